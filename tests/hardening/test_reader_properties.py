"""Property tests of every reader: hostile input is either read correctly (every row, the
text exactly) or refused with one line naming the file — never a traceback, never a row
silently dropped. The example counts are the `ci` profile's (tests/hardening/conftest.py)."""

from __future__ import annotations

import csv
import gzip
import io
import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bertkit.data.corpus import iter_documents
from bertkit.errors import BertkitError
from bertkit.tasks import classification, multiple_choice, qa, tagging
from tests.hardening.strategies import arbitrary_bytes, boms, field_texts, line_endings, texts

pytestmark = pytest.mark.filterwarnings("ignore")


def read_or_refuse(read, path: Path):
    """`read()`'s result, or None when it raised a one-line BertkitError naming `path`.
    Any other exception fails the test (it would be a traceback for the user)."""
    try:
        return read()
    except BertkitError as exc:
        message = str(exc)
        assert "\n" not in message, message
        assert str(path) in message, message
        return None


def write(tmp_path: Path, name: str, data: bytes) -> Path:
    path = tmp_path / name
    if name.endswith(".gz"):
        data = gzip.compress(data)
    path.write_bytes(data)
    return path


# ------------------------------------------------------------------ arbitrary bytes

READERS = {
    "dev.tsv": lambda p: classification.read_examples(p, glue_task="sst2"),
    "mrpc.tsv": lambda p: classification.read_examples(p, glue_task="mrpc"),
    "rows.csv": lambda p: classification.read_examples(p, text_column="text", label_column="label"),
    "rows.jsonl": lambda p: classification.read_examples(p, text_column="text", label_column="label"),
    "eng.testa": lambda p: tagging.read_examples(p),
    "squad.json": lambda p: qa.read_examples(p, "auto"),
    "squad.json.gz": lambda p: qa.read_examples(p, 1),
    "swag.csv": lambda p: multiple_choice.read_examples(p),
    "piqa.jsonl": lambda p: multiple_choice.read_examples(p),
    "corpus.txt": lambda p: list(iter_documents([str(p)])),
    "corpus.jsonl.gz": lambda p: list(iter_documents([str(p)])),
}


@pytest.mark.parametrize("name", sorted(READERS))
@given(data=arbitrary_bytes)
def test_arbitrary_bytes_are_read_or_refused_in_one_line(tmp_path_factory, name, data):
    path = write(tmp_path_factory.mktemp("bytes"), name, data)
    read_or_refuse(lambda: READERS[name](path), path)


# ------------------------------------------------------------------ well-formed files of hostile text

@given(rows=st.lists(st.tuples(field_texts("\t\n\r"), st.sampled_from(["0", "1"])), min_size=1, max_size=8),
       ending=line_endings, bom=boms)
def test_glue_tsv_rows_are_read_exactly(tmp_path_factory, rows, ending, bom):
    body = bom + ending.join(["sentence\tlabel", *(f"{text}\t{label}" for text, label in rows)]) + ending
    path = write(tmp_path_factory.mktemp("glue"), "train.tsv", body.encode())
    examples = classification.read_examples(path, glue_task="sst2")
    names = classification.GLUE_LABEL_NAMES["sst2"]  # the file's "0"/"1" read as SST-2's label names
    assert [(ex.text, ex.label) for ex in examples] == [(text, names[label]) for text, label in rows]


@given(rows=st.lists(st.tuples(field_texts("\r\x00"), field_texts("\r\x00"), st.sampled_from(["yes", "no"])),
                     min_size=1, max_size=8), ending=line_endings, bom=boms)
def test_csv_rows_with_quotes_commas_and_newlines_are_read_exactly(tmp_path_factory, rows, ending, bom):
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator=ending)
    writer.writerow(["text", "pair", "label"])
    writer.writerows(rows)
    path = write(tmp_path_factory.mktemp("csv"), "rows.csv", (bom + buffer.getvalue()).encode())
    examples = classification.read_examples(path, text_column="text", pair_column="pair", label_column="label")
    assert [(ex.text, ex.pair, ex.label) for ex in examples] == rows


