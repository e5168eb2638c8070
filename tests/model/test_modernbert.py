"""ModernBERT: parity with transformers' ModernBert classes both ways (fp32, <= 1e-5) on a seeded random
tiny model, padded batches longer than the local window, padded and unpadded paths; config.json of
both transformers layouts; the heads' losses; training through padding stays finite."""

from __future__ import annotations

import json

import pytest
import torch
import transformers

from bertkit.errors import ConfigError
from bertkit.model.modernbert import (
    ModernBertConfig,
    ModernBertForMaskedLM,
    ModernBertForMultipleChoice,
    ModernBertForQuestionAnswering,
    ModernBertForSequenceClassification,
    ModernBertForTokenClassification,
    ModernBertModel,
)
from bertkit.model.bert.modeling import set_unpad

TOL = 1e-5
PAD = 0
# 4 layers: global at 0 and 3 (every third), local (window +-4) at 1 and 2; sequences of 21 > the window
SIZE = dict(vocab_size=97, hidden_size=32, intermediate_size=48, num_hidden_layers=4, num_attention_heads=2,
            local_attention=8, max_position_embeddings=64, pad_token_id=PAD, bos_token_id=1, eos_token_id=2,
            cls_token_id=1, sep_token_id=2)


def _hf(cls, **overrides):
    """A transformers model with sharp random weights (attention far from uniform) and a bias where
    the class has one."""
    torch.manual_seed(0)
    model = cls(transformers.ModernBertConfig(**{**SIZE, **overrides})).eval()
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.normal_(0.0, 0.3)
        for norm in (m for m in model.modules() if isinstance(m, torch.nn.LayerNorm)):
            norm.weight.normal_(1.0, 0.2)
    return model


def _inputs(rows: int = 3, length: int = 21):
    """A right-padded batch: row 1 has 14 real tokens, row 2 has 5 (its last real tokens' windows hold padding)."""
    gen = torch.Generator().manual_seed(3)
    ids = torch.randint(3, 97, (rows, length), generator=gen)
    ids[:, 0] = 1
    mask = torch.ones_like(ids)
    for row, real in ((1, 14), (2, 5)):
        if row < rows:
            ids[row, real:], mask[row, real:] = PAD, 0
    return ids, mask


def _close(ours: torch.Tensor, ref: torch.Tensor, where: torch.Tensor | None = None) -> float:
    ours, ref = (ours, ref) if where is None else (ours[where], ref[where])
    difference = (ours - ref).abs().max().item()
    assert difference <= TOL, difference
    return difference


@pytest.mark.parametrize("unpad", [False, True])
def test_transformers_masked_lm_loads_with_equal_outputs(tmp_path, unpad):
    ref = _hf(transformers.ModernBertForMaskedLM)
    ref.save_pretrained(tmp_path)
    ours, info = ModernBertForMaskedLM.from_pretrained(tmp_path, output_loading_info=True)
    assert info == {"missing_keys": [], "unexpected_keys": []}
    set_unpad(ours, unpad)
    ids, mask = _inputs()
    real = mask.bool()  # padding positions carry no meaning (the unpadded path leaves zeros there)
    labels = torch.full_like(ids, -100)
    labels[0, 3], labels[1, 12], labels[2, 4], labels[0, 19] = 5, 6, 7, 8
    with torch.no_grad():
        expected = ref(input_ids=ids, attention_mask=mask, output_hidden_states=True)
        got = ours(ids, mask, output_hidden_states=True)
        expected_loss = ref(input_ids=ids, attention_mask=mask, labels=labels).loss
        with_labels = ours(ids, mask, labels=labels)
    assert got.logits.shape == (3, 21, 97) and expected.logits.abs().max() > 1.0
    _close(got.logits, expected.logits, real)
    assert len(got.hidden_states) == len(expected.hidden_states) == 5
    for mine, theirs in zip(got.hidden_states, expected.hidden_states):
        _close(mine, theirs, real)
    _close(with_labels.loss, expected_loss)
    # with labels, the labelled positions' logits only (row-major)
    assert with_labels.masked_positions.tolist() == [[0, 3], [0, 19], [1, 12], [2, 4]]
    _close(with_labels.logits, expected.logits[labels != -100])


def test_the_window_and_the_thetas_matter(tmp_path):
    """The parity above is not vacuous: a wider window or another theta changes the outputs."""
    ref = _hf(transformers.ModernBertModel)
    ref.save_pretrained(tmp_path)
    ids, mask = _inputs(rows=1)
    with torch.no_grad():
        expected = ref(input_ids=ids, attention_mask=mask).last_hidden_state
        for change in ({"local_attention": 64}, {"local_rope_theta": 500.0}, {"global_rope_theta": 500.0}):
            config = ModernBertConfig.from_pretrained(tmp_path)
            for name, value in change.items():
                setattr(config, name, value)
            changed = ModernBertModel.from_pretrained(tmp_path, config=config)(ids, mask).last_hidden_state
            assert (changed - expected).abs().max() > 1e-2, change


