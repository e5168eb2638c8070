"""BertModel / BertForPreTraining against transformers (the reference), no network."""

from __future__ import annotations

import pytest
import torch
import transformers

from bertkit import BertConfig, BertForPreTraining, BertModel

TEXTS_A = ["The bank raised interest rates.", "We sat on the river bank and watched the boats.", "Hello!"]
TEXTS_B = ["Markets fell sharply.", None, "A much longer second segment that makes this row the longest of all."]


def _padded_pair_batch(model_dir):
    """A padded batch mixing single sentences and sentence pairs (HF tokenizer = reference input)."""
    tok = transformers.BertTokenizerFast.from_pretrained(model_dir)
    rows = [tok(a, b) if b else tok(a) for a, b in zip(TEXTS_A, TEXTS_B)]
    return tok.pad(rows, return_tensors="pt")


def test_real_checkpoint_matches_transformers(minilm_dir):
    batch = _padded_pair_batch(minilm_dir)
    assert (batch["attention_mask"] == 0).any() and (batch["token_type_ids"] == 1).any()
    ours = BertModel.from_pretrained(minilm_dir)
    assert ours.loading_info == {"missing_keys": [], "unexpected_keys": []}
    ref = transformers.BertModel.from_pretrained(minilm_dir, attn_implementation="sdpa").eval()
    with torch.no_grad():
        a = ours(input_ids=batch["input_ids"], token_type_ids=batch["token_type_ids"], attention_mask=batch["attention_mask"], output_hidden_states=True)
        b = ref(**batch, output_hidden_states=True)
    real = batch["attention_mask"].bool()
    assert len(a.hidden_states) == len(b.hidden_states) == 7
    for mine, theirs in zip(a.hidden_states, b.hidden_states):
        assert (mine[real] - theirs[real]).abs().max() < 1e-5
    assert (a.last_hidden_state[real] - b.last_hidden_state[real]).abs().max() < 1e-5
    assert (a.pooler_output - b.pooler_output).abs().max() < 1e-5


def test_attentions_match_transformers_eager(minilm_dir):
    batch = _padded_pair_batch(minilm_dir)
    ours = BertModel.from_pretrained(minilm_dir)
    ref = transformers.BertModel.from_pretrained(minilm_dir, attn_implementation="eager").eval()
    with torch.no_grad():
        a = ours(input_ids=batch["input_ids"], token_type_ids=batch["token_type_ids"], attention_mask=batch["attention_mask"], output_attentions=True)
        b = ref(**batch, output_attentions=True)
    assert len(a.attentions) == 6 and a.attentions[0].shape == (3, 12, batch["input_ids"].shape[1], batch["input_ids"].shape[1])
    for mine, theirs in zip(a.attentions, b.attentions):
        assert (mine - theirs).abs().max() < 1e-5
    # probabilities over padded keys are zero, rows sum to one
    assert a.attentions[0][1, :, :, batch["attention_mask"][1] == 0].abs().max() == 0
    torch.testing.assert_close(a.attentions[0].sum(-1), torch.ones_like(a.attentions[0].sum(-1)))


def _hf_config(cfg: BertConfig) -> transformers.BertConfig:
    return transformers.BertConfig(**{k: v for k, v in cfg.to_dict().items() if k != "pre_layer_norm"})


def test_pretraining_parity_with_copied_weights(tiny_config):
    torch.manual_seed(0)
    ref = transformers.BertForPreTraining(_hf_config(tiny_config)).eval()
    ours = BertForPreTraining(tiny_config).eval()
    result = ours.load_state_dict(
        {k: v for k, v in ref.state_dict().items() if not k.startswith("cls.predictions.decoder")}, strict=False
    )
    assert result.missing_keys == [] and result.unexpected_keys == []
    gen = torch.Generator().manual_seed(1)
    ids = torch.randint(5, 120, (4, 16), generator=gen)
    mask = torch.ones_like(ids)
    mask[2, 11:] = 0
    types = torch.zeros_like(ids)
    types[:, 8:] = 1
    labels = torch.full_like(ids, -100)
    labels[0, 3] = 7
    labels[1, [2, 9]] = torch.tensor([50, 51])
    labels[3, 15] = 99
    nsp = torch.tensor([0, 1, 1, 0])
    with torch.no_grad():
        a = ours(input_ids=ids, token_type_ids=types, attention_mask=mask, labels=labels, next_sentence_label=nsp)
        b = ref(input_ids=ids, token_type_ids=types, attention_mask=mask, labels=labels, next_sentence_label=nsp)
        full = ours(input_ids=ids, token_type_ids=types, attention_mask=mask)
    torch.testing.assert_close(a.loss, b.loss, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(a.seq_relationship_logits, b.seq_relationship_logits, atol=1e-5, rtol=1e-5)
    # sparse logits = reference logits at the labelled positions
    rows, cols = a.masked_positions[:, 0], a.masked_positions[:, 1]
    assert a.prediction_logits.shape == (4, 120)
    torch.testing.assert_close(a.prediction_logits, b.prediction_logits[rows, cols], atol=1e-5, rtol=1e-5)
    real = mask.bool()  # at padding the unpadded encoder path gives zeros (bertkit.model.unpad)
    torch.testing.assert_close(full.prediction_logits[real], b.prediction_logits[real], atol=1e-5, rtol=1e-5)


def test_pre_layer_norm_variant(tiny_config):
    cfg = BertConfig.from_dict({**tiny_config.to_dict(), "pre_layer_norm": True})
    model = BertModel(cfg).eval()
    assert model.encoder.final_layer_norm is not None
    ids = torch.randint(0, 120, (2, 10))
    out = model(ids, output_hidden_states=True)
    # the final LayerNorm normalizes the last hidden state
    last = out.last_hidden_state
    torch.testing.assert_close(last.mean(-1), torch.zeros(2, 10), atol=1e-5, rtol=0)
    assert len(out.hidden_states) == 3
    # pre-LN differs from post-LN on the same weights
    post = BertModel(tiny_config).eval()
    post.load_state_dict({k: v for k, v in model.state_dict().items() if "final_layer_norm" not in k})
    assert not torch.allclose(post(ids).last_hidden_state, last)


def test_padding_does_not_change_real_tokens(tiny_config):
    torch.manual_seed(0)
    model = BertModel(tiny_config).eval()
    ids = torch.randint(5, 120, (1, 7))
    padded = torch.cat([ids, torch.zeros(1, 5, dtype=torch.long)], dim=1)
    mask = torch.cat([torch.ones(1, 7), torch.zeros(1, 5)], dim=1).long()
    with torch.no_grad():
        short = model(ids).last_hidden_state
        long = model(padded, attention_mask=mask).last_hidden_state[:, :7]
    torch.testing.assert_close(short, long, atol=1e-5, rtol=1e-5)


def test_too_long_input_is_a_clear_error(tiny_config):
    model = BertModel(tiny_config)
    with pytest.raises(ValueError, match="max_position_embeddings"):
        model(torch.zeros(1, 65, dtype=torch.long))


def test_output_indexing(tiny_config):
    out = BertModel(tiny_config).eval()(torch.ones(1, 4, dtype=torch.long))
    assert out[0] is out.last_hidden_state and out["pooler_output"] is out.pooler_output


def test_no_masked_positions_gives_zero_mlm_loss(tiny_config):
    model = BertForPreTraining(tiny_config)
    ids = torch.randint(5, 120, (2, 6))
    out = model(ids, labels=torch.full_like(ids, -100), next_sentence_label=torch.tensor([0, 1]))
    assert out.prediction_logits.shape == (0, 120) and torch.isfinite(out.loss)
    out.loss.backward()
