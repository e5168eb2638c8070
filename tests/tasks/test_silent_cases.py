"""Inputs that used to pass silently now fail in one line naming the file (and line):
empty texts in classification files, SQuAD read under the wrong version, repeated
question ids, dev labels the training file never had."""

from __future__ import annotations

import json

import pytest

from bertkit.errors import BertkitError
from bertkit.tasks import classification, qa


@pytest.mark.parametrize("name, content, kwargs, message", [
    ("a.csv", "text,label\nfine,pos\n  ,neg\n", {"text_column": "text", "label_column": "label"},
     r"a\.csv:3: the text is empty or whitespace only"),
    ("a.jsonl", '{"text": "ok", "label": "x"}\n{"text": "", "label": "y"}\n',
     {"text_column": "text", "label_column": "label"}, r"a\.jsonl:2: the text is empty"),
    ("a.tsv", "s1\ts2\tlabel\nA\tB\t1\nA\t\t0\n", {"text_column": "s1", "pair_column": "s2", "label_column": "label"},
     r"a\.tsv:3: the second text of the pair is empty"),
    ("dev.tsv", "sentence\tlabel\n\t1\n", {"glue_task": "sst2"}, r"dev\.tsv:2: the text is empty"),
])
def test_empty_texts_are_errors_naming_the_row(tmp_path, name, content, kwargs, message):
    path = tmp_path / name
    path.write_text(content, encoding="utf-8")
    with pytest.raises(BertkitError, match=message):
        classification.read_examples(path, **kwargs)


def test_dev_labels_the_training_file_never_had_are_named(tmp_path):
    train = classification.read_examples(_write(tmp_path / "t.csv", "text,label\na,x\nb,y\n"), text_column="text",
                                         label_column="label")
    dev = classification.read_examples(_write(tmp_path / "d.csv", "text,label\na,x\nc,z\n"), text_column="text",
                                       label_column="label")
    with pytest.raises(BertkitError, match=r"d\.csv:3: .*'z'"):
        classification.check_labels(dev, classification.build_label_map(train), "the training file t.csv")


def _squad(tmp_path, version, questions):
    document = {"version": version, "data": [{"title": "t", "paragraphs": [
        {"context": "Paris is in France.", "qas": questions}]}]}
    return _write(tmp_path / "squad.json", json.dumps(document))


ANSWERED = {"id": "q1", "question": "Where is Paris?", "answers": [{"text": "France", "answer_start": 12}]}
IMPOSSIBLE = {"id": "q2", "question": "Where is Rome?", "answers": [], "is_impossible": True}


def test_training_version_2_on_a_v1_file_is_an_error(tmp_path):
    path = _squad(tmp_path, "1.1", [ANSWERED])
    with pytest.raises(BertkitError, match=r"squad\.json: training as SQuAD v2\.0 .* says version 1\.1 and has no "
                                           r"unanswerable questions"):
        qa.read_examples(path, 2, training=True)
    assert len(qa.read_examples(path, "auto", training=True)) == len(qa.read_examples(path, 1, training=True)) == 1
    assert len(qa.read_examples(path, 2)) == 1  # scoring it with v2.0's keys is allowed


def test_version_1_on_a_file_with_unanswerable_questions_is_an_error(tmp_path):
    path = _squad(tmp_path, "v2.0", [ANSWERED, IMPOSSIBLE])
    with pytest.raises(BertkitError, match=r"qas\[1\].*no answers \(a SQuAD v1\.1 question needs one"):
        qa.read_examples(path, 1)
    assert [ex.is_impossible for ex in qa.read_examples(path, "auto")] == [False, True]


def test_repeated_question_ids_are_an_error(tmp_path):
    path = _squad(tmp_path, "1.1", [ANSWERED, {**ANSWERED, "question": "Paris lies where?"}])
    with pytest.raises(BertkitError, match=r"qas\[1\] \(id q1\): the same id as .*qas\[0\]"):
        qa.read_examples(path, "auto")


def _write(path, text):
    path.write_text(text, encoding="utf-8")
    return path
