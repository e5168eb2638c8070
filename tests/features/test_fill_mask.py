"""fill-mask against a transformers BertForMaskedLM with the same weights."""

from __future__ import annotations

import shutil

import pytest
import torch
import transformers

from bertkit.errors import BertkitError
from bertkit.fill_mask import fill_mask


@pytest.fixture(scope="module")
def mlm_dir(tmp_path_factory, minilm_dir):
    """A seeded random tiny BertForMaskedLM (HF-saved) with the real uncased vocab."""
    path = tmp_path_factory.mktemp("mlm")
    torch.manual_seed(0)
    cfg = transformers.BertConfig(vocab_size=30522, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                                  intermediate_size=64, max_position_embeddings=64)
    transformers.BertForMaskedLM(cfg).save_pretrained(path)
    shutil.copy(minilm_dir / "vocab.txt", path / "vocab.txt")
    shutil.copy(minilm_dir / "tokenizer_config.json", path / "tokenizer_config.json")
    return path


def test_fill_mask_matches_transformers(mlm_dir):
    text = "Paris is a beautiful [MASK] and [MASK] too."
    got = fill_mask(text, model=mlm_dir, top_k=3)
    ref_tok = transformers.BertTokenizerFast.from_pretrained(mlm_dir)
    ref = transformers.BertForMaskedLM.from_pretrained(mlm_dir).eval()
    batch = ref_tok(text, return_tensors="pt")
    with torch.no_grad():
        probs = ref(**batch).logits[0].softmax(-1)
    positions = (batch["input_ids"][0] == ref_tok.mask_token_id).nonzero().flatten()
    assert len(got) == 2
    for predictions, pos in zip(got, positions):
        top = probs[pos].topk(3)
        assert [p["token_id"] for p in predictions] == top.indices.tolist()
        assert [p["score"] for p in predictions] == pytest.approx(top.values.tolist(), abs=1e-5)
    first = got[0][0]
    assert first["sequence"].startswith("Paris is a beautiful ") and first["sequence"].endswith("and [MASK] too.")
    assert first["token"] in first["sequence"]


def test_checkpoint_without_mlm_head_is_a_clear_error(minilm_dir):
    with pytest.raises(BertkitError, match="checkpoint has no MLM head"):
        fill_mask("Paris is a [MASK].", model=minilm_dir)


def test_text_without_mask(mlm_dir):
    with pytest.raises(BertkitError, match=r"text has no \[MASK\] token"):
        fill_mask("Paris is nice.", model=mlm_dir)
