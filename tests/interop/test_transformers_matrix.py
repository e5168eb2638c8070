"""Every checkpoint bertkit saves computes the same function in transformers.

Matrix: preset (tiny, mini, and base with one layer) x LayerNorm placement (post, pre)
x family (BERT, RoBERTa, ELECTRA, ALBERT) x every saved model class. Each model has its
LayerNorm weights moved away from their init (a norm transformers drops or misplaces
then shows), is saved, loaded by transformers through config.json's `architectures`
and run on a right-padded pair batch; logits (and hidden states) at the real positions
must agree within 1e-4. Pre-LN BERT and RoBERTa are saved as transformers'
roberta-prelayernorm; pre-LN ELECTRA and ALBERT are refused in one line. Every saved
checkpoint also loads back in bertkit to the same weights and outputs.
"""

from __future__ import annotations

import json

import pytest
import torch
import transformers

from bertkit.errors import ConfigError
from bertkit.model.families import MODEL_FAMILIES, load_config

TOLERANCE = 1e-4
# the families built on BertConfig's fields (XLNet's matrix: tests/model/test_xlnet_parity.py)
PAD_IDS = {"bert": 0, "roberta": 1, "electra": 0, "albert": 0}
PRESETS = {"tiny": {}, "mini": {}, "base": {"num_hidden_layers": 1}}
# Classes saved by pre-training objectives besides the registry's backbone, MLM and task heads.
EXTRA_CLASSES = {
    "bert": ("bertkit.objectives.ltr:BertLMHeadModel", "bertkit.objectives.spanbert:SpanBertForPreTraining"),
    "electra": ("bertkit.model.electra.modeling:ElectraForPreTraining",),
    "albert": ("bertkit.model.albert.modeling:AlbertForPreTraining",),
}
# bertkit classes transformers lacks under that name: the transformers class that runs them
HF_CLASS_FOR = {"SpanBertForPreTraining": "BertForMaskedLM"}
OUTPUT_NAMES = ("last_hidden_state", "pooler_output", "logits", "prediction_logits", "seq_relationship_logits",
                "sop_logits", "start_logits", "end_logits")


def _resolve(reference: str):
    from bertkit.model.families import _resolve as resolve

    return resolve(reference)


def _classes(family: str) -> list[str]:
    entry = MODEL_FAMILIES[family]
    masked_lm = [entry.mlm.model] if entry.mlm is not None else []
    return [entry.backbone, *masked_lm, *entry.tasks.values(), *EXTRA_CLASSES.get(family, ())]


def _config(family: str, preset: str, pre_layer_norm: bool):
    config_class = MODEL_FAMILIES[family].config_class()
    return config_class.from_preset(
        preset, **PRESETS[preset], vocab_size=99, max_position_embeddings=40, pad_token_id=PAD_IDS[family],
        hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, pre_layer_norm=pre_layer_norm,
    )


