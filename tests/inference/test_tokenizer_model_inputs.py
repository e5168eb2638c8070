"""A tokenizer gives exactly the inputs its model takes (model_input_names), and what bertkit
saves loads in transformers the same way: `model(**tok(...))` works for GPT and BART."""

from __future__ import annotations

import logging

import pytest
import torch
from _bart_checkpoint import build_bart_checkpoint
from _gpt_checkpoint import build_gpt_checkpoint

from bertkit.tokenization import Tokenizer

transformers = pytest.importorskip("transformers")


def test_gpt_model_called_with_tokenizer_output_equals_ids_and_mask(tmp_path):
    from bertkit import GPT2LMHeadModel

    directory = build_gpt_checkpoint(tmp_path / "gpt")
    tok, model = Tokenizer.from_pretrained(directory), GPT2LMHeadModel.from_pretrained(directory).eval()
    enc = tok(["It is a truth"], return_tensors="pt")
    assert set(enc) == {"input_ids", "attention_mask"} == set(transformers.AutoTokenizer.from_pretrained(directory)(
        ["It is a truth"], return_tensors="pt"))
    with torch.no_grad():
        torch.testing.assert_close(model(**enc).logits,
                                   model(input_ids=enc["input_ids"], attention_mask=enc["attention_mask"]).logits,
                                   rtol=0, atol=0)
    assert set(tok(["It is", "a truth"], ["x", "y"], return_token_type_ids=True)) >= {"token_type_ids"}


def test_transformers_generates_from_a_saved_bertkit_bart(tmp_path):
    directory = build_bart_checkpoint(tmp_path / "bart")
    tok = transformers.AutoTokenizer.from_pretrained(directory)
    assert "token_type_ids" not in tok.model_input_names
    model = transformers.BartForConditionalGeneration.from_pretrained(directory).eval()
    out = model.generate(**tok(["The cute dog walks"], return_tensors="pt"), max_new_tokens=3, do_sample=False)
    assert out.shape[0] == 1
    assert set(Tokenizer.from_pretrained(directory)("The cute dog")) == {"input_ids", "attention_mask"}


def test_saved_bpe_tokenizer_decodes_in_transformers_without_the_clean_up_warning(tmp_path):
    directory = build_bart_checkpoint(tmp_path / "bart")
    messages: list[str] = []
    handler = logging.Handler()
    handler.emit = lambda record: messages.append(record.getMessage())  # type: ignore[method-assign]
    root = transformers.utils.logging.get_logger("transformers")
    root.addHandler(handler)
    logging.Logger.warning_once.cache_clear()  # an earlier test may have had the warning already
    try:
        tok = transformers.AutoTokenizer.from_pretrained(directory)
        assert tok.decode(tok("The cute dog, walks .")["input_ids"], skip_special_tokens=True) == "The cute dog, walks ."
    finally:
        root.removeHandler(handler)
    assert not [m for m in messages if "clean_up_tokenization_spaces" in m]
