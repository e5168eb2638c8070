"""The inference layer's attention weights against transformers' `output_attentions`
on the real MiniLM checkpoint, and the per-position masked-LM candidates against
`fill_mask` on a text with that token masked."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from bertkit.errors import BertkitError
from bertkit.inference import attention_map, load_encoder, position_candidates


def test_weights_match_transformers_output_attentions(minilm_dir):
    transformers = pytest.importorskip("transformers")
    text, pair = "The animal didn't cross the street because it was too tired.", "It was tired."
    ours = attention_map(text, minilm_dir, pair=pair)
    tokenizer = transformers.AutoTokenizer.from_pretrained(minilm_dir)
    reference = transformers.BertModel.from_pretrained(minilm_dir, attn_implementation="eager").eval()
    encoded = tokenizer(text, pair, return_tensors="pt")
    with torch.inference_mode():
        expected = torch.stack(reference(**encoded, output_attentions=True).attentions)[:, 0].numpy()
    assert ours.tokens == tokenizer.convert_ids_to_tokens(encoded["input_ids"][0])
    assert ours.token_type_ids == encoded["token_type_ids"][0].tolist()
    assert ours.attentions.shape == expected.shape == (6, 12, len(ours.tokens), len(ours.tokens))
    np.testing.assert_allclose(ours.attentions, expected, atol=1e-5)
    np.testing.assert_allclose(ours.attentions.sum(-1), 1.0, atol=1e-5)
    assert not ours.truncated


def test_long_input_is_capped(minilm_dir):
    loaded = load_encoder(minilm_dir)
    text = " ".join(["word"] * 300)
    result = attention_map(text, loaded, max_length=16)
    assert result.kept == 16 and result.total_tokens == 302 and result.truncated
    assert result.tokens[0] == "[CLS]" and result.tokens[-1] == "[SEP]"
    assert result.attentions.shape[-2:] == (16, 16)


def test_empty_text_is_refused(minilm_dir):
    with pytest.raises(BertkitError, match="text: must be a non-empty string"):
        attention_map("  ", load_encoder(minilm_dir))


def test_position_candidates_equal_fill_mask(tmp_path):
    """Masking position i of the ids gives the same top-k as fill_mask on the text with
    that word replaced by [MASK] (a whole-word token, so both inputs are the same ids)."""
    from bertkit import BertConfig, BertForPreTraining, Tokenizer
    from bertkit.inference import fill_mask, load_masked_lm

    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "cat", "sat", "on", "mat", "."]
    torch.manual_seed(0)
    config = BertConfig.from_preset("tiny", vocab_size=len(vocab), hidden_size=32, num_attention_heads=2,
                                    intermediate_size=64, max_position_embeddings=32)
    BertForPreTraining(config).save_pretrained(tmp_path)
    Tokenizer.from_wordpiece_vocab(vocab).save_pretrained(tmp_path)
    loaded = load_masked_lm(tmp_path)
    attention = attention_map("the cat sat on the mat .", loaded)
    candidates = position_candidates(attention, loaded, top_k=3)
    assert candidates[0] is None and candidates[-1] is None  # [CLS], [SEP]
    expected = fill_mask("the [MASK] sat on the mat .", loaded, top_k=3)[0]
    assert [c["token_id"] for c in candidates[2]] == [c["token_id"] for c in expected]
    np.testing.assert_allclose([c["score"] for c in candidates[2]], [c["score"] for c in expected], atol=1e-6)
