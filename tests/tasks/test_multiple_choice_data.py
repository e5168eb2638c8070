"""Multiple-choice data: PIQA (labels in a side file), CommonsenseQA (HF export and the
original layout), SWAG CSV; (B, C, T) batches equal to transformers' tokenizer and
accepted by BertForMultipleChoice; errors naming file and line."""

from __future__ import annotations

import json

import pytest
import torch

from bertkit.errors import BertkitError
from bertkit.tasks import multiple_choice as mc


def _jsonl(path):
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def test_piqa_labels_come_from_the_side_file(fixtures):
    path = fixtures / "piqa" / "valid.jsonl"
    examples = mc.read_examples(path)
    records = _jsonl(path)
    labels = [int(x) for x in (fixtures / "piqa" / "valid-labels.lst").read_text().split()]
    assert len(examples) == len(records) == 10
    assert [ex.label for ex in examples] == labels
    assert [(ex.context, ex.choices) for ex in examples] == [(r["goal"], [r["sol1"], r["sol2"]]) for r in records]


def test_commonsenseqa_answer_keys(fixtures):
    path = fixtures / "commonsenseqa" / "dev.jsonl"
    examples = mc.read_examples(path)
    records = _jsonl(path)
    assert [ex.label for ex in examples] == [r["choices"]["label"].index(r["answerKey"]) for r in records]
    assert all(len(ex.choices) == 5 for ex in examples) and examples[0].choices == records[0]["choices"]["text"]


def test_original_commonsenseqa_layout_and_generic_lists(tmp_path):
    path = tmp_path / "csqa.jsonl"
    rows = [
        {"answerKey": "B", "id": "1", "question": {"question_concept": "x", "stem": "Where?",
                                                   "choices": [{"label": "A", "text": "here"},
                                                               {"label": "B", "text": "there"}]}},
        {"context": "It rains.", "question": "So?", "endings": ["wet", "dry"], "label": 0},
        {"ctx": "A cat", "endings": ["sleeps", "barks"], "label": "1"},
    ]
    path.write_text("\n".join(json.dumps(r) for r in rows))
    examples = mc.read_examples(path)
    assert [(ex.context, ex.choices, ex.label) for ex in examples] == [
        ("Where?", ["here", "there"], 1), ("It rains. So?", ["wet", "dry"], 0), ("A cat", ["sleeps", "barks"], 1)]


def test_swag_csv_endings_continue_sent2(tmp_path):
    path = tmp_path / "val.csv"
    path.write_text(
        "video-id,fold-ind,startphrase,sent1,sent2,gold-source,ending0,ending1,ending2,ending3,label\n"
        'lsmdc1,17,"x","Someone opens the door, slowly.",He,gold,walks in.,flies away.,"sings, loudly.",sits.,0\n'
        "lsmdc2,18,y,The man smiles.,She,gen,laughs.,cries.,runs.,waves.,3\n")
    examples = mc.read_examples(path)
    assert examples[0].context == "Someone opens the door, slowly."
    assert examples[0].choices == ["He walks in.", "He flies away.", "He sings, loudly.", "He sits."]
    assert [ex.label for ex in examples] == [0, 3] and examples[1].source.endswith("val.csv:3")


def test_batches_match_transformers_and_run_through_the_model(fixtures, tokenizer, hf_tokenizer, tiny_config):
    examples = mc.read_examples(fixtures / "commonsenseqa" / "dev.jsonl")[:4]
    features = mc.encode(examples, tokenizer, 24)
    batch = mc.collate(features, tokenizer.pad_token_id)
    first = [ex.context for ex in examples for _ in ex.choices]
    second = [choice for ex in examples for choice in ex.choices]
    ref = hf_tokenizer(first, second, truncation=True, max_length=24, padding="longest", pad_to_multiple_of=8,
                       return_tensors="pt")
    for key in ("input_ids", "token_type_ids", "attention_mask"):
        assert batch[key].shape == (4, 5, ref[key].shape[-1])
        assert torch.equal(batch[key], ref[key].view(4, 5, -1)), key
    assert batch["labels"].tolist() == [ex.label for ex in examples]

    from bertkit import BertConfig, BertForMultipleChoice

    cfg = BertConfig.from_dict({**tiny_config.to_dict(), "vocab_size": tokenizer.vocab_size})
    out = BertForMultipleChoice(cfg)(**batch)
    assert out.logits.shape == (4, 5) and torch.isfinite(out.loss)


