"""Pre-LN checkpoints in transformers' `roberta-prelayernorm` layout.

transformers has no pre-LN BERT: a pre-LN model saved under BERT's names loads there as a
post-LN `BertModel` and computes another function. Its RoBERTa-PreLayerNorm family
computes what bertkit's pre-LN encoder does (embeddings + LayerNorm; per layer
x + attn(LN(x)), then x + ffn(LN(x)); a final LayerNorm before the heads and the pooler),
so bertkit saves every pre-LN BERT or RoBERTa model in that layout and reads it back:

- keys: the backbone under `roberta_prelayernorm.`; a layer's pre-attention LayerNorm
  (bertkit `attention.output.LayerNorm`) is `attention.LayerNorm`, its pre-FFN one
  (`output.LayerNorm`) is `intermediate.LayerNorm`; `encoder.final_layer_norm` is the
  backbone's `LayerNorm`.
- BERT only: RoBERTa counts positions from `pad_token_id + 1` over the non-padding
  tokens, so BERT's position row t is stored at row t + pad_token_id + 1
  (`max_position_embeddings` grows by pad_token_id + 1; rows below stay zero). On
  right-padded inputs (what bertkit's tokenizers make) every real token then reads the
  row it reads in bertkit. BERT's MLM head is RoBERTa's `lm_head` (same maths when
  `hidden_act` is "gelu", which the config enforces for pre-LN BERT); BERT's pooler +
  classifier is RoBERTa's classification head `classifier.dense` / `classifier.out_proj`
  (dropout aside). Heads RoBERTa lacks (NSP `cls.seq_relationship`, SpanBERT's `sbo`)
  keep their bertkit names: transformers reports them unused, bertkit reads them back.
- config.json: `model_type` "roberta-prelayernorm", transformers' class names in
  `architectures`, and a `bertkit` field with the model_type and architectures to load
  back as (absent in transformers' own checkpoints, which load as pre-LN RoBERTa).

Everything here maps dicts; tensors are only sliced, so importing it costs nothing.
"""

from __future__ import annotations

import re
from typing import Any

HF_MODEL_TYPE = "roberta-prelayernorm"
HF_PREFIX = "roberta_prelayernorm."
MARKER = "bertkit"  # config.json field: what bertkit loads the checkpoint back as
DEFAULT_NATIVE_MODEL_TYPE = "roberta"  # transformers' own roberta-prelayernorm checkpoints

# Backbone-relative key prefixes: (bertkit, transformers); {n} = a layer index.
_BACKBONE_RENAMES = (
    ("encoder.layer.{n}.attention.output.LayerNorm.", "encoder.layer.{n}.attention.LayerNorm."),
    ("encoder.layer.{n}.output.LayerNorm.", "encoder.layer.{n}.intermediate.LayerNorm."),
    ("encoder.final_layer_norm.", "LayerNorm."),
)
# BERT's vocabulary head under RoBERTa's names (the decoder is tied: never stored).
_BERT_LM_RENAMES = (
    ("cls.predictions.transform.dense.", "lm_head.dense."),
    ("cls.predictions.transform.LayerNorm.", "lm_head.layer_norm."),
    ("cls.predictions.bias", "lm_head.bias"),
)
# BertForSequenceClassification: pooler + classifier = RoBERTa's classification head.
_BERT_SEQUENCE_HEAD_RENAMES = (
    ("bert.pooler.dense.", "classifier.dense."),
    ("classifier.", "classifier.out_proj."),
)
_BERT_SEQUENCE_HEAD = "BertForSequenceClassification"
_POSITIONS = "embeddings.position_embeddings.weight"

# bertkit class -> the transformers class that computes the same function.
HF_ARCHITECTURES = {
    "BertModel": "RobertaPreLayerNormModel",
    "BertForPreTraining": "RobertaPreLayerNormForMaskedLM",
    "SpanBertForPreTraining": "RobertaPreLayerNormForMaskedLM",
    "BertLMHeadModel": "RobertaPreLayerNormForCausalLM",
    "BertForSequenceClassification": "RobertaPreLayerNormForSequenceClassification",
    "BertForTokenClassification": "RobertaPreLayerNormForTokenClassification",
    "BertForQuestionAnswering": "RobertaPreLayerNormForQuestionAnswering",
    "BertForMultipleChoice": "RobertaPreLayerNormForMultipleChoice",
    "RobertaModel": "RobertaPreLayerNormModel",
    "RobertaForMaskedLM": "RobertaPreLayerNormForMaskedLM",
    "RobertaForSequenceClassification": "RobertaPreLayerNormForSequenceClassification",
    "RobertaForTokenClassification": "RobertaPreLayerNormForTokenClassification",
    "RobertaForQuestionAnswering": "RobertaPreLayerNormForQuestionAnswering",
    "RobertaForMultipleChoice": "RobertaPreLayerNormForMultipleChoice",
}
NATIVE_MODEL_TYPES = ("bert", "roberta")


class LayoutError(ValueError):
    """A pre-LN model this layout cannot express (the caller names the file or model)."""


def is_hf_config(values: dict[str, Any]) -> bool:
    return values.get("model_type") == HF_MODEL_TYPE


def native_model_type(values: dict[str, Any]) -> str:
    """The bertkit model_type a roberta-prelayernorm config.json loads back as."""
    marker = values.get(MARKER)
    return str(marker.get("model_type")) if isinstance(marker, dict) else DEFAULT_NATIVE_MODEL_TYPE


def position_offset(values: dict[str, Any]) -> int:
    """Rows RoBERTa's positions start past (BERT origin only): pad_token_id + 1."""
    return int(values.get("pad_token_id", 0)) + 1


