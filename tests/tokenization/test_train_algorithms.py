"""All four algorithms from the API and the CLI; the outputs load in bertkit and transformers
with identical tokens; byte-level BPE never yields [UNK]; Korean; morphemes; bad input; stats."""

from __future__ import annotations

import gzip
import json
import random
from pathlib import Path

import pytest
from tokenizers import Tokenizer as RustTokenizer
from transformers import AutoTokenizer, BertTokenizer

from bertkit.cli import main
from bertkit.errors import BertkitError
from bertkit.tokenization import Tokenizer
from bertkit.tokenization.train import ALGORITHMS, TextOptions, TrainOptions, train_tokenizer

try:  # transformers >= 5: BertTokenizer is the fast one; the Python original is "Legacy"
    from transformers.models.bert.tokenization_bert_legacy import BertTokenizerLegacy as SlowBertTokenizer
except ImportError:  # transformers 4.x
    from transformers import BertTokenizer as SlowBertTokenizer

STEMS = ["play", "walk", "talk", "jump", "paint", "read", "train", "token", "model", "learn", "mark", "work"]
ENDINGS = ["", "s", "ed", "ing", "er", "ers", "able", "ization"]
NSMC_REVIEWS = Path(__file__).parents[1] / "fixtures" / "nsmc_reviews_50.txt"  # tests/fixtures/cut_nsmc_reviews.py
HELD_OUT = [
    "The Painters were repainting; unlearnable tokenizations!",
    "Jumping, reading & walking (in 2024) -- naïve café RÉSUMÉ.",
    "retrain the retrained models 日本語 with [MASK] tokens",
]


def english_corpus(path: Path, lines: int = 300, seed: int = 0) -> Path:
    rng = random.Random(seed)
    rows = []
    for _ in range(lines):
        words = [rng.choice(STEMS) + rng.choice(ENDINGS) for _ in range(rng.randint(4, 12))]
        words[0] = words[0].capitalize()
        rows.append(" ".join(words) + rng.choice([".", "!", ", then re" + rng.choice(STEMS) + "."]))
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    return english_corpus(tmp_path_factory.mktemp("corpus") / "en.txt")


@pytest.fixture(scope="module")
def trained(tmp_path_factory, corpus) -> dict[str, Path]:
    """One tokenizer directory per algorithm, trained through the API."""
    root = tmp_path_factory.mktemp("trained")
    dirs = {}
    for algorithm in ALGORITHMS:
        dirs[algorithm] = root / algorithm
        train_tokenizer(
            [corpus], dirs[algorithm], TrainOptions(algorithm=algorithm, vocab_size=400, show_progress=False)
        )
    return dirs


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_api_output_loads_in_bertkit_and_transformers_alike(trained, algorithm):
    directory = trained[algorithm]
    ours = Tokenizer.from_pretrained(directory)
    theirs = AutoTokenizer.from_pretrained(directory)
    assert ours.tokenize(HELD_OUT[0])  # something real was learned
    for text in HELD_OUT:
        a, b = ours(text), theirs(text)
        assert dict(a) == dict(b), text  # the same inputs: token types only where transformers gives them
    pair_ours, pair_theirs = ours(HELD_OUT[0], HELD_OUT[1]), theirs(HELD_OUT[0], HELD_OUT[1])
    assert dict(pair_ours) == dict(pair_theirs)
    assert ("token_type_ids" in pair_ours) == (algorithm != "bbpe")  # RoBERTa's byte-level BPE has none
    pair_ours = ours(HELD_OUT[0], HELD_OUT[1], return_token_type_ids=True)
    if algorithm == "unigram":  # its layouts (XLNet's A <sep> B <sep> <cls>...): test_unigram.py
        return
    # CLS A SEP B SEP with segment ids 0 then 1
    ids, types = pair_ours["input_ids"], pair_ours["token_type_ids"]
    assert ids[0] == ours.cls_token_id and ids[-1] == ours.sep_token_id and ids.count(ours.sep_token_id) == 2
    first_sep = ids.index(ours.sep_token_id)
    assert set(types[: first_sep + 1]) == {0} and set(types[first_sep + 1 :]) == {1}


