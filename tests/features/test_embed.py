"""bertkit.embed against transformers hidden states on the real checkpoint."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import transformers

import bertkit
from bertkit import BertModel, Tokenizer
from bertkit.errors import BertkitError
from bertkit.features import select_layers

TEXTS = [
    "A short one.",
    "The bank raised interest rates, and markets fell sharply in early trading on Tuesday.",
    "Hello world",
    "",
    "Contextual embeddings differ between sentences.",
]


@pytest.fixture(scope="module")
def loaded(minilm_dir):
    return BertModel.from_pretrained(minilm_dir), Tokenizer.from_pretrained(minilm_dir)


@pytest.fixture(scope="module")
def reference(minilm_dir):
    tok = transformers.BertTokenizerFast.from_pretrained(minilm_dir)
    model = transformers.BertModel.from_pretrained(minilm_dir).eval()
    batch = tok(TEXTS, padding=True, return_tensors="pt")
    with torch.no_grad():
        out = model(**batch, output_hidden_states=True)
    return batch["attention_mask"], out


def _mean(hidden, mask):
    m = mask.unsqueeze(-1).float()
    return ((hidden * m).sum(1) / m.sum(1)).numpy()


@pytest.mark.parametrize("layers", ["last", "second_to_last", "sum_last_four", "concat_last_four", "weighted_sum", "embeddings"])
def test_layer_features_match_reference(loaded, reference, layers):
    model, tokenizer = loaded
    mask, out = reference
    hs = out.hidden_states
    expected_tokens = {
        "last": hs[-1], "second_to_last": hs[-2], "sum_last_four": sum(hs[-4:]),
        "concat_last_four": torch.cat(hs[-4:], -1), "weighted_sum": torch.stack(hs).mean(0), "embeddings": hs[0],
    }[layers]
    got = bertkit.embed(TEXTS, model=model, tokenizer=tokenizer, layers=layers, batch_size=2)
    assert got.shape == (len(TEXTS), 384 * (4 if layers == "concat_last_four" else 1)) and got.dtype == np.float32
    np.testing.assert_allclose(got, _mean(expected_tokens, mask), atol=2e-5)


def test_cls_pooler_and_token_outputs(loaded, reference):
    model, tokenizer = loaded
    mask, out = reference
    cls = bertkit.embed(TEXTS, model=model, tokenizer=tokenizer, pooling="cls", batch_size=3)
    np.testing.assert_allclose(cls, out.last_hidden_state[:, 0].numpy(), atol=2e-5)
    pooled = bertkit.embed(TEXTS, model=model, tokenizer=tokenizer, pooling="pooler")
    np.testing.assert_allclose(pooled, out.pooler_output.numpy(), atol=2e-5)
    tokens = bertkit.embed(TEXTS, model=model, tokenizer=tokenizer, pooling="none")
    for i, feats in enumerate(tokens):
        length = int(mask[i].sum())
        assert feats.shape == (length, 384)
        np.testing.assert_allclose(feats, out.last_hidden_state[i, :length].numpy(), atol=2e-5)


def test_weighted_sum_with_given_weights_and_normalize(loaded, reference):
    model, tokenizer = loaded
    mask, out = reference
    weights = [0, 0, 0, 0, 0, 0.5, 0.5]
    got = bertkit.embed(TEXTS, model=model, tokenizer=tokenizer, layers="weighted_sum", layer_weights=weights, normalize=True)
    expected = _mean((out.hidden_states[-1] + out.hidden_states[-2]) / 2, mask)
    expected /= np.linalg.norm(expected, axis=1, keepdims=True)
    np.testing.assert_allclose(got, expected, atol=2e-5)


def test_order_is_kept_for_many_texts_and_directory_loading(minilm_dir, loaded):
    texts = [("word " * n).strip() for n in (5, 1, 40, 3, 12, 7, 0, 22)]
    from_dir = bertkit.embed(texts, model=minilm_dir, batch_size=3)  # its modules.json: mean, then Normalize
    one_by_one = np.stack([bertkit.embed([t], model=loaded[0], tokenizer=loaded[1], normalize=True)[0] for t in texts])
    np.testing.assert_allclose(from_dir, one_by_one, atol=2e-5)


def test_bad_arguments(loaded):
    model, tokenizer = loaded
    with pytest.raises(BertkitError, match="pooling: unknown choice 'max'"):
        bertkit.embed(["x"], model=model, tokenizer=tokenizer, pooling="max")
    with pytest.raises(BertkitError, match="single string"):
        bertkit.embed("x", model=model, tokenizer=tokenizer)
    with pytest.raises(BertkitError, match="layer_weights: expected 7 values"):
        bertkit.embed(["x"], model=model, tokenizer=tokenizer, layers="weighted_sum", layer_weights=[1.0])
    with pytest.raises(BertkitError, match="tokenizer: required"):
        bertkit.embed(["x"], model=model)
    assert bertkit.embed([], model=model, tokenizer=tokenizer).shape == (0, 384)


def test_select_layers_needs_four_layers():
    hs = tuple(torch.zeros(1, 2, 4) for _ in range(3))
    with pytest.raises(BertkitError, match="at least 4 layers"):
        select_layers(hs, "sum_last_four")
