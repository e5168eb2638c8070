"""Downstream task families: one module each, found through the registry.

Every family module exposes the same surface, so the fine-tuning program needs no
per-task code beyond choosing the module:
  read_examples(path, ...)                      -> list of example dataclasses
  encode(examples, tokenizer, max_seq_length, label_map) -> list of feature dicts for
                                                   `collate` (numpy arrays and ints)
  collate(features, pad_token_id, pad_to_multiple_of=8)  -> dict of tensors
  model_class()                                 -> the head class to build before a checkpoint is read
plus the hooks of bertkit.tasks.hooks where the family differs from their defaults.
Adding a task family = one module + one `register(TaskFamily(...))` line in
bertkit.tasks.registry (see docs/finetuning.md).
"""

from __future__ import annotations

from types import ModuleType

from bertkit.tasks.registry import get_task_family


def get_family(name: str) -> ModuleType:
    """The module of task family `name` or an alias (e.g. "ner" -> bertkit.tasks.tagging)."""
    return get_task_family(name).load_module()
