"""Checkpoints: an HF-layout model folder plus `training_state.pt`, written atomically.

A checkpoint is built in a hidden temporary folder next to its final place and renamed
in one step, so a run killed mid-save (even by SIGKILL) leaves the previous checkpoint
as the latest complete one; temporary folders are ignored and swept away. Only the
last `keep` checkpoints are kept.

Every folder written this way (checkpoints, `final/`, `best/`) ends with `manifest.json`,
written last: each file's size and SHA-256. `checkpoint_problem` checks a folder against
it, so a checkpoint damaged after it was written (a truncated copy, a flipped byte) is
told apart from a good one; `bertkit checkpoint verify` runs the same check. The training state (optimizer, scheduler, step, RNG)
holds tensors and plain values only, so it loads with `weights_only=True`.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from bertkit.atomic import atomic_path, default_mode
from bertkit.checksums import file_sha256
from bertkit.errors import BertkitError

STATE_FILE = "training_state.pt"
MANIFEST_FILE = "manifest.json"
MANIFEST_FORMAT = 1
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


def verify_run(run_dir: Path) -> list[tuple[Path, str | None]]:
    """Each checkpoint folder of a run (checkpoint-N — complete or not —, final/, best/; or
    `run_dir` itself when it is one) with why it is damaged, or None when it checks out."""
    if (run_dir / STATE_FILE).is_file() or (run_dir / MANIFEST_FILE).is_file():
        folders = [run_dir]
    else:
        named = [(int(m.group(1)), p) for p in run_dir.iterdir() if p.is_dir() and (m := _CHECKPOINT.match(p.name))]
        folders = [path for _, path in sorted(named)]
        folders += [run_dir / name for name in ("final", "best") if (run_dir / name).is_dir()]
    return [(folder, _folder_problem(folder)) for folder in folders]


def _folder_problem(folder: Path) -> str | None:
    if _CHECKPOINT.match(folder.name) or (folder / STATE_FILE).exists():
        return checkpoint_problem(folder)
    return model_folder_problem(folder)


def refuse_existing_run(output_dir: Path, overwrite: bool) -> None:
    """An error when `output_dir` already holds a run (checkpoints) and `overwrite` is off."""
    if list_checkpoints(output_dir) and not overwrite:
        raise BertkitError(f"{output_dir}: already holds a run; pass --resume to continue it or --overwrite to start over")


def checkpoint_problem(checkpoint: Path) -> str | None:
    """Why `checkpoint` cannot be resumed from, in one line naming the file (its training
    state, a weights file or a config.json does not read back); None when it reads back.
    A folder with a manifest is first checked against it (sizes, then SHA-256 hashes).
    Tensors are memory-mapped, so the read-back costs little more than the files' headers."""
    try:
        load_training_state(checkpoint, mmap=True)
    except BertkitError as exc:
        return manifest_problem(checkpoint) or str(exc)
    return model_folder_problem(checkpoint)


def model_folder_problem(checkpoint: Path) -> str | None:
    """Why a saved model folder does not read back (its manifest, weights or config.json),
    or None."""
    from safetensors import safe_open

    problem = manifest_problem(checkpoint)
    if problem is not None:
        return problem
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


def write_manifest(directory: Path) -> Path:
    """Record every file of `directory` (size, SHA-256) in its manifest, written last."""
    files = {}
    for path in sorted(p for p in directory.rglob("*") if p.is_file() and p.name != MANIFEST_FILE):
        files[path.relative_to(directory).as_posix()] = {"size": path.stat().st_size, "sha256": file_sha256(path)}
    target = directory / MANIFEST_FILE
    target.write_text(json.dumps({"format": MANIFEST_FORMAT, "files": files}, indent=1) + "\n", encoding="utf-8")
    return target


def manifest_problem(directory: Path) -> str | None:
    """Why `directory`'s files do not match its manifest (one line naming the file), or
    None when they match or the folder has no manifest (written before manifests existed)."""
    path = directory / MANIFEST_FILE
    if not path.exists():
        return None
    try:
        files = json.loads(path.read_text(encoding="utf-8"))["files"]
    except (OSError, UnicodeDecodeError, ValueError, KeyError, TypeError) as exc:
        return f"{path}: cannot read the manifest ({exc})"
    for name, recorded in files.items():
        file = directory / name
        if not file.is_file():
            return f"{file}: missing (listed in {path})"
        size = file.stat().st_size
        if size != recorded.get("size"):
            return f"{file}: {size} bytes, the manifest records {recorded.get('size')} (damaged or truncated)"
    for name, recorded in files.items():
        if file_sha256(directory / name) != recorded.get("sha256"):
            return f"{directory / name}: SHA-256 differs from the manifest's (the file is damaged)"
    return None


def write_directory_atomic(target: Path, fill: Callable[[Path], None]) -> Path:
    """Call `fill(tmp_dir)` to populate a fresh folder, record its manifest, then move it to
    `target` in one rename.

    An existing `target` is replaced only after the new folder is complete. A failed write
    (a full disk, a read-only folder) becomes a one-line error naming `target`, with the
    temporary folder removed and everything written before left as it was.
    """
    try:
        return _write_directory_atomic(target, fill)
    except OSError as exc:
        raise BertkitError(f"{target}: cannot be written ({exc.strerror or exc}); "
                           f"nothing already saved was changed") from exc


def _write_directory_atomic(target: Path, fill: Callable[[Path], None]) -> Path:
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp"))
    try:
        os.chmod(tmp, default_mode(directory=True))  # mkdtemp makes it owner-only
        fill(tmp)
        write_manifest(tmp)
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
