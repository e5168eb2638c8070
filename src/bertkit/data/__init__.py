"""Pre-training data: corpus reading, sentence splitting, instance creation (NSP / SOP /
packed), shards, the build driver, masking and batch collation (`bertkit.data.collate`).

Names are imported lazily (`bertkit.data.PretrainingDataset` loads only dataset.py), so
the data build never pays for torch and the CLI stays fast.
"""

from __future__ import annotations

import importlib

_EXPORTS = {
    "BuildOptions": "build",
    "build_dataset": "build",
    "DatasetInfo": "dataset",
    "PretrainingDataset": "dataset",
    "Masker": "masking",
    "MaskingConfig": "masking",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    if name in _EXPORTS:
        return getattr(importlib.import_module(f"bertkit.data.{_EXPORTS[name]}"), name)
    raise AttributeError(f"module 'bertkit.data' has no attribute {name!r}")
