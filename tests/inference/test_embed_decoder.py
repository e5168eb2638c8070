"""embed and export onnx on a pre-trained GPT (no pad token): padded with EOS on the right,
and the sentence vector is the mean of the last hidden states over the real tokens, equal to
running the model on each text alone."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from _gpt_checkpoint import build_gpt_checkpoint

from bertkit.cli import main
from bertkit.inference.embedding import embed

TEXTS = ["It is a truth universally acknowledged", "A cat", "The cute dog walks in the green park."]


@pytest.fixture(scope="module")
def gpt_dir(tmp_path_factory):
    return build_gpt_checkpoint(tmp_path_factory.mktemp("gpt"))


def test_embed_gpt_is_the_mean_over_real_tokens_of_each_text_alone(gpt_dir):
    from bertkit import GPT2Model
    from bertkit.tokenization import Tokenizer

    vectors = embed(TEXTS, model=gpt_dir, batch_size=3)
    tok, model = Tokenizer.from_pretrained(gpt_dir), GPT2Model.from_pretrained(gpt_dir).eval()
    assert tok.pad_token is None and tok.with_eos_padding(model.config.eos_token_id).pad_token == "<|endoftext|>"
    with torch.no_grad():
        direct = [model(input_ids=torch.tensor([tok.encode(t)])).last_hidden_state[0].mean(0).numpy() for t in TEXTS]
    np.testing.assert_allclose(vectors, np.stack(direct), rtol=1e-5, atol=1e-5)
    assert embed(TEXTS[:1], model=gpt_dir).shape == (1, model.config.n_embd)


def test_embed_and_export_commands_run_on_gpt(gpt_dir, tmp_path, capsys):
    assert main(["embed", "--model", str(gpt_dir), "--output", str(tmp_path / "v.npy"), *TEXTS[:2]]) == 0
    assert np.load(tmp_path / "v.npy").shape[0] == 2
    pytest.importorskip("onnx")
    assert main(["export", "onnx", "--model", str(gpt_dir), "--output", str(tmp_path / "m.onnx")]) == 0
