"""Unigram tokenizers that bertkit trains: layouts (xlnet, t5, albert), sentinels, Korean,
determinism, and parity with transformers loading the same directory."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from transformers import AutoTokenizer

from bertkit.cli import main
from bertkit.errors import BertkitError, ConfigError
from bertkit.tokenization import Tokenizer
from bertkit.tokenization.train import TrainOptions, train_tokenizer
from bertkit.tokenization.train.corpus import CorpusSource, count_words
from bertkit.tokenization.train.options import TextOptions

FIXTURES = Path(__file__).parents[1] / "fixtures"
NSMC = FIXTURES / "nsmc_small.txt.gz"  # Korean movie reviews (cut_nsmc_reviews.py)
AUSTEN = FIXTURES / "austen_small.txt"
TEXTS = [
    "아 더빙.. 진짜 짜증나네요 목소리",
    "It is a truth universally acknowledged, that a single man",
    "ＦＵＬＬ width  and\ttabs <mask> here",
    "x",
]
NSMC_LINE = "흠...포스터보고 초딩영화줄....오버연기조차 가볍지 않구나"
PAIRS = ["흠...포스터보고 초딩영화줄....오버연기조차", "Mr. Darcy", "second text", "y z"]


def train(tmp_path: Path, name: str, **options) -> Path:
    out = tmp_path / name
    train_tokenizer([NSMC, AUSTEN], out, TrainOptions(algorithm="unigram", show_progress=False, workers=1, **options))
    return out


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("unigram")
    return {
        "xlnet": train(root, "xlnet", vocab_size=1500),
        "t5": train(root, "t5", vocab_size=1500, sentinels=10),
        "albert": train(root, "albert", vocab_size=1500, layout="albert"),
    }


def as_lists(encoding) -> dict:
    return {k: [[tuple(x) if isinstance(x, (list, tuple)) else x for x in row] for row in v] for k, v in encoding.items()}


@pytest.mark.parametrize("layout", ["xlnet", "t5", "albert"])
def test_trained_tokenizer_matches_transformers(trained, layout):
    ours = Tokenizer.from_pretrained(trained[layout])
    theirs = AutoTokenizer.from_pretrained(trained[layout])
    assert ours.padding_side == theirs.padding_side == ("left" if layout == "xlnet" else "right")
    assert len(ours) == len(theirs)
    for name in ("pad", "unk", "eos", "bos", "cls", "sep", "mask"):
        if getattr(theirs, f"{name}_token") is not None:  # bertkit may find more roles (T5: sep = </s>)
            assert getattr(ours, f"{name}_token_id") == getattr(theirs, f"{name}_token_id"), name
    for kwargs in (
        {},
        {"padding": True},
        {"padding": "max_length", "max_length": 24, "truncation": True},
        {"truncation": "only_second", "max_length": 40, "padding": True},
        {"truncation": True, "max_length": 16, "padding": True, "pad_to_multiple_of": 8},
    ):
        for pairs in (None, PAIRS):
            if pairs is None and kwargs.get("truncation") == "only_second":
                continue
            a = ours(TEXTS, pairs, return_offsets_mapping=True, **kwargs)
            b = theirs(TEXTS, pairs, return_offsets_mapping=True, return_token_type_ids=True, **kwargs)
            assert as_lists(a) == as_lists({k: b[k] for k in a}), (layout, kwargs, pairs)
    # SQuAD-style windows: only_second with stride and overflow rows, padded (XLNet: on the left)
    windows = dict(truncation="only_second", max_length=20, stride=4, return_overflowing_tokens=True)
    questions, contexts = ["짜증나네요?", "Who?"], [TEXTS[0] * 3, TEXTS[1] + " " + PAIRS[0]]
    a = ours(questions, contexts, padding="max_length", return_offsets_mapping=True, return_token_type_ids=True,
             **windows)
    b = theirs(questions, contexts, padding="max_length", return_offsets_mapping=True, return_token_type_ids=True, **windows)
    assert len(a["input_ids"]) > 2 and a["overflow_to_sample_mapping"] == b["overflow_to_sample_mapping"]
    fields = ("input_ids", "token_type_ids", "attention_mask", "offset_mapping")
    assert as_lists({k: a[k] for k in fields}) == as_lists({k: b[k] for k in fields}), layout
    assert [a.sequence_ids(i) for i in range(len(a["input_ids"]))] == [b.sequence_ids(i) for i in range(len(b["input_ids"]))]
    tensors = ours(TEXTS, PAIRS, padding=True, return_tensors="np")
    assert (tensors["input_ids"] == ours(TEXTS, PAIRS, padding=True)["input_ids"]).all()
    assert ours.decode(ours.encode(TEXTS[0])) == theirs.decode(theirs.encode(TEXTS[0]), skip_special_tokens=True)


def test_xlnet_layout(trained):
    tok = Tokenizer.from_pretrained(trained["xlnet"])
    vocab = tok.get_vocab()
    assert [vocab[t] for t in ("<unk>", "<s>", "</s>", "<cls>", "<sep>", "<pad>", "<mask>", "<eod>", "<eop>")] == list(
        range(9)
    )
    enc = tok(["short", "a longer text here"], ["b", "c"], padding=True)
    long_row = enc["input_ids"][1]
    assert long_row[-1] == tok.cls_token_id and long_row.count(tok.sep_token_id) == 2
    short = enc["input_ids"][0]
    n_pad = enc["attention_mask"][0].count(0)
    assert n_pad > 0 and short[:n_pad] == [tok.pad_token_id] * n_pad and short[-1] == tok.cls_token_id
    assert enc["attention_mask"][0] == [0] * n_pad + [1] * (len(short) - n_pad)
    types = enc["token_type_ids"][1]
    first_sep = long_row.index(tok.sep_token_id)
    assert set(types[: first_sep + 1]) == {0} and set(types[first_sep + 1 : -1]) == {1} and types[-1] == 2
    assert enc.tokens(0)[:n_pad] == ["<pad>"] * n_pad
    assert tok(["a", "bb cc"], padding=True, padding_side="right")["attention_mask"][0][-1] == 0
    # pad() (rows regrouped later) and arrays pad on the same side
    rows = tok(["short", "a longer text here"], ["b", "c"])
    repadded = tok.pad({"input_ids": rows["input_ids"], "token_type_ids": rows["token_type_ids"]})
    assert repadded["input_ids"] == enc["input_ids"] and repadded["attention_mask"] == enc["attention_mask"]
    assert repadded["token_type_ids"] == enc["token_type_ids"]
    arrays = tok(["short", "a longer text here"], ["b", "c"], padding=True, return_tensors="np")
    assert arrays["input_ids"].tolist() == enc["input_ids"] and arrays["attention_mask"].tolist() == enc["attention_mask"]
    assert tok.bos_token == "<s>" and tok.eos_token == "</s>"
    assert tok.additional_special_tokens == ["<eod>", "<eop>"]


def test_t5_layout_and_sentinels(trained):
    tok = Tokenizer.from_pretrained(trained["t5"])
    assert (tok.pad_token_id, tok.eos_token_id, tok.unk_token_id) == (0, 1, 2)
    assert tok.get_sentinel_tokens() == [f"<extra_id_{i}>" for i in range(10)]
    top = len(tok) - 1
    assert tok.get_sentinel_token_ids() == list(range(top, top - 10, -1))  # <extra_id_0> is the highest id
    ids = tok("The <extra_id_0> walks in <extra_id_1> park.")["input_ids"]
    assert top in ids and top - 1 in ids and ids[-1] == tok.eos_token_id
    pair = tok("a", "b")["input_ids"]
    assert pair.count(tok.eos_token_id) == 2 and "token_type_ids" not in tok("a", "b")  # T5 has no segments
    config = json.loads((trained["t5"] / "tokenizer_config.json").read_text())
    assert config["additional_special_tokens"][:2] == ["<extra_id_0>", "<extra_id_1>"]
    assert config["bertkit_training"]["sentinels"] == 10 and config["bertkit_training"]["layout"] == "t5"


def test_albert_layout_lowercases(trained):
    tok = Tokenizer.from_pretrained(trained["albert"])
    assert [tok.pad_token_id, tok.unk_token_id, tok.cls_token_id, tok.sep_token_id, tok.mask_token_id] == [0, 1, 2, 3, 4]
    ids = tok("Hello", "World")["input_ids"]
    assert ids[0] == tok.cls_token_id and ids.count(tok.sep_token_id) == 2
    assert tok.tokenize("HELLO") == tok.tokenize("hello")


def test_korean_pieces_are_syllables_and_nfkc_applies(trained):
    tok = Tokenizer.from_pretrained(trained["xlnet"])
    pieces = tok.tokenize("진짜 짜증나네요")
    assert "".join(pieces).replace("\u2581", "") == "진짜짜증나네요"
    # syllables are never taken apart into jamo (NFKC composes; only compatibility jamo such as
    # "ㅋ" become conjoining jamo, as in SentencePiece's nmt_nfkc)
    assert not any("\u1100" <= c <= "\u11ff" for piece in tok.tokenize(NSMC_LINE) for c in piece)
    assert tok.tokenize("ＡＢＣ") == tok.tokenize("ABC")  # full-width folded by NFKC
    assert tok.unk_token_id not in tok.encode("진짜 짜증나네요", add_special_tokens=False)


def test_training_is_deterministic(tmp_path):
    first = train(tmp_path, "a", vocab_size=1200)
    second = train(tmp_path, "b", vocab_size=1200)
    assert (first / "tokenizer.json").read_text() == (second / "tokenizer.json").read_text()


def test_metaspace_word_counts_equal_the_rust_pipeline(tmp_path):
    lines = ["Ｆｕｌｌ width  Ａ", "tab\tsep\u3000ideographic", "한국어 문장 ①", "ctrl\x1cchar", "MiXeD Case"]
    corpus = tmp_path / "c.txt"
    corpus.write_text("\n".join(lines) + "\n", encoding="utf-8")
    for lowercase in (False, True):
        counts = count_words(CorpusSource((str(corpus),)), TextOptions(lowercase=lowercase), scheme="metaspace")
        from tokenizers import Tokenizer as RustTokenizer
        from tokenizers import models

        from bertkit.tokenization.metaspace import metaspace_pipeline

        rust = metaspace_pipeline(RustTokenizer(models.Unigram()), lowercase)
        expected: dict[str, int] = {}
        for line in lines:
            for word, _ in rust.pre_tokenizer.pre_tokenize_str(rust.normalizer.normalize_str(line)):
                expected[word] = expected.get(word, 0) + 1
        assert counts == expected


def test_cli_train_with_sentinels_and_errors(tmp_path, capsys):
    out = tmp_path / "t5"
    args = ["tokenizer", "train", "--algorithm", "unigram", "--vocab-size", "1000", "--sentinels", "4"]
    assert main([*args, "--no-progress", "-o", str(out), str(NSMC)]) == 0
    config = json.loads((out / "tokenizer_config.json").read_text())
    assert config["eos_token"] == "</s>" and config["do_lower_case"] is False
    assert Tokenizer.from_pretrained(out).get_sentinel_token_ids()[0] == len(Tokenizer.from_pretrained(out)) - 1
    capsys.readouterr()
    for bad, message in (
        (["--layout", "bert"], "layout='bert' is unknown"),
        (["--vocab-size", "20"], "vocab_size=20 is smaller"),
        (["--cls-token", "[C]"], "takes its special tokens from --layout"),
    ):
        assert main(["tokenizer", "train", "--algorithm", "unigram", *bad, "-o", str(tmp_path / "x"), str(NSMC)]) == 1
        assert message in capsys.readouterr().err
    assert main(["tokenizer", "train", "--algorithm", "bpe", "--sentinels", "3", "-o", str(tmp_path / "y"), str(NSMC)]) == 1
    assert "only to --algorithm unigram" in capsys.readouterr().err


def test_options_fail_fast(trained):
    with pytest.raises(ConfigError, match="layout="):
        TrainOptions(algorithm="unigram", layout="gpt")
    with pytest.raises(ConfigError, match="sentinels="):
        TrainOptions(algorithm="unigram", sentinels=-1)
    with pytest.raises(ConfigError, match="only to algorithm='unigram'"):
        TrainOptions(algorithm="wordpiece", sentinels=2)
    with pytest.raises(BertkitError, match="padding_side='middle'"):
        Tokenizer.from_pretrained(trained["xlnet"])(["a", "b c"], padding=True, padding_side="middle")
    with pytest.raises(BertkitError, match="padding_side='up'"):
        Tokenizer.from_pretrained(trained["xlnet"], padding_side="up")


def test_deterministic_scores_undo_hash_order():
    """What the trainer's hash order varies: float noise on equal scores, the order of tied
    pieces, and which added character gets which score of the run min, min + 1e-4, ..."""
    import random

    from bertkit.tokenization.train.unigram import deterministic_scores

    learned = [("▁the", -3.0), ("ing", -4.5), ("▁a", -4.5), ("x", -6.0), ("▁rare", -6.0), ("q", -6.0)]
    added = ["가", "z", "é", "ß"]
    outputs = set()
    for seed in range(20):
        rng = random.Random(seed)
        noisy = [(p, s + rng.uniform(-3e-11, 3e-11)) for p, s in learned]
        run = list(added)
        rng.shuffle(run)
        noisy += [(c, -6.0 + k * 1e-4 + rng.uniform(-3e-11, 3e-11)) for k, c in enumerate(run)]
        rng.shuffle(noisy)
        outputs.add(tuple(deterministic_scores(noisy)))
    assert len(outputs) == 1
    (result,) = outputs
    assert [p for p, _ in result[:3]] == ["▁the", "ing", "▁a"]  # ties ordered by text ("i" < "▁")
    assert {p for p, _ in result} == {p for p, _ in learned} | set(added)
    assert [s for _, s in result] == sorted((s for _, s in result), reverse=True)


@pytest.mark.parametrize("layout", ["xlnet", "t5"])
def test_save_pretrained_round_trip(trained, tmp_path, layout):
    tok = Tokenizer.from_pretrained(trained[layout])
    tok.save_pretrained(tmp_path / "copy")
    copy, theirs = Tokenizer.from_pretrained(tmp_path / "copy"), AutoTokenizer.from_pretrained(tmp_path / "copy")
    assert copy.padding_side == theirs.padding_side == tok.padding_side
    assert copy.additional_special_tokens == tok.additional_special_tokens
    assert copy.get_sentinel_token_ids() == tok.get_sentinel_token_ids()
    for side in (copy, theirs):
        assert side(TEXTS, PAIRS, padding=True)["input_ids"] == tok(TEXTS, PAIRS, padding=True)["input_ids"]


def test_morphemes_are_split_when_encoding_too(tmp_path):
    pytest.importorskip("kiwipiepy")
    out = train(tmp_path, "kiwi", vocab_size=900, text=TextOptions(morphemes="kiwi"))
    assert json.loads((out / "tokenizer_config.json").read_text())["pretokenize_morphemes"] == "kiwi"
    tok = Tokenizer.from_pretrained(out)
    encoded = tok("진짜 짜증나네요", return_offsets_mapping=True)
    assert encoded["offset_mapping"][-3][1] <= len("진짜 짜증나네요")  # offsets point into the text as given
    assert tok.tokenize("짜증나네요") != Tokenizer.from_pretrained(out, pretokenize_morphemes=None).tokenize("짜증나네요")


def test_bert_text_options_are_refused():
    for text in (TextOptions(strip_accents=True), TextOptions(tokenize_chinese_chars=True), TextOptions(keep_hangul=False)):
        with pytest.raises(ConfigError, match="does not apply to unigram"):
            TrainOptions(algorithm="unigram", text=text)
