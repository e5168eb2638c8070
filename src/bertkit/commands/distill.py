"""`bertkit distill`: a smaller student learns from a teacher (DistilBERT, TinyBERT, Hinton).

  bertkit distill --teacher runs/mini/final --student-layers 2 --data data/ --output-dir runs/distilled
  bertkit distill --teacher runs/mini/final --data data/ --output-dir runs/tiny --hidden-loss --attention-loss
  bertkit distill --teacher runs/mrpc/best --task glue --glue-task mrpc --data glue/MRPC --output-dir runs/mrpc-small
  bertkit distill --teacher runs/ner/best --task ner --train eng.train --dev eng.testa --output-dir runs/ner-small
  bertkit distill --teacher runs/squad/best --task squad --version 2 --train train-v2.0.json --dev dev-v2.0.json \
      --output-dir runs/squad-small
  bertkit distill --teacher runs/mc/best --task multiple-choice --train train.jsonl --dev dev.jsonl \
      --output-dir runs/mc-small

Without --task: general distillation on a `bertkit data build` directory; with --task:
task distillation on the task's training file (best/ by the dev metric), for every task
family of `bertkit finetune` — glue / classify (KL on the logits), ner (KL on the tag
logits of the labelled tokens), squad (KL on the start and end distributions over the
real positions, averaged) and multiple-choice (KL over the choices). The teacher is a
checkpoint fine-tuned on the task (its head and label map); the task flags are
`bertkit finetune`'s (ner: --tag-column; squad: --version, --doc-stride,
--max-query-length, --max-answer-length, max_seq_length 384 by default; multiple-choice:
--train-labels, --dev-labels).
Configuration: defaults, `--config run.yaml`, the flags, then `--set key=value` (fields of
bertkit.distillation.DistillConfig / TaskDistillConfig; `student.X` for the student's
BertConfig fields, e.g. --set student.hidden_size=256).
"""

from __future__ import annotations

import argparse
import sys

from bertkit.commands import add_runtime_options, note, warn_about_schedule
from bertkit.commands.finetune import FAMILIES, SQUAD_MAX_SEQ_LENGTH, TASK_FIELDS, add_task_options

# flag attribute -> config field, for both modes
_COMMON = {"teacher": "teacher", "output_dir": "output_dir", "student_layers": "student_layers",
           "temperature": "temperature", "alpha_soft": "alpha_soft", "alpha_hard": "alpha_hard", "lr": "lr",
           "batch_size": "batch_size", "seed": "seed", "max_steps": "max_steps"}
_TASK = {"train": "train", "dev": "dev", "epochs": "epochs", "max_seq_length": "max_seq_length"}
_GENERAL = {"data": "data", "alpha_cos": "alpha_cos"}
# each task's own flags: glue and classify here, the others `bertkit finetune`'s (less ner's feature-based tagger)
_FEATURE_BASED = ("features", "lstm_hidden_size")
_TASK_FLAGS = {
    "glue": {"glue_task": "glue_task"},
    "classify": {"text_column": "text_column", "pair_column": "pair_column", "label_column": "label_column"},
    **{task: {flag: name for flag, name in TASK_FIELDS[task].items() if flag not in _FEATURE_BASED}
       for task in ("ner", "squad", "multiple-choice")},
}


