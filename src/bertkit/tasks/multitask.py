"""MT-DNN's multi-task fine-tuning (Liu et al., 2019): one shared encoder, a head per task.

`MultiTaskProgram` is a `TrainingProgram` over several task programs (each a
`TaskProgram` of bertkit.tasks.programs with its own data, head, loss and official
metrics), so the shared loop trains them with one optimizer and one schedule:

- Batches. Each global batch comes from one task. Task t's training features fill
  ceil(n_t / G) batches of G slots per epoch (the last one topped up with the task's
  first features), and each epoch deals those batches in a random order drawn from
  (seed, epoch): the paper's "merge every task's mini-batches and shuffle", so a task is
  sampled in proportion to its size and every example is seen once an epoch. The epoch
  length is a multiple of G, so no batch straddles two tasks across an epoch boundary.
- Loss. A batch's loss is its task program's (cross-entropy, or MSE for STS-B).
- Evaluation. Every task's dev set with its official metrics, keyed `<task>_<metric>`,
  and `average`: the mean of the tasks' headline metrics (accuracy, F1, Spearman, MCC),
  which picks best/.
- Checkpoint (`save_pretrained`): the shared encoder at the top (the family's bare model,
  config.json, tokenizer: what `bertkit finetune glue --model DIR` starts from, its head
  fresh), `multitask.json` naming the tasks, and `tasks/<task>/` a whole fine-tuned model
  per task (the encoder with that task's head, bertkit_task.json, label map) that
  `bertkit predict --task` / `bertkit evaluate glue --task` read (`task_checkpoint`).

QNLI trains with a classification head, not the paper's pairwise ranking: the ranking
loss needs each question's candidate sentences with one right answer, and GLUE's QNLI
(the 2019 revision) pairs most questions with a single sentence (dev: 2,738 of 4,100
questions), so there is no candidate set to rank over.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from bertkit.atomic import write_text_atomic
from bertkit.errors import BertkitError, ConfigError
from bertkit.training.program import TrainingProgram

MULTITASK_FILE = "multitask.json"
TASKS_DIR = "tasks"
AVERAGE = "average"  # the mean of the tasks' headline dev metrics


class MultiTaskModel(nn.Module):
    """Task models sharing one encoder: `tasks[name]` is task `name`'s model (a model
    family's sequence-classification class), and every one of them holds the same encoder
    module as its `backbone_attribute` (HF's `bert`, `roberta`, ...)."""

    def __init__(self, task_models: Mapping[str, nn.Module], backbone_attribute: str):
        super().__init__()
        if not task_models:
            raise ValueError("a multi-task model needs at least one task model")
        self.tasks = nn.ModuleDict(dict(task_models))
        self.backbone_attribute = backbone_attribute
        shared = getattr(next(iter(task_models.values())), backbone_attribute)
        for model in task_models.values():
            setattr(model, backbone_attribute, shared)
        self.config = shared.config  # the encoder's: what the loop's FLOP count reads

    @property
    def backbone(self) -> nn.Module:
        return getattr(next(iter(self.tasks.values())), self.backbone_attribute)

    def forward(self, task: str, **inputs):
        """Task `task`'s model on `inputs` (its keyword inputs and targets)."""
        return self.tasks[task](**inputs)


class TaskBatches:
    """Where each task's examples sit in the stream of one epoch.

    sizes: training features per task; batch_size: the global batch G. Task t owns the
    slots [offsets[t], offsets[t + 1]), ceil(n_t / G) * G of them; slot k of a task is its
    feature k mod n_t (the last batch topped up with the first features)."""

    def __init__(self, sizes: Sequence[int], batch_size: int):
        if batch_size <= 0 or any(n <= 0 for n in sizes):
            raise ValueError(f"sizes {list(sizes)} and batch size {batch_size} must be positive")
        self.sizes = [int(n) for n in sizes]
        self.batch_size = batch_size
        self.batches = [math.ceil(n / batch_size) for n in self.sizes]
        self.offsets = np.cumsum([0] + [b * batch_size for b in self.batches])

    @property
    def total(self) -> int:
        return int(self.offsets[-1])

    def locate(self, slot: int) -> tuple[int, int]:
        """(task index, feature index) of a slot."""
        task = int(np.searchsorted(self.offsets, slot, side="right")) - 1
        return task, (slot - int(self.offsets[task])) % self.sizes[task]

    def order(self, permutation: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """An epoch's slots: each task's slots in `permutation`'s order cut into batches of G,
        and all the tasks' batches dealt in a random order from `rng`. (total,) -> (total,)."""
        tasks = np.searchsorted(self.offsets, permutation, side="right") - 1
        batches = []
        for task in range(len(self.sizes)):
            mine = permutation[tasks == task]
            batches += [mine[start : start + self.batch_size] for start in range(0, len(mine), self.batch_size)]
        return np.concatenate([batches[i] for i in rng.permutation(len(batches))])


class MultiTaskProgram(TrainingProgram):
    """Several task programs on one shared encoder (see the module docstring).

    programs: task name -> its `TaskProgram` (whose `model` is that task's model inside
    `model`); batch_size: the global batch; seed: the order of the tasks' batches."""

    def __init__(self, model: MultiTaskModel, programs: Mapping[str, Any], batch_size: int, seed: int):
        self.model = model
        self.programs = dict(programs)
        self.names = list(self.programs)
        self.batch_size = batch_size
        self.seed = seed
        self.slots = TaskBatches([len(p.train_features) for p in self.programs.values()], batch_size)
        self.tokenizer = next(iter(self.programs.values())).tokenizer

    # ---- data ---------------------------------------------------------------------------
    def num_train_examples(self) -> int:
        return self.slots.total

    def train_example(self, index: int, epoch: int) -> dict[str, Any]:
        task, feature = self.slots.locate(index)
        return {**self.programs[self.names[task]].train_example(feature, epoch), "task": task}

    def epoch_order(self, permutation: np.ndarray, epoch: int, global_batch: int) -> np.ndarray:
        if global_batch != self.batch_size:
            raise ConfigError(f"field 'batch_size': multi-task batches are {self.batch_size} sequences of one task; "
                              f"the loop asked for {global_batch} (a batch ramp is not supported)")
        return self.slots.order(permutation, np.random.default_rng([self.seed, epoch, 43]))

    def collate(self, examples: list[dict[str, Any]]) -> dict[str, torch.Tensor]:
        """The task program's batch plus `task` (B,): the task's index, the same in every row."""
        tasks = {example["task"] for example in examples}
        if len(tasks) != 1:
            raise BertkitError(f"a multi-task micro-batch mixes tasks {sorted(self.names[t] for t in tasks)}")
        task = tasks.pop()
        batch = self.programs[self.names[task]].collate([{k: v for k, v in e.items() if k != "task"}
                                                         for e in examples])
        batch["task"] = torch.full((len(examples),), task, dtype=torch.long)
        return batch

    def task_of(self, batch: dict[str, torch.Tensor]) -> str:
        return self.names[int(batch["task"][0])]

    # ---- loss ---------------------------------------------------------------------------
    def loss_counts(self, batch: dict[str, torch.Tensor]) -> dict[str, float]:
        return self.programs[self.task_of(batch)].loss_counts(batch)

    def compute_loss(self, model, batch, totals) -> tuple[torch.Tensor, dict[str, float]]:
        name = self.task_of(batch)
        loss, stats = self.programs[name].compute_loss(model.tasks[name], batch, totals)
        return loss, {**stats, **{f"{name}/{key}": value for key, value in stats.items()}}

    def summarize(self, stats: dict[str, float]) -> dict[str, float]:
        """The loss over all tasks' batches, and each task's loss (and training accuracy)."""
        metrics = {key: value for key, value in self.programs[self.names[0]].summarize(
            {k: v for k, v in stats.items() if "/" not in k}).items() if key != "accuracy"}
        for name, program in self.programs.items():
            own = {k.removeprefix(f"{name}/"): v for k, v in stats.items() if k.startswith(f"{name}/")}
            metrics.update({f"{name}_{k.removeprefix('task_')}": v for k, v in program.summarize(own).items()})
        return metrics

    # ---- evaluation -----------------------------------------------------------------------
    def headline(self, name: str) -> str:
        """Task `name`'s official headline metric (accuracy, f1, spearmanr, mcc)."""
        program = self.programs[name]
        return program.default_metric(program.spec)

    def evaluate(self, model: nn.Module, ctx, batch_size: int, max_batches: int | None) -> dict[str, float]:
        metrics: dict[str, float] = {}
        headlines = []
        for name, program in self.programs.items():
            scores = program.evaluate(model.tasks[name], ctx, batch_size, max_batches)
            metrics.update({f"{name}_{key}": value for key, value in scores.items()})
            if self.headline(name) in scores:
                headlines.append(scores[self.headline(name)])
        if headlines:
            metrics[AVERAGE] = float(np.mean(headlines))
        return metrics

    def on_evaluate(self, step: int, metrics: dict[str, float], improved: bool) -> None:
        for program in self.programs.values():
            program.on_evaluate(step, metrics, improved)

    # ---- saving -----------------------------------------------------------------------------
    def save_pretrained(self, model: nn.Module, directory: Path, state_dict=None) -> None:
        """The shared encoder, the tokenizer and multitask.json in `directory`, and a whole
        model per task in `directory/tasks/<task>/`. The run is one process, so `model` holds
        the weights the loop's `state_dict` copied (it is not read)."""
        directory = Path(directory)
        model.backbone.save_pretrained(directory)
        self.tokenizer.save_pretrained(directory)
        for name, program in self.programs.items():
            program.save_pretrained(model.tasks[name], directory / TASKS_DIR / name)
        description = {"tasks": {name: {"folder": f"{TASKS_DIR}/{name}", "metric": self.headline(name),
                                        "head": type(model.tasks[name]).__name__} for name in self.names}}
        write_text_atomic(directory / MULTITASK_FILE, json.dumps(description, indent=2) + "\n")

    def fsdp_units(self, model: nn.Module) -> list[nn.Module]:
        raise ConfigError("multi-task fine-tuning runs in one process (its heads train on alternate steps)")


def multitask_tasks(directory: str | Path) -> list[str] | None:
    """The tasks of a multi-task checkpoint (its multitask.json), None for another folder."""
    path = Path(directory) / MULTITASK_FILE
    if not path.is_file():
        return None
    try:
        return list(json.loads(path.read_text(encoding="utf-8"))["tasks"])
    except (json.JSONDecodeError, KeyError, TypeError) as exc:
        raise BertkitError(f"{path}: not a valid multi-task description ({exc})") from None


def task_checkpoint(directory: str | Path, task: str | None) -> Path:
    """The checkpoint of GLUE task `task` in a multi-task checkpoint `directory`
    (`directory/tasks/<task>`); `directory` itself for any other checkpoint. A multi-task
    checkpoint without `task`, or without that task, is a one-line error naming the tasks."""
    from bertkit.evaluation.metrics import glue_task_name

    tasks = multitask_tasks(directory)
    if tasks is None:
        return Path(directory)
    if task is None:
        raise BertkitError(f"{directory}: a multi-task checkpoint ({', '.join(tasks)}); choose one with --task")
    name = glue_task_name(task)
    if name not in tasks:
        raise BertkitError(f"field 'task': {directory} was trained on {', '.join(tasks)}, not {name}")
    return Path(directory) / TASKS_DIR / name
