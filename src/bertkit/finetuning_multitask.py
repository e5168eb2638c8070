"""A multi-task fine-tuning run (MT-DNN): several GLUE tasks, one shared encoder, the shared loop.

`finetune_multitask(config)` is what `bertkit finetune multitask` calls. Each task is read,
checked and encoded exactly as `bertkit finetune glue` would (bertkit.finetuning.prepare
on the task's folder), then every task's head model is built on one encoder loaded from
`init_from` (any registered model family with a sequence-classification head) and
bertkit.tasks.multitask's `MultiTaskProgram` trains them with one optimizer and one
schedule, each step on one task's batch, tasks in proportion to their size.

An epoch is one pass over every task's training set (sum over tasks of ceil(n_t / G)
steps). Evaluation every epoch scores each task's dev set with its official metrics;
the mean of the tasks' headline metrics (`average`) picks best/. Run folder: best/ and
final/ (the shared encoder + multitask.json + tasks/<task>/ per task: see
bertkit.tasks.multitask), metrics.jsonl, loss.png, dev_average.png, report.md,
run_config.json. Per-task fine-tuning continues from it: `bertkit finetune glue --task rte
--model RUN/final ...` starts from the shared encoder with a fresh head (or
`--model RUN/final/tasks/rte` keeps the multi-task head).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bertkit.errors import ConfigError
from bertkit.finetuning import FinetuneConfig, PreparedTask
from bertkit.tasks.registry import CLASSIFICATION

# a GLUE task's folder as the GLUE release names it (GLUE_TASK_METRICS keys -> folder)
GLUE_FOLDERS = {"cola": "CoLA", "sst2": "SST-2", "mrpc": "MRPC", "qqp": "QQP", "stsb": "STS-B", "mnli": "MNLI",
                "qnli": "QNLI", "rte": "RTE", "wnli": "WNLI"}
HEADS = ("linear", "san")
# GLUE's sentence-pair classification tasks: the ones `--head san` gives a SAN head (MT-DNN's
# task table: single-sentence CoLA and SST-2 and regression STS-B keep the linear head)
PAIR_CLASSIFICATION = ("mrpc", "qqp", "mnli", "qnli", "rte", "wnli")


@dataclass
class MultitaskConfig(FinetuneConfig):
    """A multi-task run: the fine-tuning fields (the paper's recipe) plus the GLUE tasks and
    the folder holding one sub-folder per task. `max_train_samples` caps every task's
    training set (the first N examples), as it caps one task's in `finetune glue`."""

    tasks: list = field(default_factory=list)
    data: str = ""
    head: str = "linear"  # "san": the stochastic answer network on pair classification tasks
    san_steps: int = 5  # K, the SAN's reasoning steps
    san_step_dropout: float = 0.1  # the SAN's stochastic prediction dropout (whole steps)

    def __post_init__(self) -> None:
        super().__post_init__()
        from bertkit.evaluation.metrics import glue_task_name

        names = [str(t).strip() for t in self.tasks if str(t).strip()]
        canonical = []
        for name in names:
            try:
                task = glue_task_name(name)
            except ConfigError:
                raise ConfigError(f"field 'tasks': {name!r} is not a GLUE task; expected some of "
                                  f"{', '.join(GLUE_FOLDERS)}") from None
            if task not in GLUE_FOLDERS:
                raise ConfigError(f"field 'tasks': {name!r} has no training set; expected some of "
                                  f"{', '.join(GLUE_FOLDERS)}")
            if task in canonical:
                raise ConfigError(f"field 'tasks': {task} is named twice")
            canonical.append(task)
        self.tasks = canonical
        if self.head not in HEADS:
            raise ConfigError(f"field 'head': {self.head!r}; expected one of {', '.join(HEADS)}")


def build_multitask_config(values: dict[str, Any], overrides: dict[str, str]) -> MultitaskConfig:
    """Defaults <- the starting checkpoint's family's fine-tuning defaults <- `values` <- `--set`."""
    from bertkit.finetuning import model_family_defaults
    from bertkit.training.config import apply_overrides, parse_value

    model_overrides = {k.removeprefix("model."): v for k, v in overrides.items() if k.startswith("model.")}
    plain = {k: v for k, v in overrides.items() if not k.startswith("model.")}
    base = apply_overrides(MultitaskConfig(), model_family_defaults(values.get("init_from")), source="defaults")
    config = apply_overrides(apply_overrides(base, values, source="config"), plain)
    if model_overrides:
        config = dataclasses.replace(config, model={**config.model, **{k: parse_value(v, Any)
                                                                       for k, v in model_overrides.items()}})
    for name, flag in (("init_from", "--model DIR"), ("output_dir", "--output-dir DIR"), ("data", "--data DIR")):
        if not getattr(config, name):
            raise ConfigError(f"field {name!r} is required ({flag})")
    if not config.tasks:
        raise ConfigError("field 'tasks' is required: GLUE tasks separated by commas (--tasks rte,mrpc,sts-b)")
    return config


def task_folder(data: str | Path, task: str) -> Path:
    """Task `task`'s folder under `data` (its GLUE name, e.g. STS-B, or the task's own name,
    any case); a one-line error naming the folder when there is none."""
    data = Path(data)
    if not data.is_dir():
        raise ConfigError(f"field 'data': {data}: no such directory (one folder per GLUE task)")
    wanted = {GLUE_FOLDERS[task].lower(), task}
    found = [p for p in sorted(data.iterdir()) if p.is_dir() and p.name.lower() in wanted]
    if not found:
        from bertkit.finetuning import GLUE_DEV_FILES

        raise ConfigError(f"field 'tasks': {task}: no folder {data / GLUE_FOLDERS[task]} (the GLUE release's "
                          f"{GLUE_FOLDERS[task]}/ with train.tsv and {GLUE_DEV_FILES.get(task, 'dev.tsv')}); "
                          f"add it or drop {task} from --tasks")
    return found[0]


def task_file(folder: Path, task: str, split: str) -> str:
    """The task's `split` file in its folder (bertkit.finetuning.glue_file); a one-line error
    naming the missing file and the fix when there is none."""
    from bertkit.finetuning import GLUE_DEV_FILES, glue_file

    name = "train.tsv" if split == "train" else GLUE_DEV_FILES.get(task, "dev.tsv")
    if not (folder / name).is_file():
        raise ConfigError(f"field 'tasks': {task}: no {folder / name} (each task's folder needs train.tsv and "
                          f"{GLUE_DEV_FILES.get(task, 'dev.tsv')}); add it or drop {task} from --tasks")
    return glue_file(folder, task, split)


def prepare_tasks(config: MultitaskConfig) -> dict[str, PreparedTask]:
    """Every task read, checked and encoded as `finetune glue` does, before anything is written."""
    from bertkit.finetuning import prepare

    files = {}  # every task's files found first: a missing one fails before any task is encoded
    for task in config.tasks:
        folder = task_folder(config.data, task)
        files[task] = task_file(folder, task, "train"), task_file(folder, task, "dev")
    prepared = {}
    for task, (train, dev) in files.items():
        one = dataclasses.replace(config, family=CLASSIFICATION, glue_task=task, train=train, dev=dev)
        prepared[task] = prepare(one)
    return prepared


@dataclass
class MultitaskResult:
    output_dir: Path
    best_dir: Path | None
    best_metric: float | None  # the average of the tasks' headline dev metrics at best/
    best_step: int | None
    task_metrics: dict[str, dict[str, float]]  # task -> its dev metrics at best/ (the last evaluation without dev)
    fresh_keys: list[str]
    seconds: float


def build_model(config: MultitaskConfig, prepared: dict[str, PreparedTask]):
    """(MultiTaskModel, fresh keys as '<task>: key'): every task's head model on the checkpoint's
    encoder, the encoder then shared (the first task's copy)."""
    import torch

    from bertkit.finetuning import load_task_model, task_model_config
    from bertkit.model.families import family_for_config
    from bertkit.tasks.multitask import MultiTaskModel

    torch.manual_seed(config.seed)
    models, fresh = {}, []
    for task, one in prepared.items():
        model_cls, keep_head = one.program_cls.model_class(one.base_config), one.keep_head
        if config.head == "san" and task in PAIR_CLASSIFICATION:
            from functools import partial

            from bertkit.tasks.san import SanForSequenceClassification

            model_cls = partial(SanForSequenceClassification, steps=config.san_steps,
                                step_dropout=config.san_step_dropout)
            keep_head = False
        model, missing = load_task_model(model_cls, Path(config.init_from), task_model_config(one), keep_head)
        one.recipe.prepare_model(model, config)
        models[task] = model
        fresh += [f"{task}: {key}" for key in missing]
    family = family_for_config(next(iter(prepared.values())).base_config)
    return MultiTaskModel(models, family.backbone_attribute), fresh


def finetune_multitask(config: MultitaskConfig, *, overwrite: bool = False,
                       notify: Callable[[str], None] | None = None) -> MultitaskResult:
    """Run multi-task fine-tuning; `notify` receives one-line notes (which weights start fresh)."""
    from bertkit.finetuning import check_output_dir
    from bertkit.tasks.multitask import AVERAGE, MultiTaskProgram
    from bertkit.training.distributed import setup, teardown
    from bertkit.training.run import run_training

    output_dir = check_output_dir(config.output_dir, overwrite)
    prepared = prepare_tasks(config)
    ctx = setup()
    try:
        if ctx.world_size > 1:
            raise ConfigError("multi-task fine-tuning runs in one process (its heads train on alternate steps)")
        model, fresh = build_model(config, prepared)
        model.train()
        programs = {}
        for task, one in prepared.items():
            id2label = None if one.labels is None else dict(enumerate(one.labels))
            programs[task] = one.program_cls(model.tasks[task], one.tokenizer, one.spec, one.train.features, one.dev,
                                             id2label, eval_batch_size=config.eval_batch_size,
                                             progress=config.progress,
                                             auxiliary_loss=one.recipe.auxiliary_loss(config))
        program = MultiTaskProgram(model, programs, config.batch_size, config.seed)
        steps_per_epoch = program.num_train_examples() // config.batch_size
        training = config.training_fields(steps_per_epoch, AVERAGE)
        name = f"{type(next(iter(model.tasks.values()))).__name__} x {len(programs)} tasks (one shared encoder)"
        note = f"{name} from {config.init_from}: initialised fresh: " + (
            "; ".join(fresh_by_task(fresh)) if fresh else "nothing (every head was in the checkpoint)")
        finished = run_training(config, program, model, training, output_dir, ctx=ctx, notes=[note], notify=notify,
                                report=lambda run: write_multitask_report(output_dir, config, prepared, program,
                                                                          run, steps_per_epoch, fresh))
    finally:
        teardown()
    result = finished.result
    best_dir = output_dir / "best" if result.best_step is not None else None
    return MultitaskResult(output_dir, best_dir, result.best_metric, result.best_step,
                           task_metrics(program, best_record(result)), fresh, finished.seconds)


def fresh_by_task(fresh: list[str]) -> list[str]:
    """'<task>: key' entries -> one '<task>: key, key' entry per task."""
    grouped: dict[str, list[str]] = {}
    for entry in fresh:
        task, key = entry.split(": ", 1)
        grouped.setdefault(task, []).append(key)
    return [f"{task}: {', '.join(keys)}" for task, keys in grouped.items()]


def best_record(result) -> dict[str, Any]:
    """The evaluation record of best/ (the last evaluation when there is no best)."""
    evals = [r for r in result.records if any(k.startswith("eval_") for k in r)]
    chosen = [r for r in evals if r["step"] == result.best_step] or evals[-1:]
    return chosen[0] if chosen else {}


def task_metrics(program, record: dict[str, Any]) -> dict[str, dict[str, float]]:
    """Task -> its dev metrics in an evaluation record (`eval_<task>_<metric>`)."""
    return {task: {k.removeprefix(f"eval_{task}_"): v for k, v in record.items() if k.startswith(f"eval_{task}_")}
            for task in program.names}


# ---------------------------------------------------------------------------- report


def write_multitask_report(output_dir: Path, config: MultitaskConfig, prepared: dict[str, PreparedTask], program,
                           run, steps_per_epoch: int, fresh: list[str]) -> Path:
    from bertkit.evaluation.metrics import format_metric
    from bertkit.tasks.multitask import AVERAGE
    from bertkit.training.config import RUN_CONFIG_FILE, resolve_warmup_steps
    from bertkit.training.reporting import plot_curves, write_report

    result = run.result
    total = config.total_steps(steps_per_epoch)
    headlines = [f"eval_{task}_{program.headline(task)}" for task in program.names]
    plots = plot_curves(result.records, output_dir, [("Loss", ["loss", "eval_loss"]),
                                                     (f"Dev {AVERAGE}", [f"eval_{AVERAGE}", *headlines])])
    first = next(iter(prepared.values()))
    mc = first.base_config
    rows = ["| task | train examples | batches per epoch | share of batches | dev examples | head | metric |",
            "|---|---|---|---|---|---|---|"]
    for index, (task, one) in enumerate(prepared.items()):
        batches = program.slots.batches[index]
        rows.append(f"| {task} | {len(one.train.examples)} | {batches} | {batches / steps_per_epoch:.1%} | "
                    f"{len(one.dev.examples) if one.dev is not None else 0} | "
                    f"{type(program.programs[task].model).__name__} ({'regression' if one.spec.regression else 'classification'}) | "
                    f"{program.headline(task)} |")
    describe = {
        "tasks": ", ".join(program.names),
        "model": f"{config.init_from} ({mc.num_hidden_layers} layers, hidden {mc.hidden_size}), one encoder shared",
        "initialised fresh": "; ".join(fresh_by_task(fresh)) or "nothing",
        "batches": f"each from one task; every task's batches once per epoch, dealt in a random order "
                   f"(seed {config.seed}): tasks in proportion to their size",
        "epochs x steps per epoch": f"{config.epochs} x {steps_per_epoch} (ran {result.step} steps"
                                    + (", stopped early)" if result.stopped_early else ")"),
        "batch size, max_seq_length": f"{config.batch_size}, {config.max_seq_length}",
        "lr (peak), warm-up, decay": f"{config.lr:g}, "
                                     f"{resolve_warmup_steps(config.warmup_steps, config.warmup_ratio, total)} "
                                     "steps, linear to 0 (one optimizer and schedule for every task)",
        "weight decay": f"{config.weight_decay:g}",
        "wall time (s)": round(run.seconds, 1),
    }
    evals = [r for r in result.records if any(k.startswith("eval_") for k in r)]
    keys = [f"eval_{AVERAGE}", *headlines]
    table = ["| epoch | step | " + " | ".join(k.removeprefix("eval_") for k in keys) + " |",
             "|---" * (len(keys) + 2) + "|"]
    for record in evals:
        mark = " **best**" if record["step"] == result.best_step else ""
        table.append(f"| {record['step'] / steps_per_epoch:.3g}{mark} | {record['step']} | "
                     + " | ".join(format_metric(k, record[k]) if k in record else "" for k in keys) + " |")
    best: dict[str, Any] | str = "no evaluation"
    if result.best_step is not None:
        best = {"metric for best": f"{AVERAGE} (mean of the tasks' headline metrics)",
                "best value": format_metric(AVERAGE, result.best_metric), "step": result.best_step,
                **{f"{task} {name}": format_metric(name, value)
                   for task, values in task_metrics(program, best_record(result)).items()
                   for name, value in values.items() if name != "loss"}}
    sections = [("Run", describe), ("Tasks", "\n".join(rows)), ("Best dev model", best),
                ("Dev metrics per evaluation", "\n".join(table) if evals else "no evaluation"),
                ("Files", "`best/` and `final/`: the shared encoder (config.json, model.safetensors, tokenizer), "
                          "`multitask.json`, and `tasks/<task>/` per task (the encoder with the task's head, "
                          f"bertkit_task.json: `bertkit predict --task TASK --model best`); `metrics.jsonl`, "
                          f"`{RUN_CONFIG_FILE}`")]
    return write_report(output_dir, f"Multi-task fine-tuning run: {output_dir.name}", sections, plots)
