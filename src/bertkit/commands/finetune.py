"""`bertkit finetune TASK`: fine-tune a BERT checkpoint on a downstream task.

  bertkit finetune glue --task mrpc --model DIR --data glue/MRPC --output-dir runs/mrpc
  bertkit finetune classify --train train.csv --dev dev.csv --text-column review --model DIR --output-dir runs/cls
  bertkit finetune ner --train eng.train --dev eng.testa --model DIR --output-dir runs/ner
  bertkit finetune ner --train eng.train --dev eng.testa --model DIR --output-dir runs/ner --features concat_last_four
  bertkit finetune multiple-choice --train train.jsonl --dev dev.jsonl --model DIR --output-dir runs/mc
  bertkit finetune squad --version 2 --train train-v2.0.json --dev dev-v2.0.json --model DIR --output-dir runs/squad
  bertkit finetune text2text --task glue --glue-task rte --data glue/RTE --model runs/t5/final --output-dir runs/t5-rte
  bertkit finetune text2text --train pairs.jsonl --dev pairs-dev.jsonl --model DIR --output-dir runs/t2t

Configuration: defaults (the paper's recipe), then `--config run.yaml`, then the flags,
then `--set key=value` (any field of bertkit.finetuning.FinetuneConfig; `model.X` for
BertConfig fields such as model.hidden_dropout_prob). See bertkit.finetuning for the
run folder's contents.
"""

from __future__ import annotations

import argparse
import sys

from bertkit.commands import add_runtime_options
from bertkit.errors import BertkitError
from bertkit.feature_choices import LAYER_CHOICES
from bertkit.model.families import MODEL_FAMILIES, families_that
from bertkit.tasks.registry import QA, command_families, get_task_family

# flag attribute -> FinetuneConfig field (flags left None keep the config's value); TASK_FIELDS and FAMILIES
# (task -> FinetuneConfig.family) serve `bertkit distill --task` too
_COMMON_FIELDS = {
    "model": "init_from", "output_dir": "output_dir", "epochs": "epochs", "lr": "lr", "batch_size": "batch_size",
    "max_seq_length": "max_seq_length", "seed": "seed", "warmup_ratio": "warmup_ratio",
    "early_stopping": "early_stopping_patience", "train": "train", "dev": "dev",
    "max_train_samples": "max_train_samples", "max_eval_samples": "max_eval_samples",
}
TASK_FIELDS = {
    "glue": {"task": "glue_task"},
    "classify": {"text_column": "text_column", "pair_column": "pair_column", "label_column": "label_column",
                 "features": "features", "lstm_hidden_size": "lstm_hidden_size"},
    "ner": {"tag_column": "tag_column", "features": "features", "lstm_hidden_size": "lstm_hidden_size"},
    "multiple-choice": {"train_labels": "train_labels", "dev_labels": "dev_labels"},
    "squad": {"version": "squad_version", "doc_stride": "doc_stride", "max_query_length": "max_query_length",
              "max_answer_length": "max_answer_length"},
    "text2text": {"task": "text2text_task", "glue_task": "glue_task", "source_field": "source_field",
                  "target_field": "target_field", "max_target_length": "max_target_length", "num_beams": "num_beams",
                  "tag_column": "tag_column"},
}
FAMILIES = command_families()  # subcommand -> task family, from the registry (bertkit.tasks.registry)
# FinetuneConfig's defaults (the paper's BERT recipe) that the flags' help names; a model family's
# recipe may start elsewhere (its registry line's `finetuning_defaults`: family_defaults_help)
PLAIN_DEFAULTS = {"lr": 3e-5, "batch_size": 32, "epochs": 3, "warmup_ratio": 0.1}
SQUAD_MAX_SEQ_LENGTH = get_task_family(QA).max_seq_length  # BERT's SQuAD windows of 384 tokens (stride 128)


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser("finetune", help="fine-tune a checkpoint on GLUE, any classification table, NER, "
                                   "multiple choice, SQuAD or text-to-text",
                                   description="Fine-tune a checkpoint of any model family on a task (each family's "
                                   "fine-tuning recipe applies: docs/finetuning.md); writes best/ (HF layout), "
                                   "metrics, curves and report.md.", epilog=family_defaults_help())
    tasks = parser.add_subparsers(dest="finetune_task",
                                  metavar="{glue,classify,ner,multiple-choice,squad,text2text,multitask}")
    parser.set_defaults(func=lambda args: parser.print_help() or 2)

    p = tasks.add_parser("glue", help="a GLUE task from its TSV folder (CoLA, SST-2, MRPC, STS-B, QQP, MNLI, ...)")
    p.add_argument("--task", required=True, help="GLUE task: cola, sst2, mrpc, stsb, qqp, mnli, mnli-mm, qnli, rte, wnli")
    p.add_argument("--data", metavar="DIR", help="the task's folder (train.tsv, dev.tsv)")
    _add_common(p, data_required=False)

    p = tasks.add_parser("classify", help="sequence classification (or --regression) on any CSV / TSV / JSONL")
    p.add_argument("--text-column", required=True, help="column (or JSONL field) holding the text")
    p.add_argument("--pair-column", help="column holding the second text of a pair (optional)")
    p.add_argument("--label-column", help="column holding the label (default: label)")
    p.add_argument("--regression", action="store_true", help="numeric labels: one output, MSE loss")
    _add_feature_options(p, "a BiLSTM whose states, averaged over the tokens, feed a linear classifier")
    _add_common(p)

    p = tasks.add_parser("ner", help="token tagging from CoNLL files (IOB1 / IOB2 / IOBES)")
    add_task_options(p, "ner")
    _add_common(p)

    p = tasks.add_parser("multiple-choice", help="SWAG CSV or JSONL (PIQA, CommonsenseQA, ...)")
    add_task_options(p, "multiple-choice")
    _add_common(p)

    p = tasks.add_parser("squad", help="extractive QA on SQuAD v1.1 / v2.0 JSON (max_seq_length 384 by default)")
    add_task_options(p, "squad")
    _add_common(p)

    p = tasks.add_parser("text2text", help=f"a text-to-text model ({families_that('text2text')}), every task as "
                         "text: GLUE, SQuAD, NER or source/target pairs",
                         description="Text-to-text fine-tuning (bertkit.tasks.text2text): teacher forcing, dev "
                                     "scored on generated text with the task's official metric.")
    add_text2text_options(p)
    p.add_argument("--data", metavar="DIR", help="--task glue: the task's folder (train.tsv, dev.tsv)")
    p.add_argument("--max-target-length", type=int, help="target tokens, EOS included; longer targets are cut "
                                                         "(default: the longest training target)")
    _add_common(p, data_required=False)

    from bertkit.commands.finetune_multitask import add_multitask_parser

    add_multitask_parser(tasks, add_run_options, family_defaults_help(), _COMMON_FIELDS)


