"""Non-finite losses and gradients: which parameter, and on a GPU, telling without a host read.

On a CPU the loop reads each step's loss and gradient norm (a read costs nothing there) and
decides at once: skip the step or stop, naming the first non-finite gradient. On a GPU
that read would stall the launch queue every step, so there the decision is taken on the
device (`finite_flag`): the fused optimizer skips the update itself when told a step was
not finite (AdamW's `found_inf`, what GradScaler uses), and the loop reads the steps'
flags with the logging window's statistics (`PendingSteps`), then counts the skipped
steps or stops, naming the step and its batch as on the CPU.
"""

from __future__ import annotations

import torch
import torch.distributed as dist
from torch import nn

from bertkit.training.distributed import DistContext


def first_nonfinite_gradient(model: nn.Module) -> str:
    """The name of the first parameter whose gradient holds NaN or inf ("an unnamed
    parameter" when none does on this process)."""
    for name, parameter in model.named_parameters():
        grad = parameter.grad
        if grad is None:
            continue
        local = grad.to_local() if hasattr(grad, "to_local") else grad  # FSDP shards are DTensors
        if not torch.isfinite(local).all():
            return name
    return "a parameter on another process"


def skips_on_device(optimizer: torch.optim.Optimizer) -> bool:
    """Whether `optimizer` skips an update on a device flag (`found_inf`): torch's fused Adam(W)."""
    return isinstance(optimizer, torch.optim.Adam | torch.optim.AdamW) and all(
        group.get("fused") for group in optimizer.param_groups)


def finite_flag(loss: torch.Tensor, grad_norm: torch.Tensor, ctx: DistContext) -> torch.Tensor:
    """A 0-d bool on the device, True when the step's loss and gradient norm are finite on
    every process (one all-reduce of one number, no host read)."""
    finite = torch.isfinite(loss.detach()) & torch.isfinite(grad_norm.to(loss.device))
    if ctx.enabled:
        flag = finite.to(torch.float32)
        dist.all_reduce(flag, op=dist.ReduceOp.MIN)
        finite = flag > 0
    return finite


def skip_update_unless(optimizer: torch.optim.Optimizer, finite: torch.Tensor) -> None:
    """Make `optimizer`'s next step skip its update on the device when `finite` is False."""
    optimizer.found_inf = (~finite).to(torch.float32)


class PendingSteps:
    """Steps whose finiteness is still a device flag, read together (`read`)."""

    def __init__(self) -> None:
        self._steps: list[int] = []
        self._flags: list[torch.Tensor] = []

    def add(self, step: int, finite: torch.Tensor) -> None:
        self._steps.append(step)
        self._flags.append(finite.reshape(()))

    def __bool__(self) -> bool:
        return bool(self._steps)

    def read(self) -> list[tuple[int, bool]]:
        """(step, finite) of every pending step in order, in one transfer; then none is pending."""
        if not self._steps:
            return []
        flags = torch.stack(self._flags).tolist()
        pending = list(zip(self._steps, (bool(f) for f in flags)))
        self._steps, self._flags = [], []
        return pending
