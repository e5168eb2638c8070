"""What a tokenizer's pipeline implies for the transformers keys of tokenizer_config.json.

One rule per key, used wherever a tokenizer is created or saved (`Tokenizer`, and the
files `bertkit tokenizer train` writes), so bertkit and transformers agree on them:

  model_input_names             the inputs `tok(...)` returns and `model(**tok(...))` passes.
                                token_type_ids only for a pipeline whose pair template
                                gives the second text its own type id (BERT, ALBERT,
                                XLNet); never for byte-level BPE (GPT-2, RoBERTa, BART:
                                their models have no segment embedding, and GPT-2's would
                                look the type ids up as tokens) or a template-less decoder.
  clean_up_tokenization_spaces  only for WordPiece ("do n't" -> "don't" after joining
                                "##" pieces); transformers ignores it for BPE with a warning
                                on every decode, and it would eat real spaces elsewhere.

transformers' own class defaults are not consulted: transformers 5 lists no token types
for ALBERT and XLNet, whose models read them.
"""

from __future__ import annotations

import json
from typing import Any

from tokenizers import Tokenizer as RustTokenizer

WITH_TOKEN_TYPES = ("input_ids", "token_type_ids", "attention_mask")
WITHOUT_TOKEN_TYPES = ("input_ids", "attention_mask")


def model_input_names(backend: RustTokenizer, declared: tuple[str, ...] | None = None) -> tuple[str, ...]:
    """`declared` (tokenizer_config.json's model_input_names) when given, else what `backend` implies."""
    if declared is not None:
        return tuple(declared)
    spec = json.loads(backend.to_str())
    if _has(spec.get("pre_tokenizer"), "ByteLevel") or not _marks_segments(spec.get("post_processor")):
        return WITHOUT_TOKEN_TYPES
    return WITH_TOKEN_TYPES


def clean_up_tokenization_spaces(backend: RustTokenizer) -> bool:
    """transformers' decode-time space clean-up: meant for (and only right for) WordPiece."""
    return type(backend.model).__name__ == "WordPiece"


def _marks_segments(processor: Any) -> bool:
    """Does this post-processor give a pair's second text a type id of its own, between specials?
    (A template with a single form only gets tokenizers' default pair "$A:0 $B:1", no framing.)"""
    if not isinstance(processor, dict):
        return False
    kind = processor.get("type")
    if kind == "BertProcessing":
        return True
    if kind == "Sequence":
        return any(_marks_segments(p) for p in processor.get("processors", []))
    if kind == "TemplateProcessing":
        pair = processor.get("pair", [])
        types = {piece["Sequence"]["type_id"] for piece in pair if "Sequence" in piece}
        return len(types) > 1 and any("SpecialToken" in piece for piece in pair)
    return False


def _has(component: Any, kind: str) -> bool:
    """Is a `kind` step in this serialized pre-tokenizer (or in its Sequence)?"""
    if not isinstance(component, dict):
        return False
    if component.get("type") == kind:
        return True
    return any(_has(step, kind) for step in component.get("pretokenizers", []))
