"""Process-group setup under `torchrun`, and the few collectives the loop needs.

One process = one rank. Without torchrun's environment (RANK / WORLD_SIZE) everything
runs as a single process and the collectives are no-ops, so the same loop serves a
laptop and a cluster.

A process that dies (SIGKILL, OOM) makes its peers' next collective fail: at once when
the transport sees the connection close (gloo), at the latest after the collective
timeout — `BERTKIT_COLLECTIVE_TIMEOUT` seconds, default 600 — when a peer hangs instead.
Either way the survivors stop with one line (`peer_failure`) rather than wait forever.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from datetime import timedelta

import torch
import torch.distributed as dist

from bertkit.errors import BertkitError

COLLECTIVE_TIMEOUT_ENV = "BERTKIT_COLLECTIVE_TIMEOUT"
DEFAULT_COLLECTIVE_TIMEOUT = 600  # seconds: a checkpoint save of a large model fits well inside
# what the transports say when a peer process is gone or silent
_PEER_GONE = re.compile(r"connection (closed|reset)|broken pipe|timed out|timeout|peer|socket|gloo|nccl|"
                        r"connection refused|end of file", re.IGNORECASE)


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
        if device != "cpu" and local_rank >= torch.cuda.device_count():
            raise BertkitError(
                f"process {local_rank} of torchrun's --nproc-per-node has no GPU: this machine has "
                f"{torch.cuda.device_count()} (start at most that many processes per node, or set "
                "CUDA_VISIBLE_DEVICES= to train on the CPU)")
    dev = torch.device(device)
    if dev.type == "cuda":
        torch.cuda.set_device(dev)
    if world_size > 1 and not dist.is_initialized():
        _join_process_group("nccl" if dev.type == "cuda" else "gloo", world_size)
    rank = dist.get_rank() if dist.is_initialized() else 0
    return DistContext(rank, world_size, local_rank, dev)


def _join_process_group(backend: str, world_size: int) -> None:
    """`init_process_group` over torchrun's store, under a key prefix of its own per restart.

    torchrun keeps one store across `--max-restarts`; processes of a restarted attempt
    would otherwise find the previous attempt's addresses under the same keys and try
    to connect to processes that no longer exist."""
    from bertkit.training.faults import restart_count

    timeout = collective_timeout()
    rank = int(os.environ["RANK"])
    agent_store = os.environ.get("TORCHELASTIC_USE_AGENT_STORE", "").lower() == "true"  # torchrun hosts it
    store = dist.TCPStore(os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]), world_size,
                          is_master=rank == 0 and not agent_store, timeout=timeout)
    store = dist.PrefixStore(f"bertkit/attempt-{restart_count()}", store)
    dist.init_process_group(backend, store=store, rank=rank, world_size=world_size, timeout=timeout)


def collective_timeout() -> timedelta:
    """How long a collective waits for the other processes (`BERTKIT_COLLECTIVE_TIMEOUT`)."""
    raw = os.environ.get(COLLECTIVE_TIMEOUT_ENV, str(DEFAULT_COLLECTIVE_TIMEOUT))
    try:
        seconds = float(raw)
    except ValueError:
        seconds = -1.0
    if not seconds > 0:
        raise BertkitError(f"{COLLECTIVE_TIMEOUT_ENV}={raw!r}: expected a positive number of seconds")
    return timedelta(seconds=seconds)


def peer_failure(exc: BaseException, ctx: DistContext) -> bool:
    """Whether `exc` is a collective failing because another process died or hung."""
    if not ctx.enabled:
        return False
    dist_error = getattr(dist, "DistError", None)
    if dist_error is not None and isinstance(exc, dist_error):
        return True
    return isinstance(exc, RuntimeError) and bool(_PEER_GONE.search(str(exc)))


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


def all_reduce_max(value: float, ctx: DistContext) -> float:
    """The largest of one number over all ranks."""
    if not ctx.enabled:
        return value
    tensor = torch.tensor([float(value)], dtype=torch.float64, device=_collective_device(ctx))
    dist.all_reduce(tensor, op=dist.ReduceOp.MAX)
    return float(tensor.item())


def all_reduce_tensor(tensor: torch.Tensor, ctx: DistContext) -> torch.Tensor:
    """The element-wise sum of a same-shaped tensor over all ranks (returned on the tensor's device)."""
    if not ctx.enabled:
        return tensor
    reduced = tensor.to(_collective_device(ctx))
    dist.all_reduce(reduced)
    return reduced.to(tensor.device)


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
