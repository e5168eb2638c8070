"""Text-to-text formats and scoring (bertkit.tasks.text2text): the T5 paper's GLUE and SQuAD
strings, STS-B rounding, label-word scoring with invalid outputs, SQuAD through the official
metric, the NER text format, and the pairs reader's one-line errors."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from bertkit.errors import BertkitError
from bertkit.evaluation.metrics import glue_metrics, percentages
from bertkit.evaluation.squad import evaluate_squad, read_squad_dataset
from bertkit.tasks.programs import TaskSpec
from bertkit.tasks.text2text import (
    GLUE_FORMATS,
    Text2TextExample,
    glue_scores,
    glue_source,
    glue_target,
    ner_scores,
    ner_target,
    parse_ner,
    read_examples,
    sentence_entities,
    squad_scores,
    stsb_target,
)

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "tasks"


def spec(task: str, **fields) -> TaskSpec:
    return TaskSpec(family="text2text", text2text_task=task, **fields)


# Inputs and targets as printed in the T5 paper (Raffel et al. 2020, JMLR 21(140), appendix D
# "Preprocessed examples"); the GLUE reader's example gives (text, pair) = (first field, second
# field) of the TSV, and T5 orders the keys alphabetically (MNLI: hypothesis before premise).
PAPER = [
    ("cola", "John made Bill master of himself.", None, "1",
     "cola sentence: John made Bill master of himself.", "acceptable"),
    ("rte", "A smaller proportion of Yugoslavia's Italians were settled in Slovenia.",
     "Slovenia has 3,000 inhabitants.", "not_entailment",
     "rte sentence1: A smaller proportion of Yugoslavia's Italians were settled in Slovenia. "
     "sentence2: Slovenia has 3,000 inhabitants.", "not_entailment"),
    ("mnli", "yeah well losing is not everything", "The St. Louis Cardinals have always won.", "contradiction",
     "mnli hypothesis: The St. Louis Cardinals have always won. premise: yeah well losing is not everything",
     "contradiction"),
    ("mrpc", "We acted because we saw the existing evidence in a new light .",
     "Rather , the US acted because the administration saw existing evidence .", "1",
     "mrpc sentence1: We acted because we saw the existing evidence in a new light . "
     "sentence2: Rather , the US acted because the administration saw existing evidence .", "equivalent"),
    ("qnli", "Where did Jebe die?", "Genghis Khan recalled Subutai back to Mongolia soon afterwards.", "entailment",
     "qnli question: Where did Jebe die? sentence: Genghis Khan recalled Subutai back to Mongolia soon afterwards.",
     "entailment"),
    ("qqp", "What attributes would have made you highly desirable in ancient Rome?",
     "How I GET OPPERTINUTY TO JOIN IT COMPANY AS A FRESHER?", "0",
     "qqp question1: What attributes would have made you highly desirable in ancient Rome? "
     "question2: How I GET OPPERTINUTY TO JOIN IT COMPANY AS A FRESHER?", "not_duplicate"),
    ("sst2", "it confirms fincher 's status as a film maker .", None, "1",
     "sst2 sentence: it confirms fincher 's status as a film maker .", "positive"),
    ("stsb", "Representatives for Puerto Rico's Governor also did not immediately respond.",
     "Representatives for New York Gov. Andrew Cuomo did not immediately respond.", 3.4,
     "stsb sentence1: Representatives for Puerto Rico's Governor also did not immediately respond. "
     "sentence2: Representatives for New York Gov. Andrew Cuomo did not immediately respond.", "3.4"),
    ("wnli", "The city councilmen refused the demonstrators a permit because they feared violence.",
     "The demonstrators feared violence.", "0",
     "wnli sentence1: The city councilmen refused the demonstrators a permit because they feared violence. "
     "sentence2: The demonstrators feared violence.", "not_entailment"),
]


@pytest.mark.parametrize("task, text, pair, label, source, target", PAPER, ids=[row[0] for row in PAPER])
def test_glue_inputs_and_targets_are_the_t5_papers(task, text, pair, label, source, target):
    assert glue_source(task, text, pair) == source
    assert glue_target(task, label) == target


def test_every_glue_task_has_a_format_and_label_words():
    from bertkit.evaluation.metrics import GLUE_TASK_METRICS
    from bertkit.tasks.classification import glue_labels

    assert set(GLUE_FORMATS) == set(GLUE_TASK_METRICS)
    # the diagnostic set and mismatched MNLI are read as MNLI, as T5 does
    assert GLUE_FORMATS["ax"] == GLUE_FORMATS["mnli-mm"] == GLUE_FORMATS["mnli"]
    for task in GLUE_FORMATS:
        labels = glue_labels(task)
        if labels is not None:
            assert len(set(labels)) == len(labels) and all(" " not in w for w in labels)  # T5's words


def test_glue_files_are_read_by_the_glue_reader(fixtures=FIXTURES):
    rte = read_examples(FIXTURES / "glue" / "RTE" / "dev.tsv", spec("glue", glue_task="RTE"))
    first = rte[0]
    assert first.source.startswith("rte sentence1: ") and " sentence2: " in first.source
    assert first.target in ("entailment", "not_entailment") and first.where.endswith(":2")
    cola = read_examples(FIXTURES / "glue" / "CoLA" / "dev.tsv", spec("glue", glue_task="cola"))
    assert all(ex.source.startswith("cola sentence: ") and ex.target in ("acceptable", "unacceptable") for ex in cola)
    stsb = read_examples(FIXTURES / "glue" / "STS-B" / "dev.tsv", spec("glue", glue_task="stsb"))
    assert all(ex.target == stsb_target(ex.gold) for ex in stsb)


@pytest.mark.parametrize("score, target", [(3.8, "3.8"), (3.75, "3.8"), (3.7, "3.6"), (0.5, "0.4"), (2.9, "2.8"),
                                           (5.0, "5.0"), (0.0, "0.0"), (4.14, "4.2"), (1.0, "1.0")])
def test_stsb_targets_round_to_the_nearest_fifth(score, target):
    # T5: tf.as_string(tf.round(label * 5) / 5, precision=1); tf.round rounds halves to even (18.5 -> 18)
    assert stsb_target(score) == target


def examples(golds) -> list[Text2TextExample]:
    return [Text2TextExample("x", None, gold, f"f:{i}") for i, gold in enumerate(golds)]


def test_label_words_score_as_glue_does_and_invalid_outputs_count_as_wrong():
    gold = ["entailment", "not_entailment", "entailment", "not_entailment"]
    outputs = ["entailment", "not_entailment", "yes", "Entailment"]  # two invalid: wrong whatever the gold
    scores = glue_scores("rte", examples(gold), outputs)
    assert scores == {"accuracy": 50.0, "invalid": 2} and isinstance(scores["invalid"], int)  # a count
    # MRPC: F1 as glue_metrics computes it on the ids, an invalid output flipped to the other label
    gold = ["equivalent", "equivalent", "not_equivalent", "equivalent", "not_equivalent"]  # GLUE names, as read
    outputs = ["equivalent", "???", "not_equivalent", "not_equivalent", ""]
    scores = glue_scores("mrpc", examples(gold), outputs)
    expected = percentages(glue_metrics("mrpc", np.array([1, 0, 0, 0, 1]), np.array([1, 1, 0, 1, 0])))
    assert scores == {**expected, "invalid": 2.0}
    # CoLA: MCC
    scores = glue_scores("cola", examples(["acceptable", "unacceptable", "acceptable", "unacceptable"]), ["acceptable", "unacceptable", "x", "acceptable"])
    assert scores["invalid"] == 1.0
    assert scores["mcc"] == pytest.approx(percentages(glue_metrics("cola", np.array([1, 0, 0, 1]),
                                                                   np.array([1, 0, 1, 0])))["mcc"])


def test_stsb_outputs_are_numbers_and_unparsable_ones_the_far_end_of_the_scale():
    gold = [4.2, 1.0, 3.0, 0.4]
    outputs = ["4.0", "1.2", "three", "nan"]
    scores = glue_scores("stsb", examples(gold), outputs)
    expected = percentages(glue_metrics("stsb", np.array([4.0, 1.2, 0.0, 5.0]), np.array(gold)))
    assert scores == {**expected, "invalid": 2.0}


def test_squad_is_scored_by_the_official_metric_on_every_answer():
    path = FIXTURES / "squad_dev-v1.1.json"
    read = read_examples(path, spec("squad"))
    assert read[0].source.startswith("question: ") and " context: " in read[0].source
    assert read[0].target == read[0].gold[0]
    outputs = [ex.gold[-1] if i % 3 else "the " + ex.gold[0] + " x" for i, ex in enumerate(read)]
    official = evaluate_squad(read_squad_dataset(path), {ex.qid: out for ex, out in zip(read, outputs)})
    assert squad_scores(read, outputs) == official
    assert 0 < official["exact_match"] < 100


def test_ner_text_format_round_trips_and_scores_entities():
    words = "John Smith lives in Paris with Acme Corp .".split()
    tags = ["B-PER", "I-PER", "O", "O", "B-LOC", "O", "B-ORG", "I-ORG", "O"]
    entities = sentence_entities(words, tags)
    assert entities == [("PER", "John Smith"), ("LOC", "Paris"), ("ORG", "Acme Corp")]
    assert ner_target(entities) == "PER: John Smith; LOC: Paris; ORG: Acme Corp"
    assert parse_ner(ner_target(entities)) == entities
    assert ner_target([]) == "none" and parse_ner("none") == []
    assert parse_ner("PER John") is None and parse_ner("PER: ") is None
    read = read_examples(FIXTURES / "conll2003" / "eng.testa", spec("ner"))
    assert read[0].source.startswith("ner sentence: ")
    assert all(parse_ner(ex.target) == ex.gold for ex in read)
    gold = examples([entities, [("MISC", "German")]])
    # 2 of 3 right in sentence 1 (one wrong type), sentence 2 unparsable: P 2/3, R 2/4
    scores = ner_scores(gold, ["PER: John Smith; LOC: Paris; PER: Acme Corp", "German"])
    assert scores["invalid"] == 1.0
    assert scores["precision"] == pytest.approx(200 / 3) and scores["recall"] == pytest.approx(50.0)
    assert scores["f1"] == pytest.approx(100 * 2 * (2 / 3) * 0.5 / (2 / 3 + 0.5))


def test_pairs_jsonl_and_csv_with_their_fields(tmp_path):
    jsonl = tmp_path / "p.jsonl"
    jsonl.write_text('{"q": "translate: cat", "a": "Katze"}\n\n{"q": "translate: dog", "a": "Hund"}\n')
    read = read_examples(jsonl, spec("pairs", source_field="q", target_field="a"))
    assert [(ex.source, ex.target, ex.where) for ex in read] == [("translate: cat", "Katze", f"{jsonl}:1"),
                                                                 ("translate: dog", "Hund", f"{jsonl}:3")]
    csv = tmp_path / "p.csv"
    csv.write_text('input,output\n"a, b",c\n')
    assert [(ex.source, ex.target) for ex in read_examples(csv, spec("pairs"))] == [("a, b", "c")]


def test_pairs_bad_input_names_the_file_and_line(tmp_path):
    empty = tmp_path / "empty.jsonl"
    empty.write_text(json.dumps({"input": "ok", "output": "y"}) + "\n" + json.dumps({"input": "  ", "output": "y"}))
    with pytest.raises(BertkitError, match=rf"^{empty}:2: empty source \(field 'input'\)"):
        read_examples(empty, spec("pairs"))
    missing = tmp_path / "missing.jsonl"
    missing.write_text(json.dumps({"text": "ok"}) + "\n")
    with pytest.raises(BertkitError, match=rf"^{missing}:1: no field 'input'"):
        read_examples(missing, spec("pairs"))
    latin = tmp_path / "latin.jsonl"
    latin.write_bytes(b'{"input": "ok", "output": "y"}\n{"input": "caf\xe9", "output": "y"}\n')
    with pytest.raises(BertkitError, match=rf"^{latin}:2: .*UTF-8"):
        read_examples(latin, spec("pairs"))