@pytest.mark.parametrize("algorithm", ["wordpiece", "wordpiece-freq"])
def test_wordpiece_outputs_load_in_bert_tokenizers(trained, algorithm):
    directory = trained[algorithm]
    config = json.loads((directory / "tokenizer_config.json").read_text())
    assert config["tokenizer_class"] == "BertTokenizer"
    ours = Tokenizer.from_pretrained(directory)
    for reference in (BertTokenizer.from_pretrained(directory), SlowBertTokenizer.from_pretrained(directory)):
        for text in HELD_OUT:
            assert reference.tokenize(text) == ours.tokenize(text), (type(reference).__name__, text)
            assert reference(text)["input_ids"] == ours(text)["input_ids"]


def test_wordpiece_vocab_file_matches_tokenizer_json(trained):
    directory = trained["wordpiece"]
    vocab = (directory / "vocab.txt").read_text(encoding="utf-8").splitlines()
    backend = RustTokenizer.from_file(str(directory / "tokenizer.json"))
    assert backend.get_vocab() == {token: i for i, token in enumerate(vocab)}
    assert len(vocab) <= 400  # the small corpus runs out of candidate pairs first


def test_wordpiece_freq_reaches_the_vocab_size_exactly(tmp_path, corpus):
    """A character found only in a word over 100 characters is in the alphabet (so the word can
    be encoded as [UNK] like BERT), but the library's trainer never sees it: still exactly
    vocab_size tokens."""
    text = corpus.read_text(encoding="utf-8") + "x" * 60 + "\u0436" + "y" * 60 + "\n"
    path = tmp_path / "long.txt"
    path.write_text(text, encoding="utf-8")
    result = train_tokenizer(
        [path], tmp_path / "t", TrainOptions(algorithm="wordpiece-freq", vocab_size=150, show_progress=False)
    )
    vocab = (tmp_path / "t" / "vocab.txt").read_text(encoding="utf-8").splitlines()
    assert result.vocab_size == len(vocab) == 150 and "\u0436" in vocab


@pytest.mark.parametrize("algorithm", ["bpe", "bbpe"])
def test_bpe_variants_write_merges(trained, algorithm):
    directory = trained[algorithm]
    merges = (directory / "merges.txt").read_text(encoding="utf-8").splitlines()
    vocab = json.loads((directory / "vocab.json").read_text(encoding="utf-8"))
    assert merges[0].startswith("#version") and len(merges) > 10
    assert len(vocab) <= 400


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_cli_train_matches_api(trained, corpus, tmp_path, algorithm):
    out = tmp_path / "cli"
    assert (
        main(
            [
                "tokenizer",
                "train",
                "--algorithm",
                algorithm,
                "--vocab-size",
                "400",
                "--no-progress",
                "-o",
                str(out),
                str(corpus),
            ]
        )
        == 0
    )
    assert (out / "tokenizer.json").read_text() == (trained[algorithm] / "tokenizer.json").read_text()
    ours, theirs = Tokenizer.from_pretrained(out), AutoTokenizer.from_pretrained(out)
    assert ours(HELD_OUT[1])["input_ids"] == theirs(HELD_OUT[1])["input_ids"]


def test_bbpe_never_yields_unknown_tokens(trained):
    tok = Tokenizer.from_pretrained(trained["bbpe"])
    rng = random.Random(7)
    ranges = [
        (0x20, 0x7F),
        (0xA0, 0x2FF),
        (0x370, 0x52F),
        (0x600, 0x6FF),
        (0x900, 0x97F),
        (0x3040, 0x30FF),
        (0x4E00, 0x9FFF),
        (0xAC00, 0xD7A3),
        (0x1F300, 0x1FAFF),
        (0x10000, 0x1000F),
    ]
    texts = []
    for _ in range(50):
        chars = []
        for _ in range(rng.randint(1, 40)):
            low, high = rng.choice(ranges)
            chars.append(chr(rng.randint(low, high)))
        texts.append("".join(chars))
    unk = tok.unk_token_id
    for text in texts:
        ids = tok(text, add_special_tokens=False)["input_ids"]
        assert unk not in ids
        assert ids or not text.strip()


