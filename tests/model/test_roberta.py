"""RoBERTa models: parity with transformers both ways on a seeded random tiny model (padded batch)."""

from __future__ import annotations

import pytest
import torch
import transformers

from bertkit.errors import ConfigError
from bertkit.model.roberta.modeling import (
    RobertaConfig,
    RobertaForMaskedLM,
    RobertaForSequenceClassification,
    RobertaModel,
    roberta_position_ids,
)

PAD = 1


def _config(**overrides) -> RobertaConfig:
    values = dict(vocab_size=99, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=37,
                  max_position_embeddings=20, type_vocab_size=1, layer_norm_eps=1e-5)
    return RobertaConfig.from_dict({**values, **overrides})


def _hf_config(config: RobertaConfig) -> transformers.RobertaConfig:
    return transformers.RobertaConfig(**config.to_dict())


def _inputs():
    """A padded batch: row 1 has 6 real tokens then padding (id 1, mask 0)."""
    gen = torch.Generator().manual_seed(3)
    ids = torch.randint(5, 99, (3, 17), generator=gen)
    ids[:, 0] = 0  # <s>
    mask = torch.ones_like(ids)
    ids[1, 6:], mask[1, 6:] = PAD, 0
    ids[2, 12:], mask[2, 12:] = PAD, 0
    return ids, mask


def test_position_ids_skip_padding():
    ids = torch.tensor([[0, 7, 8, 2, PAD, PAD], [0, 9, 2, PAD, PAD, PAD]])
    assert roberta_position_ids(ids, PAD).tolist() == [[2, 3, 4, 5, 1, 1], [2, 3, 4, 1, 1, 1]]
    hf = transformers.models.roberta.modeling_roberta.RobertaEmbeddings.create_position_ids_from_input_ids(ids, PAD)
    assert torch.equal(roberta_position_ids(ids, PAD), hf)


