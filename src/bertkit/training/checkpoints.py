"""Checkpoints: an HF-layout model folder plus `training_state.pt`, written atomically.

A checkpoint is built in a hidden temporary folder next to its final place and renamed
in one step, so a run killed mid-save (even by SIGKILL) leaves the previous checkpoint
as the latest complete one; temporary folders are ignored and swept away. Only the
last `keep` checkpoints are kept. The training state (optimizer, scheduler, step, RNG)
holds tensors and plain values only, so it loads with `weights_only=True`.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from bertkit.atomic import atomic_path, default_mode
from bertkit.errors import BertkitError

STATE_FILE = "training_state.pt"
_CHECKPOINT = re.compile(r"checkpoint-(\d+)\Z")


def checkpoint_name(step: int) -> str:
    return f"checkpoint-{step:07d}"


def list_checkpoints(output_dir: Path) -> list[tuple[int, Path]]:
    """Complete checkpoints in `output_dir`, oldest first: [(step, path)]."""
    if not output_dir.is_dir():
        return []
    found = []
    for path in output_dir.iterdir():
        match = _CHECKPOINT.match(path.name)
        if match and (path / STATE_FILE).is_file():
            found.append((int(match.group(1)), path))
    return sorted(found)


def latest_checkpoint(output_dir: Path) -> Path | None:
    found = list_checkpoints(output_dir)
    return found[-1][1] if found else None


def refuse_existing_run(output_dir: Path, overwrite: bool) -> None:
    """An error when `output_dir` already holds a run (checkpoints) and `overwrite` is off."""
    if list_checkpoints(output_dir) and not overwrite:
        raise BertkitError(f"{output_dir}: already holds a run; pass --resume to continue it or --overwrite to start over")


def checkpoint_problem(checkpoint: Path) -> str | None:
    """Why `checkpoint` cannot be resumed from, in one line naming the file (its training
    state, a weights file or a config.json does not read back); None when it reads back.
    Tensors are memory-mapped, so the check costs little more than the files' headers."""
    import json

    from safetensors import safe_open

    try:
        load_training_state(checkpoint, mmap=True)
    except BertkitError as exc:
        return str(exc)
    for path in sorted(checkpoint.rglob("*.safetensors")):
        try:
            with safe_open(str(path), "pt"):
                pass
        except Exception as exc:  # safetensors raises its own error type
            return f"{path}: cannot read the weights ({str(exc).splitlines()[0]})"
    for path in sorted(checkpoint.rglob("config.json")):
        try:
            json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            return f"{path}: cannot read the model configuration ({exc})"
    return None


def write_directory_atomic(target: Path, fill: Callable[[Path], None]) -> Path:
    """Call `fill(tmp_dir)` to populate a fresh folder, then move it to `target` in one rename.

    An existing `target` is replaced only after the new folder is complete.
    """
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp"))
    try:
        os.chmod(tmp, default_mode(directory=True))  # mkdtemp makes it owner-only
        fill(tmp)
        _fsync_tree(tmp)
        if target.exists():
            old = target.with_name(f".{target.name}.old")
            shutil.rmtree(old, ignore_errors=True)
            os.replace(target, old)
            os.replace(tmp, target)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(tmp, target)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return target


def _fsync_tree(directory: Path) -> None:
    for path in directory.rglob("*"):
        if path.is_file():
            with open(path, "rb") as handle:
                os.fsync(handle.fileno())


def sweep_incomplete(output_dir: Path) -> None:
    """Remove temporary folders a killed run left behind (never a complete checkpoint)."""
    if output_dir.is_dir():
        for pattern in (".checkpoint-*.tmp", ".best.*.tmp"):
            for path in output_dir.glob(pattern):
                shutil.rmtree(path, ignore_errors=True)


def prune_checkpoints(output_dir: Path, keep: int) -> None:
    for _, path in list_checkpoints(output_dir)[:-keep]:
        shutil.rmtree(path, ignore_errors=True)


def save_training_state(directory: Path, state: dict[str, Any]) -> None:
    with atomic_path(directory / STATE_FILE) as tmp:
        torch.save(state, tmp)


def load_training_state(checkpoint: Path, mmap: bool = False) -> dict[str, Any]:
    path = checkpoint / STATE_FILE
    try:
        return torch.load(path, map_location="cpu", weights_only=True, mmap=mmap)
    except FileNotFoundError:
        raise BertkitError(f"{path}: no such file (not a training checkpoint)") from None
    except Exception as exc:  # unpickling errors come in many types
        raise BertkitError(f"{path}: cannot read the training state ({str(exc).splitlines()[0]})") from None


def rng_state() -> dict[str, torch.Tensor]:
    state = {"torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state()
    return state


def restore_rng_state(state: dict[str, torch.Tensor]) -> None:
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state(state["cuda"])
