"""Memory bounds of a data build: a corpus without line breaks is cut into slice-sized
pieces (one line never becomes one huge slice), and a corpus of only empty documents is
one clear error, whatever its format."""

from __future__ import annotations

import json

import pytest

from bertkit.cli import main
from bertkit.data.corpus import iter_documents, iter_slices

WORDS = "the cat sat on a mat and then it went to sleep by the fire".split()


def test_a_line_without_breaks_is_cut_at_spaces_into_bounded_pieces(tmp_path):
    text = " ".join(WORDS[i % len(WORDS)] for i in range(20_000))  # ~80k characters, no newline
    path = tmp_path / "one_line.txt"
    path.write_text(text)
    documents = list(iter_documents([str(path)], max_document_chars=5_000))
    lines = [line for document in documents for line in document]
    assert len(documents) > 10 and all(sum(map(len, d)) <= 5_000 for d in documents)
    assert " ".join(lines) == text  # cut only at spaces: every word kept whole
    slices = list(iter_slices(iter_documents([str(path)], max_document_chars=5_000), slice_chars=20_000))
    assert len(slices) > 2 and max(s.chars for s in slices) <= 20_000 + 2 * 5_000  # a slice closes past slice_chars


def test_a_word_longer_than_the_limit_is_cut_anyway(tmp_path):
    path = tmp_path / "no_spaces.txt"
    path.write_text("x" * 12_000 + "\n")
    lines = [line for document in iter_documents([str(path)], max_document_chars=5_000) for line in document]
    assert [len(line) for line in lines] == [5_000, 5_000, 2_000]


def test_jsonl_paragraphs_are_cut_too(tmp_path):
    path = tmp_path / "docs.jsonl"
    path.write_text(json.dumps({"text": " ".join(["word"] * 3_000)}) + "\n")
    documents = list(iter_documents([str(path)], max_document_chars=1_000))
    assert len(documents) > 10 and all(sum(map(len, d)) <= 1_000 for d in documents)


@pytest.fixture(scope="module")
def tokenizer_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("tok")
    corpus = root / "corpus.txt"
    corpus.write_text("\n\n".join(" ".join(WORDS[i:] + WORDS[:i]) + "." for i in range(len(WORDS))) + "\n")
    assert main(["tokenizer", "train", "--vocab-size", "120", "--output", str(root / "tok"), "--no-progress",
                 "--threads", "1", str(corpus)]) == 0
    return root / "tok"


@pytest.mark.parametrize("name, content", [("blank.txt", "\n   \n\n" * 50), ("nothing.txt", ""),
                                           ("empty.jsonl", '{"text": ""}\n{"text": "  \\n "}\n')])
def test_only_empty_documents_is_one_clear_line(name, content, tokenizer_dir, tmp_path, capsys):
    path = tmp_path / name
    path.write_text(content)
    capsys.readouterr()
    assert main(["data", "build", "--tokenizer", str(tokenizer_dir), "--output", str(tmp_path / "out"),
                 "--no-progress", "--threads", "1", str(path)]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"no text in {path}" in err and "nothing can be built" in err