def config_to_hf(values: dict[str, Any]) -> dict[str, Any]:
    """A pre-LN bertkit config dict (`BertConfig.to_dict`) -> roberta-prelayernorm config.json values."""
    model_type = values.get("model_type")
    if model_type not in NATIVE_MODEL_TYPES:
        raise LayoutError(f"pre-LN {model_type} models have no transformers layout (only BERT and RoBERTa)")
    architectures = list(values.get("architectures") or [])
    unknown = [name for name in architectures if name not in HF_ARCHITECTURES]
    if unknown:
        raise LayoutError(f"pre-LN {unknown[0]} has no transformers class that computes it "
                          f"(transformers' roberta-prelayernorm covers {', '.join(sorted(HF_ARCHITECTURES))})")
    hf = {k: v for k, v in values.items() if k not in ("pre_layer_norm", "model_type", "architectures")}
    hf["model_type"] = HF_MODEL_TYPE
    hf["architectures"] = [HF_ARCHITECTURES[name] for name in architectures]
    if model_type == "bert":
        hf["max_position_embeddings"] = values["max_position_embeddings"] + position_offset(values)
    hf[MARKER] = {"model_type": model_type, "architectures": architectures}
    return hf


def config_from_hf(values: dict[str, Any]) -> dict[str, Any]:
    """roberta-prelayernorm config.json values -> the bertkit config dict they were saved from
    (or, for transformers' own checkpoints, a pre-LN RoBERTa)."""
    native = {k: v for k, v in values.items() if k != MARKER}
    model_type = native_model_type(values)
    marker = values.get(MARKER) if isinstance(values.get(MARKER), dict) else {}
    if "architectures" in marker:
        native["architectures"] = list(marker["architectures"])
    elif native.get("architectures"):
        native["architectures"] = [name.replace("RobertaPreLayerNorm", "Roberta") for name in native["architectures"]]
    native["model_type"] = model_type
    native["pre_layer_norm"] = True
    if model_type == "bert" and isinstance(native.get("max_position_embeddings"), int):
        native["max_position_embeddings"] -= position_offset(native)
    return native


def is_hf_state(state: dict[str, Any]) -> bool:
    """True for a state dict in the roberta-prelayernorm layout (not bertkit's own)."""
    return any(key.startswith(HF_PREFIX) or re.search(r"(^|\.)encoder\.layer\.\d+\.intermediate\.LayerNorm\.", key)
               for key in state)


def state_to_hf(state: dict[str, Any], model_type: str, architecture: str, pad_token_id: int) -> dict[str, Any]:
    """A bertkit pre-LN state dict (`model.state_dict()`) -> roberta-prelayernorm keys and tensors."""
    native_prefix = f"{model_type}."
    bare = not any(key.startswith(native_prefix) for key in state)
    bert = model_type == "bert"
    hf: dict[str, Any] = {}
    for key, value in state.items():
        if bert and architecture == _BERT_SEQUENCE_HEAD:
            key = _rename(key, _BERT_SEQUENCE_HEAD_RENAMES, to_hf=True)
        if bare or key.startswith(native_prefix):
            inner = _rename(key.removeprefix(native_prefix) if not bare else key, _BACKBONE_RENAMES, to_hf=True)
            if bert and inner == _POSITIONS:
                value = _shift_rows(value, pad_token_id + 1)
            key = inner if bare else HF_PREFIX + inner
        elif bert:
            key = _rename(key, _BERT_LM_RENAMES, to_hf=True)
        hf[key] = value
    return hf


def state_from_hf(state: dict[str, Any], model_type: str, pad_token_id: int) -> dict[str, Any]:
    """A roberta-prelayernorm state dict -> bertkit's keys for a pre-LN `model_type` model
    (backbone under "`model_type`." when the checkpoint has a prefix, bare otherwise)."""
    if model_type not in NATIVE_MODEL_TYPES:
        raise LayoutError(f"a {HF_MODEL_TYPE} checkpoint loads as a pre-LN BERT or RoBERTa model, not {model_type}")
    bare = not any(key.startswith(HF_PREFIX) for key in state)
    bert = model_type == "bert"
    native: dict[str, Any] = {}
    for key, value in state.items():
        backbone = key.startswith(HF_PREFIX) or (bare and key.split(".")[0] in ("embeddings", "encoder", "pooler",
                                                                               "LayerNorm"))
        if backbone:
            inner = _rename(key.removeprefix(HF_PREFIX), _BACKBONE_RENAMES, to_hf=False)
            if bert and inner == _POSITIONS:
                value = value[pad_token_id + 1:]
            key = inner if bare else f"{model_type}.{inner}"
        elif bert:
            key = _rename(key, _BERT_LM_RENAMES, to_hf=False)
            if key.startswith("classifier.dense.") or key.startswith("classifier.out_proj."):
                key = _rename(key, _BERT_SEQUENCE_HEAD_RENAMES, to_hf=False)
        native[key] = value
    return native


def _rename(key: str, renames: tuple[tuple[str, str], ...], to_hf: bool) -> str:
    """Replace the first matching key prefix of `renames` (bertkit -> transformers or back)."""
    for native, hf in renames:
        source, target = (native, hf) if to_hf else (hf, native)
        pattern = "^" + re.escape(source).replace(re.escape("{n}"), r"(\d+)")
        match = re.match(pattern, key)
        if match:
            return (target.replace("{n}", match.group(1)) if match.groups() else target) + key[match.end():]
    return key


def _shift_rows(table, offset: int):
    """(P, H) -> (P + offset, H): the rows moved down by `offset`, zeros above."""
    shifted = table.new_zeros((table.shape[0] + offset, *table.shape[1:]))
    shifted[offset:] = table
    return shifted