def add_text2text_options(p) -> None:
    """The flags saying which text-to-text task reads the files (`finetune` and `evaluate text2text`)."""
    from bertkit.tasks.registry import TEXT2TEXT_TASKS as TASKS

    p.add_argument("--task", choices=TASKS, help="what the files hold (default: pairs): a GLUE task (--glue-task), "
                                                 "SQuAD v1.1 JSON, CoNLL NER, or source/target pairs")
    p.add_argument("--glue-task", help="--task glue: cola, sst2, mrpc, stsb, qqp, mnli, mnli-mm, qnli, rte, wnli")
    p.add_argument("--source-field", help="--task pairs: JSONL field / column of the input text (default: input)")
    p.add_argument("--target-field", help="--task pairs: JSONL field / column of the target text (default: output)")
    p.add_argument("--tag-column", type=int, help="--task ner: column of the tag (default: last)")
    p.add_argument("--num-beams", type=int, help="dev decoding: beam search with this many beams (default 1: greedy)")


def _add_feature_options(p, head: str) -> None:
    p.add_argument("--features", metavar="LAYERS",
                   help=f"feature-based approach (paper Table 7; ELMo's): freeze the encoder (BERT or ELMo) and train "
                        f"{head} on these features: {', '.join(LAYER_CHOICES)}; scalar_mix / weighted_sum train the "
                        "layers' mix with the task (default lr then 1e-3)")
    p.add_argument("--lstm-hidden-size", type=int, help="with --features: BiLSTM size per direction "
                                                        "(default 256; the paper 768)")


