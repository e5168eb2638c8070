"""What a sentence-transformers folder asks of `embed`: its modules.json pipeline.

A sentence-transformers checkpoint is a BERT folder plus `modules.json`, listing the
modules `SentenceTransformer.encode` runs in order: Transformer (the encoder, at the
folder root), Pooling (`1_Pooling/config.json`: mean, cls, ...), often Normalize (unit
vectors) and sometimes Dense. `sentence_bert_config.json` adds the truncation length and
whether texts are lowercased first. `read_sentence_modules` turns this into the few
settings `embed` needs to give what `encode` gives by default; a module or pooling mode
that `embed` does not implement is a one-line error, never silently skipped.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bertkit.errors import BertkitError

MODULES_FILE = "modules.json"
SENTENCE_CONFIG_FILE = "sentence_bert_config.json"
# pooling modes as sentence-transformers names them -> embed's pooling names
_POOLING = {"mean": "mean", "cls": "cls"}
# the legacy boolean keys of 1_Pooling/config.json -> mode names
_LEGACY_POOLING_KEYS = {
    "pooling_mode_cls_token": "cls",
    "pooling_mode_mean_tokens": "mean",
    "pooling_mode_max_tokens": "max",
    "pooling_mode_mean_sqrt_len_tokens": "mean_sqrt_len_tokens",
    "pooling_mode_weightedmean_tokens": "weightedmean",
    "pooling_mode_lasttoken": "lasttoken",
}


@dataclass(frozen=True)
class SentenceModules:
    """The sentence-transformers pipeline of a folder, as embed settings."""

    pooling: str  # "mean" or "cls"
    normalize: bool  # a Normalize module follows the pooling
    max_seq_length: int | None  # sentence_bert_config.json's truncation length
    do_lower_case: bool  # sentence_bert_config.json: lowercase texts before tokenizing


def read_sentence_modules(directory: str | os.PathLike) -> SentenceModules | None:
    """The pipeline of `directory`'s modules.json; None for a plain checkpoint without one."""
    directory = Path(directory)
    path = directory / MODULES_FILE
    if not path.is_file():
        return None
    modules = _read_json(path)
    if not isinstance(modules, list) or not all(isinstance(m, dict) for m in modules):
        raise BertkitError(f"{path}: expected a list of module objects")
    pooling, normalize = None, False
    for index, module in enumerate(modules):
        kind = str(module.get("type", "")).rsplit(".", 1)[-1]
        where = f"{path}: module {module.get('name', index)} ({kind or 'no type'})"
        if kind == "Transformer" and index == 0:
            if (module.get("path") or "") not in ("", "."):
                raise BertkitError(f"{where} lives in {module['path']}/; embed reads the encoder at the folder "
                                   f"root: pass --model {directory / module['path']}")
        elif kind == "Pooling" and pooling is None:
            pooling = _pooling_mode(directory / (module.get("path") or ""), where)
        elif kind == "Normalize" and pooling is not None:
            normalize = True
        else:
            raise BertkitError(f"{where} is not supported by embed (it runs Transformer -> Pooling (mean or cls) "
                               f"-> Normalize); use sentence-transformers for this checkpoint")
    if pooling is None:
        raise BertkitError(f"{path}: no Pooling module; pass pooling= (--pooling) to choose one")
    config_path = directory / SENTENCE_CONFIG_FILE
    config = _read_json(config_path) if config_path.is_file() else {}
    max_seq_length = config.get("max_seq_length")
    if max_seq_length is not None and (not isinstance(max_seq_length, int) or max_seq_length < 1):
        raise BertkitError(f"{config_path}: max_seq_length must be a positive integer, got {max_seq_length!r}")
    return SentenceModules(pooling=pooling, normalize=normalize, max_seq_length=max_seq_length,
                           do_lower_case=bool(config.get("do_lower_case", False)))


def _pooling_mode(folder: Path, where: str) -> str:
    """embed's pooling name for a Pooling module's config.json (new `pooling_mode` or legacy booleans)."""
    config_path = folder / "config.json"
    config = _read_json(config_path) if config_path.is_file() else {}
    mode: Any = config.get("pooling_mode")
    if mode is None:
        modes = [name for key, name in _LEGACY_POOLING_KEYS.items() if config.get(key)]
        mode = modes[0] if len(modes) == 1 else modes or "mean"  # sentence-transformers' default is mean
    if isinstance(mode, list) and len(mode) == 1:
        mode = mode[0]
    if not isinstance(mode, str) or mode not in _POOLING:
        shown = "+".join(mode) if isinstance(mode, list) else mode
        raise BertkitError(f"{where}: pooling mode {shown!r} is not supported by embed (supported: "
                           f"{', '.join(_POOLING)})")
    return _POOLING[mode]


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise BertkitError(f"{path}: cannot read JSON ({exc})") from exc
