"""The training loop shared by pre-training and fine-tuning.

It knows nothing about BERT: a `TrainingProgram` turns examples into batches and
batches into a loss. The loop owns the rest — global batch arithmetic over processes
and accumulation, optimizer and schedule, mixed precision, clipping, non-finite
losses, periodic evaluation, atomic checkpoints, exact resume, logging.

Determinism. The data is one endless stream of sample positions in which epoch e is a
permutation drawn from (seed, e); each step takes the next positions, G of them (the
global batch: step s holds [s*G, (s+1)*G)), or with a batch ramp (bertkit.training.ramp)
as many micro-batches as the ramp gives at that point of the run. Checkpoints store the
positions consumed. Dropout is seeded from (seed, step, micro-batch, rank). So resuming
needs no replay, the number of data workers cannot change a batch, and a killed run
resumed from its checkpoint ends with bit-identical weights.

Best model and early stopping. With `metric_for_best` set, every evaluation is compared
with the best so far; an improvement writes `best/` (the model in the HF layout plus
`best_metrics.json`) atomically, and `early_stopping_patience` evaluations in a row
without one stop the run cleanly (a last checkpoint and `final/` are still written).
The best value travels in the checkpoints, so a resumed run compares against it.

Wall-clock budgets. With `budget_seconds` set the run ends when the time is spent (the
last evaluation's length kept in reserve, so the final evaluation fits), the lr follows
the fraction of the time spent, and evaluations fall at fractions of it
(bertkit.training.budget). Checkpoints carry the time spent, so a resumed budget run
continues the same schedule; such a run is not bit-reproducible (see that module).
"""

from __future__ import annotations

import itertools
import json
import math
import queue
import threading
import time
import warnings
from collections.abc import Iterator
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from bertkit.atomic import write_text_atomic
from bertkit.errors import BertkitError, ConfigError
from bertkit.training import checkpoints as ckpt
from bertkit.training.budget import BudgetClock, budget_lr_factor
from bertkit.training.compile import compile_with_fallback
from bertkit.training.faults import maybe_fail
from bertkit.training.config import TrainingConfig
from bertkit.training.distributed import DistContext, all_reduce_sum, barrier
from bertkit.training.optim import build_optimizer, linear_schedule
from bertkit.training.program import TrainingProgram
from bertkit.training.ramp import ramp_batch_size
from bertkit.training.nonfinite import PendingSteps, finite_flag, first_nonfinite_gradient, skip_update_unless, skips_on_device
from bertkit.training.reporting import MetricsLog
from bertkit.training.step_sums import add_into, read_sums
from bertkit.training.throughput import ModelFlops, Peak, device_peak

FINAL_DIR = "final"
COMPILE_CACHE_DIR = "compile_cache"  # torch.compile's artefacts in the run folder, reused when it resumes
DDP_BUCKET_MB = 25  # DDP's default: big enough to amortise a collective, small enough to start early
BEST_DIR = "best"
BEST_METRICS_FILE = "best_metrics.json"


@dataclass
class TrainResult:
    step: int
    final_dir: Path | None
    records: list[dict[str, Any]] = field(default_factory=list)
    tokens_per_second: float = 0.0
    skipped_steps: int = 0
    best_dir: Path | None = None  # set when metric_for_best is and an evaluation ran
    best_metric: float | None = None
    best_step: int | None = None
    stopped_early: bool = False
    amp_skipped_steps: int = 0  # fp16 steps GradScaler skipped itself (loss-scale overflow), not failures
    budget_ended: bool = False  # a budget run ended because its time was spent (not at max_steps)
    elapsed_seconds: float | None = None  # a budget run's time spent (a resumed run's earlier part included)
    mfu: float | None = None  # model FLOPs utilisation over the run's logged steps (None: no known peak)