def add_parser(subparsers) -> None:
    p = subparsers.add_parser("distill", help="distil a teacher BERT into a smaller student (general or task)",
                              description="General distillation on pre-training data (--data DIR from `bertkit data "
                                          "build`), or task distillation with --task glue|classify|ner|squad|"
                                          "multiple-choice from a teacher fine-tuned on that task (soft targets: "
                                          "the logits; ner: the tag logits of the labelled tokens; squad: the start "
                                          "and end distributions; multiple-choice: the choices' scores).")
    p.add_argument("--teacher", metavar="DIR", help="teacher checkpoint, bertkit or Hugging Face (general: BERT; "
                                                      "--task: BERT, RoBERTa, ELECTRA, ALBERT, BigBird, DeBERTa or "
                                                      "ModernBERT)")
    p.add_argument("--output-dir", metavar="DIR", help="run folder")
    p.add_argument("--data", metavar="DIR", help="general: a `bertkit data build` directory; task glue: the task folder")
    p.add_argument("--student-layers", type=int, metavar="N", help="student depth (default: half the teacher's)")
    p.add_argument("--temperature", type=float, help="softmax temperature of the soft targets (default 2)")
    p.add_argument("--alpha-soft", type=float, help="weight of the soft-target loss (general 5, task 1)")
    p.add_argument("--alpha-hard", type=float, help="weight of the hard MLM / label loss (general 2, task 1)")
    p.add_argument("--alpha-cos", type=float, help="general: weight of the last-hidden-state cosine loss (default 1)")
    p.add_argument("--hidden-loss", action="store_true", help="general: TinyBERT hidden-state MSE (weight 1, or "
                                                              "--set alpha_hidden=W)")
    p.add_argument("--attention-loss", action="store_true", help="general: TinyBERT attention-map MSE (weight 1, or "
                                                                 "--set alpha_attention=W)")
    p.add_argument("--cache-teacher", action="store_true", help="store the teacher's outputs under "
                                                                "OUTPUT/teacher-cache/ (a resumed run reuses them)")
    p.add_argument("--task", choices=tuple(FAMILIES), help="task distillation on this task (the teacher: a checkpoint "
                                                         "fine-tuned on it with `bertkit finetune TASK`)")
    p.add_argument("--glue-task", help="with --task glue: mrpc, sst2, cola, qnli, rte, ...")
    p.add_argument("--train", metavar="FILE", help="task: training file (glue: default DATA/train.tsv)")
    p.add_argument("--dev", metavar="FILE", help="task: dev file, picks best/ (default: DATA/dev.tsv for glue)")
    p.add_argument("--text-column", help="task classify: column of the text")
    p.add_argument("--pair-column", help="task classify: column of the second text")
    p.add_argument("--label-column", help="task classify: column of the label")
    p.add_argument("--epochs", type=int, help="task: epochs (default 3)")
    p.add_argument("--max-seq-length", type=int, help="task: tokens per sequence (default 128; squad 384)")
    p.add_argument("--max-steps", type=int, help="optimizer steps (general default 10000; task: epochs)")
    p.add_argument("--lr", type=float, help="peak learning rate")
    p.add_argument("--batch-size", type=int, help="sequences per optimizer step")
    p.add_argument("--seed", type=int, help="seed (default 42)")
    p.add_argument("--config", metavar="YAML", help="YAML file of configuration fields")
    p.add_argument("--set", action="append", metavar="KEY=VALUE", help="override a field, e.g. --set alpha_cos=0 or "
                                                                     "--set student.hidden_size=256 (repeatable)")
    p.add_argument("--resume", action="store_true", help="general: continue the run in --output-dir")
    p.add_argument("--overwrite", action="store_true", help="start over in an --output-dir that holds a run")
    add_runtime_options(p)
    for task in ("ner", "squad", "multiple-choice"):  # `bertkit finetune TASK`'s own flags
        add_task_options(p.add_argument_group(f"--task {task}"), task, feature_based=False)
    p.set_defaults(func=run)


