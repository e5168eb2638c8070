"""Classification and regression metrics, which of them each GLUE task reports, and the
one scale every bertkit report prints them on.

Scale. Every quality score bertkit writes — evaluate / predict JSON, metrics.jsonl,
report.md, logged lines, plot axes, best_metrics.json — is a percentage on 0-100, as the
GLUE and SQuAD leaderboards and the papers print them: accuracy, F1, precision, recall,
exact match and the correlations (Matthews, Pearson, Spearman) x 100. Losses,
perplexities, counts, thresholds and probabilities stay raw. The functions of this module
(and of `seqeval`) return fractions, scikit-learn's / scipy's / seqeval's scale, so they
stay drop-in comparable with those references; whatever writes a score converts it with
`percent` (one value) or `percentages` (a dict of them) — nowhere else multiplies by 100.

Plain numpy (no scikit-learn at runtime); the tests check every function against
scikit-learn / scipy. Argument order is `(predictions, labels)` everywhere in bertkit,
unlike scikit-learn's `(y_true, y_pred)` — pass them by name when in doubt.

Conventions for degenerate inputs (documented, never NaN, so results stay valid JSON):
- empty input, or predictions and labels of different lengths -> `BertkitError`;
- Matthews correlation with a constant prediction or constant labels -> 0.0
  (as scikit-learn);
- F1 of a class that is neither predicted nor present -> 0.0 (scikit-learn's default);
- Pearson / Spearman when either side is constant (the correlation is undefined;
  scipy returns NaN) -> 0.0: a constant predictor carries no information about the
  labels, which is what a correlation of 0 reports.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

import numpy as np

from bertkit.errors import BertkitError, ConfigError

ArrayLike = Sequence | np.ndarray

# Task -> metrics it reports (GLUE paper / BERT paper Table 1). MNLI matched and
# mismatched are two evaluation files with the same metric; AX is the diagnostic set
# (scored with R3 = Matthews correlation on the 3 MNLI classes).
GLUE_TASK_METRICS: dict[str, tuple[str, ...]] = {
    "cola": ("mcc",),
    "sst2": ("accuracy",),
    "mrpc": ("f1", "accuracy", "combined"),
    "qqp": ("f1", "accuracy", "combined"),
    "stsb": ("pearson", "spearmanr", "combined"),
    "mnli": ("accuracy",),
    "mnli-mm": ("accuracy",),
    "qnli": ("accuracy",),
    "rte": ("accuracy",),
    "wnli": ("accuracy",),
    "ax": ("mcc",),
}
# Spellings seen in the GLUE release (directory names) and in other toolkits.
_TASK_ALIASES = {"sst-2": "sst2", "sts-b": "stsb", "mnli-m": "mnli", "mnli-matched": "mnli",
                 "mnli-mismatched": "mnli-mm", "diagnostic": "ax"}
REGRESSION_TASKS = frozenset({"stsb"})


# ---------------------------------------------------------------- the reporting scale

SCALE_NOTE = ("quality scores (accuracy, F1, precision, recall, exact match, Matthews / Pearson / Spearman "
              "correlation) are percentages on 0-100; losses, perplexities, counts and thresholds are raw")
# Metric names on the percent scale: one of these words as a "_"-separated part
# (eval_mlm_accuracy, HasAns_exact, f1_macro), unless a raw part follows (best_f1_thresh).
_PERCENT_WORDS = re.compile(r"(?:^|_)(?:accuracy|f1|precision|recall|exact|exact_match|mcc|pearson|spearmanr|combined)"
                            r"(?:_macro|_micro)?$")


def percent(value: float, total: float = 1.0) -> float:
    """`value / total` on the 0-100 report scale, computed as 100 * value / total (the
    official SQuAD scripts' arithmetic, so totals match them to the last digit)."""
    return 100.0 * float(value) / total


def percentages(scores: Mapping[str, float]) -> dict[str, float]:
    """Every value of `scores` (fractions, e.g. `glue_metrics`) on the 0-100 scale."""
    return {name: percent(value) for name, value in scores.items()}


def is_percent_metric(name: str) -> bool:
    """True for a metric name reported on the 0-100 scale (see the module docstring):
    accuracy, mlm_accuracy, eval_f1, HasAns_exact, f1_macro, spearmanr...; False for
    losses, perplexities, thresholds (best_f1_thresh), counts (total), mse, lr."""
    return bool(_PERCENT_WORDS.search(name))


def format_metric(name: str, value) -> str:
    """A metric for a report table: percentages with 2 decimals (81.66), raw numbers with
    4 significant digits (0.4127), anything else as str."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return str(value)
    return f"{value:.2f}" if is_percent_metric(name) else f"{value:.4g}"


def axis_label(names: Sequence[str]) -> str | None:
    """A plot's y-axis label: "percent (0-100)" when every drawn metric is a percentage, else None."""
    return "percent (0-100)" if names and all(is_percent_metric(n) for n in names) else None


def glue_task_name(task: str) -> str:
    """The canonical GLUE task name (`"SST-2"` -> `"sst2"`); ConfigError for unknown tasks."""
    key = task.strip().lower().replace("_", "-")
    key = _TASK_ALIASES.get(key, key)
    if key not in GLUE_TASK_METRICS:
        raise ConfigError(f"task {task!r}: unknown GLUE task; expected one of {', '.join(GLUE_TASK_METRICS)}")
    return key


def glue_metrics(task: str, predictions: ArrayLike, labels: ArrayLike) -> dict[str, float]:
    """The official metrics of one GLUE task, as `{name: value}` (fractions; reports show
    `percentages` of them).

    predictions: (N,) class ids — or (N, K) logits, argmax'ed — for classification tasks;
    (N,) or (N, 1) float scores for STS-B. labels: (N,) class ids / float scores.
    `combined` is the mean of the task's two metrics (F1 and accuracy; Pearson and Spearman).
    """
    name = glue_task_name(task)
    if name in REGRESSION_TASKS:
        scores = np.asarray(predictions, dtype=np.float64)
        if scores.ndim == 2 and scores.shape[1] == 1:
            scores = scores[:, 0]  # (N, 1) regression head output -> (N,)
        r, rho = pearson(scores, labels), spearman(scores, labels)
        return {"pearson": r, "spearmanr": rho, "combined": (r + rho) / 2}
    predicted = np.asarray(predictions)
    if predicted.ndim == 2:
        predicted = predicted.argmax(axis=-1)  # (N, K) logits -> (N,) class ids
    if GLUE_TASK_METRICS[name] == ("mcc",):
        return {"mcc": matthews_corrcoef(predicted, labels)}
    if GLUE_TASK_METRICS[name] == ("accuracy",):
        return {"accuracy": accuracy(predicted, labels)}
    f1, acc = f1_score(predicted, labels, average="binary", pos_label=1), accuracy(predicted, labels)
    return {"f1": f1, "accuracy": acc, "combined": (f1 + acc) / 2}


def accuracy(predictions: ArrayLike, labels: ArrayLike) -> float:
    """Fraction of positions where the prediction equals the label."""
    predicted, gold = _paired(predictions, labels)
    return float(np.mean(predicted == gold))


def f1_score(predictions: ArrayLike, labels: ArrayLike, *, average: str = "binary", pos_label=1) -> float:
    """F1 = 2 TP / (2 TP + FP + FN).

    average="binary": F1 of class `pos_label` against all others (one-vs-rest, so it is
    also defined when there are more than two classes). "macro": unweighted mean of the
    per-class F1 over every class seen in predictions or labels. "micro": F1 of the
    pooled counts, which equals accuracy for single-label classification.
    """
    predicted, gold = _paired(predictions, labels)
    if average == "binary":
        return _f1(np.sum((predicted == pos_label) & (gold == pos_label)),
                   np.sum(predicted == pos_label), np.sum(gold == pos_label))
    if average == "macro":
        matrix = _confusion_matrix(predicted, gold)[0]
        return float(np.mean([_f1(matrix[k, k], matrix[:, k].sum(), matrix[k, :].sum()) for k in range(len(matrix))]))
    if average == "micro":
        return accuracy(predicted, gold)
    raise ConfigError(f"average {average!r}: expected one of binary, macro, micro")


def matthews_corrcoef(predictions: ArrayLike, labels: ArrayLike) -> float:
    """Matthews correlation, in the K-class form (Gorodkin 2004), equal to the binary formula for K=2.

    With the confusion matrix C (rows = labels), t_k / p_k the true / predicted counts of
    class k, c = trace(C) and s = N:
    MCC = (c s - sum_k p_k t_k) / sqrt((s^2 - sum_k p_k^2)(s^2 - sum_k t_k^2)).
    0.0 when either side is constant (the denominator is 0).
    """
    predicted, gold = _paired(predictions, labels)
    matrix = _confusion_matrix(predicted, gold)[0].astype(np.float64)
    true_counts, predicted_counts = matrix.sum(axis=1), matrix.sum(axis=0)
    correct, total = np.trace(matrix), matrix.sum()
    numerator = correct * total - predicted_counts @ true_counts
    denominator = np.sqrt((total**2 - predicted_counts @ predicted_counts) * (total**2 - true_counts @ true_counts))
    return float(numerator / denominator) if denominator > 0 else 0.0


def pearson(predictions: ArrayLike, labels: ArrayLike) -> float:
    """Pearson correlation coefficient; 0.0 when either side is constant (see module docstring)."""
    x, y = _paired(predictions, labels, dtype=np.float64)
    x, y = x - x.mean(), y - y.mean()
    denominator = np.sqrt((x @ x) * (y @ y))
    if denominator == 0:
        return 0.0
    return float(np.clip((x @ y) / denominator, -1.0, 1.0))


def spearman(predictions: ArrayLike, labels: ArrayLike) -> float:
    """Spearman rank correlation: Pearson of the ranks, tied values sharing their average rank."""
    x, y = _paired(predictions, labels, dtype=np.float64)
    return pearson(average_ranks(x), average_ranks(y))


def average_ranks(values: np.ndarray) -> np.ndarray:
    """1-based ranks of `values` (N,), ties given the mean of the ranks they span -> (N,) float64."""
    _, inverse, counts = np.unique(values, return_inverse=True, return_counts=True)
    first_rank = np.cumsum(counts) - counts + 1  # rank of the first member of each distinct value
    return (first_rank + (counts - 1) / 2.0)[inverse.reshape(-1)]


def _f1(true_positives, predicted_positives, actual_positives) -> float:
    denominator = predicted_positives + actual_positives
    return float(2 * true_positives / denominator) if denominator > 0 else 0.0


def _confusion_matrix(predicted: np.ndarray, gold: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(K, K) int64 counts, rows = labels, columns = predictions, over the K classes seen on either side."""
    classes, inverse = np.unique(np.concatenate([gold, predicted]), return_inverse=True)
    inverse = inverse.reshape(-1)
    gold_ids, predicted_ids = inverse[: len(gold)], inverse[len(gold):]
    matrix = np.zeros((len(classes), len(classes)), dtype=np.int64)
    np.add.at(matrix, (gold_ids, predicted_ids), 1)
    return matrix, classes


def _paired(predictions: ArrayLike, labels: ArrayLike, dtype=None) -> tuple[np.ndarray, np.ndarray]:
    """Both sides as 1-D arrays of equal, non-zero length (BertkitError otherwise)."""
    predicted, gold = np.asarray(predictions, dtype=dtype), np.asarray(labels, dtype=dtype)
    if predicted.ndim != 1 or gold.ndim != 1:
        raise BertkitError(f"expected 1-D predictions and labels, got shapes {predicted.shape} and {gold.shape}")
    if len(predicted) != len(gold):
        raise BertkitError(f"{len(predicted)} predictions but {len(gold)} labels")
    if len(gold) == 0:
        raise BertkitError("no predictions to score (empty input)")
    if dtype is not None and not (np.isfinite(predicted).all() and np.isfinite(gold).all()):
        raise BertkitError("predictions and labels must be finite numbers (found NaN or infinity)")
    return predicted, gold