@pytest.mark.parametrize("pooling", ["cls", "mean"])
def test_transformers_sequence_classifier_loads_with_equal_logits_and_loss(tmp_path, pooling):
    ref = _hf(transformers.ModernBertForSequenceClassification, num_labels=3, classifier_pooling=pooling,
              classifier_bias=True)
    ref.save_pretrained(tmp_path)
    ours = ModernBertForSequenceClassification.from_pretrained(tmp_path)
    assert ours.config.classifier_pooling == pooling and ours.loading_info["missing_keys"] == []
    ids, mask = _inputs()
    labels = torch.tensor([0, 2, 1])
    with torch.no_grad():
        expected = ref(input_ids=ids, attention_mask=mask, labels=labels)
        got = ours(ids, mask, labels=labels)
    _close(got.logits, expected.logits)
    _close(got.loss, expected.loss)


def test_transformers_token_classifier_and_qa_load_with_equal_logits(tmp_path):
    ids, mask = _inputs()
    real = mask.bool()
    ref = _hf(transformers.ModernBertForTokenClassification, num_labels=5)
    ref.save_pretrained(tmp_path / "tag")
    ours = ModernBertForTokenClassification.from_pretrained(tmp_path / "tag")
    labels = torch.randint(0, 5, ids.shape).masked_fill(~real, -100)
    with torch.no_grad():
        expected, got = ref(input_ids=ids, attention_mask=mask, labels=labels), ours(ids, mask, labels=labels)
    _close(got.logits, expected.logits, real)
    _close(got.loss, expected.loss)

    ref = _hf(transformers.ModernBertForQuestionAnswering)
    ref.save_pretrained(tmp_path / "qa")
    ours = ModernBertForQuestionAnswering.from_pretrained(tmp_path / "qa")
    with torch.no_grad():
        expected, got = ref(input_ids=ids, attention_mask=mask), ours(ids, mask)
    _close(got.start_logits, expected.start_logits, real)
    _close(got.end_logits, expected.end_logits, real)
    assert (got.start_logits[~real] == torch.finfo(torch.float32).min).all()  # padding is never an answer


def test_transformers_multiple_choice_loads_with_equal_logits(tmp_path):
    ref = _hf(transformers.ModernBertForMultipleChoice)
    ref.save_pretrained(tmp_path)
    ours = ModernBertForMultipleChoice.from_pretrained(tmp_path)
    ids, mask = _inputs(rows=3)
    ids, mask = ids.view(1, 3, -1), mask.view(1, 3, -1)
    labels = torch.tensor([2])
    with torch.no_grad():
        expected = ref(input_ids=ids, attention_mask=mask, labels=labels)
        got = ours(ids, mask, labels=labels)
    assert got.logits.shape == (1, 3)
    _close(got.logits, expected.logits)
    _close(got.loss, expected.loss)


def _randomize(model: torch.nn.Module) -> torch.nn.Module:
    torch.manual_seed(1)
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.normal_(0.0, 0.3)
    return model.eval()


def test_bertkit_checkpoints_load_in_transformers_with_equal_outputs(tmp_path):
    config = ModernBertConfig.from_dict({**SIZE, "layer_types": None, "num_labels": 3})
    ids, mask = _inputs()
    real = mask.bool()
    ours = _randomize(ModernBertForMaskedLM(config))
    ours.save_pretrained(tmp_path / "mlm")
    written = json.loads((tmp_path / "mlm" / "config.json").read_text())
    assert written["architectures"] == ["ModernBertForMaskedLM"] and written["global_attn_every_n_layers"] == 3
    ref = transformers.ModernBertForMaskedLM.from_pretrained(tmp_path / "mlm").eval()
    assert ref.config.layer_types == ["full_attention", "sliding_attention", "sliding_attention", "full_attention"]
    with torch.no_grad():
        _close(ours(ids, mask).logits, ref(input_ids=ids, attention_mask=mask).logits, real)

    ours = _randomize(ModernBertForSequenceClassification(config))
    ours.save_pretrained(tmp_path / "cls")
    ref = transformers.ModernBertForSequenceClassification.from_pretrained(tmp_path / "cls").eval()
    with torch.no_grad():
        _close(ours(ids, mask).logits, ref(input_ids=ids, attention_mask=mask).logits)


