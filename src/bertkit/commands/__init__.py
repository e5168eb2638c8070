"""CLI subcommands: each module registers one command (family) via add_parser."""

from __future__ import annotations

import os
import sys


def note(message: str) -> None:
    """`bertkit: MESSAGE` on stderr, once per run (rank 0 under torchrun): a library's
    `notify` lines (the checkpoint a run resumed from, weights initialised fresh)."""
    if os.environ.get("RANK", "0") == "0":
        print(f"bertkit: {message}", file=sys.stderr)


def add_precision_argument(parser, help_suffix: str = "") -> None:
    """`--precision fp32|int8|bf16` (bertkit.inference.precision) on a command that loads a model."""
    from bertkit.inference.precision import DEFAULT_PRECISION, PRECISIONS

    parser.add_argument("--precision", choices=PRECISIONS, default=DEFAULT_PRECISION,
                        help="inference precision: fp32 (default), int8 (dynamic quantization of the linear "
                             f"layers, CPU) or bf16 (weights and compute in bfloat16){help_suffix}")


def warn(message: str | None) -> None:
    """`bertkit: warning: MESSAGE` on stderr, once per run (rank 0 under torchrun); None: nothing."""
    if message:
        note(f"warning: {message}")


def warn_about_schedule(config) -> None:
    """A training config's schedule warnings (warm-up as long as the run); given to the
    library's `on_start`, so they come after every check and an error stays one line."""
    warn(config.warmup_warning())
