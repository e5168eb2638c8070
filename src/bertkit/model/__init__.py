"""The model layer: the family contract (`PreTrainedModel`, the `MODEL_FAMILIES` registry in
`families.py`), what families share (attention, embeddings, layers, heads, losses, masks, the
encoder-decoder parts, generation and decoding, unpadding, typed outputs) and one package per
family. Public classes are reached from the top level (`from bertkit import BertModel`) or
their family package (`from bertkit.model.bert import BertModel`).

The names below load on first use, so reading the registry (help texts, `families_that`)
does not import torch.
"""

import importlib

_LAZY = {
    "BertForPreTrainingOutput": "bertkit.model.outputs", "BertModelOutput": "bertkit.model.outputs",
    "MultipleChoiceModelOutput": "bertkit.model.outputs", "QuestionAnsweringModelOutput": "bertkit.model.outputs",
    "SequenceClassifierOutput": "bertkit.model.outputs", "TokenClassifierOutput": "bertkit.model.outputs",
    "PreTrainedModel": "bertkit.model.pretrained",
}

__all__ = list(_LAZY)


def __getattr__(name: str):
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'bertkit.model' has no attribute {name!r}")