class Trainer:
    def __init__(self, program: TrainingProgram, config: TrainingConfig, output_dir: str | Path, ctx: DistContext | None = None,
                 clock=time.perf_counter):
        self.program = program
        self.clock = clock  # a budget run's time source (injectable for tests)
        self.budget: BudgetClock | None = None
        self.config = config
        self.output_dir = Path(output_dir)
        self.ctx = ctx or DistContext()
        self.global_batch = config.batch_size
        # a ramp's smallest batch is one micro-batch per process unless micro_batch_size says otherwise
        smallest = config.batch_ramp_start or config.batch_size
        micro = config.micro_batch_size or max(1, smallest // self.ctx.world_size)
        per_step = micro * self.ctx.world_size
        for name in ("batch_size", "batch_ramp_start"):
            value = getattr(config, name)
            if value is not None and value % per_step:
                raise ConfigError(
                    f"field {name!r} ({value}) must be a multiple of micro_batch_size x processes "
                    f"({micro} x {self.ctx.world_size})"
                )
        self.micro_batch = micro
        self.sequences_per_micro = per_step  # one micro-batch on every process
        self.accumulation = config.batch_size // per_step  # micro-batches per step at the full batch
        self.ramped = config.batch_ramp_start is not None
        self.samples_seen = 0  # stream positions consumed so far (the next step's first)
        # the steps not yet checked for non-finite values: step -> (first position, micro-batches)
        self._step_layouts: dict[int, tuple[int, int]] = {}
        # check each step's loss and gradient on the host (None: on a CPU, where a read costs nothing;
        # on a GPU the check is taken on the device and read at log steps, bertkit.training.nonfinite)
        self.check_every_step: bool | None = None
        self._flops: ModelFlops | None = None  # the model's FLOPs per token and the device's peak, for MFU
        self._peak: Peak | None = None
        self.num_examples = program.num_train_examples()
        if self.num_examples <= 0:
            raise BertkitError("no training examples")
        self._permutations: dict[int, np.ndarray] = {}
        self.precision = _resolve_precision(config.precision, self.ctx.device)
        # best value of metric_for_best so far, its step, and evaluations since it improved
        self._best: dict[str, Any] = {"value": None, "step": None, "bad_evals": 0}

    # ---- data order ------------------------------------------------------------------
    def _permutation(self, epoch: int) -> np.ndarray:
        if epoch not in self._permutations:
            self._permutations = {e: p for e, p in self._permutations.items() if e >= epoch - 1}
            permutation = np.random.default_rng([self.config.seed, epoch]).permutation(self.num_examples)
            self._permutations[epoch] = self.program.epoch_order(permutation, epoch, self.global_batch)
        return self._permutations[epoch]

    def micro_batches_at(self, step: int, fraction: float | None = None) -> int:
        """Micro-batches (per process) accumulated in `step`: all of batch_size's, or with a
        batch ramp as many as the ramp gives at `fraction` of the run (a budget run's share
        of its time; None: step / max_steps)."""
        cfg = self.config
        if not self.ramped:
            return self.accumulation
        fraction = step / cfg.max_steps if fraction is None else fraction
        batch = ramp_batch_size(fraction, cfg.batch_ramp_start, cfg.batch_size, cfg.batch_ramp_ratio,
                                self.sequences_per_micro)
        return batch // self.sequences_per_micro

    def describe_accumulation(self) -> str:
        """Micro-batches accumulated per step for a report: "4", or with a ramp "1..4"."""
        least = self.micro_batches_at(0, 0.0)
        return f"{least}..{self.accumulation}" if least != self.accumulation else str(self.accumulation)

    def samples_before(self, step: int) -> int:
        """Stream positions a step-count run consumes before `step` (a budget run's ramp
        follows its clock, so its count comes from the loop and the checkpoint instead)."""
        micro_batches = 0
        for s in range(step):  # the ramp never shrinks: once grown, the rest is counted at once
            size = self.micro_batches_at(s)
            if size == self.accumulation:
                micro_batches += (step - s) * size
                break
            micro_batches += size
        return micro_batches * self.sequences_per_micro

    def _positions(self, first: int, micro: int) -> range:
        """This rank's positions in the `micro`-th micro-batch counted from stream position `first`:
        each micro-batch spans one micro-batch of every process, ranks in order."""
        start = first + (micro * self.ctx.world_size + self.ctx.rank) * self.micro_batch
        return range(start, start + self.micro_batch)

    def _examples(self, positions: range) -> list[dict[str, Any]]:
        examples = []
        for position in positions:
            epoch, offset = divmod(position, self.num_examples)
            examples.append(self.program.train_example(int(self._permutation(epoch)[offset]), epoch))
        return examples

    def _micro_batch_stream(self, first: int, end: int | None) -> Iterator[dict[str, torch.Tensor]]:
        """This rank's collated micro-batches from stream position `first` up to `end` (None:
        endlessly, a budget run): each step takes the next ones, as many as it accumulates,
        so none is skipped or repeated."""
        for micro in itertools.count():
            if end is not None and first + micro * self.sequences_per_micro >= end:
                return
            yield self.program.collate(self._examples(self._positions(first, micro)))

    # ---- setup -----------------------------------------------------------------------
    def _wrap(self, model: nn.Module) -> nn.Module:
        if self.config.compile:
            self.program.fix_shapes(model)  # static row counts where the program bounds them
            compile_with_fallback(model, self.output_dir / COMPILE_CACHE_DIR, self._say, self.config.compile_mode)
        if not self.ctx.enabled:
            return model
        if self.config.parallel == "fsdp":
            from torch.distributed.fsdp import fully_shard

            for unit in self.program.fsdp_units(model):
                fully_shard(unit)
            fully_shard(model)
            return model
        from torch.nn.parallel import DistributedDataParallel

        device_ids = [self.ctx.device.index] if self.ctx.device.type == "cuda" else None
        # gradients all-reduced in buckets while the backward pass still runs (DDP's default), the
        # buckets' memory being the gradients themselves (no copy in and out of them)
        return DistributedDataParallel(model, device_ids=device_ids, bucket_cap_mb=DDP_BUCKET_MB,
                                       gradient_as_bucket_view=True)

    def _say(self, line: str) -> None:
        """One line to the user from the main process (a notice, not an error)."""
        if self.ctx.is_main:
            print(line, flush=True)

    def _autocast(self):
        if self.precision == "fp32":
            return nullcontext()
        dtype = torch.bfloat16 if self.precision == "bf16" else torch.float16
        return torch.autocast(device_type=self.ctx.device.type, dtype=dtype)

    def _seed_dropout(self, step: int, micro: int) -> None:
        seed = np.random.SeedSequence([self.config.seed, step, micro, self.ctx.rank]).generate_state(1)[0]
        torch.manual_seed(int(seed))

    # ---- checkpoints -------------------------------------------------------------------
    def _full_state_dicts(self, model: nn.Module, optimizer) -> tuple[dict, dict | None]:
        """Model and optimizer state as full (unsharded) dicts; collective under FSDP."""
        if self.ctx.enabled and self.config.parallel == "fsdp":
            from torch.distributed.checkpoint.state_dict import (
                StateDictOptions,
                get_model_state_dict,
                get_optimizer_state_dict,
            )

            options = StateDictOptions(full_state_dict=True, cpu_offload=True)
            model_state = get_model_state_dict(model, options=options)
            optim_state = get_optimizer_state_dict(model, optimizer, options=options) if optimizer is not None else None
            return model_state, optim_state
        raw = _unwrap(model)
        return raw.state_dict(), optimizer.state_dict() if optimizer is not None else None

    def save_checkpoint(self, model, optimizer, scheduler, scaler, step: int) -> Path | None:
        model_state, optim_state = self._full_state_dicts(model, optimizer)
        target = self.output_dir / ckpt.checkpoint_name(step)
        if self.ctx.is_main:
            state = {
                "step": step,
                "optimizer": optim_state,
                "scheduler": scheduler.state_dict(),
                "scaler": scaler.state_dict() if scaler is not None else None,
                "rng": ckpt.rng_state(),
                "world_size": self.ctx.world_size,
                "global_batch": self.global_batch,
                "samples_seen": self.samples_seen,  # where the data stream resumes (a ramp makes it no multiple of step)
                "best": dict(self._best),
                "elapsed_seconds": self.budget.elapsed() if self.budget is not None else None,
            }

            def fill(tmp: Path) -> None:
                self.program.save_pretrained(_unwrap(model), tmp, state_dict=model_state)
                maybe_fail("checkpoint", step, self.ctx.rank)
                ckpt.save_training_state(tmp, state)

            ckpt.write_directory_atomic(target, fill)
            ckpt.prune_checkpoints(self.output_dir, self.config.save_total_limit)
        else:
            maybe_fail("checkpoint", step, self.ctx.rank)  # while the main process writes
        barrier(self.ctx)
        return target

    def _save_or_explain(self, model, optimizer, scheduler, scaler, step: int, last_saved: Path | None) -> Path | None:
        """`save_checkpoint`; a failed save (full disk, read-only folder) says which complete
        checkpoint the run can be resumed from."""
        try:
            return self.save_checkpoint(model, optimizer, scheduler, scaler, step)
        except BertkitError as exc:
            where = (f"the last complete checkpoint is {last_saved} (continue with --resume)" if last_saved
                     else "no checkpoint was written yet")
            raise BertkitError(f"step {step}: {exc}; {where}") from exc

    def _nonfinite_problem(self, loss: float, grad_norm: torch.Tensor, model: nn.Module, scaler) -> str | None:
        """What is non-finite at this step (the loss, else a gradient), or None. Under fp16 a
        non-finite gradient with a finite loss is the loss scale overflowing, which
        GradScaler handles by skipping the step and lowering the scale: not a failure."""
        if not math.isfinite(loss):
            return f"the loss is {loss} (non-finite)"
        if scaler is None and not math.isfinite(float(grad_norm)):
            return f"the gradient of {first_nonfinite_gradient(model)} is non-finite"
        return None

    def _on_nonfinite(self, step: int, problem: str, in_row: int, last_saved: Path | None) -> None:
        """Stop (on_nonfinite=stop, or too many skips in a row) with the step, the batch's
        data positions and what went non-finite, all in one line."""
        cfg = self.config
        if cfg.on_nonfinite == "skip" and in_row < cfg.nonfinite_skip_limit:
            return
        where = f"the last good checkpoint is {last_saved}" if last_saved else "no checkpoint was written yet"
        why = (problem if cfg.on_nonfinite == "stop"
               else f"{in_row} steps in a row skipped (nonfinite_skip_limit), the last because {problem}")
        raise BertkitError(f"step {step + 1}: {why}; the batch held {self.describe_batch(step)}; stopped — {where}")

    def describe_batch(self, step: int, shown: int = 8) -> str:
        """This process's training examples at `step` as `epoch:index` data positions
        (the first `shown`), so a user can look at their text."""
        if step in self._step_layouts:
            first, micro_batches = self._step_layouts[step]
        else:
            first, micro_batches = self.samples_before(step), self.micro_batches_at(step)
        positions = [p for micro in range(micro_batches) for p in self._positions(first, micro)]
        named = []
        for position in positions[:shown]:
            epoch, offset = divmod(position, self.num_examples)
            named.append(f"{epoch}:{int(self._permutation(epoch)[offset])}")
        more = f" and {len(positions) - shown} more" if len(positions) > shown else ""
        return f"training examples (epoch:index) {', '.join(named)}{more}"

    def _resume(self, checkpoint: Path, model: nn.Module, optimizer, scheduler, scaler) -> int:
        state = ckpt.load_training_state(checkpoint)
        if state.get("world_size") != self.ctx.world_size or state.get("global_batch") != self.global_batch:
            raise BertkitError(
                f"{checkpoint}: saved with {state.get('world_size')} process(es) and batch_size "
                f"{state.get('global_batch')}; resume with the same (now {self.ctx.world_size} and {self.global_batch})"
            )
        if self.ctx.enabled and self.config.parallel == "fsdp":
            from torch.distributed.checkpoint.state_dict import StateDictOptions, set_optimizer_state_dict

            set_optimizer_state_dict(model, optimizer, state["optimizer"], options=StateDictOptions(full_state_dict=True))
        else:
            optimizer.load_state_dict(state["optimizer"])
        scheduler.load_state_dict(state["scheduler"])
        self._apply_schedule(optimizer, scheduler)
        if scaler is not None and state.get("scaler"):
            scaler.load_state_dict(state["scaler"])
        ckpt.restore_rng_state(state["rng"])
        if state.get("best"):
            self._best = dict(state["best"])
        if self.budget is not None:
            self.budget.already = float(state.get("elapsed_seconds") or 0.0)
        step = int(state["step"])
        seen = state.get("samples_seen")  # absent from the oldest checkpoints, which had no ramp
        self.samples_seen = int(seen) if seen is not None else self.samples_before(step)
        return step

    def _apply_schedule(self, optimizer, scheduler) -> None:
        """The configured lr schedule from the resumed step on: a resumed run may change
        lr, warmup_steps or max_steps, which the saved optimizer and scheduler state would
        otherwise keep (unchanged, these are the numbers the saved state holds)."""
        scheduler.base_lrs = [self.config.lr for _ in optimizer.param_groups]
        for group, factor in zip(optimizer.param_groups, scheduler.lr_lambdas):
            group["initial_lr"] = self.config.lr
            group["lr"] = self.config.lr * factor(scheduler.last_epoch)
        scheduler._last_lr = [group["lr"] for group in optimizer.param_groups]

    # ---- best model and early stopping ---------------------------------------------------
    def _track_best(self, model: nn.Module, step: int, metrics: dict[str, float]) -> bool:
        """Compare `metrics` with the best so far (writing best/ when better); True if improved."""
        cfg = self.config
        if not cfg.metric_for_best:
            return False
        name = cfg.metric_for_best.removeprefix("eval_")
        if name not in metrics:
            reported = ", ".join(sorted(metrics)) or "nothing (is there held-out data?)"
            raise ConfigError(f"field 'metric_for_best': the evaluation reports no {name!r}; it reports {reported}")
        value, best = float(metrics[name]), self._best["value"]
        improved = math.isfinite(value) and (best is None or (value > best if cfg.best_is_greater() else value < best))
        if improved:
            self._best.update(value=value, step=step, bad_evals=0)
            self._save_best(model, step, name, metrics)
        else:
            self._best["bad_evals"] += 1
        return improved

    def _save_best(self, model: nn.Module, step: int, name: str, metrics: dict[str, float]) -> None:
        model_state, _ = self._full_state_dicts(model, None)
        if self.ctx.is_main:
            summary = {"step": step, "metric_for_best": name, **{f"eval_{k}": v for k, v in metrics.items()}}

            def fill(tmp: Path) -> None:
                self.program.save_pretrained(_unwrap(model), tmp, state_dict=model_state)
                write_text_atomic(tmp / BEST_METRICS_FILE, json.dumps(summary, indent=2) + "\n")

            ckpt.write_directory_atomic(self.output_dir / BEST_DIR, fill)
        barrier(self.ctx)

    def _patience_exhausted(self) -> bool:
        patience = self.config.early_stopping_patience
        return patience is not None and self._best["bad_evals"] >= patience

    # ---- the loop --------------------------------------------------------------------
    def train(self, model: nn.Module, resume_from: Path | None = None) -> TrainResult:
        """Train `model` (whose weights the caller has already loaded, from `resume_from`
        too) to `max_steps`; returns where the final model went."""
        cfg, ctx = self.config, self.ctx
        self.output_dir.mkdir(parents=True, exist_ok=True)
        ckpt.sweep_incomplete(self.output_dir)
        model.to(ctx.device)
        model.train()
        self._flops, self._peak = ModelFlops.of(model), device_peak(ctx.device, self.precision)
        wrapped = self._wrap(model)
        optimizer = build_optimizer(wrapped, cfg)
        scheduler = linear_schedule(optimizer, cfg.num_warmup_steps(), cfg.max_steps)
        scaler = torch.amp.GradScaler(ctx.device.type) if self.precision == "fp16" else None
        every_step = self.check_every_step if self.check_every_step is not None else ctx.device.type != "cuda"
        pending = PendingSteps() if not every_step and scaler is None and skips_on_device(optimizer) else None
        if cfg.budget_seconds is not None:
            self.budget = BudgetClock(cfg.budget_seconds, cfg.budget_evals, clock=self.clock)
        self.samples_seen = 0
        start = self._resume(resume_from, wrapped, optimizer, scheduler, scaler) if resume_from else 0
        # a budget run's ramp follows the fraction of its time shared at the step before (all processes agree)
        fraction = self.budget.already / self.budget.budget if self.budget is not None else None
        # a step-count run's stream ends with its last step, so nothing is prepared past it
        end = None
        if self.budget is None:
            end = self.samples_seen + self.samples_before(cfg.max_steps) - self.samples_before(start)
        batches_ahead = self._micro_batch_stream(self.samples_seen, end)
        if ctx.device.type == "cuda":  # page-locked: the copies to the GPU run without holding the host
            batches_ahead = ({k: v.pin_memory() for k, v in batch.items()} for batch in batches_ahead)
        stream = _prefetch(batches_ahead, depth=2 * self.accumulation)
        log = MetricsLog(self.output_dir, cfg.tensorboard, resume_step=start if resume_from else None) if ctx.is_main else None
        bar = _progress(cfg, start, ctx)
        window: dict[str, Any] = {}  # the logging window's sums, tensors on the device until logged
        window_start = time.perf_counter()
        total_tokens, total_time, total_flops = 0.0, 0.0, 0.0
        skipped = skipped_in_row = amp_skipped = 0
        last_saved = ckpt.latest_checkpoint(self.output_dir)
        step = start
        stopped: int | None = None  # the step early stopping ended the run at
        ended: int | None = None  # the step the budget ended the run at
        eval_seconds = 0.0  # the last evaluation's length: a budget run keeps it in reserve for the final one
        if self.budget is not None:
            self.budget.start()
        try:
            for step in range(start, cfg.max_steps):
                micro_batches = self.micro_batches_at(step, fraction)
                self._step_layouts[step] = (self.samples_seen, micro_batches)
                self.samples_seen += micro_batches * self.sequences_per_micro
                host_batches = [next(stream) for _ in range(micro_batches)]
                counts: dict[str, Any] = {}
                for batch in host_batches:  # counted on the host's copy: no read from the device
                    add_into(counts, self.program.loss_counts(batch))
                stats = self._token_counts(host_batches)
                batches = [{k: v.to(ctx.device, non_blocking=True) for k, v in batch.items()} for batch in host_batches]
                totals = all_reduce_sum(counts, ctx)
                for micro, batch in enumerate(batches):
                    self._seed_dropout(step, micro)
                    sync = micro == len(batches) - 1 or not hasattr(wrapped, "no_sync")
                    with (nullcontext() if sync else wrapped.no_sync()), self._autocast():
                        loss, micro_stats = self.program.compute_loss(wrapped, batch, totals)
                    maybe_fail("step", step + 1, ctx.rank)
                    # DDP/FSDP average gradients over processes; the loss is already a global mean
                    scaled = loss * ctx.world_size
                    (scaler.scale(scaled) if scaler is not None else scaled).backward()
                    micro_stats["loss"] = micro_stats.get("loss", 0.0) + loss.detach()
                    add_into(stats, micro_stats)  # this process's sums, over processes when logged
                if scaler is not None:
                    scaler.unscale_(optimizer)
                # no host read: the norm stays a tensor and the clipping factor is applied on the device
                grad_norm = torch.nn.utils.clip_grad_norm_(wrapped.parameters(), cfg.max_grad_norm)
                if hasattr(grad_norm, "full_tensor"):  # FSDP: a DTensor over the shards -> the norm itself
                    grad_norm = grad_norm.full_tensor()
                finite = None
                if pending is not None:  # decided on the device, read with the window (bertkit.training.nonfinite)
                    finite = finite_flag(stats["loss"], grad_norm, ctx)
                    skip_update_unless(optimizer, finite)
                    pending.add(step, finite)
                    problem = None
                else:
                    self._step_layouts = {step: self._step_layouts[step]}
                    loss_value = float(all_reduce_sum({"loss": stats["loss"]}, ctx)["loss"])
                    problem = self._nonfinite_problem(loss_value, grad_norm, wrapped, scaler)
                if problem is not None:
                    optimizer.zero_grad(set_to_none=True)
                    skipped, skipped_in_row = skipped + 1, skipped_in_row + 1
                    self._on_nonfinite(step, problem, skipped_in_row, last_saved)
                    if log is not None:
                        log.log({"step": step + 1, "nonfinite_skipped": skipped})
                    if bar is not None:
                        bar.write(f"step {step + 1}: {problem}; step skipped ({skipped} so far)")
                    if scaler is not None:
                        scaler.update()  # unscale_ was called: the scaler expects a step or an update
                    with warnings.catch_warnings():  # the schedule follows the step, skipped or not
                        warnings.simplefilter("ignore", UserWarning)
                        scheduler.step()
                    if bar is not None:
                        bar.update(1)
                    continue
                if pending is None:
                    skipped_in_row = 0
                if scaler is not None and not math.isfinite(float(grad_norm)):
                    amp_skipped += 1  # the loss scale overflowed: GradScaler skips this step itself
                spent = due = False
                if self.budget is not None:  # the lr follows the time spent, not the step
                    fraction, spent, due = self._budget_decisions(eval_seconds)  # the next step's ramp reads it too
                    for group in optimizer.param_groups:
                        group["lr"] = cfg.lr * budget_lr_factor(fraction, cfg.warmup_ratio)
                lr = optimizer.param_groups[0]["lr"] if self.budget is not None else scheduler.get_last_lr()[0]
                if scaler is not None:
                    scaler.step(optimizer)
                    scaler.update()
                else:
                    optimizer.step()
                scheduler.step()
                optimizer.zero_grad(set_to_none=True)
                done = step + 1
                add_into(window, {**stats, "steps": 1.0, "grad_norm": grad_norm}, keep=finite)
                last = done == cfg.max_steps or spent
                if last and done < cfg.max_steps:
                    ended = done
                due = due if self.budget is not None else done % cfg.eval_steps == 0
                logged = done % cfg.log_steps == 0 or last
                if pending and (logged or due or done % cfg.save_steps == 0):
                    for past, ok in pending.read():
                        if ok:
                            skipped_in_row = 0
                            continue
                        problem = "the loss or a gradient is non-finite (the update was not applied)"
                        skipped, skipped_in_row = skipped + 1, skipped_in_row + 1
                        self._on_nonfinite(past, problem, skipped_in_row, last_saved)
                        if log is not None:
                            log.log({"step": past + 1, "nonfinite_skipped": skipped})
                        if bar is not None:
                            bar.write(f"step {past + 1}: {problem}; step skipped ({skipped} so far)")
                    self._step_layouts = {}
                if logged:
                    elapsed = time.perf_counter() - window_start
                    values = self._window_values(window)
                    if values["steps"] > 0:  # a window of skipped steps only has nothing to report
                        record = self._record(done, values, lr, elapsed)
                        if self.ramped:
                            record["batch_size"] = micro_batches * self.sequences_per_micro  # this step's batch
                        total_tokens += values["tokens"]
                        total_flops += values.get("model_flops", 0.0)
                        total_time += elapsed
                        if log is not None:
                            log.log(record)
                        if bar is not None:
                            bar.set_postfix({k: _short(record[k]) for k in ("loss", "lr", "tok/s", "mfu", *self.program.progress_keys)
                                             if k in record})
                    window, window_start = {}, time.perf_counter()
                if due or last:
                    eval_started = time.perf_counter()
                    metrics = self.evaluate(wrapped)
                    eval_seconds = time.perf_counter() - eval_started
                    if log is not None and metrics:
                        log.log({"step": done, **{f"eval_{k}": v for k, v in metrics.items()},
                                 **self.program.evaluation_details()})
                    improved = self._track_best(wrapped, done, metrics)
                    self.program.on_evaluate(done, metrics, improved)
                    if self._patience_exhausted() and done < cfg.max_steps:
                        stopped = done
                    window_start = time.perf_counter()  # evaluation time is not training throughput
                if done % cfg.save_steps == 0 and not last and cfg.save_checkpoints and stopped is None:
                    last_saved = self._save_or_explain(wrapped, optimizer, scheduler, scaler, done, last_saved)
                    window_start = time.perf_counter()
                if bar is not None:
                    bar.update(1)
                if ended is not None:
                    if bar is not None:
                        bar.write(f"step {done}: the {self.budget.budget:g}s budget is spent")
                    break
                if stopped is not None:
                    if bar is not None:
                        bar.write(f"step {done}: early stopping: no better {cfg.metric_for_best} in "
                                  f"{cfg.early_stopping_patience} evaluations (best at step {self._best['step']})")
                    break
            step = stopped if stopped is not None else ended if ended is not None else cfg.max_steps
            if start < step and cfg.save_checkpoints:
                self._save_or_explain(wrapped, optimizer, scheduler, scaler, step, last_saved)
            final = self.output_dir / FINAL_DIR
            model_state, _ = self._full_state_dicts(wrapped, None)
            if ctx.is_main:
                ckpt.write_directory_atomic(final, lambda tmp: self.program.save_pretrained(_unwrap(wrapped), tmp, state_dict=model_state))
            barrier(ctx)
        finally:
            stream.close()  # stops the prefetching thread
            if bar is not None:
                bar.close()
            if log is not None:
                log.close()
        records = log.records if log is not None else []
        speed = total_tokens / total_time if total_time else 0.0
        mfu = total_flops / total_time / self._peak.flops if total_time and self._peak is not None and total_flops else None
        has_best = ctx.is_main and self._best["step"] is not None
        return TrainResult(step, final if ctx.is_main else None, records, speed, skipped, amp_skipped_steps=amp_skipped,
                           best_dir=self.output_dir / BEST_DIR if has_best else None,
                           best_metric=self._best["value"], best_step=self._best["step"],
                           stopped_early=stopped is not None, budget_ended=ended is not None,
                           elapsed_seconds=self.budget.elapsed() if self.budget is not None else None, mfu=mfu)

    def _budget_decisions(self, reserve: float) -> tuple[float, bool, bool]:
        """(the fraction of the budget spent, whether it is spent with `reserve` seconds kept,
        whether an evaluation is due), read on the main process and shared: every process
        then sets the same lr, evaluates and stops at the same step."""
        budget = self.budget
        local = {"fraction": 0.0, "spent": 0.0, "due": 0.0}
        if self.ctx.is_main:
            local = {"fraction": budget.fraction(), "spent": float(budget.spent(reserve)), "due": float(budget.evaluation_due())}
        shared = all_reduce_sum(local, self.ctx)
        return shared["fraction"], shared["spent"] > 0, shared["due"] > 0

    def _token_counts(self, batches: list[dict[str, torch.Tensor]]) -> dict[str, float]:
        """Real tokens of a step's (host) micro-batches and, when the model's FLOPs are known,
        the model FLOPs they cost (bertkit.training.throughput)."""
        tokens = [self.program.count_tokens(batch) for batch in batches]
        counts = {"tokens": float(sum(tokens))}
        if self._flops is not None and self._peak is not None:
            widths = [batch["input_ids"].shape[-1] if "input_ids" in batch else 0 for batch in batches]
            counts["model_flops"] = sum(n * self._flops.per_token(width) for n, width in zip(tokens, widths))
        return counts

    def _window_values(self, window: dict[str, Any]) -> dict[str, float]:
        """The window's sums as numbers (one read from the device), the program's statistics
        summed over processes (the step count and gradient norm are the same on every one)."""
        values = read_sums(window)
        local = {k: v for k, v in values.items() if k not in ("steps", "grad_norm")}
        return {**values, **all_reduce_sum(local, self.ctx)}

    def _record(self, step: int, window: dict[str, float], lr: float, elapsed: float) -> dict[str, Any]:
        steps = window["steps"]
        metrics = self.program.summarize(window)
        metrics.pop("loss", None)  # the optimised loss below is the one to report
        record = {"step": step, "loss": window["loss"] / steps, "lr": lr, "grad_norm": window["grad_norm"] / steps,
                  "tok/s": window["tokens"] / elapsed if elapsed > 0 else 0.0, **metrics}
        if "model_flops" in window and elapsed > 0:
            record["mfu"] = window["model_flops"] / elapsed / self._peak.flops
        return record

    def describe_mfu(self) -> str:
        """How MFU is counted in this run, for a report."""
        if self._flops is None:
            return "not reported (the model's layers and width are not known)"
        if self._peak is None:
            where = "a CPU" if self.ctx.device.type != "cuda" else torch.cuda.get_device_name(self.ctx.device)
            return f"not reported: no known {self.precision} peak for {where} (bench/bench_pretrain_step.py measures one)"
        return (f"model FLOPs (6 x {self._flops.non_embedding_params:,} non-embedding parameters + 12 x layers x hidden "
                f"x sequence length per token) / s over {self._peak.source}")

    def evaluate(self, model: nn.Module) -> dict[str, float]:
        """Dev/held-out metrics in fp32 whatever the training precision: the score that picks
        best/ is then the one `bertkit evaluate` reproduces from the saved fp32 weights (under
        bf16 autocast a near-tied fine-tuned model flipped 3 of 10 multiple-choice answers on
        an H100)."""
        model.eval()
        try:
            with torch.no_grad():
                return self.program.evaluate(model, self.ctx, self.micro_batch, self.config.eval_batches)
        finally:
            model.train()


def _unwrap(model: nn.Module) -> nn.Module:
    model = getattr(model, "module", model)  # DDP
    return getattr(model, "_orig_mod", model)  # torch.compile


def _resolve_precision(precision: str, device: torch.device) -> str:
    if precision == "auto":
        if device.type == "cuda" and torch.cuda.is_bf16_supported():
            return "bf16"
        return "fp32"
    if precision == "fp16" and device.type != "cuda":
        raise ConfigError("field 'precision': fp16 with loss scaling needs a GPU; use fp32 or bf16 on CPU")
    return precision


def _progress(cfg: TrainingConfig, start: int, ctx: DistContext):
    if not (cfg.progress and ctx.is_main):
        return None
    from tqdm import tqdm

    return tqdm(total=None if cfg.budget_seconds is not None else cfg.max_steps, initial=start, desc="train", unit="step", dynamic_ncols=True)


def _short(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.3g}" if abs(value) < 1e4 else f"{value:.0f}"
    return str(value)


def _prefetch(iterator: Iterator, depth: int = 2) -> Iterator:
    """Run `iterator` one or two items ahead in a thread (collation overlaps compute).

    Exceptions raised while preparing an item are re-raised in the consumer."""
    items: queue.Queue = queue.Queue(maxsize=depth)
    done = object()
    stop = threading.Event()

    def produce() -> None:
        try:
            for item in iterator:
                while not stop.is_set():
                    try:
                        items.put(item, timeout=0.1)
                        break
                    except queue.Full:
                        continue
                if stop.is_set():
                    return
            items.put(done)
        except BaseException as exc:  # handed to the consumer
            items.put(exc)

    thread = threading.Thread(target=produce, daemon=True)
    thread.start()
    try:
        while True:
            item = items.get()
            if item is done:
                return
            if isinstance(item, BaseException):
                raise item
            yield item
    finally:
        stop.set()
        # let the producer finish the item it is preparing: a daemon thread still inside torch
        # when the process exits can abort it ("terminate called without an active exception",
        # seen once in a two-process budget run's shutdown)
        thread.join(timeout=10.0)