@given(rows=st.lists(st.tuples(field_texts(""), st.sampled_from(["a", "b"])), min_size=1, max_size=8),
       ascii_only=st.booleans(), ending=line_endings)
def test_jsonl_rows_are_read_exactly(tmp_path_factory, rows, ascii_only, ending):
    lines = [json.dumps({"text": text, "label": label}, ensure_ascii=ascii_only) for text, label in rows]
    path = write(tmp_path_factory.mktemp("jsonl"), "rows.jsonl", (ending.join(lines) + ending).encode())
    examples = classification.read_examples(path, text_column="text", label_column="label")
    assert [(ex.text, ex.label) for ex in examples] == rows


@given(before=texts(0, 5), surrogate=st.integers(0xD800, 0xDFFF).map(chr), after=texts(0, 5))
def test_jsonl_text_with_a_lone_surrogate_is_refused_naming_the_line(tmp_path_factory, before, surrogate, after):
    text = before + surrogate + after
    # "\ud800" written as a JSON escape decodes to a string no tokenizer can take
    path = write(tmp_path_factory.mktemp("surrogate"), "rows.jsonl",
                 (json.dumps({"text": "ok", "label": "a"}) + "\n" + json.dumps({"text": text, "label": "b"})).encode())
    with pytest.raises(BertkitError, match=r"rows\.jsonl:2: .*surrogate"):
        classification.read_examples(path, text_column="text", label_column="label")


WORD = texts(1, 12).filter(lambda w: w.split() == [w] and w != "-DOCSTART-" and not w.startswith("\ufeff"))
TAG = st.sampled_from(["O", "B-PER", "I-PER", "B-LOC", "I-LOC"])


@given(sentences=st.lists(st.lists(st.tuples(WORD, TAG), min_size=1, max_size=6), min_size=1, max_size=5),
       ending=line_endings, docstart=st.booleans())
def test_conll_sentences_are_read_exactly(tmp_path_factory, sentences, ending, docstart):
    lines = ["-DOCSTART- -X- -X- O", ""] if docstart else []
    for sentence in sentences:
        lines += [f"{word} NN I-NP {tag}" for word, tag in sentence] + [""]
    path = write(tmp_path_factory.mktemp("conll"), "eng.train", ending.join(lines).encode())
    examples = tagging.read_examples(path)
    assert [list(zip(ex.words, ex.tags)) for ex in examples] == [list(s) for s in sentences]


@given(questions=st.lists(st.tuples(field_texts(""), field_texts(""), field_texts("")), min_size=1, max_size=5),
       ascii_only=st.booleans())
def test_squad_questions_are_read_exactly(tmp_path_factory, questions, ascii_only):
    paragraphs = []
    for number, (before, answer, question) in enumerate(questions):
        context = before + " " + answer
        paragraphs.append({"context": context, "qas": [{"id": f"q{number}", "question": question, "answers": [
            {"text": answer, "answer_start": len(before) + 1}]}]})
    document = {"version": "1.1", "data": [{"title": "t", "paragraphs": paragraphs}]}
    path = write(tmp_path_factory.mktemp("squad"), "squad.json", json.dumps(document, ensure_ascii=ascii_only).encode())
    examples = read_or_refuse(lambda: qa.read_examples(path, "auto"), path)
    if examples is None:  # refused: only an answer that is blank once stripped may be
        assert any(not answer.strip() for _, answer, _ in questions)
        return
    assert [(ex.qid, ex.question) for ex in examples] == [(f"q{n}", q) for n, (_, _, q) in enumerate(questions)]


@given(rows=st.lists(st.tuples(field_texts(""), st.lists(field_texts(""), min_size=2, max_size=2)),
                     min_size=1, max_size=6), ending=line_endings)