def test_korean_syllables_stay_whole(tmp_path):
    lines = ["영화가 정말 재미있었다", "영화를 보고 싶다", "재미있는 영화였다", "정말 좋았다 ㅎㅎ"] * 20
    corpus = tmp_path / "ko.txt"
    corpus.write_text("\n".join(lines) + "\n", encoding="utf-8")
    for text in (TextOptions(lowercase=True), TextOptions(lowercase=False)):  # uncased strips accents: Hangul must survive
        out = tmp_path / f"tok-{text.lowercase}"
        train_tokenizer([corpus], out, TrainOptions(vocab_size=200, text=text, show_progress=False))
        vocab = (out / "vocab.txt").read_text(encoding="utf-8").splitlines()
        assert "영" in vocab and "##화" in vocab
        assert not any("\u1100" <= c <= "\u11ff" for token in vocab for c in token)  # no conjoining jamo
        ours = Tokenizer.from_pretrained(out)
        assert "".join(ours.tokenize("영화가 재미있었다")).replace("##", "") == "영화가재미있었다"
        assert ours.tokenize("영화가") == AutoTokenizer.from_pretrained(out).tokenize("영화가")
        config = json.loads((out / "tokenizer_config.json").read_text())
        # transformers' BertTokenizer would strip accents through jamo: only named when it cannot
        assert config["tokenizer_class"] == ("PreTrainedTokenizerFast" if text.lowercase else "BertTokenizer")


def test_trained_uncased_korean_tokenizer_records_and_keeps_syllables(tmp_path):
    """Uncased training strips accents, yet no jamo reach the vocabulary or the tokens of real
    reviews; the config records keep_hangul_syllables so loading keeps syllables too."""
    out = tmp_path / "tok"
    train_tokenizer([NSMC_REVIEWS], out, TrainOptions(vocab_size=1200, show_progress=False))
    config = json.loads((out / "tokenizer_config.json").read_text())
    assert config["keep_hangul_syllables"] is True and config["do_lower_case"] is True
    vocab = (out / "vocab.txt").read_text(encoding="utf-8").splitlines()
    assert "영화" in vocab
    reviews = NSMC_REVIEWS.read_text(encoding="utf-8").splitlines()
    ours, theirs = Tokenizer.from_pretrained(out), AutoTokenizer.from_pretrained(out)
    assert ours.config.keep_hangul_syllables is True
    tokens = [token for review in reviews for token in ours.tokenize(review)]
    for token in vocab + tokens:
        assert not any("\u1100" <= c <= "\u11ff" for c in token), token  # no conjoining jamo
    assert tokens.count("[UNK]") == 0
    assert ours(reviews)["input_ids"] == theirs(reviews)["input_ids"]


def test_morpheme_pretokenization_round_trips(tmp_path):
    pytest.importorskip("kiwipiepy")
    lines = ["영화를 봤는데 정말 재미있었다", "이 영화에서 나의 향수를 느꼈다", "배우들의 연기가 좋았다"] * 10
    corpus = tmp_path / "ko.txt"
    corpus.write_text("\n".join(lines) + "\n", encoding="utf-8")
    out = tmp_path / "tok"
    train_tokenizer(
        [corpus], out, TrainOptions(vocab_size=300, text=TextOptions(morphemes="kiwi"), show_progress=False)
    )
    config = json.loads((out / "tokenizer_config.json").read_text())
    assert config["pretokenize_morphemes"] == "kiwi"
    tok = Tokenizer.from_pretrained(out)
    tokens = tok.tokenize("영화를 봤다")
    assert tokens[:2] == ["영화", "를"]  # the particle is its own word: never "##를"
    encoded = tok("영화를 봤다", return_offsets_mapping=True)
    assert "영화를 봤다"[slice(*encoded["offset_mapping"][1])] == "영화"  # offsets point into the original text


def test_morpheme_splitter_inserts_spaces_only():
    pytest.importorskip("kiwipiepy")
    from bertkit.tokenization.morphemes import morpheme_splitter

    split = morpheme_splitter()
    text = "이 영화에서 나의 향수를 느꼈다. BERT's ab12 2019년"
    result = split(text)
    assert result.replace(" ", "") == text.replace(" ", "")
    assert "영화 에서" in result and "BERT's ab12" in result and "2019 년" in result


