"""KLUE's dev files are one JSON array of objects: the classification reader takes them as
they are (line numbers where each object starts), with dotted label fields (`labels.label`)."""

from __future__ import annotations

import json

import pytest

from bertkit.errors import BertkitError
from bertkit.tasks import classification as cls_data
from bertkit.tasks.records import iter_jsonl, record_field


def _objects(path):
    return json.loads(path.read_text(encoding="utf-8"))


def test_klue_nli_json_array(fixtures):
    path = fixtures / "klue" / "klue-nli-v1.1_dev.json"
    examples = cls_data.read_examples(path, text_column="premise", pair_column="hypothesis", label_column="gold_label")
    rows = _objects(path)
    assert len(examples) == len(rows) == 6
    assert [(ex.text, ex.pair, ex.label) for ex in examples] == [(r["premise"], r["hypothesis"], r["gold_label"])
                                                                  for r in rows]
    lines = path.read_text(encoding="utf-8").splitlines()
    starts = [int(ex.source.rsplit(":", 1)[1]) for ex in examples]
    assert starts[0] == 2 and all(lines[n - 1].lstrip().startswith("{") for n in starts)
    assert all(f'"guid": "{r["guid"]}"' in lines[n] for n, r in zip(starts, rows))


def test_klue_sts_dotted_regression_label(fixtures):
    path = fixtures / "klue" / "klue-sts-v1.1_dev.json"
    examples = cls_data.read_examples(path, text_column="sentence1", pair_column="sentence2",
                                      label_column="labels.label", regression=True)
    rows = _objects(path)
    assert [ex.label for ex in examples] == [r["labels"]["label"] for r in rows] and examples[0].label == 4.9
    assert [ex.pair for ex in examples] == [r["sentence2"] for r in rows]
    with pytest.raises(BertkitError, match=r"klue-sts-v1.1_dev.json:2: no field 'labels.score'"):
        cls_data.read_examples(path, text_column="sentence1", label_column="labels.score", regression=True)


def test_record_field_prefers_a_literal_key():
    assert record_field({"a.b": 1, "a": {"b": 2}}, "a.b") == (True, 1)
    assert record_field({"a": {"b": 2}}, "a.b") == (True, 2)
    assert record_field({"a": 3}, "a.b") == (False, None) and record_field({}, "x") == (False, None)


def test_json_array_and_jsonl_read_alike(tmp_path):
    rows = [{"text": "가나", "label": "1"}, {"text": "다라", "label": "0"}]
    array, lines = tmp_path / "a.json", tmp_path / "b.jsonl"
    array.write_text(json.dumps(rows, ensure_ascii=False, indent=2), encoding="utf-8")
    lines.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    assert [r for _, r in iter_jsonl(array)] == [r for _, r in iter_jsonl(lines)] == rows
    assert [n for n, _ in iter_jsonl(array)] == [2, 6]
    (tmp_path / "empty.json").write_text(" [ ]\n")
    assert list(iter_jsonl(tmp_path / "empty.json")) == []


@pytest.mark.parametrize("text, message", [
    ('[\n{"a": 1},\n{"a": \n', r"bad.json:3: malformed JSON"),
    ('[\n{"a": 1}\n{"a": 2}\n]', r"bad.json:3: malformed JSON array \(expected ',' or ']'\)"),
    ('[\n{"a": 1},\n[1, 2]\n]', r"bad.json:3: expected a JSON object in the array, got list"),
    ('[{"a": 1}]\n{"b": 2}\n', r"bad.json:2: text after the JSON array's closing"),
])
def test_malformed_json_array_names_the_line(tmp_path, text, message):
    path = tmp_path / "bad.json"
    path.write_text(text)
    with pytest.raises(BertkitError, match=message):
        list(iter_jsonl(path))