def test_multiple_choice_jsonl_is_read_exactly(tmp_path_factory, rows, ending):
    lines = [json.dumps({"goal": goal, "sol1": a, "sol2": b, "label": n % 2}) for n, (goal, (a, b)) in enumerate(rows)]
    path = write(tmp_path_factory.mktemp("mc"), "piqa.jsonl", (ending.join(lines) + ending).encode())
    examples = multiple_choice.read_examples(path)
    assert [(ex.context, ex.choices, ex.label) for ex in examples] == [
        (goal, [a, b], n % 2) for n, (goal, (a, b)) in enumerate(rows)]


@given(documents=st.lists(st.lists(field_texts("\n\r"), min_size=1, max_size=4), min_size=1, max_size=4),
       ending=line_endings, bom=boms, gz=st.booleans())
def test_corpus_documents_are_read_exactly(tmp_path_factory, documents, ending, bom, gz):
    body = bom + (ending + ending).join(ending.join(lines) for lines in documents) + ending
    path = write(tmp_path_factory.mktemp("corpus"), "corpus.txt.gz" if gz else "corpus.txt", body.encode())
    read = list(iter_documents([str(path)]))
    expected = [[line.strip() for line in lines] for lines in documents]  # lines are stripped by design
    assert read == expected


def test_a_huge_line_is_read_whole(tmp_path):
    """Every word of a 10 MB line, in order; cut at spaces into slice-sized documents so a
    build's memory stays bounded (tests/data/test_memory_bounds.py)."""
    line = "word " * 2_000_000  # 10 MB on one line
    path = write(tmp_path, "corpus.txt", (line + "\n").encode())
    documents = list(iter_documents([str(path)]))
    assert " ".join(text for document in documents for text in document) == line.strip()
    assert len(documents) == 10 and all(sum(map(len, document)) <= 1_000_000 for document in documents)


@pytest.mark.parametrize("name, content", [
    ("corpus.jsonl", '{"text": "fine"}\n{"text": "bad \\udc80 escape"}\n'),
    ("squad.json", '{"version": "1.1", "data": [{"paragraphs": [{"context": "a \\ud800 b", "qas": []}]}]}'),
    ("klue.json", '[{"text": "ok", "label": "a"},\n {"text": "\\udfff", "label": "b"}]'),
])
def test_lone_surrogates_are_refused_by_every_json_reader(tmp_path, name, content):
    path = write(tmp_path, name, content.encode())
    read = {"corpus.jsonl": lambda: list(iter_documents([str(path)])),
            "squad.json": lambda: qa.read_examples(path, "auto"),
            "klue.json": lambda: classification.read_examples(path, text_column="text", label_column="label")}[name]
    with pytest.raises(BertkitError, match=r"holds a lone surrogate \\u(dc80|d800|dfff)"):
        read()


def test_an_emoji_escaped_as_a_surrogate_pair_is_fine(tmp_path):
    path = write(tmp_path, "rows.jsonl", json.dumps({"text": "smile \U0001f600", "label": "a"}).encode())
    assert classification.read_examples(path, text_column="text", label_column="label")[0].text == "smile \U0001f600"


@pytest.mark.parametrize("name", ["vocab.txt", "tokenizer.json", "tokenizer_config.json"])
@given(data=arbitrary_bytes)
def test_tokenizer_files_of_arbitrary_bytes_load_or_are_refused_in_one_line(tmp_path_factory, minilm_dir, name, data):
    from bertkit.tokenization import Tokenizer

    folder = tmp_path_factory.mktemp("tokenizer")
    (folder / "vocab.txt").write_bytes((minilm_dir / "vocab.txt").read_bytes())
    (folder / name).write_bytes(data)
    tokenizer = read_or_refuse(lambda: Tokenizer.from_pretrained(folder), folder)
    if tokenizer is not None:
        tokenizer("a text to encode", "and its pair")