def add_task_options(p, task: str, feature_based: bool = True) -> None:
    """The flags of task `task` (ner, multiple-choice, squad) on parser or argument group
    `p`; `bertkit distill --task` shares them (without ner's feature-based flags)."""
    if task == "ner":
        p.add_argument("--tag-column", type=int, help="which whitespace-separated column holds the tag (default: last)")
        if feature_based:
            _add_feature_options(p, "a BiLSTM tagger")
    elif task == "multiple-choice":
        p.add_argument("--train-labels", metavar="FILE", help="labels in a separate file, one index a line (PIQA)")
        p.add_argument("--dev-labels", metavar="FILE", help="the same for --dev")
    elif task == "squad":
        p.add_argument("--version", type=int, choices=(1, 2), help="SQuAD version (default: from the training file)")
        p.add_argument("--doc-stride", type=int, help="tokens shared by consecutive windows of a passage (default 128)")
        p.add_argument("--max-query-length", type=int, help="questions are cut to this many tokens (default 64)")
        p.add_argument("--max-answer-length", type=int, help="longest answer in tokens (default 30)")
    else:
        raise ValueError(f"no task options for {task!r}")


def _grouped_family_defaults() -> list[tuple[list[str], dict]]:
    """(model types, their fine-tuning defaults) for the families whose recipe sets any, registry order,
    families with equal defaults together (gpt2 and openai-gpt share GPT-1's)."""
    groups: list[tuple[list[str], dict]] = []
    for family in MODEL_FAMILIES.values():
        defaults = dict(family.finetuning_defaults)
        if not defaults:
            continue
        same = next((names for names, values in groups if values == defaults), None)
        if same is None:
            groups.append(([family.model_type], defaults))
        else:
            same.append(family.model_type)
    return groups


def family_defaults_help() -> str:
    """The help's closing lines: each family's fine-tuning defaults where its recipe sets them."""
    lines = [f"{', '.join(names)}: " + ", ".join(f"{name}={value:g}" if isinstance(value, float) else f"{name}={value}"
                                                 for name, value in defaults.items())
             for names, defaults in _grouped_family_defaults()]
    plain = ", ".join(f"{name}={value:g}" for name, value in PLAIN_DEFAULTS.items())
    return ("fine-tuning defaults per model family (its recipe's; the flags, --config and --set override them): "
            + "; ".join(lines + [f"every other family: the paper's BERT recipe, {plain}"]))


def _default(name: str, unit: str = "") -> str:
    """A flag's '(default X; gpt2, openai-gpt: Y)': FinetuneConfig's default and the families' that differ."""
    differ = [f"{', '.join(names)}: {defaults[name]:g}{unit}" for names, defaults in _grouped_family_defaults()
              if name in defaults and defaults[name] != PLAIN_DEFAULTS[name]]
    return f"(default {PLAIN_DEFAULTS[name]:g}{unit}{''.join('; ' + text for text in differ)})"


def _add_common(p: argparse.ArgumentParser, data_required: bool = True) -> None:
    p.epilog = family_defaults_help()
    p.add_argument("--train", metavar="FILE", required=data_required, help="training file")
    p.add_argument("--dev", metavar="FILE", help="dev file: evaluated every epoch, picks best/")
    add_run_options(p)
    p.set_defaults(func=run)


def add_run_options(p: argparse.ArgumentParser, grid: bool = True) -> None:
    """The flags every fine-tuning run takes (model, output, recipe, --config / --set); `grid`: the grid's too."""
    p.add_argument("--model", required=True, metavar="DIR", help="checkpoint to start from (bertkit or HF; "
                   f"model_type one of {', '.join(MODEL_FAMILIES)})")
    p.add_argument("--output-dir", required=True, metavar="DIR", help="run folder")
    p.add_argument("--epochs", type=int, help=f"training epochs {_default('epochs')}")
    p.add_argument("--lr", type=float, help=f"peak learning rate {_default('lr')}")
    p.add_argument("--batch-size", type=int, help=f"sequences per optimizer step {_default('batch_size')}")
    p.add_argument("--max-seq-length", type=int, help="tokens per sequence, longer inputs are cut (default 128)")
    p.add_argument("--seed", type=int, help="seed of the head's initialisation, data order and dropout (default 42)")
    p.add_argument("--max-train-samples", type=int, metavar="N", help="train on the first N examples only (a quick try)")
    p.add_argument("--max-eval-samples", type=int, metavar="N", help="evaluate on the first N dev examples only")
    p.add_argument("--warmup-ratio", type=float, help=f"fraction of the steps spent warming up {_default('warmup_ratio')}")
    p.add_argument("--early-stopping", type=int, metavar="N", help="stop after N evaluations without improvement")
    if grid:
        p.add_argument("--grid", action="store_true", help="the paper's search: lr in {5e-5, 3e-5, 2e-5} x epochs "
                                                           "in {2, 3, 4}; keeps the best dev run")
        p.add_argument("--grid-lrs", metavar="LIST", help="learning rates of the grid, e.g. 5e-5,3e-5 (implies a grid)")
        p.add_argument("--grid-epochs", metavar="LIST", help="epoch counts of the grid, e.g. 2,3 (implies a grid)")
    p.add_argument("--config", metavar="YAML", help="YAML file of configuration fields")
    p.add_argument("--set", action="append", metavar="KEY=VALUE", help="override a field, e.g. --set weight_decay=0 "
                   "or --set model.hidden_dropout_prob=0.2 (repeatable)")
    p.add_argument("--overwrite", action="store_true", help="replace a run already in --output-dir")
    add_runtime_options(p)


