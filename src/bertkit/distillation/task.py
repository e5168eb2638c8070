"""Task distillation (Hinton et al.) on a fine-tuning task's training data, for every
task family: `SoftTargets` mixed into the family's program, so data, the hard loss,
metrics, dev evaluation, best/ and the saved layout are the fine-tuning task layer's
(see the package docstring)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from bertkit.distillation.config import TaskDistillConfig
from bertkit.distillation.losses import soft_target_loss
from bertkit.distillation.student import (
    describe_student,
    init_student_from_teacher,
    student_config,
    student_layer_sources,
)
from bertkit.distillation.teacher import check_task_teacher, load_teacher
from bertkit.distillation.teacher_cache import load_teacher_logits, save_teacher_logits, task_cache_path
from bertkit.errors import BertkitError, ConfigError
from bertkit.model.bert.modeling import IGNORE_INDEX
from bertkit.tasks.programs import (
    ClassificationProgram,
    MultipleChoiceProgram,
    QuestionAnsweringProgram,
    TaggingProgram,
    run_features,
)
from bertkit.training.config import RUN_CONFIG_FILE


class _Recorder:
    """Calls the model and keeps its output: a family's own `compute_loss` gives the hard
    loss and its statistics, and the output it computed meets the teacher's logits."""

    def __init__(self, model):
        self.model = model
        self.module = model  # what model_inputs looks through, as through DDP's wrapper
        self.output = None

    def __call__(self, *args, **kwargs):
        self.output = self.model(*args, **kwargs)
        return self.output


