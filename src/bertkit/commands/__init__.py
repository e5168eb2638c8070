"""CLI subcommands: each module registers one command (family) via add_parser."""

from __future__ import annotations

import argparse
import os
import sys
import warnings
from collections.abc import Iterator
from contextlib import contextmanager


class CommandParser(argparse.ArgumentParser):
    """argparse with a usage error as one line that points at --help, instead of the usage
    block first (`bertkit finetune classify: error: ... (see bertkit finetune classify --help)`).
    Sub-command parsers inherit the class."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


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


def add_skip_bad_lines_argument(parser) -> None:
    """`--skip-bad-lines`, on every command that reads text lines and advises it on a bad byte;
    a warning then says how many lines each file lost (bertkit.textio.warn_skipped)."""
    parser.add_argument("--skip-bad-lines", action="store_true",
                        help="skip undecodable or malformed input lines instead of stopping (a warning counts them)")


@contextmanager
def one_line_warnings() -> Iterator[None]:
    """Warnings shown as they happen, each as one `bertkit: warning: ...` line (Python's
    filters still show a warning once per place), instead of Python's two-line format."""
    shown = warnings.showwarning

    def show(message, category, filename, lineno, file=None, line=None):
        print(f"bertkit: warning: {message}", file=sys.stderr)

    warnings.showwarning = show
    try:
        yield
    finally:
        warnings.showwarning = shown


THREADS_HELP = ("CPU threads for torch, the tokenizers library and data workers (default: OMP_NUM_THREADS "
                "when set, else the cores this process may use)")


def add_runtime_options(parser, *, progress: bool = True) -> None:
    """`--threads N` and `--no-progress`, the same on every long-running command. `bertkit`
    applies `--threads` once before the command runs (bertkit.parallel.apply_thread_policy)
    and leaves the resolved count in `args.threads`; each command maps `args.no_progress`
    onto its own progress setting."""
    parser.add_argument("--threads", type=int, metavar="N", help=THREADS_HELP)
    if progress:
        parser.add_argument("--no-progress", action="store_true", help="no progress bars")