def _number_list(text: str | None, flag: str, kind) -> list | None:
    if text is None:
        return None
    try:
        values = [kind(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise BertkitError(f"{flag} {text!r}: expected comma-separated numbers") from None
    if not values:
        raise BertkitError(f"{flag}: empty list")
    return values


def config_values(args: argparse.Namespace) -> dict:
    """Configuration fields from a YAML file and the flags of `args`."""
    from bertkit.finetuning import (FEATURE_BASED_GRID_LRS, FEATURE_BASED_LR, PAPER_GRID_EPOCHS, PAPER_GRID_LRS,
                                    glue_file)
    from bertkit.training.config import read_yaml_config

    values = read_yaml_config(args.config) if args.config else {}
    values["family"] = FAMILIES[args.finetune_task]
    for attribute, name in {**_COMMON_FIELDS, **TASK_FIELDS[args.finetune_task]}.items():
        if getattr(args, attribute, None) is not None:
            values[name] = getattr(args, attribute)
    if getattr(args, "regression", False):
        values["regression"] = True
    family_length = get_task_family(values["family"]).max_seq_length
    if family_length is not None:  # the family's own default (SQuAD's 384-token windows)
        values.setdefault("max_seq_length", family_length)
    feature_based = values.get("features") is not None
    if feature_based:
        values.setdefault("lr", FEATURE_BASED_LR)
    if args.no_progress:
        values["progress"] = False
    lrs = _number_list(args.grid_lrs, "--grid-lrs", float)
    epochs = _number_list(args.grid_epochs, "--grid-epochs", int)
    if args.grid:
        lrs = lrs or list(FEATURE_BASED_GRID_LRS if feature_based else PAPER_GRID_LRS)
        epochs = epochs or list(PAPER_GRID_EPOCHS)
    if lrs is not None:
        values["grid_lrs"] = lrs
    if epochs is not None:
        values["grid_epochs"] = epochs
    if args.finetune_task == "text2text":
        values.setdefault("text2text_task", "pairs")
        if values["text2text_task"] == "glue" and not values.get("glue_task"):
            raise BertkitError("finetune text2text --task glue: name the GLUE task with --glue-task (e.g. rte)")
        if args.data is not None and values["text2text_task"] != "glue":
            raise BertkitError("finetune text2text: --data DIR is for --task glue; give --train FILE (and --dev FILE)")
    glue_task = args.task if args.finetune_task == "glue" else (
        values.get("glue_task") if values.get("text2text_task") == "glue" else None)
    if glue_task is not None:
        from bertkit.evaluation.metrics import glue_task_name

        glue_task_name(glue_task)  # a typo fails first, naming the tasks
        if args.data is None and args.train is None:
            raise BertkitError(f"finetune {args.finetune_task}: give --data DIR (the task's folder) or --train FILE")
        if args.data is not None:
            for split in ("train", "dev"):
                if split not in values:
                    values[split] = glue_file(args.data, glue_task, split)
    return values


def run(args: argparse.Namespace) -> int:
    from bertkit.finetuning import build_config, finetune
    from bertkit.training.config import parse_set_arguments

    config = build_config(config_values(args), parse_set_arguments(args.set))
    result = finetune(config, overwrite=args.overwrite, notify=lambda line: print(f"bertkit: {line}", file=sys.stderr))
    if result.best_dir is not None:
        print(f"best model: {result.best_dir}  ({result.metric} {result.best_metric:.4f} at step {result.best_step}; "
              f"report: {result.output_dir / 'report.md'})")
    else:
        print(f"final model: {result.output_dir / 'final'}  (no dev set, so no best model; "
              f"report: {result.output_dir / 'report.md'})")
    return 0