def test_transformers_checkpoint_loads_with_parity(tmp_path):
    config = _config()
    torch.manual_seed(0)
    ref = transformers.RobertaForMaskedLM(_hf_config(config)).eval()
    with torch.no_grad():  # a non-zero output bias, so that it is checked too
        ref.lm_head.bias.normal_()
    ref.save_pretrained(tmp_path)
    ours, info = RobertaForMaskedLM.from_pretrained(tmp_path, output_loading_info=True)
    assert info == {"missing_keys": [], "unexpected_keys": []}
    assert isinstance(ours.config, RobertaConfig) and ours.config.model_type == "roberta"
    ids, mask = _inputs()
    real = mask.bool()  # padding positions carry no meaning (bertkit's unpadded path leaves zeros there)
    with torch.no_grad():
        expected = ref(input_ids=ids, attention_mask=mask).logits
        got = ours(ids, attention_mask=mask).logits
    torch.testing.assert_close(got[real], expected[real], atol=1e-5, rtol=1e-5)
    # with labels: the sparse logits and the loss at the labelled positions
    labels = torch.full_like(ids, -100)
    labels[0, 3], labels[1, 2], labels[2, 9] = 11, 12, 13
    with torch.no_grad():
        out = ours(ids, attention_mask=mask, labels=labels)
        ref_loss = ref(input_ids=ids, attention_mask=mask, labels=labels).loss
    torch.testing.assert_close(out.logits, expected[labels != -100], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(out.loss, ref_loss, atol=1e-5, rtol=1e-5)
    # the bare encoder loads from the same checkpoint (its "roberta." prefix stripped)
    backbone = RobertaModel.from_pretrained(tmp_path)
    assert backbone.loading_info["missing_keys"] == ["pooler.dense.bias", "pooler.dense.weight"]
    with torch.no_grad():
        torch.testing.assert_close(backbone(ids, attention_mask=mask).last_hidden_state[real],
                                   ref.roberta(input_ids=ids, attention_mask=mask).last_hidden_state[real],
                                   atol=1e-5, rtol=1e-5)


def test_bertkit_checkpoint_loads_in_transformers(tmp_path):
    config = _config()
    torch.manual_seed(1)
    ours = RobertaForMaskedLM(config).eval()
    with torch.no_grad():
        ours.lm_head.bias.normal_()
    ours.save_pretrained(tmp_path)
    ref, info = transformers.RobertaForMaskedLM.from_pretrained(tmp_path, output_loading_info=True)
    assert not info["missing_keys"] and not info["unexpected_keys"]
    ref.eval()
    ids, mask = _inputs()
    real = mask.bool()
    with torch.no_grad():
        torch.testing.assert_close(ours(ids, attention_mask=mask).logits[real],
                                   ref(input_ids=ids, attention_mask=mask).logits[real], atol=1e-5, rtol=1e-5)
        # without padding, every position
        torch.testing.assert_close(ours(ids[:1]).logits, ref(input_ids=ids[:1]).logits, atol=1e-5, rtol=1e-5)
    # a bare RobertaModel checkpoint loads under transformers' RobertaModel too
    RobertaModel(config).save_pretrained(tmp_path / "bare")
    assert not transformers.RobertaModel.from_pretrained(tmp_path / "bare", output_loading_info=True)[1]["missing_keys"]


@pytest.mark.parametrize("num_labels", [3, 1])
def test_sequence_classification_parity_both_ways(tmp_path, num_labels):
    config = _config(num_labels=num_labels)
    torch.manual_seed(2)
    ref = transformers.RobertaForSequenceClassification(_hf_config(config)).eval()
    ref.save_pretrained(tmp_path / "hf")
    ours, info = RobertaForSequenceClassification.from_pretrained(tmp_path / "hf", output_loading_info=True)
    assert info == {"missing_keys": [], "unexpected_keys": []}
    ids, mask = _inputs()
    labels = torch.tensor([0.5, 1.5, -0.2]) if num_labels == 1 else torch.tensor([0, 2, 1])
    with torch.no_grad():
        a = ours(ids, attention_mask=mask, labels=labels)
        b = ref(input_ids=ids, attention_mask=mask, labels=labels)
    torch.testing.assert_close(a.logits, b.logits, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(a.loss, b.loss, atol=1e-5, rtol=1e-5)
    ours.save_pretrained(tmp_path / "ours")
    back = transformers.RobertaForSequenceClassification.from_pretrained(tmp_path / "ours").eval()
    with torch.no_grad():
        torch.testing.assert_close(back(input_ids=ids, attention_mask=mask).logits, a.logits, atol=1e-5, rtol=1e-5)


def test_masked_lm_checkpoint_starts_a_classifier(tmp_path):
    torch.manual_seed(3)
    RobertaForMaskedLM(_config()).save_pretrained(tmp_path)
    model = RobertaForSequenceClassification.from_pretrained(tmp_path)
    assert sorted(model.loading_info["missing_keys"]) == [
        "classifier.dense.bias", "classifier.dense.weight", "classifier.out_proj.bias", "classifier.out_proj.weight"]


def test_config_round_trip_and_errors(tmp_path):
    config = _config()
    config.save_pretrained(tmp_path)
    hf = transformers.RobertaConfig.from_pretrained(tmp_path)
    assert hf.model_type == "roberta" and hf.pad_token_id == PAD and hf.type_vocab_size == 1
    hf.save_pretrained(tmp_path / "hf")
    again = RobertaConfig.from_pretrained(tmp_path / "hf")
    assert again.max_position_embeddings == 20 and again.layer_norm_eps == 1e-5
    with pytest.raises(ConfigError, match="model_type.*'roberta'"):
        RobertaConfig.from_dict({"model_type": "bert"})


def test_positions_past_the_table_are_refused():
    model = RobertaModel(_config(max_position_embeddings=10)).eval()
    model(torch.full((1, 8), 5))  # positions 2..9 fit
    with pytest.raises(ValueError, match="position ids up to 10"):
        model(torch.full((1, 9), 5))


@pytest.mark.parametrize("name", ["RobertaForTokenClassification", "RobertaForQuestionAnswering",
                                  "RobertaForMultipleChoice"])
def test_task_heads_parity_with_transformers(tmp_path, name):
    import bertkit.model.roberta.modeling as roberta

    config = _config(num_labels=2 if name != "RobertaForTokenClassification" else 5)
    torch.manual_seed(4)
    ref = getattr(transformers, name)(_hf_config(config)).eval()
    ref.save_pretrained(tmp_path)
    ours, info = getattr(roberta, name).from_pretrained(tmp_path, output_loading_info=True)
    assert info == {"missing_keys": [], "unexpected_keys": []}
    ids, mask = _inputs()
    real = mask.bool()
    with torch.no_grad():
        if name == "RobertaForMultipleChoice":  # (B, C, T): the 3 rows as 3 choices of one question
            a = ours(ids[None], attention_mask=mask[None], labels=torch.tensor([2]))
            b = ref(input_ids=ids[None], attention_mask=mask[None], labels=torch.tensor([2]))
            torch.testing.assert_close(a.logits, b.logits, atol=1e-5, rtol=1e-5)
            torch.testing.assert_close(a.loss, b.loss, atol=1e-5, rtol=1e-5)
        elif name == "RobertaForQuestionAnswering":
            a, b = ours(ids, attention_mask=mask), ref(input_ids=ids, attention_mask=mask)
            torch.testing.assert_close(a.start_logits[real], b.start_logits[real], atol=1e-5, rtol=1e-5)
            torch.testing.assert_close(a.end_logits[real], b.end_logits[real], atol=1e-5, rtol=1e-5)
        else:
            labels = torch.where(real, ids % 5, -100)
            a = ours(ids, attention_mask=mask, labels=labels)
            b = ref(input_ids=ids, attention_mask=mask, labels=labels)
            torch.testing.assert_close(a.logits[real], b.logits[real], atol=1e-5, rtol=1e-5)
            torch.testing.assert_close(a.loss, b.loss, atol=1e-5, rtol=1e-5)
    ours.save_pretrained(tmp_path / "ours")
    assert not getattr(transformers, name).from_pretrained(tmp_path / "ours", output_loading_info=True)[1]["missing_keys"]