def test_config_json_of_both_transformers_layouts():
    # transformers 4's layout, as the published answerdotai checkpoints: every-n pattern, thetas, extra switches
    published = {**SIZE, "model_type": "modernbert", "global_attn_every_n_layers": 2, "global_rope_theta": 1000.0,
                 "local_rope_theta": 100.0, "reference_compile": True, "repad_logits_with_grad": False,
                 "layer_norm_eps": 1e-5, "position_embedding_type": "absolute", "classifier_pooling": "mean"}
    config = ModernBertConfig.from_dict(published)
    assert config.attention_types == ["full_attention", "sliding_attention"] * 2
    assert config.sliding_window == 4 and config.reference_compile is True
    assert config.to_dict()["repad_logits_with_grad"] is False  # carried through
    # transformers 5's layout: layer_types and rope_parameters
    values = {**SIZE, "layer_types": ["sliding_attention", "full_attention", "sliding_attention", "full_attention"],
              "rope_parameters": {"full_attention": {"rope_theta": 1234.0, "rope_type": "default"},
                                  "sliding_attention": {"rope_theta": 56.0, "rope_type": "default"}}}
    config = ModernBertConfig.from_dict(values)
    assert (config.global_rope_theta, config.local_rope_theta) == (1234.0, 56.0)
    assert config.attention_types == values["layer_types"]
    hf = transformers.ModernBertConfig(**config.to_dict())
    assert hf.layer_types == values["layer_types"]
    assert hf.rope_parameters["sliding_attention"]["rope_theta"] == 56.0
    with pytest.raises(ConfigError, match="rope_parameters"):
        ModernBertConfig.from_dict({"rope_parameters": {"full_attention": {"rope_type": "yarn", "factor": 2.0}}})
    with pytest.raises(ConfigError, match="'layer_types'"):
        ModernBertConfig.from_dict({**SIZE, "layer_types": ["full_attention"]})
    with pytest.raises(ConfigError, match="'classifier_pooling'"):
        ModernBertConfig(classifier_pooling="max")
    with pytest.raises(ConfigError, match="unknown field 'local_atention'"):
        ModernBertConfig.from_dict({"local_atention": 64})


def test_presets_and_their_sizes():
    assert ModernBertConfig.from_preset("modernbert-base").to_dict()["intermediate_size"] == 1152
    large = ModernBertConfig.from_preset("modernbert-large")
    assert (large.hidden_size, large.num_hidden_layers, large.num_attention_heads) == (1024, 28, 16)
    tiny = ModernBertConfig.from_preset("modernbert-tiny", vocab_size=100, pad_token_id=0)
    model = ModernBertForMaskedLM(tiny)
    assert tiny.attention_types == ["full_attention", "sliding_attention", "sliding_attention"]
    assert model.num_parameters() < 500_000


def test_training_through_padding_and_dropout_stays_finite():
    """A padding query whose window holds only padding gets a finite row (additive minimum, not -inf):
    gradients stay finite on both paths, with attention dropout's explicit path too."""
    config = ModernBertConfig.from_dict({**SIZE, "attention_dropout": 0.1, "mlp_dropout": 0.1})
    ids, mask = _inputs(length=40)  # row 2: 5 real tokens, 35 padding (windows of +-4)
    labels = torch.full_like(ids, -100)
    labels[:, 2] = 9
    for unpad in (False, True):
        model = set_unpad(ModernBertForMaskedLM(config), unpad).train()
        loss = model(ids, mask, labels=labels).loss
        loss.backward()
        assert torch.isfinite(loss)
        assert all(torch.isfinite(p.grad).all() for p in model.parameters() if p.grad is not None)


def test_unpadded_and_padded_paths_agree_with_attentions_returned():
    model = _randomize(ModernBertModel(ModernBertConfig.from_dict(SIZE)))
    ids, mask = _inputs()
    real = mask.bool()
    with torch.no_grad():
        padded = model(ids, mask, unpad=False)
        unpadded = model(ids, mask, unpad=True)
        explained = model(ids, mask, output_attentions=True)
    _close(unpadded.last_hidden_state, padded.last_hidden_state, real)
    assert (unpadded.last_hidden_state[~real] == 0).all()
    _close(explained.last_hidden_state, padded.last_hidden_state, real)
    local = explained.attentions[1]  # (B, heads, T, T): a sliding-window layer sees +-4 positions only
    assert local.shape == (3, 2, 21, 21) and local[0, :, 10, :6].abs().max() == 0 and local[0, :, 10, 6:15].min() > 0
    assert explained.attentions[0][0, :, 10].min() > 0  # a global one sees every real token


def test_packed_global_layers_of_the_gpu_route_agree():
    """The GPU's route (global layers on packed rows through the variable-length kernels, RoPE read per
    row), run here on the CPU: equal to the padded path at the real tokens."""
    from bertkit.model.varlen import varlen_route

    model = _randomize(ModernBertModel(ModernBertConfig.from_dict(SIZE)))
    ids, mask = _inputs()
    real = mask.bool()
    with torch.no_grad():
        padded = model(ids, mask, unpad=False).last_hidden_state
        with varlen_route(True):
            packed = model(ids, mask, unpad=True).last_hidden_state
    _close(packed, padded, real)
