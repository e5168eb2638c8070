"""Official SQuAD scoring: hand-worked normalization / EM / F1, v2.0 no-answer rules and thresholds, real dev set."""

from __future__ import annotations

import json
import os
import warnings
from pathlib import Path

import pytest

from bertkit.errors import BertkitError, ConfigError
from bertkit.evaluation.squad import (MissingPredictionWarning, UnknownPredictionWarning, evaluate_squad, evaluate_v1,
                                      evaluate_v2, exact_match, normalize_answer, parse_squad_dataset,
                                      read_squad_dataset, squad_v2_threshold, token_f1)

SHARED_DATA = Path(os.environ.get("BERTKIT_SHARED_DATA", Path(__file__).resolve().parents[3] / "shared" / "data"))
DEV_V11 = SHARED_DATA / "squad" / "dev-v1.1.json"


def squad_document(questions: list[tuple[str, list[str]]], version: str = "v2.0") -> dict:
    """A SQuAD JSON object with one paragraph holding `(id, gold answers)`; no answers = impossible."""
    qas = [{"id": qid, "question": "?", "is_impossible": not answers,
            "answers": [{"text": text, "answer_start": 0} for text in answers]} for qid, answers in questions]
    return {"version": version, "data": [{"title": "t", "paragraphs": [{"context": "c", "qas": qas}]}]}


# Five v2.0 questions worked by hand below.
V2_QUESTIONS = [("q1", ["Denver Broncos"]), ("q2", ["Carolina Panthers"]), ("q3", []), ("q4", []),
                ("q5", ["Levi's Stadium"])]
V2_PREDICTIONS = {"q1": "Denver Broncos", "q2": "", "q3": "", "q4": "Santa Clara", "q5": "Stadium"}
# raw exact:      1                       0          1 (""=="")  0                   0
# raw f1:         1                       0          1           0                   2/3 (p=1/1, r=1/2)


@pytest.mark.parametrize("text,normalized", [
    ("The Quick, Brown Fox!", "quick brown fox"),
    ("an apple a day", "apple day"),
    ("Theater Another", "theater another"),  # articles only as whole words
    ("A-ha the-end", "aha theend"),  # punctuation goes first, so no article is left to remove
    ("  multiple   spaces\n\there ", "multiple spaces here"),
    ("¿Qué?", "¿qué"),  # only ASCII punctuation is removed
    ("Levi's Stadium", "levis stadium"),
])
def test_normalize_answer(text, normalized):
    assert normalize_answer(text) == normalized


def test_exact_match_and_token_f1_by_hand():
    assert exact_match("Denver Broncos.", "the Denver Broncos") == 1.0
    assert exact_match("Denver", "Denver Broncos") == 0.0
    assert token_f1("Denver Broncos won", "Denver Broncos") == pytest.approx(0.8)  # p=2/3, r=1
    assert token_f1("the cat the cat", "cat") == pytest.approx(2 / 3)  # counts clip: 1 common, p=1/2, r=1
    assert token_f1("red car", "blue bike") == 0.0
    assert token_f1("", "") == 0.0  # v1.1: nothing in common
    assert token_f1("", "", empty_match=True) == 1.0  # v2.0: both "no answer"
    assert token_f1("a", "The", empty_match=True) == 1.0  # both normalize to ""
    assert token_f1("", "Broncos", empty_match=True) == 0.0


def test_v1_max_over_gold_answers_and_missing_prediction():
    dataset = parse_squad_dataset(squad_document([
        ("a", ["Denver Broncos", "Broncos"]),
        ("b", ["Denver Broncos", "the Denver Broncos team"]),
        ("c", ["Santa Clara"]),
    ], version="1.1"))
    predictions = {"a": "broncos", "b": "Broncos"}
    with pytest.warns(MissingPredictionWarning, match="1 of 3 questions have no prediction.*first: c"):
        result = evaluate_v1(dataset, predictions)
    # a: EM 1, F1 1; b: EM 0, F1 max(2/3 [p=1, r=1/2], 1/2 [p=1, r=1/3]); c: missing -> 0
    assert result == {"exact_match": pytest.approx(100 / 3), "f1": pytest.approx(100 * (1 + 2 / 3) / 3)}


