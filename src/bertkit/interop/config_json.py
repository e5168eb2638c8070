"""config.json on disk: read one JSON object, write one atomically (sorted keys, two-space indent, as
transformers writes it). Torch-free: `PretrainedConfig` and the checkpoint I/O (`interop/hf.py`) both use it,
so neither imports the other."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from bertkit.atomic import write_text_atomic
from bertkit.errors import BertkitError


def config_json_text(values: dict[str, Any]) -> str:
    return json.dumps(values, indent=2, sort_keys=True) + "\n"


def write_config_json(directory: str | os.PathLike, values: dict[str, Any]) -> None:
    """`values` as `directory`/config.json (atomically), creating the directory."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    write_text_atomic(directory / "config.json", config_json_text(values))


def run_folder_hint(config_path: Path) -> str:
    """For a missing config.json in a run folder (the output of pretrain / finetune): where its models are."""
    folder = config_path.parent
    found = [str(folder / sub) for sub in ("final", "best") if (folder / sub / "config.json").is_file()]
    if config_path.name != "config.json" or not found:
        return ""
    return f"; {folder} is a run folder, its model is {' or '.join(found)}"


def read_json_object(path: str | os.PathLike) -> dict[str, Any]:
    """A JSON file holding one object (config.json); errors are one line naming the file."""
    path = Path(path)
    try:
        values = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise BertkitError(f"{path}: no such file{run_folder_hint(path)}") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise BertkitError(f"{path}: not valid JSON ({exc})") from None
    if not isinstance(values, dict):
        raise BertkitError(f"{path}: expected a JSON object")
    return values