def _perturbed(model: torch.nn.Module, seed: int) -> torch.nn.Module:
    """Every LayerNorm's weight and bias moved well away from (1, 0)."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, torch.nn.LayerNorm):
                module.weight.copy_(1.0 + 0.5 * torch.randn(module.weight.shape, generator=gen))
                module.bias.copy_(0.3 * torch.randn(module.bias.shape, generator=gen))
    return model.eval()


def _batch(pad_id: int, choices: int | None):
    """Right-padded pairs (real lengths 9, 6, 3), (B, choices, T) for multiple choice; ids are
    never the pad id; token type 1 from position 4."""
    gen = torch.Generator().manual_seed(7)
    shape = (3, choices, 9) if choices else (3, 9)
    ids = torch.randint(3, 99, shape, generator=gen)
    mask = torch.ones_like(ids)
    mask[1, ..., 6:] = 0
    mask[2, ..., 3:] = 0
    ids[mask == 0] = pad_id
    types = torch.zeros_like(ids)
    types[..., 4:] = 1
    types[mask == 0] = 0
    return ids, types, mask


def _bertkit_outputs(model, name: str, ids, types, mask) -> dict[str, torch.Tensor]:
    if name == "SpanBertForPreTraining":  # needs span labels: compare its MLM head's vocabulary logits
        hidden = model.bert(input_ids=ids, token_type_ids=types, attention_mask=mask).last_hidden_state
        return {"logits": model.cls.predictions(hidden, model.bert.embeddings.word_embeddings.weight)}
    out = model(input_ids=ids, token_type_ids=types, attention_mask=mask)
    return {key: getattr(out, key) for key in OUTPUT_NAMES if getattr(out, key, None) is not None}


def _assert_outputs_close(ours: dict, theirs, mask: torch.Tensor, where: str) -> int:
    """Compares the outputs both sides have (per-token ones at real positions); returns how many."""
    compared = 0
    for key, value in ours.items():
        other = getattr(theirs, key, None)
        if other is None and key == "prediction_logits":  # BertForPreTraining as RobertaPreLayerNormForMaskedLM
            other = getattr(theirs, "logits", None)
        if other is None:
            continue
        if value.dim() >= mask.dim() and value.shape[: mask.dim()] == mask.shape:
            value, other = value[mask.bool()], other[mask.bool()]
        torch.testing.assert_close(value, other, atol=TOLERANCE, rtol=TOLERANCE, msg=lambda m: f"{where} {key}: {m}")
        compared += 1
    return compared


CASES = [(preset, family, pre_ln, reference)
         for preset in PRESETS for family in PAD_IDS for pre_ln in (False, True)
         if not (pre_ln and family in ("electra", "albert")) for reference in _classes(family)]


@pytest.mark.parametrize("preset,family,pre_layer_norm,reference", CASES,
                         ids=[f"{p}-{f}-{'pre' if ln else 'post'}-{r.split(':')[1]}" for p, f, ln, r in CASES])
def test_saved_checkpoint_computes_the_same_in_transformers(tmp_path, preset, family, pre_layer_norm, reference):
    name = reference.split(":")[1]
    torch.manual_seed(0)
    config = _config(family, preset, pre_layer_norm)
    model_class = _resolve(reference)
    model = _perturbed(model_class(config), seed=1)
    model.save_pretrained(tmp_path)
    saved = json.loads((tmp_path / "config.json").read_text())
    if pre_layer_norm:
        assert saved["model_type"] == "roberta-prelayernorm"
    hf_class = getattr(transformers, HF_CLASS_FOR.get(saved["architectures"][0], saved["architectures"][0]))
    theirs_model = hf_class.from_pretrained(tmp_path).eval()

    ids, types, mask = _batch(PAD_IDS[family], 2 if "MultipleChoice" in name else None)
    with torch.no_grad():
        ours = _bertkit_outputs(model, name, ids, types, mask)
        theirs = theirs_model(input_ids=ids, token_type_ids=types, attention_mask=mask)
    assert _assert_outputs_close(ours, theirs, mask, f"{name} in transformers") >= 1

    reloaded, info = model_class.from_pretrained(tmp_path, output_loading_info=True)
    assert info == {"missing_keys": [], "unexpected_keys": []}
    assert load_config(tmp_path).to_dict() == {**config.to_dict(), "architectures": [name], **model.hf_config_fields}
    for (key, value), (key_back, value_back) in zip(model.state_dict().items(), reloaded.state_dict().items()):
        assert key == key_back and torch.equal(value, value_back), key
    with torch.no_grad():
        again = _bertkit_outputs(reloaded, name, ids, types, mask)
    for key, value in ours.items():
        torch.testing.assert_close(again[key], value, atol=0, rtol=0)


@pytest.mark.parametrize("family", ["electra", "albert"])
def test_pre_layer_norm_is_refused_where_transformers_has_no_pre_ln_family(family):
    with pytest.raises(ConfigError, match="'pre_layer_norm' is not supported") as error:
        _config(family, "tiny", True)
    assert "\n" not in str(error.value)


@pytest.mark.parametrize("hf_name,ours_name", [
    ("RobertaPreLayerNormForMaskedLM", "RobertaForMaskedLM"),
    ("RobertaPreLayerNormForSequenceClassification", "RobertaForSequenceClassification"),
])
def test_transformers_roberta_prelayernorm_checkpoint_loads_as_pre_ln_roberta(tmp_path, hf_name, ours_name):
    torch.manual_seed(0)
    config = transformers.RobertaPreLayerNormConfig(vocab_size=99, hidden_size=32, num_hidden_layers=2,
                                                   num_attention_heads=2, intermediate_size=64,
                                                   max_position_embeddings=40, type_vocab_size=1)
    _perturbed(getattr(transformers, hf_name)(config), seed=2).save_pretrained(tmp_path)
    assert load_config(tmp_path).pre_layer_norm
    ours_class = _resolve(f"bertkit.model.roberta.modeling:{ours_name}")
    ours, info = ours_class.from_pretrained(tmp_path, output_loading_info=True)
    assert info == {"missing_keys": [], "unexpected_keys": []}
    ids, _, mask = _batch(config.pad_token_id, None)
    with torch.no_grad():
        theirs = getattr(transformers, hf_name).from_pretrained(tmp_path).eval()
        compared = _assert_outputs_close(_bertkit_outputs(ours, ours_name, ids, None, mask),
                                         theirs(input_ids=ids, attention_mask=mask), mask, hf_name)
    assert compared >= 1


def test_pre_ln_checkpoints_in_bertkits_earlier_layout_still_load(tmp_path):
    """Before the roberta-prelayernorm layout, pre-LN BERT was saved under BERT's names."""
    from bertkit import BertForPreTraining
    from bertkit.interop.hf import save_pretrained_weights

    model = _perturbed(BertForPreTraining(_config("bert", "tiny", True)), seed=3)
    model.config.save_pretrained(tmp_path)
    save_pretrained_weights(model, tmp_path)
    reloaded = BertForPreTraining.from_pretrained(tmp_path)
    for (key, value), (_, value_back) in zip(model.state_dict().items(), reloaded.state_dict().items()):
        assert torch.equal(value, value_back), key