def test_v2_no_answer_rules_and_split():
    dataset = parse_squad_dataset(squad_document(V2_QUESTIONS))
    assert dataset.scoring_version() == 2
    result = evaluate_squad(dataset, V2_PREDICTIONS)
    assert list(result) == ["exact", "f1", "total", "HasAns_exact", "HasAns_f1", "HasAns_total",
                            "NoAns_exact", "NoAns_f1", "NoAns_total"]
    assert result == {
        "exact": pytest.approx(40.0), "f1": pytest.approx(100 * (2 + 2 / 3) / 5), "total": 5,
        "HasAns_exact": pytest.approx(100 / 3), "HasAns_f1": pytest.approx(100 * (1 + 2 / 3) / 3), "HasAns_total": 3,
        "NoAns_exact": pytest.approx(50.0), "NoAns_f1": pytest.approx(50.0), "NoAns_total": 2,
    }
    only_answerable = parse_squad_dataset(squad_document(V2_QUESTIONS[:2]))
    answerable_result = evaluate_v2(only_answerable, {"q1": "Denver Broncos", "q2": ""})
    assert answerable_result["HasAns_total"] == 2 and "NoAns_total" not in answerable_result


def test_v2_best_threshold_by_hand():
    dataset = parse_squad_dataset(squad_document(V2_QUESTIONS))
    na_probs = {"q1": 0.1, "q2": 0.9, "q3": 0.8, "q4": 0.6, "q5": 0.5}
    # Sweep in increasing na_prob, starting from "all no answer" = 2 (q3, q4 correct):
    #   q1 0.1: +1 -> 3 | q5 0.5: EM +0 -> 3, F1 +2/3 -> 3.67 | q4 0.6: -1 (non-empty for impossible)
    #   q3 0.8: +0 (empty for impossible) | q2 0.9: +0 (empty for answerable)
    result = evaluate_v2(dataset, V2_PREDICTIONS, na_probs)
    assert result["best_exact"] == pytest.approx(60.0) and result["best_exact_thresh"] == 0.1
    assert result["best_f1"] == pytest.approx(100 * (3 + 2 / 3) / 5) and result["best_f1_thresh"] == 0.5
    # applying the best F1 threshold reaches the best F1: q2, q3, q4 (na_prob > 0.5) become "no answer"
    applied = evaluate_v2(dataset, V2_PREDICTIONS, na_probs, na_prob_thresh=0.5)
    assert applied["f1"] == pytest.approx(result["best_f1"])
    assert applied["exact"] == pytest.approx(60.0) and applied["NoAns_exact"] == 100.0


def test_squad_v2_threshold_on_null_score_differences():
    dataset = parse_squad_dataset(squad_document(V2_QUESTIONS))
    best_spans = {"q1": "Denver Broncos", "q2": "Carolina Panthers", "q3": "Santa Clara", "q4": "Santa Clara",
                  "q5": "Stadium"}
    diffs = {"q1": -3.0, "q2": 1.5, "q3": 2.0, "q4": -1.0, "q5": 0.5}  # score(null) - score(best span)
    # start 2; q1 -3: +1 -> 3 | q4 -1: -1 -> 2 | q5 0.5: +2/3 (EM +0) | q2 1.5: +1 -> 3.67 (EM 3) | q3 2.0: -1
    assert squad_v2_threshold(dataset, best_spans, diffs) == (1.5, pytest.approx(100 * (3 + 2 / 3) / 5))
    assert squad_v2_threshold(dataset, best_spans, diffs, metric="exact") == (-3.0, pytest.approx(60.0))
    with pytest.raises(ConfigError):
        squad_v2_threshold(dataset, best_spans, diffs, metric="em")


