"""Downstream task families: one module each, found by name.

Every family module exposes the same surface, so the fine-tuning program needs no
per-task code beyond choosing the module:
  read_examples(path, ...)                      -> list of example dataclasses
  encode(examples, tokenizer, max_seq_length, label_map) -> list of feature dicts for
                                                   `collate` (numpy arrays and ints)
  collate(features, pad_token_id, pad_to_multiple_of=8)  -> dict of tensors
  model_class()                                 -> the BertFor... class to build
  MODEL_CLASS_NAME                              -> its name (config `architectures`)
Adding a task family = one module + one line in FAMILIES.
"""

from __future__ import annotations

import importlib
from types import ModuleType

from bertkit.errors import ConfigError

FAMILIES: dict[str, str] = {
    "classification": "bertkit.tasks.classification",
    "glue": "bertkit.tasks.classification",  # GLUE TSVs: read_examples(path, glue_task=...)
    "tagging": "bertkit.tasks.tagging",
    "ner": "bertkit.tasks.tagging",
    "multiple_choice": "bertkit.tasks.multiple_choice",
    "qa": "bertkit.tasks.qa",
    "squad": "bertkit.tasks.qa",  # SQuAD v1.1 / v2.0 JSON: read_examples(path, version=...)
}


def get_family(name: str) -> ModuleType:
    """The module of task family `name` (e.g. "ner" -> bertkit.tasks.tagging)."""
    key = name.strip().lower().replace("-", "_")
    if key not in FAMILIES:
        raise ConfigError(f"task family {name!r}: unknown; expected one of {', '.join(FAMILIES)}")
    return importlib.import_module(FAMILIES[key])
