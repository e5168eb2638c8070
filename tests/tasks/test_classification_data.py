"""Classification data: GLUE TSV layouts, generic CSV/TSV/JSONL, label maps, encoding
against transformers' tokenizer, and one-line errors naming file and line."""

from __future__ import annotations

import csv
import json

import numpy as np
import pytest

from bertkit.errors import BertkitError, ConfigError
from bertkit.tasks import classification as cls_data
from bertkit.tasks import get_family


def _tsv_rows(path, header=True):
    lines = path.read_text(encoding="utf-8-sig").splitlines()
    rows = [line.split("\t") for line in lines]
    return rows[1:] if header else rows


def test_registry_names_the_families():
    assert get_family("glue") is cls_data and get_family("classification") is cls_data
    assert get_family("NER").__name__ == "bertkit.tasks.tagging" == get_family("tagging").__name__
    assert get_family("multiple-choice").model_class().__name__ == "BertForMultipleChoice"
    assert cls_data.model_class().__name__ == "BertForSequenceClassification"
    with pytest.raises(ConfigError, match="unknown; expected one of classification"):
        get_family("squad-ish")


def test_mrpc_with_bom_reads_every_row(fixtures):
    path = fixtures / "glue" / "MRPC" / "dev.tsv"
    assert path.read_bytes().startswith(b"\xef\xbb\xbf")
    examples = cls_data.read_examples(path, glue_task="MRPC")
    rows = _tsv_rows(path)
    assert len(examples) == len(rows) == 12
    names = cls_data.GLUE_LABEL_NAMES["mrpc"]  # the file's 0/1 read as GLUE's label names
    assert [ex.label for ex in examples] == [names[row[0]] for row in rows]
    assert [(ex.text, ex.pair) for ex in examples] == [(row[3], row[4]) for row in rows]
    assert examples[0].source == f"{path}:2"


def test_cola_has_no_header(fixtures):
    path = fixtures / "glue" / "CoLA" / "dev.tsv"
    examples = cls_data.read_examples(path, glue_task="cola")
    rows = _tsv_rows(path, header=False)
    assert len(examples) == 12 and examples[0].source.endswith("dev.tsv:1")
    names = cls_data.GLUE_LABEL_NAMES["cola"]
    assert [(ex.text, ex.pair, ex.label) for ex in examples] == [(r[3], None, names[r[1]]) for r in rows]


def test_stsb_float_labels_and_rte_string_labels(fixtures):
    sts = cls_data.read_examples(fixtures / "glue" / "STS-B" / "dev.tsv", glue_task="STS-B")
    rows = _tsv_rows(fixtures / "glue" / "STS-B" / "dev.tsv")
    assert [ex.label for ex in sts] == [float(r[9]) for r in rows] and sts[0].label == 5.0
    assert cls_data.glue_labels("stsb") is None
    rte = cls_data.read_examples(fixtures / "glue" / "RTE" / "dev.tsv", glue_task="rte")
    assert {ex.label for ex in rte} <= {"entailment", "not_entailment"}
    assert cls_data.glue_labels("rte") == ["entailment", "not_entailment"]
    assert cls_data.glue_labels("mnli-mm") == ["contradiction", "entailment", "neutral"]


def test_glue_test_file_without_labels(tmp_path):
    path = tmp_path / "test.tsv"
    path.write_text("index\tsentence1\tsentence2\n0\tA man.\tA woman.\n1\tSun.\tMoon.\n")
    examples = cls_data.read_examples(path, glue_task="rte")
    assert [(ex.pair, ex.label) for ex in examples] == [("A woman.", None), ("Moon.", None)]


def test_encode_matches_transformers_with_pair_truncation(fixtures, tokenizer, hf_tokenizer):
    examples = cls_data.read_examples(fixtures / "glue" / "MRPC" / "dev.tsv", glue_task="mrpc")
    label_map = {"not_equivalent": 0, "equivalent": 1}  # GLUE names (the file says 0/1)
    features = cls_data.encode(examples, tokenizer, 24, label_map)
    ref = hf_tokenizer([ex.text for ex in examples], [ex.pair for ex in examples], truncation=True, max_length=24)
    for feature, ids, types, ex in zip(features, ref["input_ids"], ref["token_type_ids"], examples, strict=True):
        assert feature["input_ids"].tolist() == ids and feature["token_type_ids"].tolist() == types
        assert feature["labels"] == label_map[ex.label]
    batch = cls_data.collate(features[:5], tokenizer.pad_token_id)
    assert batch["input_ids"].shape == (5, 24) and batch["labels"].tolist() == [label_map[e.label] for e in examples[:5]]


def test_regression_labels_encode_as_floats(fixtures, tokenizer):
    examples = cls_data.read_examples(fixtures / "glue" / "STS-B" / "dev.tsv", glue_task="stsb")
    features = cls_data.encode(examples, tokenizer, 64, None)
    batch = cls_data.collate(features, tokenizer.pad_token_id)
    assert str(batch["labels"].dtype) == "torch.float32"
    np.testing.assert_allclose(batch["labels"].numpy(), [ex.label for ex in examples], rtol=1e-6)


