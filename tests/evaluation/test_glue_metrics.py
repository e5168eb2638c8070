"""Classification / regression metrics against scikit-learn and scipy; the GLUE task map."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from scipy import stats
from sklearn import metrics as skm

from bertkit.errors import BertkitError, ConfigError
from bertkit.evaluation.metrics import (GLUE_TASK_METRICS, accuracy, average_ranks, f1_score, glue_metrics,
                                        glue_task_name, matthews_corrcoef, pearson, spearman)


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("num_classes", [2, 3, 5])
def test_classification_metrics_match_sklearn(seed, num_classes):
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, num_classes, size=200)
    # predictions correct ~60% of the time, so the metrics are far from 0 and 1
    predictions = np.where(rng.random(200) < 0.6, labels, rng.integers(0, num_classes, size=200))
    assert accuracy(predictions, labels) == pytest.approx(skm.accuracy_score(labels, predictions), abs=1e-12)
    assert matthews_corrcoef(predictions, labels) == pytest.approx(
        skm.matthews_corrcoef(labels, predictions), abs=1e-12)
    assert f1_score(predictions, labels, average="macro") == pytest.approx(
        skm.f1_score(labels, predictions, average="macro"), abs=1e-12)
    assert f1_score(predictions, labels, average="micro") == pytest.approx(
        skm.f1_score(labels, predictions, average="micro"), abs=1e-12)
    if num_classes == 2:
        for pos_label in (0, 1):
            assert f1_score(predictions, labels, pos_label=pos_label) == pytest.approx(
                skm.f1_score(labels, predictions, pos_label=pos_label), abs=1e-12)


def test_string_labels_and_macro_over_classes_seen_on_either_side():
    labels = ["entailment", "neutral", "entailment", "contradiction"]
    predictions = ["entailment", "entailment", "neutral", "neutral"]
    assert accuracy(predictions, labels) == 0.25
    assert f1_score(predictions, labels, average="macro") == pytest.approx(
        skm.f1_score(labels, predictions, average="macro"))
    assert matthews_corrcoef(predictions, labels) == pytest.approx(skm.matthews_corrcoef(labels, predictions))
    assert f1_score(predictions, labels, pos_label="entailment") == pytest.approx(0.5)  # TP 1, FP 1, FN 1


def test_hand_worked_binary_f1_and_mcc():
    # TP=2 (idx 0,1), FN=1 (idx 2), FP=1 (idx 3), TN=2 (idx 4,5)
    labels = [1, 1, 1, 0, 0, 0]
    predictions = [1, 1, 0, 1, 0, 0]
    assert f1_score(predictions, labels) == pytest.approx(2 * 2 / (2 * 2 + 1 + 1))
    assert matthews_corrcoef(predictions, labels) == pytest.approx((2 * 2 - 1 * 1) / np.sqrt(3 * 3 * 3 * 3))


@pytest.mark.parametrize("seed", range(5))
def test_correlations_match_scipy_including_ties(seed):
    rng = np.random.default_rng(seed)
    labels = rng.uniform(0, 5, size=150)
    predictions = labels + rng.normal(0, 1.5, size=150)
    assert pearson(predictions, labels) == pytest.approx(stats.pearsonr(predictions, labels)[0], abs=1e-12)
    assert spearman(predictions, labels) == pytest.approx(stats.spearmanr(predictions, labels)[0], abs=1e-12)
    # STS-B gold scores come in steps of 0.2: many ties on both sides
    tied_labels, tied_predictions = np.round(labels * 5) / 5, np.round(predictions)
    assert spearman(tied_predictions, tied_labels) == pytest.approx(
        stats.spearmanr(tied_predictions, tied_labels)[0], abs=1e-12)


def test_average_ranks_matches_scipy_rankdata():
    values = np.array([3.0, 1.0, 4.0, 1.0, 5.0, 9.0, 2.0, 6.0, 5.0, 3.0, 5.0])
    np.testing.assert_array_equal(average_ranks(values), stats.rankdata(values, method="average"))


def test_constant_inputs_give_zero_not_nan():
    labels = [0, 1, 1, 0, 1]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert skm.matthews_corrcoef(labels, [1] * 5) == 0.0  # the reference convention
    assert matthews_corrcoef([1] * 5, labels) == 0.0
    assert matthews_corrcoef(labels, [1] * 5) == 0.0
    assert pearson([2.0] * 5, [0.1, 0.5, 0.2, 0.9, 0.3]) == 0.0
    assert spearman([2.0] * 5, [0.1, 0.5, 0.2, 0.9, 0.3]) == 0.0
    assert f1_score([0, 0, 0], [0, 0, 0]) == 0.0  # no positive anywhere: sklearn's zero_division default
    assert matthews_corrcoef([0, 1, 2], [0, 1, 2]) == pytest.approx(1.0)


@pytest.mark.parametrize("call", [
    lambda: accuracy([], []),
    lambda: matthews_corrcoef([], []),
    lambda: pearson([], []),
    lambda: f1_score([1, 0], [1]),
    lambda: spearman([1.0, float("nan")], [1.0, 2.0]),
])
def test_bad_input_is_a_user_error(call):
    with pytest.raises(BertkitError):
        call()


def test_glue_metrics_per_task():
    labels, predictions = [1, 0, 1, 1, 0, 1], [1, 0, 0, 1, 1, 1]
    mcc = skm.matthews_corrcoef(labels, predictions)
    assert glue_metrics("cola", predictions, labels) == {"mcc": pytest.approx(mcc)}
    for task in ("sst2", "mnli", "mnli-mm", "qnli", "rte", "wnli"):
        assert glue_metrics(task, predictions, labels) == {"accuracy": pytest.approx(4 / 6)}
    for task in ("mrpc", "qqp"):
        f1, acc = skm.f1_score(labels, predictions), 4 / 6
        assert glue_metrics(task, predictions, labels) == {"f1": pytest.approx(f1), "accuracy": pytest.approx(acc),
                                                           "combined": pytest.approx((f1 + acc) / 2)}
    scores, gold = [0.5, 2.0, 3.1, 4.8, 1.0], [0.0, 2.4, 3.0, 5.0, 1.6]
    result = glue_metrics("STS-B", np.array(scores)[:, None], gold)  # (N, 1) regression output and the GLUE dir name
    r = stats.pearsonr(scores, gold)[0]
    assert result == {"pearson": pytest.approx(r), "spearmanr": pytest.approx(1.0),
                      "combined": pytest.approx((r + 1) / 2)}
    assert set(result) == set(GLUE_TASK_METRICS["stsb"])


def test_glue_metrics_accepts_logits():
    logits = np.array([[0.1, 2.0], [3.0, -1.0], [0.0, 0.5]])  # argmax -> 1, 0, 1
    assert glue_metrics("sst2", logits, [1, 0, 0]) == {"accuracy": pytest.approx(2 / 3)}


def test_unknown_task_names_the_allowed_values():
    with pytest.raises(ConfigError, match=r"task 'squad'.*cola, sst2, mrpc, qqp, stsb, mnli"):
        glue_metrics("squad", [1], [1])
    assert glue_task_name("SST-2") == "sst2" and glue_task_name("MNLI_mismatched") == "mnli-mm"
    with pytest.raises(ConfigError, match="average 'weighted'"):
        f1_score([1], [1], average="weighted")
