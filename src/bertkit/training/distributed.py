"""Process-group setup under `torchrun`, and the few collectives the loop needs.

One process = one rank. Without torchrun's environment (RANK / WORLD_SIZE) everything
runs as a single process and the collectives are no-ops, so the same loop serves a
laptop and a cluster.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import torch
import torch.distributed as dist


@dataclass(frozen=True)
class DistContext:
    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    device: torch.device = torch.device("cpu")

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def enabled(self) -> bool:
        return self.world_size > 1


def setup(device: str | None = None) -> DistContext:
    """Join the process group torchrun describes (nccl on GPUs, gloo on CPUs), if any."""
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    if device is None:
        device = f"cuda:{local_rank}" if torch.cuda.is_available() else "cpu"
    dev = torch.device(device)
    if dev.type == "cuda":
        torch.cuda.set_device(dev)
    if world_size > 1 and not dist.is_initialized():
        dist.init_process_group("nccl" if dev.type == "cuda" else "gloo")
    rank = dist.get_rank() if dist.is_initialized() else 0
    return DistContext(rank, world_size, local_rank, dev)


def teardown() -> None:
    if dist.is_initialized():
        dist.destroy_process_group()


def all_reduce_sum(values: dict[str, float], ctx: DistContext) -> dict[str, float]:
    """Sum a dict of numbers over all ranks (one collective for the whole dict)."""
    if not ctx.enabled or not values:
        return dict(values)
    keys = sorted(values)
    tensor = torch.tensor([float(values[k]) for k in keys], dtype=torch.float64, device=_collective_device(ctx))
    dist.all_reduce(tensor)
    return dict(zip(keys, tensor.tolist()))


def broadcast_flag(flag: bool, ctx: DistContext) -> bool:
    """True on every rank when it is True on any rank."""
    if not ctx.enabled:
        return flag
    tensor = torch.tensor([1.0 if flag else 0.0], device=_collective_device(ctx))
    dist.all_reduce(tensor, op=dist.ReduceOp.MAX)
    return bool(tensor.item())


def barrier(ctx: DistContext) -> None:
    if ctx.enabled:
        dist.barrier()


def _collective_device(ctx: DistContext) -> torch.device:
    return ctx.device if dist.get_backend() == "nccl" else torch.device("cpu")