def test_generic_csv_tsv_jsonl_with_chosen_columns(tmp_path):
    rows = [{"review": 'Great, really "great"', "title": "t1", "stars": "5"},
            {"review": "two\nlines", "title": "t2", "stars": "10"},
            {"review": "meh", "title": "t3", "stars": "2"}]
    csv_path = tmp_path / "reviews.csv"
    with open(csv_path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, ["title", "review", "stars"])
        writer.writeheader()
        writer.writerows(rows)
    examples = cls_data.read_examples(csv_path, text_column="review", pair_column="title", label_column="stars")
    assert [(e.text, e.pair, e.label) for e in examples] == [(r["review"], r["title"], r["stars"]) for r in rows]
    assert [e.source.rsplit(":", 1)[1] for e in examples] == ["2", "3", "5"]  # the quoted newline spans line 3-4
    assert cls_data.build_label_map(examples) == {"2": 0, "5": 1, "10": 2}  # integers sort numerically

    tsv_path = tmp_path / "data.tsv"
    tsv_path.write_text("text\tlabel\r\nfine\tpos\r\n\r\nbad\tneg\r\n")
    examples = cls_data.read_examples(tsv_path, text_column="text")
    assert [(e.text, e.label) for e in examples] == [("fine", "pos"), ("bad", "neg")]
    assert cls_data.build_label_map(examples) == {"neg": 0, "pos": 1}

    jsonl = tmp_path / "data.jsonl"
    jsonl.write_text("\n".join(json.dumps(r) for r in [{"q": "a", "y": 0.5}, {"q": "b", "y": 2}]) + "\n")
    examples = cls_data.read_examples(jsonl, text_column="q", label_column="y", regression=True)
    assert [e.label for e in examples] == [0.5, 2.0]
    unlabelled = cls_data.read_examples(jsonl, text_column="q", label_column=None)
    assert [e.label for e in unlabelled] == [None, None]


def test_checkpoint_label_map_check(tmp_path):
    path = tmp_path / "train.tsv"
    path.write_text("sentence\tlabel\nok\tpos\nhmm\tneutral\n")
    examples = cls_data.read_examples(path, text_column="sentence")
    assert cls_data.check_label_map(None, examples, "ckpt/config.json") is None
    assert cls_data.check_label_map({"LABEL_0": 0, "LABEL_1": 1}, examples, "ckpt/config.json") is None
    full = {"neg": 0, "neutral": 1, "pos": 2}
    assert cls_data.check_label_map(full, examples, "ckpt/config.json") == full
    with pytest.raises(BertkitError, match=r"train.tsv:3: label 'neutral' is not in the label map of "
                                           r"ckpt/config.json \(neg, pos\)$"):
        cls_data.check_label_map({"neg": 0, "pos": 1}, examples, "ckpt/config.json")


@pytest.mark.parametrize("name,content,kwargs,message", [
    ("short.tsv", "index\tsentence1\tsentence2\tlabel\n0\ta\tb\tentailment\n1\ta\tentailment\n",
     {"glue_task": "rte"}, r"short.tsv:3: expected 4 tab-separated fields \(as the header\), found 3$"),
    ("mrpc.tsv", "\ufeffQuality\t#1 ID\t#2 ID\t#1 String\t#2 String\n1\t1\t2\ta\tb\n2\t3\t4\tc\td\n",
     {"glue_task": "mrpc"}, r"mrpc.tsv:3: label '2' is not one of mrpc's labels \(0, 1\)$"),
    ("empty.tsv", "", {"glue_task": "sst2"}, r"empty.tsv: empty file"),
    ("header_only.tsv", "sentence\tlabel\n", {"glue_task": "sst2"}, r"header_only.tsv: empty file \(no examples\)"),
    ("typo.tsv", "sentence\tlabel\nx\t1\n", {"text_column": "sentense"},
     r"typo.tsv:1: no column 'sentense' \(did you mean 'sentence'\?\); the columns are 'sentence', 'label'$"),
    ("sts.tsv", "sentence1\tsentence2\tscore\na\tb\thigh\n", {"glue_task": "stsb"},
     r"sts.tsv:2: label 'high' is not a number"),
    ("wrong_task.tsv", "sentence\tlabel\nx\t1\n", {"glue_task": "rte"}, r"wrong_task.tsv:1: no column 'sentence1'"),
    ("quote.csv", 'text,label\n"open quote,1\n', {"text_column": "text"}, r"quote.csv:\d: malformed CSV"),
    ("bad.jsonl", '{"text": "a", "label": 1}\n{"text": "b", "label": 1\n', {"text_column": "text"},
     r"bad.jsonl:2: malformed JSON"),
    ("field.jsonl", '{"text": "a", "label": 1}\n{"txet": "b", "label": 1}\n', {"text_column": "text"},
     r"field.jsonl:2: no field 'text' \(did you mean 'txet'\?\)"),
])
def test_bad_input_is_one_line_naming_file_and_line(tmp_path, name, content, kwargs, message):
    path = tmp_path / name
    path.write_text(content, encoding="utf-8")
    with pytest.raises(BertkitError, match=message) as info:
        cls_data.read_examples(path, **kwargs)
    assert "\n" not in str(info.value) and str(path) in str(info.value)


def test_encode_rejects_labels_outside_the_map(tmp_path, tokenizer):
    path = tmp_path / "dev.tsv"
    path.write_text("sentence\tlabel\nok\tpos\nhmm\tmeh\n")
    examples = cls_data.read_examples(path, text_column="sentence")
    with pytest.raises(BertkitError, match=r"dev.tsv:3: label 'meh' is not in the label map of the label set"):
        cls_data.encode(examples, tokenizer, 16, {"neg": 0, "pos": 1})


def test_a_checkpoint_that_says_0_and_1_is_read_in_glue_names():
    assert cls_data.glue_label_map("SST-2", {"0": 0, "1": 1}) == {"negative": 0, "positive": 1}
    assert cls_data.glue_label_map("rte", {"entailment": 0, "not_entailment": 1}) == {"entailment": 0, "not_entailment": 1}
    assert cls_data.glue_labels("sst2") == ["negative", "positive"] and cls_data.glue_labels("wnli")[1] == "entailment"
