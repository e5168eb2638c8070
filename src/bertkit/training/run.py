"""The run harness: the one sequence every training run goes through.

Pre-training, fine-tuning (each grid point) and both distillation modes build their
program and model their own way, then hand them to `run_training`, which does
resume -> Trainer -> run_config.json -> start hooks -> train -> report -> teardown:

- the Trainer is made first (its checks on the batch sizes are errors before anything
  is written);
- on the main process: the run folder and `run_config.json` (the config as trained, the
  file `--resume` reads back), then the one-line notes (where a resumed run continues,
  which weights start fresh) and `on_start(config)` (the CLI's warnings) — after every
  check, so an error stays one line;
- training, timed; from the resumption's checkpoint when there is one; a collective that
  fails because another process died is one line naming the last complete checkpoint;
- the report (main process), given the result, the wall time and the trainer;
- the process group's teardown, when the harness set it up. A caller that runs several
  trainings in one process group (the fine-tuning grid) passes its `ctx` and tears down
  itself.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from torch import nn

from bertkit.errors import BertkitError
from bertkit.training import checkpoints as ckpt
from bertkit.training.config import TrainingConfig, write_run_config
from bertkit.training.distributed import DistContext, peer_failure, setup, teardown
from bertkit.training.loop import Trainer, TrainResult
from bertkit.training.program import TrainingProgram
from bertkit.training.resume import Notify, Resumption


@dataclass
class FinishedRun:
    """A finished training: the loop's result, the seconds training took and the trainer
    (its micro-batch and accumulation, for reports)."""

    result: TrainResult
    seconds: float
    trainer: Trainer


def run_training(config: Any, program: TrainingProgram, model: nn.Module, training: TrainingConfig,
                 output_dir: str | Path, *, ctx: DistContext | None = None, resumption: Resumption | None = None,
                 notes: Sequence[str] = (), notify: Notify | None = None,
                 on_start: Callable[[Any], None] | None = None,
                 report: Callable[[FinishedRun], Any] | None = None) -> FinishedRun:
    """Train `model` with `program` under the loop's `training` fields in `output_dir`;
    `config` is the run's whole configuration, saved as run_config.json and given to
    `on_start`. `notify` receives the resumption's notes, then `notes`; `report` runs on
    the main process once training ends. `ctx`: an existing process group (not torn
    down here); None sets one up for this run and tears it down after."""
    output_dir = Path(output_dir)
    owned = ctx is None
    if owned:
        ctx = setup()
    try:
        trainer = Trainer(program, training, output_dir, ctx)
        if ctx.is_main:
            output_dir.mkdir(parents=True, exist_ok=True)
            write_run_config(output_dir, config)
            if notify is not None:
                for line in [*(resumption.notes() if resumption is not None else []), *notes]:
                    notify(line)
            if on_start is not None:
                on_start(config)
        started = time.perf_counter()
        try:
            result = trainer.train(model, resume_from=resumption.checkpoint if resumption is not None else None)
        except Exception as exc:
            if not peer_failure(exc, ctx):
                raise
            latest = ckpt.latest_checkpoint(output_dir)
            where = f"the last complete checkpoint is {latest}" if latest else "no checkpoint was written yet"
            raise BertkitError(f"process {ctx.rank} of {ctx.world_size}: another process of the run stopped "
                               f"({str(exc).splitlines()[0][:200]}); {where} (continue with --resume)") from exc
        finished = FinishedRun(result, time.perf_counter() - started, trainer)
        if ctx.is_main and report is not None:
            report(finished)
        return finished
    finally:
        if owned:
            teardown()
