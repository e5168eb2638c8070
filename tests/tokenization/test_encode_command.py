"""`bertkit tokenizer encode`: one JSON line per text for every tokenizer kind, equal to
transformers on the same directory; pairs, files, stdin; bad input as one-line errors."""

from __future__ import annotations

import gzip
import io
import json
from pathlib import Path

import pytest
from transformers import AutoTokenizer

from bertkit.cli import main
from bertkit.tokenization.train import ALGORITHMS, TrainOptions, train_tokenizer

FIXTURES = Path(__file__).parents[1] / "fixtures"
TEXTS = ["Hello world, it's a truth universally acknowledged.", "아 더빙.. 진짜 짜증나네요 목소리"]


@pytest.fixture(scope="module")
def tokenizers(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("encode")
    dirs = {}
    for algorithm in ALGORITHMS:
        dirs[algorithm] = root / algorithm
        options = TrainOptions(algorithm=algorithm, vocab_size=1500, show_progress=False, workers=1)
        train_tokenizer([FIXTURES / "austen_small.txt", FIXTURES / "nsmc_small.txt.gz"], dirs[algorithm], options)
    return dirs


def run(capsys, *args: str) -> tuple[int, list[dict], str]:
    code = main(["tokenizer", "encode", *args])
    out, err = capsys.readouterr()
    return code, [json.loads(line) for line in out.splitlines()], err


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_every_kind_matches_transformers(tokenizers, capsys, algorithm):
    directory = tokenizers[algorithm]
    code, records, _ = run(capsys, "--tokenizer", str(directory), *TEXTS)
    assert code == 0 and len(records) == 2
    reference = AutoTokenizer.from_pretrained(directory)
    for record, text in zip(records, TEXTS):
        theirs = reference(text, return_offsets_mapping=True, return_token_type_ids=True)
        assert record["text"] == text and record["source"].startswith("TEXT ")
        assert record["ids"] == theirs["input_ids"]
        assert record["tokens"] == theirs.tokens()
        assert record["offsets"] == [list(span) for span in theirs["offset_mapping"]]
        types = theirs["token_type_ids"] if "token_type_ids" in reference.model_input_names else None
        assert record.get("token_type_ids") == types
        assert len(record["tokens"]) == len(record["ids"]) == len(record["offsets"])


def test_pairs_truncation_and_no_specials(tokenizers, capsys):
    directory = str(tokenizers["wordpiece"])
    code, records, _ = run(capsys, "--tokenizer", directory, "first text", "second", "--pair", "A", "--pair", "B")
    assert code == 0 and records[0]["pair"] == "A" and records[0]["tokens"][0] == "[CLS]"
    assert records[0]["token_type_ids"][-1] == 1 and records[0]["tokens"].count("[SEP]") == 2
    code, records, _ = run(capsys, "--tokenizer", directory, "--max-length", "4", TEXTS[0])
    assert len(records[0]["ids"]) == 4 and records[0]["tokens"][-1] == "[SEP]"
    code, records, _ = run(capsys, "--tokenizer", directory, "--no-special-tokens", "hello")
    assert "[CLS]" not in records[0]["tokens"]


def test_files_and_stdin(tokenizers, capsys, tmp_path, monkeypatch):
    directory = str(tokenizers["unigram"])
    text_file = tmp_path / "texts.txt.gz"
    with gzip.open(text_file, "wt", encoding="utf-8") as handle:
        handle.write("one line\n\n안녕하세요\n")
    code, records, _ = run(capsys, "--tokenizer", directory, "--file", str(text_file))
    assert code == 0 and [r["source"] for r in records] == [f"{text_file}:1", f"{text_file}:3"]
    jsonl = tmp_path / "in.jsonl"
    jsonl.write_text(json.dumps({"text": "a", "pair": "b"}) + "\n" + json.dumps({"text": "c"}) + "\n")
    code, records, _ = run(capsys, "--tokenizer", directory, "--file", str(jsonl))
    assert code == 0 and records[0]["pair"] == "b" and "pair" not in records[1]
    assert records[0]["tokens"][-1] == "<cls>" and records[0]["token_type_ids"][-1] == 2  # xlnet layout
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO("from stdin\n".encode())))
    code, records, _ = run(capsys, "--tokenizer", directory)
    assert code == 0 and records[0]["source"] == "<stdin>:1" and records[0]["text"] == "from stdin"


def test_bad_input_is_one_line(tokenizers, capsys, tmp_path):
    cases = []
    bad_utf8 = tmp_path / "bad.txt"
    bad_utf8.write_bytes(b"fine\nabc\xff\n")
    cases.append((["--tokenizer", str(tokenizers["bpe"]), "--file", str(bad_utf8)], f"{bad_utf8}:2"))
    cases.append((["--tokenizer", str(tmp_path / "missing"), "x"], "no such tokenizer directory"))
    cases.append((["--tokenizer", str(tokenizers["bpe"]), "a", "b", "--pair", "c"], "--pair given 1 time(s) for 2"))
    cases.append((["--tokenizer", str(tokenizers["bpe"]), "--max-length", "0", "a"], "--max-length=0"))
    jsonl = tmp_path / "x.jsonl"
    jsonl.write_text('{"txt": "a"}\n')
    cases.append((["--tokenizer", str(tokenizers["bpe"]), "--file", str(jsonl)], f"{jsonl}:1"))
    for args, message in cases:
        code, _, err = run(capsys, *args)
        assert code == 1 and message in err and len(err.strip().splitlines()) == 1, (args, err)