def test_missing_kiwipiepy_is_a_clear_error(monkeypatch):
    import builtins

    real_import = builtins.__import__

    def no_kiwi(name, *args, **kwargs):
        if name.startswith("kiwipiepy"):
            raise ImportError("No module named 'kiwipiepy'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_kiwi)
    from bertkit.tokenization.morphemes import morpheme_splitter

    with pytest.raises(BertkitError, match=r"pip install 'bertkit\[ko\]'"):
        morpheme_splitter.__wrapped__()  # past the per-process cache


# ----------------------------------------------------------------------------- input formats


def test_jsonl_gz_and_tsv_inputs(tmp_path, corpus):
    rows = corpus.read_text().splitlines()
    jsonl = tmp_path / "c.jsonl.gz"
    with gzip.open(jsonl, "wt", encoding="utf-8") as handle:
        for row in rows:
            handle.write(json.dumps({"id": 1, "body": row}) + "\n")
    tsv = tmp_path / "c.tsv"
    tsv.write_text(
        "id\tdocument\tlabel\n" + "".join(f"{i}\t{row}\t1\n" for i, row in enumerate(rows)), encoding="utf-8"
    )
    plain = train_tokenizer([corpus], None, TrainOptions(vocab_size=300, show_progress=False))
    from_jsonl = train_tokenizer([jsonl], None, TrainOptions(vocab_size=300, text_field="body", show_progress=False))
    from_tsv = train_tokenizer([tsv], None, TrainOptions(vocab_size=300, show_progress=False), tsv_column="document")
    assert plain.tokenizer.get_vocab() == from_jsonl.tokenizer.get_vocab() == from_tsv.tokenizer.get_vocab()


# ----------------------------------------------------------------------------- bad input


def run_cli(capsys, *argv: str) -> tuple[int, str]:
    code = main(["tokenizer", *argv])
    err = capsys.readouterr().err.strip().splitlines()
    return code, (err[-1] if err else "")


def run_train(capsys, algorithm: str, vocab_size: str, output, corpus) -> tuple[int, str]:
    return run_cli(
        capsys, "train", "--no-progress", "--algorithm", algorithm, "--vocab-size", vocab_size, "-o", str(output), str(corpus)
    )


def test_unknown_algorithm(capsys, corpus, tmp_path):
    code, err = run_cli(capsys, "train", "--algorithm", "sentencepiece", "-o", str(tmp_path / "t"), str(corpus))
    assert code == 1 and "algorithm='sentencepiece' is unknown" in err and "wordpiece" in err


def test_score_option(capsys, corpus, tmp_path):
    code, err = run_cli(capsys, "train", "--score", "freq", "-o", str(tmp_path / "t"), str(corpus))
    assert code == 1 and err == "bertkit: error: score='freq' is unknown (allowed: pmi, gain)"
    code, err = run_cli(capsys, "train", "--algorithm", "bpe", "--score", "pmi", "-o", str(tmp_path / "t"), str(corpus))
    assert code == 1 and err == "bertkit: error: score='pmi' applies only to algorithm='wordpiece' (bpe merges by frequency)"
    assert TrainOptions().merge_score == "gain" and TrainOptions(algorithm="bpe").merge_score is None
    vocabs = {}
    for score in ("pmi", "gain", None):
        out = tmp_path / str(score)
        args = ["--score", score] if score else []
        assert run_cli(capsys, "train", "--no-progress", *args, "--vocab-size", "300", "-o", str(out), str(corpus))[0] == 0
        training = json.loads((out / "tokenizer_config.json").read_text())["bertkit_training"]
        assert training["score"] == (score or "gain")
        vocabs[score] = (out / "vocab.txt").read_text()
    assert vocabs[None] == vocabs["gain"] != vocabs["pmi"]


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_empty_corpus(capsys, tmp_path, algorithm):
    empty = tmp_path / "empty.txt"
    empty.write_text("\n   \n\n", encoding="utf-8")
    code, err = run_cli(
        capsys, "train", "--no-progress", "--algorithm", algorithm, "-o", str(tmp_path / "t"), str(empty)
    )
    assert code == 1 and "empty.txt" in err and ("nothing can be built" in err or "empty corpus" in err)


@pytest.mark.parametrize("algorithm", ["wordpiece", "wordpiece-freq", "bpe", "bbpe"])
def test_vocab_smaller_than_specials_and_alphabet(capsys, corpus, tmp_path, algorithm):
    code, err = run_train(capsys, algorithm, "20", tmp_path / "t", corpus)
    assert code == 1 and "vocab_size=20 is smaller than the 5 special tokens" in err


def test_non_utf8_file_names_file_and_line_and_can_be_skipped(capsys, tmp_path, corpus):
    bad = tmp_path / "bad.txt"
    bad.write_bytes(corpus.read_bytes() + b"caf\xe9 latin-1 line\nmore text here\n")
    line = len(corpus.read_text().splitlines()) + 1
    for algorithm in ("wordpiece", "bpe"):
        code, err = run_train(capsys, algorithm, "300", tmp_path / "t", bad)
        assert code == 1 and f"bad.txt:{line}: not valid UTF-8" in err, err
    code, _ = run_cli(
        capsys, "train", "--no-progress", "--skip-bad-lines", "--vocab-size", "300", "-o", str(tmp_path / "t"), str(bad)
    )
    assert code == 0 and (tmp_path / "t" / "vocab.txt").is_file()


def test_stats_on_an_empty_file_names_it(capsys, trained, tmp_path):
    empty = tmp_path / "heldout.txt"
    empty.write_text("\n  \n", encoding="utf-8")
    code, err = run_cli(capsys, "stats", "--tokenizer", str(trained["wordpiece"]), str(empty))
    assert code == 1 and err == f"bertkit: error: {empty}: no words to measure (empty or blank)"


def test_missing_and_directory_inputs(capsys, tmp_path):
    code, err = run_cli(capsys, "train", "-o", str(tmp_path / "t"), str(tmp_path / "nope.txt"))
    assert code == 1 and "nope.txt: no such file" in err
    code, err = run_cli(capsys, "train", "-o", str(tmp_path / "t"), str(tmp_path))
    assert code == 1 and "a folder without .parquet files or a datasets save_to_disk layout" in err  # folders: Parquet / Arrow


def test_bad_numbers_and_tsv_column(capsys, corpus, tmp_path):
    code, err = run_cli(capsys, "train", "--vocab-size", "0", "-o", str(tmp_path / "t"), str(corpus))
    assert code == 1 and "vocab_size=0 must be a positive integer" in err
    code, err = run_cli(capsys, "train", "--tsv-column", "text", "-o", str(tmp_path / "t"), str(corpus))
    assert code == 1 and "en.txt:1: no column 'text' in the TSV header" in err


# ----------------------------------------------------------------------------- stats


def test_stats_report_and_histogram(capsys, trained, tmp_path):
    held_out = tmp_path / "held.txt"
    held_out.write_text("\n".join(HELD_OUT) + "\n", encoding="utf-8")
    png = tmp_path / "lengths.png"
    assert (
        main(["tokenizer", "stats", "--tokenizer", str(trained["wordpiece"]), "--histogram", str(png), str(held_out)])
        == 0
    )
    out = capsys.readouterr().out
    assert "fertility" in out and "unknown-token rate" in out and "words kept whole" in out
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert (
        main(
            [
                "tokenizer",
                "stats",
                "--json",
                "--tokenizer",
                str(trained["bbpe"]),
                "--histogram",
                str(png),
                str(held_out),
            ]
        )
        == 0
    )
    figures = json.loads(capsys.readouterr().out)
    words = sum(len(t.split()) for t in HELD_OUT)
    assert figures["words"] == words and figures["unk_rate"] == 0 and figures["fertility"] >= 1


def test_stats_counts_by_hand(trained):
    from bertkit.tokenization.train.stats import measure

    tok = Tokenizer.from_pretrained(trained["wordpiece"])
    text = "playing zzzq played"  # z and q never occur in the corpus: that word is [UNK]
    stats = measure(tok, [text])
    expected = tok.tokenize(text)
    assert stats.words == 3 and stats.tokens == len(expected)
    assert stats.unk_tokens == expected.count("[UNK]") == 1 and stats.words_with_unk == 1
    assert stats.words_whole == sum(tok.tokenize(w) != ["[UNK]"] and len(tok.tokenize(w)) == 1 for w in text.split())


def test_nfkc_and_cased_options_round_trip(tmp_path, corpus):
    wide = (
        "\uff30\uff4c\uff41\uff59\uff49\uff4e\uff47 \uff54\uff4f\uff4b\uff45\uff4e\uff53"  # full-width "Playing tokens"
    )
    out = tmp_path / "tok"
    options = TrainOptions(vocab_size=400, text=TextOptions(nfkc=True, lowercase=False), show_progress=False)
    train_tokenizer([corpus], out, options)
    config = json.loads((out / "tokenizer_config.json").read_text())
    assert config["nfkc"] is True and config["do_lower_case"] is False
    assert config["tokenizer_class"] == "PreTrainedTokenizerFast"  # BertTokenizer has no NFKC
    ours, theirs = Tokenizer.from_pretrained(out), AutoTokenizer.from_pretrained(out)
    assert ours.tokenize(wide) == ours.tokenize("Playing tokens") == theirs.tokenize(wide)
