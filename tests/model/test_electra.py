"""ELECTRA models against transformers: discriminator, generator and classifier on seeded
random tiny models with a padded batch, checkpoints loading in both directions."""

from __future__ import annotations

import pytest
import torch
import transformers

from bertkit.errors import ConfigError
from bertkit.model.electra.config import generator_config
from bertkit.model.electra.modeling import (
    ElectraConfig,
    ElectraForMaskedLM,
    ElectraForMultipleChoice,
    ElectraForPreTraining,
    ElectraForSequenceClassification,
    ElectraModel,
)

B, T = 3, 10


def _config(**overrides) -> ElectraConfig:
    values = dict(vocab_size=120, embedding_size=16, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                  intermediate_size=64, max_position_embeddings=64)
    return ElectraConfig.from_dict({**values, **overrides})


def _inputs(seed: int = 0):
    gen = torch.Generator().manual_seed(seed)
    ids = torch.randint(5, 120, (B, T), generator=gen)
    types = torch.zeros_like(ids)
    types[:, T // 2:] = 1
    mask = torch.ones_like(ids)
    mask[1:, -3:] = 0  # padding in two rows, none in the first
    return ids, types, mask


def _hf(config: ElectraConfig):
    return transformers.ElectraConfig(**config.to_dict())


def _close(a, b):
    torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("embedding_size", [16, 32])  # projected and not
@pytest.mark.parametrize("ours_cls,hf_name", [(ElectraForPreTraining, "ElectraForPreTraining"),
                                               (ElectraForMaskedLM, "ElectraForMaskedLM")])
def test_transformers_checkpoint_loads_here(tmp_path, ours_cls, hf_name, embedding_size):
    config = _config(embedding_size=embedding_size)
    torch.manual_seed(1)
    ref = getattr(transformers, hf_name)(_hf(config)).eval()
    ref.save_pretrained(tmp_path)
    ours, info = ours_cls.from_pretrained(tmp_path, output_loading_info=True)
    assert info["missing_keys"] == []
    assert (ours.electra.embeddings_project is None) == (embedding_size == 32)
    ids, types, mask = _inputs()
    labels = (torch.rand(B, T, generator=torch.Generator().manual_seed(5)) < 0.3).long()
    if ours_cls is ElectraForMaskedLM:  # real tokens only (padding states are zeros on bertkit's unpadded path)
        labels = torch.where(labels.bool() & mask.bool(), ids, torch.full_like(ids, -100))
    with torch.no_grad():
        a = ours(input_ids=ids, token_type_ids=types, attention_mask=mask, labels=labels, output_hidden_states=True)
        b = ref(input_ids=ids, token_type_ids=types, attention_mask=mask, labels=labels, output_hidden_states=True)
    real = mask.bool()
    if ours_cls is ElectraForPreTraining:
        _close(a.logits[real], b.logits[real])
    else:  # with labels, only the labelled positions are projected onto the vocabulary
        _close(a.logits, b.logits[labels != -100])
        with torch.no_grad():
            _close(ours(input_ids=ids, token_type_ids=types, attention_mask=mask).logits[real], b.logits[real])
    _close(a.loss, b.loss)
    assert len(a.hidden_states) == len(b.hidden_states) == config.num_hidden_layers + 1
    _close(a.hidden_states[-1][real], b.hidden_states[-1][real])


@pytest.mark.parametrize("ours_cls,hf_name", [(ElectraForPreTraining, "ElectraForPreTraining"),
                                               (ElectraForMaskedLM, "ElectraForMaskedLM"),
                                               (ElectraForSequenceClassification, "ElectraForSequenceClassification")])
def test_bertkit_checkpoint_loads_in_transformers(tmp_path, ours_cls, hf_name):
    config = _config(num_labels=3) if ours_cls is ElectraForSequenceClassification else _config()
    torch.manual_seed(2)
    ours = ours_cls(config).eval()
    with torch.no_grad():  # a non-zero output bias, so the test sees it
        for name, param in ours.named_parameters():
            if name.endswith("bias"):
                param.normal_(0.0, 0.1)
    ours.save_pretrained(tmp_path)
    ref, info = getattr(transformers, hf_name).from_pretrained(tmp_path, output_loading_info=True)
    ref.eval()
    assert not info["missing_keys"] and not info["unexpected_keys"]
    ids, types, mask = _inputs(1)
    with torch.no_grad():
        a = ours(input_ids=ids, token_type_ids=types, attention_mask=mask)
        b = ref(input_ids=ids, token_type_ids=types, attention_mask=mask)
    real = mask.bool()
    if ours_cls is ElectraForSequenceClassification:
        _close(a.logits, b.logits)
    else:
        _close(a.logits[real], b.logits[real])
    # the bare encoder loads from the same checkpoint, the head reported as unexpected
    backbone = ElectraModel.from_pretrained(tmp_path)
    assert backbone.loading_info["missing_keys"] == []
    ref_backbone = transformers.ElectraModel.from_pretrained(tmp_path).eval()
    with torch.no_grad():
        _close(backbone(input_ids=ids, token_type_ids=types, attention_mask=mask).last_hidden_state[real],
               ref_backbone(input_ids=ids, token_type_ids=types, attention_mask=mask).last_hidden_state[real])


def test_sequence_classification_losses_match_transformers(tmp_path):
    config = _config(num_labels=3)
    torch.manual_seed(3)
    ref = transformers.ElectraForSequenceClassification(_hf(config)).eval()
    ref.save_pretrained(tmp_path)
    ours = ElectraForSequenceClassification.from_pretrained(tmp_path)
    ids, types, mask = _inputs(2)
    labels = torch.tensor([0, 2, 1])
    with torch.no_grad():
        a = ours(input_ids=ids, token_type_ids=types, attention_mask=mask, labels=labels)
        b = ref(input_ids=ids, token_type_ids=types, attention_mask=mask, labels=labels)
    _close(a.logits, b.logits)
    _close(a.loss, b.loss)


def test_discriminator_checkpoint_starts_a_classifier_with_a_fresh_head(tmp_path):
    torch.manual_seed(4)
    ElectraForPreTraining(_config()).save_pretrained(tmp_path)
    model = ElectraForSequenceClassification.from_pretrained(tmp_path)
    assert sorted(model.loading_info["missing_keys"]) == sorted(
        f"classifier.{k}" for k in ("dense.weight", "dense.bias", "out_proj.weight", "out_proj.bias"))


def test_config_round_trip_and_errors(tmp_path):
    config = _config()
    hf = _hf(config)
    assert hf.embedding_size == 16 and hf.model_type == "electra"
    hf.save_pretrained(tmp_path)
    again = ElectraConfig.from_pretrained(tmp_path)
    assert (again.embedding_size, again.hidden_size, again.summary_type) == (16, 32, "first")
    with pytest.raises(ConfigError, match="embedding_size"):
        _config(embedding_size=0)
    with pytest.raises(ConfigError, match="model_type"):
        ElectraConfig.from_dict({**config.to_dict(), "model_type": "bert"})
    with pytest.raises(ConfigError, match="tie_word_embeddings"):
        ElectraConfig.from_dict({**config.to_dict(), "tie_word_embeddings": False})
    preset = ElectraConfig.from_preset("small")
    assert (preset.hidden_size, preset.embedding_size, preset.num_attention_heads) == (512, 512, 8)


def test_generator_config_scales_width_heads_and_ffn():
    disc = ElectraConfig.from_preset("small", embedding_size=128)
    gen = generator_config(disc, 0.25)
    assert (gen.hidden_size, gen.num_attention_heads, gen.intermediate_size) == (128, 2, 512)
    assert (gen.embedding_size, gen.num_hidden_layers, gen.vocab_size) == (128, 4, disc.vocab_size)
    tiny = generator_config(_config(), 0.25)  # 4 heads * 0.25 = 1 head of width 8
    assert (tiny.hidden_size, tiny.num_attention_heads) == (8, 1)
    for bad in (0.0, -0.5, 1.5):
        with pytest.raises(ConfigError, match="generator_size"):
            generator_config(disc, bad)


@pytest.mark.parametrize("name", ["ElectraForTokenClassification", "ElectraForQuestionAnswering"])
def test_token_and_qa_heads_match_transformers_both_ways(tmp_path, name):
    import bertkit.model.electra.modeling as electra

    config = _config(num_labels=2 if "Question" in name else 5)
    torch.manual_seed(6)
    ref = getattr(transformers, name)(_hf(config)).eval()
    ref.save_pretrained(tmp_path / "hf")
    ours, info = getattr(electra, name).from_pretrained(tmp_path / "hf", output_loading_info=True)
    assert info["missing_keys"] == []
    ids, types, mask = _inputs(3)
    mask[:] = 1  # transformers' QA softmax includes padding positions (bertkit's does not): compare unpadded
    if "Token" in name:
        targets = {"labels": torch.randint(0, 5, (B, T), generator=torch.Generator().manual_seed(1))}
        targets["labels"][0, :2] = -100
    else:
        targets = {"start_positions": torch.tensor([1, 4, 0]), "end_positions": torch.tensor([3, 6, 0])}
    with torch.no_grad():
        a = ours(input_ids=ids, token_type_ids=types, attention_mask=mask, **targets)
        b = ref(input_ids=ids, token_type_ids=types, attention_mask=mask, **targets)
    _close(a.loss, b.loss)
    for field in (("logits",) if "Token" in name else ("start_logits", "end_logits")):
        _close(getattr(a, field), getattr(b, field))
    ours.save_pretrained(tmp_path / "ours")
    back, info = getattr(transformers, name).from_pretrained(tmp_path / "ours", output_loading_info=True)
    assert not info["missing_keys"] and not info["unexpected_keys"]
    with torch.no_grad():
        again = back.eval()(input_ids=ids, token_type_ids=types, attention_mask=mask, **targets)
    _close(again.loss, b.loss)


def _choices(seed: int):
    """(B, 2, T) inputs: each row and another row as its two choices (padding in both)."""
    return tuple(torch.stack([x, x.roll(1, 0)], dim=1) for x in _inputs(seed))


@pytest.mark.parametrize("summary", [
    {},  # HF's defaults: first token -> summary (H -> H) -> exact GELU -> dropout
    {"summary_type": "mean", "summary_activation": "tanh"},  # the mean includes padding, as transformers'
    {"summary_type": "last", "summary_activation": "relu", "summary_use_proj": False},
])
def test_multiple_choice_matches_transformers_both_ways(tmp_path, summary):
    config = _config(**summary)
    torch.manual_seed(7)
    ref = transformers.ElectraForMultipleChoice(_hf(config)).eval()
    ref.save_pretrained(tmp_path / "hf")
    ours, info = ElectraForMultipleChoice.from_pretrained(tmp_path / "hf", output_loading_info=True)
    assert info == {"missing_keys": [], "unexpected_keys": []}
    assert set(ours.state_dict()) == set(ref.state_dict())
    head = {k for k in ours.state_dict() if not k.startswith("electra.")}
    projected = summary.get("summary_use_proj", True)
    assert head == {"classifier.weight", "classifier.bias"} | (
        {"sequence_summary.summary.weight", "sequence_summary.summary.bias"} if projected else set())
    ids, types, mask = _choices(4)
    labels = torch.tensor([0, 1, 1])
    with torch.no_grad():
        a = ours(input_ids=ids, token_type_ids=types, attention_mask=mask, labels=labels)
        b = ref(input_ids=ids, token_type_ids=types, attention_mask=mask, labels=labels)
    assert a.logits.shape == (B, 2)
    _close(a.logits, b.logits)
    _close(a.loss, b.loss)

    torch.manual_seed(8)
    mine = ElectraForMultipleChoice(config).eval()
    with torch.no_grad():  # non-zero biases, so the test sees them
        for name, param in mine.named_parameters():
            if name.endswith("bias"):
                param.normal_(0.0, 0.1)
    mine.save_pretrained(tmp_path / "ours")
    back, info = transformers.ElectraForMultipleChoice.from_pretrained(tmp_path / "ours", output_loading_info=True)
    assert not info["missing_keys"] and not info["unexpected_keys"]
    ids, types, mask = _choices(5)
    with torch.no_grad():
        a = mine(input_ids=ids, token_type_ids=types, attention_mask=mask, labels=labels)
        b = back.eval()(input_ids=ids, token_type_ids=types, attention_mask=mask, labels=labels)
    _close(a.logits, b.logits)
    _close(a.loss, b.loss)


def test_multiple_choice_from_a_discriminator_checkpoint_and_the_registry(tmp_path):
    from bertkit.model.families import load_config, task_model_class

    torch.manual_seed(9)
    ElectraForPreTraining(_config()).save_pretrained(tmp_path)
    assert task_model_class(load_config(tmp_path), "multiple_choice") is ElectraForMultipleChoice
    model = ElectraForMultipleChoice.from_pretrained(tmp_path)
    assert sorted(model.loading_info["missing_keys"]) == [
        "classifier.bias", "classifier.weight", "sequence_summary.summary.bias", "sequence_summary.summary.weight"]
    ids, types, mask = _choices(6)
    out = model.train()(input_ids=ids, token_type_ids=types, attention_mask=mask, labels=torch.tensor([1, 0, 1]))
    out.loss.backward()
    assert out.logits.shape == (B, 2) and model.sequence_summary.summary.weight.grad is not None
