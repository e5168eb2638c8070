"""`evaluate`: the official metrics of a fine-tuned model on a labelled file.

The file is read, encoded and scored by the task family's program exactly as the
model's dev set was during fine-tuning (bertkit.tasks.programs), so a score here is the
score training reported.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any

from bertkit.errors import BertkitError
from bertkit.inference.loading import LoadedModel, load_finetuned


def evaluate(model: str | os.PathLike | LoadedModel, data: str | os.PathLike, *, labels_path: str | None = None,
             batch_size: int = 64, max_seq_length: int | None = None, progress: bool = False,
             precision: str = "fp32", **spec_overrides: Any) -> dict[str, float]:
    """The family's official metrics of a fine-tuned model on the labelled file `data`.

    The file is read as the model was trained (its `bertkit_task.json`); `spec_overrides`
    (glue_task, text_column, pair_column, label_column, tag_column) change that, e.g. for
    a model fine-tuned elsewhere. Labels must be in the model's label map (one-line error
    naming file and line otherwise). Returns the metrics plus `examples` (their count).
    precision ("fp32", "int8", "bf16") applies when `model` is a directory; a
    `LoadedModel` runs in the precision it was loaded in.
    """
    from bertkit.tasks.programs import metrics_for

    loaded = model if isinstance(model, LoadedModel) else load_finetuned(model, precision=precision)
    changes = {k: v for k, v in spec_overrides.items() if v is not None}
    if max_seq_length is not None:
        changes["max_seq_length"] = max_seq_length
    try:
        spec = dataclasses.replace(loaded.spec, **changes)
    except TypeError as exc:
        raise BertkitError(f"evaluate: {exc}") from None
    program_cls = loaded.program_cls
    examples = program_cls.read(str(data), spec, labels_path)
    label2id = _evaluation_label_map(loaded, spec, examples)
    encoded = program_cls.encode(str(data), examples, loaded.tokenizer, spec, label2id, progress)
    program_cls.check_labelled(encoded)
    outputs = loaded.outputs(encoded.features, batch_size, progress)
    return {**metrics_for(spec, encoded, outputs, loaded.id2label), "examples": len(examples)}


def _evaluation_label_map(loaded: LoadedModel, spec, examples: list) -> dict[str, int] | None:
    """The model's label -> id map, checked against the file's labels (the family's hook)."""
    return loaded.program_cls.task_family().evaluation_label_map(
        spec, loaded.config, examples, f"{loaded.directory}/config.json")