def config_values(args: argparse.Namespace) -> dict:
    """Flag values (those given) as config fields for the chosen mode; a flag of another
    task or mode fails in one line."""
    from bertkit.errors import ConfigError

    values = {}
    fields = {**_COMMON, **(_TASK if args.task else _GENERAL), **_TASK_FLAGS.get(args.task, {})}
    for flag, name in fields.items():
        if getattr(args, flag) is not None:
            values[name] = getattr(args, flag)
    for task, flags in _TASK_FLAGS.items():
        for flag in flags:
            if task != args.task and getattr(args, flag) is not None:
                raise ConfigError(f"--{flag.replace('_', '-')} applies to task distillation with --task {task}")
    if args.task:
        for flag in ("alpha_cos", "hidden_loss", "attention_loss"):
            if getattr(args, flag):
                raise ConfigError(f"--{flag.replace('_', '-')} applies to general distillation (without --task)")
        values["family"] = FAMILIES[args.task]
        if args.task == "glue":
            if not args.glue_task:
                raise ConfigError("--task glue needs --glue-task NAME (e.g. mrpc)")
            if args.data:
                from bertkit.finetuning import glue_file

                if args.train is None:
                    values["train"] = glue_file(args.data, args.glue_task, "train")
                if args.dev is None:
                    values["dev"] = glue_file(args.data, args.glue_task, "dev")
        elif args.data is not None and args.task != "classify":
            raise ConfigError(f"--data applies to general distillation and --task glue; --task {args.task} reads "
                              "--train FILE (and --dev FILE)")
        elif args.task == "classify" and args.text_column is None and "text_column" not in values:
            raise ConfigError("--task classify needs --text-column NAME")
    else:
        for flag in _TASK:
            if getattr(args, flag) is not None:
                raise ConfigError(f"--{flag.replace('_', '-')} applies to task distillation (--task "
                                  f"{'|'.join(FAMILIES)})")
        if args.hidden_loss:
            values["alpha_hidden"] = 1.0
        if args.attention_loss:
            values["alpha_attention"] = 1.0
    if args.cache_teacher:
        values["cache_teacher"] = True
    if args.no_progress:
        values["progress"] = False
    return values


def run(args: argparse.Namespace) -> int:
    from bertkit.distillation import (DistillConfig, TaskDistillConfig, build_config, distill_general, distill_task,
                                      resume_general_distillation)
    from bertkit.training.config import parse_set_arguments, read_yaml_config

    values = read_yaml_config(args.config) if args.config else {}
    values.update(config_values(args))
    if args.task == "squad":
        values.setdefault("max_seq_length", SQUAD_MAX_SEQ_LENGTH)  # as `bertkit finetune squad`
    overrides = parse_set_arguments(args.set)
    if args.task:
        if args.resume:
            from bertkit.errors import ConfigError

            raise ConfigError("--resume applies to general distillation; task runs are short (start over)")
        config = build_config(TaskDistillConfig, values, overrides, source=args.config or "config")
        result = distill_task(config, overwrite=args.overwrite, notify=lambda line: print(line, file=sys.stderr))
        if result.teacher_metrics and result.best_metric is not None:
            teacher = result.teacher_metrics.get(result.metric)
            print(f"student dev {result.metric} {result.best_metric:.4f} vs teacher {teacher:.4f} "
                  f"({result.student_parameters / 1e6:.2f}M vs {result.teacher_parameters / 1e6:.2f}M parameters)")
        where = result.best_dir or result.output_dir / "final"
        print(f"{'best' if result.best_dir else 'final'} model: {where}  (report: {result.output_dir / 'report.md'})")
        return 0
    from bertkit.training.resume import resumes_by_itself

    if resumes_by_itself(values.get("output_dir"), args.resume, note):  # the saved run_config.json supplies the rest
        if not values.get("output_dir"):
            from bertkit.errors import ConfigError

            raise ConfigError("field 'output_dir' is required (--output-dir DIR)")
        result = resume_general_distillation(values["output_dir"], values, overrides, notify=note)
    else:
        config = build_config(DistillConfig, values, overrides, source=args.config or "config")
        result = distill_general(config, overwrite=args.overwrite, on_start=warn_about_schedule)
    if result.final_dir is not None:
        print(f"final model: {result.final_dir}  (report: {result.final_dir.parent / 'report.md'})")
    return 0