@pytest.mark.parametrize("name,content,message", [
    ("range.jsonl", '{"goal": "g", "sol1": "a", "sol2": "b", "label": 2}\n',
     r"range.jsonl:1: label 2 is not a choice index \(0..1\)$"),
    ("count.jsonl", '{"question": "q", "choices": ["a", "b", "c"], "label": 0}\n'
                    '{"question": "q", "choices": ["a", "b"], "label": 0}\n',
     r"count.jsonl:2: 2 choices, but .*count.jsonl:1 has 3"),
    ("key.jsonl", '{"question": "q", "choices": {"label": ["A", "B"], "text": ["x", "y"]}, "answerKey": "C"}\n',
     r"key.jsonl:1: answerKey 'C' is not one of the choices \(the choices are A, B\)$"),
    ("field.jsonl", '{"qestion": "q", "choices": ["a", "b"], "label": 0}\n',
     r"field.jsonl:1: no field 'context' or 'question' or 'goal' or 'ctx' or 'sent1'"),
    ("nochoice.jsonl", '{"question": "q", "label": 0}\n', r"nochoice.jsonl:1: no field 'choices'"),
    ("swag.csv", "sent1,sent2,ending0,ending1,label\nA,B,c,d,1\nA,B,c,1\n",
     r"swag.csv:3: expected 5 comma-separated fields \(as the header\), found 4$"),
    ("swag2.csv", "sent1,sent2,ending0,ending1,label\nA,B,c,d,first\n", r"swag2.csv:2: label 'first' is not a choice"),
    ("typo.csv", "sent1,sent_2,ending0\nA,B,c\n", r"typo.csv:1: no column 'sent2' \(did you mean 'sent_2'\?\)"),
    ("empty.jsonl", "\n\n", r"empty.jsonl: empty file \(no examples\)$"),
])
def test_bad_input_names_file_and_line(tmp_path, name, content, message):
    path = tmp_path / name
    path.write_text(content)
    with pytest.raises(BertkitError, match=message):
        mc.read_examples(path)


@pytest.mark.parametrize("header, label, message", [
    # a misnamed ending3 (SWAG's four endings) read as three choices: the label error names the columns found
    ("sent1,sent2,ending0,ending1,ending2,end3,label", "3",
     r"swag.csv:2: label 3 is not a choice index \(0..2\): choices come from columns ending0, ending1, ending2 "
     r"\(other columns: end3\); is a column misnamed\?$"),
    ("video-id,sent1,sent2,gold-source,ending0,ending1,ending2,label", "3",
     r"swag.csv:2: label 3 is not a choice index \(0..2\): choices come from columns ending0, ending1, ending2; "
     r"is a column misnamed\?$"),
    # caught from the header alone (an unlabelled test split too): an ending-like name, a gap in the numbers
    ("sent1,sent2,ending0,ending1,ending2,Ending_3", None,
     r"swag.csv:1: column 'Ending_3' looks like a choice but is not read \(choices come from columns ending0, "
     r"ending1, ending2\); name it ending3$"),
    ("sent1,sent2,ending0,ending1,ending3,label", "1",
     r"swag.csv:1: choices come from columns ending0, ending1, ending3; they must be numbered ending0..ending2 "
     r"without gaps \(is a column misnamed\?\)$"),
])
def test_swag_misnamed_ending_column(tmp_path, header, label, message):
    names = header.split(",")
    values = {"sent1": "A man sits.", "sent2": "He", "label": label or ""}
    path = tmp_path / "swag.csv"
    path.write_text(header + "\n" + ",".join(values.get(name, "x") for name in names) + "\n")
    with pytest.raises(BertkitError, match=message):
        mc.read_examples(path)


def test_labels_file_of_another_length(tmp_path):
    data = tmp_path / "valid.jsonl"
    data.write_text('{"goal": "g", "sol1": "a", "sol2": "b"}\n{"goal": "h", "sol1": "a", "sol2": "b"}\n')
    (tmp_path / "valid-labels.lst").write_text("0\n")
    with pytest.raises(BertkitError, match=r"valid-labels.lst: 1 labels for 2 examples in .*valid.jsonl$"):
        mc.read_examples(data)
    (tmp_path / "valid-labels.lst").write_text("0\nx\n")
    with pytest.raises(BertkitError, match=r"valid-labels.lst:2: label 'x' is not a choice index"):
        mc.read_examples(data)
