"""A tokenizer.json without a decoder decodes as text: the decoder its model and pre-tokenizer
imply, checked against the same pipeline serialized with its decoder."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tokenizers import Tokenizer as RustTokenizer
from tokenizers import decoders, models, pre_tokenizers, trainers

from bertkit.tokenization import Tokenizer
from bertkit.tokenization.decoding import default_decoder

AUSTEN = Path(__file__).resolve().parents[1] / "fixtures" / "austen_small.txt"
DECODER_TYPE = {"bytelevel": "ByteLevel", "metaspace": "Metaspace", "wordpiece": "WordPiece"}
SAMPLE = "It is a truth universally acknowledged, that a single man must be in want of a wife."


def _trained(kind: str) -> RustTokenizer:
    specials = ["[UNK]", "[CLS]", "[SEP]", "[PAD]", "[MASK]"]
    if kind == "bytelevel":
        backend = RustTokenizer(models.BPE(unk_token="[UNK]"))
        backend.pre_tokenizer, backend.decoder = pre_tokenizers.ByteLevel(add_prefix_space=True), decoders.ByteLevel()
        trainer = trainers.BpeTrainer(vocab_size=400, special_tokens=specials, show_progress=False,
                                      initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    elif kind == "metaspace":
        backend = RustTokenizer(models.Unigram())
        backend.pre_tokenizer, backend.decoder = pre_tokenizers.Metaspace(), decoders.Metaspace()
        trainer = trainers.UnigramTrainer(vocab_size=400, special_tokens=specials, unk_token="[UNK]", show_progress=False)
    else:
        backend = RustTokenizer(models.WordPiece(unk_token="[UNK]"))
        backend.pre_tokenizer, backend.decoder = pre_tokenizers.BertPreTokenizer(), decoders.WordPiece()
        trainer = trainers.WordPieceTrainer(vocab_size=400, special_tokens=specials, show_progress=False)
    backend.train([str(AUSTEN)], trainer)
    return backend


@pytest.mark.parametrize("kind", ["bytelevel", "metaspace", "wordpiece"])
def test_missing_decoder_is_filled_in_from_the_pipeline(tmp_path, kind):
    backend = _trained(kind)
    with_decoder = Tokenizer(RustTokenizer.from_str(backend.to_str()))
    spec = json.loads(backend.to_str())
    spec["decoder"] = None
    (tmp_path / "tokenizer.json").write_text(json.dumps(spec), encoding="utf-8")
    without = Tokenizer.from_pretrained(tmp_path)
    assert json.loads(without.backend.to_str())["decoder"]["type"] == DECODER_TYPE[kind]
    ids = with_decoder(SAMPLE)["input_ids"]
    assert len(ids) > 20
    assert without.decode(ids) == with_decoder.decode(ids)
    assert "\u0120" not in without.decode(ids) and "\u2581" not in without.decode(ids) and "##" not in without.decode(ids)


def test_a_word_level_model_keeps_plain_joining():
    backend = RustTokenizer(models.WordLevel({"a": 0, "[UNK]": 1}, unk_token="[UNK]"))
    assert default_decoder(backend) is None