def test_answering_nothing_best_gives_a_threshold_below_every_difference():
    # only unanswerable questions with non-empty best spans: every answer costs 1, so "no answer" everywhere wins
    dataset = parse_squad_dataset(squad_document([("n1", []), ("n2", []), ("n3", [])]))
    best_spans = {"n1": "Santa Clara", "n2": "Denver", "n3": "1996"}
    diffs = {"n1": -2.0, "n2": -0.5, "n3": 0.25}
    threshold, score = squad_v2_threshold(dataset, best_spans, diffs)
    assert score == 100.0 and threshold == -3.0  # 1.0 below the smallest difference
    applied = evaluate_v2(dataset, best_spans, diffs, na_prob_thresh=threshold)
    assert applied["f1"] == 100.0 and applied["NoAns_exact"] == 100.0
    # the official sweep's 0.0 would answer n1 and n2 (difference <= 0.0): 1 of 3 right
    assert evaluate_v2(dataset, best_spans, diffs, na_prob_thresh=0.0)["f1"] == pytest.approx(100 / 3)
    # with probabilities (`--na-prob`) the official procedure is kept: best_*_thresh is 0.0
    probabilities = {"n1": 0.2, "n2": 0.4, "n3": 0.6}
    result = evaluate_v2(dataset, best_spans, probabilities)
    assert result["best_f1"] == 100.0 and result["best_f1_thresh"] == 0.0 and result["best_exact_thresh"] == 0.0


def test_unknown_prediction_ids_warn_and_v1_refuses_impossible_questions():
    dataset = parse_squad_dataset(squad_document(V2_QUESTIONS))
    with pytest.warns(UnknownPredictionWarning, match="1 predictions are for question ids not in the dataset"):
        evaluate_v2(dataset, {**V2_PREDICTIONS, "zzz": "x"})
    with pytest.raises(BertkitError, match="2 questions have no gold answer"):
        evaluate_squad(dataset, V2_PREDICTIONS, version=1)
    with pytest.raises(BertkitError, match="no no-answer probability for question id 'q5'"):
        evaluate_v2(dataset, V2_PREDICTIONS, {"q1": 0.0, "q2": 0.0, "q3": 0.0, "q4": 0.0})


@pytest.mark.skipif(not DEV_V11.exists(), reason="shared SQuAD dev-v1.1.json not available")
def test_real_dev_set_first_gold_answer_scores_100():
    dataset = read_squad_dataset(DEV_V11)
    assert len(dataset.questions) == 10570 and dataset.version == "1.1" and dataset.scoring_version() == 1
    predictions = {q.qid: q.answers[0] for q in dataset.questions}
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no missing / unknown ids
        assert evaluate_squad(dataset, predictions) == {"exact_match": 100.0, "f1": 100.0}
    # a wrong answer for one question costs exactly 1/10570 of the exact-match score
    predictions[dataset.questions[0].qid] = "certainly not this"
    assert evaluate_squad(dataset, predictions)["exact_match"] == pytest.approx(100 * 10569 / 10570)


def test_dataset_parse_errors_name_the_place(tmp_path):
    bad = squad_document(V2_QUESTIONS)
    del bad["data"][0]["paragraphs"][0]["qas"][1]["id"]
    with pytest.raises(BertkitError, match=r"dev.json: data\[0\]\.paragraphs\[0\]\.qas\[1\]: .*'id'"):
        parse_squad_dataset(bad, name="dev.json")
    path = tmp_path / "x.json"
    path.write_text(json.dumps({"version": "1.1"}))
    with pytest.raises(BertkitError, match="x.json: not a SQuAD dataset"):
        read_squad_dataset(path)
    assert parse_squad_dataset(squad_document(V2_QUESTIONS[:1], version="1.1")).scoring_version() == 2  # is_impossible
