"""Reading corpora into documents, grouping them into slices, and the sentence splitter."""

from __future__ import annotations

import gzip
import json

import pytest

from bertkit.data.corpus import iter_documents, iter_slices
from bertkit.data.sentences import split_sentences
from bertkit.errors import BertkitError

# (text, expected sentences), worked out by hand
SPLITS = [
    ("Mr. Smith went to Washington. He arrived on Jan. 5th.",
     ["Mr. Smith went to Washington.", "He arrived on Jan. 5th."]),
    ("Dr. Watson met Mrs. Hudson at 3 p.m. on Baker St. today.",
     ["Dr. Watson met Mrs. Hudson at 3 p.m. on Baker St. today."]),
    ("The U.S. economy grew 3.5 percent. Prices rose by 0.2 points.",
     ["The U.S. economy grew 3.5 percent.", "Prices rose by 0.2 points."]),
    ("Cities, e.g. Paris and i.e. London, vs. towns. J. K. Rowling wrote it.",
     ["Cities, e.g. Paris and i.e. London, vs. towns.", "J. K. Rowling wrote it."]),
    ('He said "Stop." Then he left.', ['He said "Stop."', "Then he left."]),
    ("(It was late.) She slept.", ["(It was late.)", "She slept."]),
    ('"Really?" she asked. Yes! Of course!!', ['"Really?" she asked.', "Yes!", "Of course!!"]),
    ("Wait... what? No... That is all.", ["Wait... what?", "No...", "That is all."]),
    ("Well… Fine. See fig. 3 and No. 5 for details.", ["Well…", "Fine.", "See fig. 3 and No. 5 for details."]),
    ("Version 2.0 is out (see www.example.com). It works!", ["Version 2.0 is out (see www.example.com).", "It works!"]),
    ("One sentence without an end", ["One sentence without an end"]),
    ("  Spaces around.   Two sentences.  ", ["Spaces around.", "Two sentences."]),
    ("", []),
    # Korean: endings with and without a space after the period (as in NSMC reviews)
    ("3시간짜리 감독판만 봤다. 초반부는 좋다.중반 넘어가서는 모르겠다.",
     ["3시간짜리 감독판만 봤다.", "초반부는 좋다.", "중반 넘어가서는 모르겠다."]),
    ("좋아요. 그렇죠? 네! 다시돌려봤다.너무사랑스럽다.", ["좋아요.", "그렇죠?", "네!", "다시돌려봤다.", "너무사랑스럽다."]),
    ("기대이하...그시절 영화치곤 괜찮은것 같다...", ["기대이하...", "그시절 영화치곤 괜찮은것 같다..."]),
    ("평점 9.5점. 최고", ["평점 9.5점.", "최고"]),
    # CJK full stops need no space
    ("我很好。你呢？不错！", ["我很好。", "你呢？", "不错！"]),
    ("「行こう。」と彼は言った。", ["「行こう。」", "と彼は言った。"]),
]


@pytest.mark.parametrize(("text", "expected"), SPLITS)
def test_split_sentences(text, expected):
    assert split_sentences(text) == expected


@pytest.mark.parametrize(("text", "expected"), [case for case in SPLITS if case[1]])
def test_split_is_idempotent_on_one_sentence_lines(text, expected):
    assert [s for sentence in expected for s in split_sentences(sentence)] == expected


def write(path, text: str):
    if path.suffix == ".gz":
        path.write_bytes(gzip.compress(text.encode("utf-8")))
    else:
        path.write_text(text, encoding="utf-8")
    return str(path)


def test_text_documents_are_separated_by_blank_lines(tmp_path):
    first = write(tmp_path / "a.txt", "one\ntwo\n\n\n  \nthree\n")
    second = write(tmp_path / "b.txt.gz", " four \n\nfive")
    assert list(iter_documents([first, second])) == [["one", "two"], ["three"], ["four"], ["five"]]


def test_jsonl_documents(tmp_path):
    records = [{"text": "Para one.\n\nPara two."}, {"text": "   "}, {"body": "x", "text": "Alone."}]
    path = write(tmp_path / "c.jsonl.gz", "\n".join(json.dumps(r) for r in records) + "\n\n")
    assert list(iter_documents([path])) == [["Para one.", "Para two."], ["Alone."]]
    custom = write(tmp_path / "d.jsonl", json.dumps({"body": "Body text."}) + "\n")
    assert list(iter_documents([custom], text_field="body")) == [["Body text."]]
    with pytest.raises(BertkitError, match=r"d\.jsonl:1: malformed JSONL"):
        list(iter_documents([custom]))


def test_invalid_utf8_names_file_and_line(tmp_path):
    path = tmp_path / "bad.txt"
    path.write_bytes(b"fine\n\nbad \xff here\n")
    with pytest.raises(BertkitError, match=r"bad\.txt:3: not valid UTF-8"):
        list(iter_documents([str(path)]))
    assert list(iter_documents([str(path)], skip_bad_lines=True)) == [["fine"]]


def test_overlong_documents_are_cut_at_line_boundaries(tmp_path):
    lines = [f"line {i:03d}" for i in range(100)]  # 8 characters each
    path = write(tmp_path / "long.txt", "\n".join(lines))
    pieces = list(iter_documents([path], max_document_chars=80))
    assert [len(p) for p in pieces] == [10] * 10
    assert [line for piece in pieces for line in piece] == lines
    jsonl = write(tmp_path / "long.jsonl", json.dumps({"text": "\n".join(lines)}))
    assert list(iter_documents([jsonl], max_document_chars=80)) == pieces


def test_slices_group_documents():
    documents = [[f"d{i}", "x" * (i % 7)] for i in range(200)]
    slices = list(iter_slices(iter(documents), slice_chars=50))
    assert [s.index for s in slices] == list(range(len(slices)))
    assert [d for s in slices for d in s.documents] == documents  # order kept, nothing lost
    for s in slices:
        assert len(s.documents) >= 2
        assert s.chars == sum(len(line) for d in s.documents for line in d)
        assert s.chars >= 50 or s is slices[-1]
        assert s.chars - sum(len(line) for line in s.documents[-1]) < 50  # closes at the first boundary past the size


def test_last_single_document_joins_the_previous_slice():
    documents = [["a" * 30], ["b" * 30], ["c" * 5]]
    slices = list(iter_slices(iter(documents), slice_chars=50))
    assert [s.documents for s in slices] == [documents]
    assert [s.documents for s in iter_slices(iter([["only"]]), 50)] == [[["only"]]]
    assert list(iter_slices(iter([]), 50)) == []
    more = [["d" * 60], ["e"]]  # slices [a b] [c d], then [e] alone joins [c d]
    assert [len(s.documents) for s in iter_slices(iter(documents + more), slice_chars=50)] == [2, 3]
    more = [["d" * 60], ["e"], ["f"]]  # a last slice of two documents stays
    assert [len(s.documents) for s in iter_slices(iter(documents + more), slice_chars=50)] == [2, 2, 2]
