"""Tokenizer properties on arbitrary Unicode: bertkit's ids, tokens, token types and offsets
equal transformers' fast tokenizer loaded from the same files — for the real MiniLM
vocabulary (vocab.txt) and for a tokenizer of each algorithm bertkit trains — and the
byte-level BPE decodes back to its input."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from transformers import AutoTokenizer

from bertkit.tokenization import Tokenizer
from bertkit.tokenization.train import ALGORITHMS, TrainOptions, train_tokenizer
from tests.hardening.strategies import TRICKY, texts

CORPUS_LINES = [
    "The bank raised its rates; we sat on the river bank.",
    "Naïve café owners don't résumé — they re-open at 9am!",
    "영화가 정말 재미있었어요. 배우들의 연기가 좋았다.",
    "日本語のテキストと中文文本 with emoji \U0001f600 and ﬁ ligatures.",
    " ".join(TRICKY),
]


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("tok")
    corpus = root / "corpus.txt"
    corpus.write_text("\n".join(CORPUS_LINES * 20) + "\n", encoding="utf-8")
    folders = {}
    for algorithm in ALGORITHMS:
        folders[algorithm] = root / algorithm
        train_tokenizer([corpus], folders[algorithm], TrainOptions(algorithm=algorithm, vocab_size=300,
                                                                   show_progress=False))
    return folders


def assert_same_encoding(ours: Tokenizer, theirs, text: str, pair: str | None) -> None:
    if pair == "":
        # transformers' single-text call drops an empty second text (`if text_pair`), its
        # batch call keeps it: bertkit keeps it in both, so compare with the batch call
        mine = {k: v[0] for k, v in ours([text], [pair], return_offsets_mapping=True).items()}
        reference = {k: v[0] for k, v in theirs([text], [pair], return_offsets_mapping=True).items()}
        assert ours(text, pair)["input_ids"] == mine["input_ids"]
    else:
        mine = ours(text, pair, return_offsets_mapping=True)
        reference = theirs(text, pair, return_offsets_mapping=True)
    assert mine["input_ids"] == reference["input_ids"]
    assert ours.convert_ids_to_tokens(mine["input_ids"]) == theirs.convert_ids_to_tokens(reference["input_ids"])
    assert [tuple(o) for o in mine["offset_mapping"]] == [tuple(o) for o in reference["offset_mapping"]]
    if "token_type_ids" in reference:
        assert mine["token_type_ids"] == reference["token_type_ids"]
    assert mine["attention_mask"] == reference["attention_mask"]


@pytest.fixture(scope="module")
def minilm_pair(minilm_dir):
    return Tokenizer.from_pretrained(minilm_dir), AutoTokenizer.from_pretrained(minilm_dir)


@given(text=texts(0, 60), pair=st.none() | texts(0, 30))
def test_the_real_bert_vocabulary_matches_transformers_on_any_text(minilm_pair, text, pair):
    assert_same_encoding(*minilm_pair, text, pair)


@pytest.mark.parametrize("algorithm", ALGORITHMS)
@given(text=texts(0, 60), pair=st.none() | texts(0, 30))
def test_trained_tokenizers_match_transformers_on_any_text(trained, algorithm, text, pair):
    ours, theirs = _pair(trained[algorithm])
    assert_same_encoding(ours, theirs, text, pair)


@given(text=texts(0, 60))
def test_byte_level_bpe_decodes_back_to_its_normalized_text(trained, text):
    """Byte-level BPE loses nothing after normalization (which bertkit's bbpe applies:
    BERT's text options, runs of spaces collapsed, the ends stripped): no [UNK], no byte lost."""
    ours, _ = _pair(trained["bbpe"])
    ids = ours(text, add_special_tokens=False)["input_ids"]
    assert ours.unk_token_id not in ids
    assert ours.decode(ids).strip() == ours.backend.normalizer.normalize_str(text)


_CACHE: dict[Path, tuple] = {}


def _pair(folder: Path):
    if folder not in _CACHE:
        _CACHE[folder] = (Tokenizer.from_pretrained(folder), AutoTokenizer.from_pretrained(folder))
    return _CACHE[folder]