class SoftTargets:
    """Task distillation over a task program (mixed in before it): the family's data,
    hard loss, metrics, dev evaluation and saved layout, plus the teacher's logits of
    every training feature as soft targets.

    teacher_logits: per training feature, what `run_features` gives the teacher: (K,)
    sequence classification, (C,) multiple choice, (T_i, K) tagging, (T_i, 2) QA start /
    end (`per_position`: padded with zeros to the batch's T, never read there). A
    family's `soft_loss_sum(out, batch)` picks the student's logits that meet them and
    returns T^2 KL (or the `soft_loss` kind) summed over the items the task loss counts
    (`loss_counts`: sequences, labelled tokens, windows, questions), so
        loss = alpha_hard * task loss + alpha_soft * soft_loss_sum / global item count.
    """

    per_position = False
    soft_targets = ""  # what the soft targets are, for the report

    def __init__(self, *args, teacher_logits, config: TaskDistillConfig, **kwargs):
        super().__init__(*args, **kwargs)
        self.teacher_logits = [np.asarray(x, dtype=np.float32) for x in teacher_logits]
        if len(self.teacher_logits) != len(self.train_features):
            raise ValueError(f"{len(self.teacher_logits)} teacher logits for {len(self.train_features)} features")
        self.config = config

    @property
    def progress_keys(self):
        return (*super().progress_keys, "soft_loss")

    def train_example(self, index: int, epoch: int) -> dict[str, Any]:
        return {**super().train_example(index, epoch), "teacher_logits": self.teacher_logits[index]}

    def collate(self, examples: list[dict[str, Any]]) -> dict[str, torch.Tensor]:
        if "teacher_logits" not in examples[0]:  # evaluation
            return super().collate(examples)
        batch = super().collate([{k: v for k, v in ex.items() if k != "teacher_logits"} for ex in examples])
        logits = [ex["teacher_logits"] for ex in examples]
        if self.per_position:
            padded = np.zeros((len(logits), batch["input_ids"].shape[-1], logits[0].shape[-1]), dtype=np.float32)
            for row, value in enumerate(logits):
                padded[row, : len(value)] = value
            batch["teacher_logits"] = torch.from_numpy(padded)  # (B, T, K)
        else:
            batch["teacher_logits"] = torch.from_numpy(np.stack(logits))  # (B, K) or (B, C)
        return batch

    def compute_loss(self, model, batch, totals) -> tuple[torch.Tensor, dict[str, float]]:
        seen = _Recorder(model)
        hard, stats = super().compute_loss(seen, batch, totals)  # task loss * count / global count
        soft = self.soft_loss_sum(seen.output, batch)
        loss = self.config.alpha_hard * hard + self.config.alpha_soft * soft / max(totals["task"], 1.0)
        return loss, {**stats, "soft_loss_sum": float(soft.detach())}

    def soft_loss_sum(self, out, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        raise NotImplementedError

    def kl(self, student: torch.Tensor, teacher: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        """`soft_target_loss` at the run's temperature and kind, summed over rows."""
        return soft_target_loss(student, teacher, self.config.temperature, self.config.soft_loss, mask)

    def summarize(self, stats: dict[str, float]) -> dict[str, float]:
        metrics = super().summarize(stats)
        if metrics and "soft_loss_sum" in stats:
            metrics["soft_loss"] = stats["soft_loss_sum"] / stats["task_count"]  # per item
        return metrics


class TaskDistillation(SoftTargets, ClassificationProgram):
    """Sequence classification: KL on the K logits (MSE to the teacher's prediction for regression)."""

    soft_targets = "T^2 KL on the logits per sequence (regression: squared error to the teacher's prediction)"

    def soft_loss_sum(self, out, batch):
        teacher = batch["teacher_logits"]  # (B, K)
        if self.spec.regression:
            return ((out.logits.float() - teacher.float()) ** 2).sum()
        return self.kl(out.logits, teacher)


class TaggingDistillation(SoftTargets, TaggingProgram):
    """Token tagging: KL on the K tag logits at each labelled token (a word's first sub-token)."""

    per_position = True
    soft_targets = "T^2 KL on the tag logits per labelled token (first sub-token of each word)"

    def soft_loss_sum(self, out, batch):
        labelled = batch["labels"] != IGNORE_INDEX  # (B, T)
        return self.kl(out.logits[labelled], batch["teacher_logits"][labelled])  # (N, K) each


class QuestionAnsweringDistillation(SoftTargets, QuestionAnsweringProgram):
    """Extractive QA: KL of the start and of the end distribution over a window's real
    positions (padding excluded), averaged as the QA loss is: (start + end) / 2."""

    per_position = True
    soft_targets = "T^2 (KL(start) + KL(end)) / 2 per window, over its real positions"

    def soft_loss_sum(self, out, batch):
        real = batch["attention_mask"].bool()  # (B, T)
        teacher = batch["teacher_logits"]  # (B, T, 2)
        return (self.kl(out.start_logits, teacher[..., 0], real) + self.kl(out.end_logits, teacher[..., 1], real)) / 2


class MultipleChoiceDistillation(SoftTargets, MultipleChoiceProgram):
    """Multiple choice: KL on the C choices' scores."""

    soft_targets = "T^2 KL on the choices' scores per question"

    def soft_loss_sum(self, out, batch):
        return self.kl(out.logits, batch["teacher_logits"])  # (B, C)


DISTILL_PROGRAMS: dict[str, type[SoftTargets]] = {
    cls.family: cls
    for cls in (TaskDistillation, TaggingDistillation, QuestionAnsweringDistillation, MultipleChoiceDistillation)
}


def teacher_task_logits(teacher: nn.Module, features: list[dict[str, Any]], collate, batch_size: int,
                        progress: bool = False) -> list[np.ndarray]:
    """The teacher's logits of every feature (`run_features`: (K,), (C,), (T_i, K) or
    (T_i, 2)) as float32, under inference_mode."""
    with torch.inference_mode():
        outputs = run_features(teacher, features, collate, batch_size, progress, "teacher")
    return [np.asarray(x, dtype=np.float32) for x in outputs]


@dataclass
class TaskDistillResult:
    output_dir: Path
    best_dir: Path | None
    metric: str | None
    best_metric: float | None
    best_step: int | None
    teacher_metrics: dict[str, float] | None
    student_parameters: int
    teacher_parameters: int



def _prepare_against_teacher(config: TaskDistillConfig):
    """`bertkit.finetuning.prepare` with the teacher as the checkpoint: the data read,
    checked and encoded in the teacher's label order. A teacher whose label map does not
    cover the data fails in prepare's one line, naming the teacher's config.json."""
    from bertkit.finetuning import prepare

    return prepare(config, label_map_advice="distil from a teacher fine-tuned on these labels")


def check_teacher_head(config: TaskDistillConfig, prepared, model_cls) -> None:
    """Raises in one line naming the teacher directory unless it holds a fine-tuned head of
    the task's family for the task's labels (`prepare` kept it). A transformers
    BertForSequenceClassification with LABEL_i names and as many outputs as labels is
    taken in the task's label order."""
    base = prepared.base_config
    architectures = base.extra.get("architectures") or []
    name = model_cls.__name__
    outputs = 1 if prepared.spec.regression else len(prepared.labels or [])
    placeholder_head = (prepared.family.placeholder_labels and name in architectures
                        and not base.has_label_names and base.num_labels == outputs)
    if prepared.keep_head or placeholder_head:
        return
    shown = ", ".join(architectures) or "none"
    why = ("its label map has no names (LABEL_i) to match the data's labels" if name in architectures
           else f"config.json architectures: {shown}")
    labels = " for these labels" if prepared.labels is not None else ""
    raise BertkitError(f"{config.teacher}: not a fine-tuned {name}{labels} ({why}); fine-tune the teacher first "
                       f"with `bertkit finetune {'|'.join(prepared.family.commands)}`")


def distill_task(config: TaskDistillConfig, *, overwrite: bool = False, notify=None) -> TaskDistillResult:
    """Task distillation (`bertkit distill --task glue|classify|ner|squad|multiple-choice`):
    the student trains on the task's training data with the teacher's logits; best/ is
    chosen by the dev metric."""
    from bertkit.finetuning import task_model_config, write_dev_predictions
    from bertkit.training.run import run_training

    output_dir = Path(config.output_dir)
    found = [n for n in ("best", "final", "metrics.jsonl", "report.md") if (output_dir / n).exists()]
    if found and not overwrite:
        raise BertkitError(f"{output_dir}: already holds a run ({found[0]}); pass --overwrite to replace it "
                           "or choose another --output-dir")
    check_task_teacher(config.teacher)
    prepared = _prepare_against_teacher(config)
    model_cls = prepared.program_cls.model_class(prepared.base_config)
    check_teacher_head(config, prepared, model_cls)
    teacher = load_teacher(model_cls, config.teacher, config=task_model_config(prepared))
    head = [k for k in teacher.loading_info["missing_keys"] if not k.startswith(f"{teacher.base_model_prefix}.")]
    if head:
        raise BertkitError(f"{config.teacher}: the checkpoint has no {head[0].split('.')[0]} weights (the task "
                           "head); fine-tune the teacher first")
    s_config = student_config(teacher.config, config.student_layers, config.student, config.teacher)
    if prepared.tokenizer.vocab_size > s_config.vocab_size:
        raise ConfigError(f"field 'student.vocab_size' ({s_config.vocab_size}) is smaller than the tokenizer's "
                          f"{prepared.tokenizer.vocab_size} tokens in {config.teacher}")
    torch.manual_seed(config.seed)
    student = model_cls(s_config)
    fresh = init_student_from_teacher(
        student, teacher, student_layer_sources(teacher.config.num_hidden_layers, s_config.num_hidden_layers))
    student.train()

    program_cls = DISTILL_PROGRAMS[prepared.program_cls.family]
    pad_id = prepared.tokenizer.pad_token_id or 0
    collate = lambda rows: program_cls.module().collate(rows, pad_id)  # noqa: E731
    cache_path = task_cache_path(config, prepared.spec) if config.cache_teacher else None
    if cache_path is not None and cache_path.is_file():
        logits = load_teacher_logits(cache_path)
    else:
        logits = teacher_task_logits(teacher, prepared.train.features, collate, config.eval_batch_size,
                                     config.progress)
        if cache_path is not None:
            save_teacher_logits(cache_path, logits)
    id2label = None if prepared.labels is None else dict(enumerate(prepared.labels))
    teacher_metrics = None
    if prepared.dev is not None:  # scored as the student's dev evaluations are (QA v2.0: threshold tuned on dev)
        with torch.inference_mode():
            outputs = run_features(teacher, prepared.dev.features, collate, config.eval_batch_size, config.progress,
                                   "teacher dev")
        scorer = prepared.program_cls(teacher, prepared.tokenizer, prepared.spec, [], prepared.dev, id2label,
                                      progress=False)
        teacher_metrics = scorer.metrics(prepared.dev, outputs)
    program = program_cls(student, prepared.tokenizer, prepared.spec, prepared.train.features, prepared.dev, id2label,
                          group_by_length=config.group_by_length, eval_batch_size=config.eval_batch_size,
                          progress=config.progress, teacher_logits=logits, config=config)
    steps_per_epoch = math.ceil(len(prepared.train.features) / config.batch_size)
    metric = program.default_metric(prepared.spec) if prepared.dev is not None else None
    note = (f"student {s_config.num_hidden_layers} layers from teacher layers "
            f"{student_layer_sources(teacher.config.num_hidden_layers, s_config.num_hidden_layers)}"
            + (f"; initialised fresh: {', '.join(fresh)}" if fresh else "; every weight copied"))

    def report(run) -> None:
        write_dev_predictions(prepared, program.best_outputs, output_dir)
        _write_task_report(config, prepared, program, teacher, student, fresh, run.result, metric, teacher_metrics,
                           run.seconds)

    result = run_training(config, program, student, config.training_fields(steps_per_epoch, metric), output_dir,
                          notes=[note], notify=notify, report=report).result
    best_dir = output_dir / "best" if result.best_dir is not None else None
    return TaskDistillResult(output_dir, best_dir, metric, result.best_metric, result.best_step, teacher_metrics,
                             student.num_parameters(), teacher.num_parameters())


def _write_task_report(config, prepared, program, teacher, student, fresh, result, metric, teacher_metrics,
                       seconds) -> Path:
    from bertkit.evaluation.metrics import format_metric
    from bertkit.finetuning import report_details, report_sections
    from bertkit.training.reporting import plot_curves, write_report

    output_dir = Path(config.output_dir)
    panels = [("Loss", ["loss", "eval_loss"]), ("Soft-target loss", ["soft_loss"])]
    if metric:
        panels.append((f"Dev {metric}", [f"eval_{metric}"]))
    plots = plot_curves(result.records, output_dir, panels)
    best: dict[str, Any] | str = "no dev set: no best model (use final/)"
    if result.best_step is not None:
        teacher_value = (teacher_metrics or {}).get(metric)
        best = {"metric": metric, "student (best)": format_metric(metric, result.best_metric),
                "teacher": None if teacher_value is None else format_metric(metric, teacher_value),
                "student / teacher": result.best_metric / teacher_value if teacher_value else None,
                "step": result.best_step, "model": "best/"}
    family_files = prepared.family.hook("report_files")(prepared.spec, prepared.dev, program.best_outputs)
    sections = [
        ("Distillation", {**describe_student(teacher.config, student.config, config.teacher, fresh),
                          "parameters (student / teacher)": f"{student.num_parameters() / 1e6:.2f}M / "
                                                            f"{teacher.num_parameters() / 1e6:.2f}M",
                          "soft targets": program.soft_targets,
                          "temperature": config.temperature, "soft loss": config.soft_loss,
                          "loss weights": f"soft {config.alpha_soft:g}, hard {config.alpha_hard:g}"}),
        ("Run", {"task": prepared.family.hook("describe")(prepared.spec), **report_details(prepared),
                 "train": f"{config.train}: {len(prepared.train.examples)} examples, "
                          f"{len(prepared.train.features)} sequences",
                 "dev": f"{config.dev}" if config.dev else "none", "epochs": config.epochs,
                 "batch size, max_seq_length": f"{config.batch_size}, {config.max_seq_length}",
                 "lr (peak)": config.lr, "seed": config.seed, "steps": result.step,
                 "wall time (s)": round(seconds, 1)}),
        ("Best dev model", best),
        ("Teacher dev metrics", teacher_metrics or "no dev set"),
        ("Files", f"`best/` (HF {type(student).__name__} layout + tokenizer + bertkit_task.json; loads with "
                  f"`bertkit predict/evaluate` and transformers), `final/`, `metrics.jsonl`, `{RUN_CONFIG_FILE}`"
                  + family_files),
        *report_sections(prepared),
    ]
    return write_report(output_dir, f"Task distillation run: {output_dir.name}", sections, plots)
