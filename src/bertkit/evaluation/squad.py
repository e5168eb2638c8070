"""Official SQuAD scoring: exact match and token F1 (v1.1), plus no-answer handling (v2.0).

Written from the definitions of the official `evaluate-v1.1.py` / `evaluate-v2.0.py`
and reproducing their numbers:
- answers are compared after normalization: lowercase, drop ASCII punctuation, drop
  the words a/an/the, collapse whitespace;
- a question scores the max over its gold answers; totals are percentages;
- v1.1 token F1 of two empty answers is 0; v2.0 makes it 1 (an empty answer is "no
  answer": right when both are empty, wrong when only one is). In v2.0 gold answers
  that normalize to "" are dropped and a question without gold answers has gold [""];
- v2.0 optionally applies a no-answer probability: a question whose `na_prob` exceeds
  `na_prob_thresh` counts as answered "no answer". With an explicit `na_probs`, the
  best threshold sweep of the official script is reported as well (`best_*`).

KorQuAD 1.0 (`metric="korquad"`, the default for a file whose `version` starts with
`KorQuAD_v1`, e.g. "KorQuAD_v1.0_dev") is scored with its official rule, which changes
the answer comparison only: before SQuAD's punctuation removal the characters
' " 《 》 < > 〈 〉 ( ) ‘ ’ become spaces, no articles are dropped, exact match compares
the normalized strings (single spaces kept), and F1 counts the characters of the
normalized answers with whitespace dropped, not words: Korean attaches particles to
words ("서울특별시에" vs "서울특별시"), so a word-level F1 scores near misses as 0.

One deliberate difference: a question with no prediction scores 0 in both versions
(the official v1.1 does this; the official v2.0 leaves it out of the total, or
crashes). A `MissingPredictionWarning` says how many; predictions for unknown question
ids are ignored with an `UnknownPredictionWarning`.
"""

from __future__ import annotations

import json
import math
import re
import string
import warnings
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from bertkit.errors import BertkitError, ConfigError
from bertkit.evaluation.metrics import percent
from bertkit.textio import open_binary

_PUNCTUATION = frozenset(string.punctuation)
_ARTICLES = re.compile(r"\b(a|an|the)\b")
# The official KorQuAD v1.0 script's remove_(): these become spaces before punctuation removal.
KORQUAD_SPACED_CHARACTERS = "'\"《》<>〈〉()‘’"
_KORQUAD_TO_SPACE = str.maketrans({ch: " " for ch in KORQUAD_SPACED_CHARACTERS})


class MissingPredictionWarning(UserWarning):
    """Some dataset questions have no prediction; they score 0."""


class UnknownPredictionWarning(UserWarning):
    """Some predictions are for question ids the dataset does not have; they are ignored."""


@dataclass(frozen=True)
class SquadQuestion:
    """One question of a SQuAD file: its id and gold answer texts (empty for unanswerable ones)."""

    qid: str
    answers: tuple[str, ...]

    @property
    def has_answer(self) -> bool:
        return bool(self.answers)


@dataclass(frozen=True)
class SquadDataset:
    """The questions of a SQuAD dataset file, in file order, and its `version` field."""

    questions: tuple[SquadQuestion, ...]
    version: str | None = None
    marks_impossible: bool = False  # some question carries the v2.0 `is_impossible` field

    def answer_metric(self) -> str:
        """"korquad" for a KorQuAD 1.0 file (`version` "KorQuAD_v1.0_dev" and the like), else "squad"."""
        return answer_metric_for_version(self.version)

    def scoring_version(self) -> int:
        """2 for a v2.0 file (version "v2.0", `is_impossible` fields or unanswerable questions), else 1."""
        if (self.version or "").lstrip("vV").startswith("2") or self.marks_impossible:
            return 2
        return 2 if any(not q.has_answer for q in self.questions) else 1


class BestThreshold(NamedTuple):
    """Result of the no-answer threshold sweep: answer when na_prob <= threshold."""

    threshold: float
    score: float  # percentage reached with that threshold


# ---------------------------------------------------------------- answer comparison


def normalize_answer(text: str) -> str:
    """Lowercase, remove punctuation, remove articles (a, an, the), collapse whitespace."""
    text = "".join(ch for ch in text.lower() if ch not in _PUNCTUATION)
    return " ".join(_ARTICLES.sub(" ", text).split())


def exact_match(prediction: str, gold: str) -> float:
    """1.0 when the normalized answers are equal, else 0.0."""
    return float(normalize_answer(prediction) == normalize_answer(gold))


def token_f1(prediction: str, gold: str, *, empty_match: bool = False) -> float:
    """F1 of the bag-of-tokens overlap of the normalized answers.

    Both empty: 0.0 (v1.1) or, with `empty_match` (v2.0), 1.0 — then an empty answer
    against a non-empty one is 0.0.
    """
    predicted_tokens, gold_tokens = normalize_answer(prediction).split(), normalize_answer(gold).split()
    if empty_match and (not predicted_tokens or not gold_tokens):
        return float(predicted_tokens == gold_tokens)
    same = sum((Counter(predicted_tokens) & Counter(gold_tokens)).values())
    if same == 0:
        return 0.0
    precision, recall = same / len(predicted_tokens), same / len(gold_tokens)
    return 2 * precision * recall / (precision + recall)


def korquad_normalize_answer(text: str) -> str:
    """KorQuAD 1.0's normalization: the bracket / quote characters of
    `KORQUAD_SPACED_CHARACTERS` to spaces, lowercase, drop ASCII punctuation, collapse
    whitespace (no article removal)."""
    text = "".join(ch for ch in text.translate(_KORQUAD_TO_SPACE).lower() if ch not in _PUNCTUATION)
    return " ".join(text.split())


def korquad_exact_match(prediction: str, gold: str) -> float:
    """1.0 when the KorQuAD-normalized answers are equal (spaces count: "서울 시" != "서울시"), else 0.0."""
    return float(korquad_normalize_answer(prediction) == korquad_normalize_answer(gold))


def character_f1(prediction: str, gold: str) -> float:
    """KorQuAD 1.0's F1: bag-of-characters overlap of the normalized answers, whitespace
    dropped; 0.0 when nothing is shared (two empty answers included)."""
    predicted_chars = "".join(korquad_normalize_answer(prediction).split())
    gold_chars = "".join(korquad_normalize_answer(gold).split())
    same = sum((Counter(predicted_chars) & Counter(gold_chars)).values())
    if same == 0:
        return 0.0
    precision, recall = same / len(predicted_chars), same / len(gold_chars)
    return 2 * precision * recall / (precision + recall)


@dataclass(frozen=True)
class AnswerMetric:
    """How one prediction is compared with one gold answer: exact match and F1, each in [0, 1]."""

    name: str
    description: str
    exact: Callable[[str, str], float]
    f1: Callable[[str, str], float]


ANSWER_METRICS = {
    "squad": AnswerMetric("squad", "SQuAD's official rule (word-level F1)", exact_match, token_f1),
    "korquad": AnswerMetric("korquad", "KorQuAD 1.0's official rule (character-level F1)", korquad_exact_match,
                            character_f1),
}


def answer_metric_for_version(version: str | None) -> str:
    """The rule a dataset's `version` string asks for: "korquad" for KorQuAD 1.0
    ("KorQuAD_v1.0_train", "KorQuAD_v1.0_dev"; the official script compares the part
    before the last "_" with "KorQuAD_v1.0"), "squad" for anything else."""
    return "korquad" if (version or "").strip().lower().startswith("korquad_v1") else "squad"


def resolve_answer_metric(metric: str | None, version: str | None) -> AnswerMetric:
    """`metric` ("squad" / "korquad"), or with None / "auto" the one `version` asks for."""
    name = answer_metric_for_version(version) if metric in (None, "auto") else str(metric).lower()
    if name not in ANSWER_METRICS:
        raise ConfigError(f"metric {metric!r}: expected auto, {' or '.join(ANSWER_METRICS)}")
    return ANSWER_METRICS[name]


# ---------------------------------------------------------------- dataset scoring


def evaluate_squad(dataset: SquadDataset, predictions: Mapping[str, str], na_probs: Mapping[str, float] | None = None,
                   *, version: str | int = "auto", na_prob_thresh: float = 1.0,
                   metric: str | None = "auto") -> dict[str, float]:
    """Score `predictions` ({question id: answer text}) with the official v1.1 or v2.0 keys.

    version: "auto" (from the file, see `SquadDataset.scoring_version`), 1 or 2.
    metric: "auto" (from the file's version string, see `answer_metric_for_version`),
    "squad" or "korquad" (KorQuAD 1.0's official rule; v1.1-style scoring only).
    """
    chosen = _scoring_version(dataset, version)
    rule = resolve_answer_metric(metric, dataset.version)
    if chosen == 1:
        if na_probs is not None:
            raise ConfigError("na_probs: no-answer probabilities apply to SQuAD v2.0 scoring only")
        return evaluate_v1(dataset, predictions, rule=rule)
    if rule.name != "squad":
        raise ConfigError(f"metric {rule.name!r}: {rule.description} scores files where every question has an "
                          "answer (v1.1-style); score SQuAD v2.0 with metric squad")
    return evaluate_v2(dataset, predictions, na_probs, na_prob_thresh=na_prob_thresh)


def evaluate_v1(dataset: SquadDataset, predictions: Mapping[str, str], *,
                rule: AnswerMetric = ANSWER_METRICS["squad"]) -> dict[str, float]:
    """`{"exact_match", "f1"}` in percent, as the official evaluate-v1.1.py (or, with
    `rule=ANSWER_METRICS["korquad"]`, KorQuAD's official evaluate-v1.0.py)."""
    _check_questions(dataset)
    unanswerable = [q.qid for q in dataset.questions if not q.has_answer]
    if unanswerable:
        raise BertkitError(f"{len(unanswerable)} questions have no gold answer (first: {unanswerable[0]}); "
                           "score them as SQuAD v2.0")
    _warn_about_ids(dataset, predictions)
    exact = f1 = 0.0
    for question in dataset.questions:
        if question.qid in predictions:
            prediction = predictions[question.qid]
            exact += max(rule.exact(prediction, gold) for gold in question.answers)
            f1 += max(rule.f1(prediction, gold) for gold in question.answers)
    total = len(dataset.questions)
    return {"exact_match": percent(exact, total), "f1": percent(f1, total)}


def evaluate_v2(dataset: SquadDataset, predictions: Mapping[str, str], na_probs: Mapping[str, float] | None = None,
                *, na_prob_thresh: float = 1.0) -> dict[str, float]:
    """The official evaluate-v2.0.py keys: exact, f1, total, HasAns_*, NoAns_* and (with na_probs) best_*.

    Without `na_probs` a question's no-answer probability is 1.0 when its prediction
    is "" and 0.0 otherwise; with the default threshold 1.0 it changes no score.
    """
    _check_questions(dataset)
    _warn_about_ids(dataset, predictions)
    probabilities = _no_answer_probabilities(dataset, predictions, na_probs)
    exact_raw, f1_raw = raw_scores_v2(dataset, predictions)
    exact, f1 = {}, {}
    for question in dataset.questions:
        qid = question.qid
        if qid in predictions and probabilities[qid] > na_prob_thresh:  # predicted "no answer"
            exact[qid] = f1[qid] = float(not question.has_answer)
        else:
            exact[qid], f1[qid] = exact_raw.get(qid, 0.0), f1_raw.get(qid, 0.0)

    result = _summary(dataset.questions, exact, f1)
    for prefix, has_answer in (("HasAns", True), ("NoAns", False)):
        subset = [q for q in dataset.questions if q.has_answer == has_answer]
        if subset:
            result.update({f"{prefix}_{key}": value for key, value in _summary(subset, exact, f1).items()})
    if na_probs is not None:
        for name, raw in (("exact", exact_raw), ("f1", f1_raw)):
            best = best_threshold_sweep(dataset, predictions, raw, probabilities, na_prob_order=list(na_probs))
            result[f"best_{name}"], result[f"best_{name}_thresh"] = best.score, best.threshold
    return result


def raw_scores_v2(dataset: SquadDataset, predictions: Mapping[str, str]) -> tuple[dict[str, float], dict[str, float]]:
    """Per question id with a prediction: (exact, f1) against gold [""] for unanswerable questions."""
    exact, f1 = {}, {}
    for question in dataset.questions:
        if question.qid not in predictions:
            continue
        prediction = predictions[question.qid]
        golds = [gold for gold in question.answers if normalize_answer(gold)] or [""]
        exact[question.qid] = max(exact_match(prediction, gold) for gold in golds)
        f1[question.qid] = max(token_f1(prediction, gold, empty_match=True) for gold in golds)
    return exact, f1


def best_threshold_sweep(dataset: SquadDataset, predictions: Mapping[str, str], raw_scores: Mapping[str, float],
                         na_probs: Mapping[str, float], *, na_prob_order: list[str] | None = None,
                         nothing_threshold: float = 0.0) -> BestThreshold:
    """The official find_best_thresh: the no-answer threshold that maximizes the total score.

    Start with every predicted question answered "no answer" (score = number of
    unanswerable ones), then answer questions one by one in increasing na_prob: an
    answerable question gains its raw score, an unanswerable one loses 1 if its
    prediction is non-empty. The best running total gives the threshold (the na_prob
    of the last question answered). If answering nothing is best, the threshold is
    `nothing_threshold`: 0.0 as in the official script, which fits probabilities (a
    question is "no answer" when na_prob > threshold, so 0.0 answers only na_prob 0);
    scores that can be negative need a value below all of them (see
    `squad_v2_threshold`). Ties in na_prob are visited in `na_prob_order` (default:
    dataset order), as the official script visits them in the na_prob file's order.
    Questions without a prediction keep score 0.
    """
    by_id = {q.qid: q for q in dataset.questions}
    order = [qid for qid in (na_prob_order or [q.qid for q in dataset.questions])
             if qid in by_id and qid in raw_scores]
    order.sort(key=lambda qid: na_probs[qid])  # stable: ties keep `order`
    score = best = float(sum(1 for qid in order if not by_id[qid].has_answer))
    threshold = float(nothing_threshold)
    for qid in order:
        if by_id[qid].has_answer:
            score += raw_scores[qid]
        elif predictions[qid]:
            score -= 1
        if score > best:
            best, threshold = score, float(na_probs[qid])
    return BestThreshold(threshold, percent(best, len(dataset.questions)))


def squad_v2_threshold(dataset: SquadDataset, predictions: Mapping[str, str], null_score_diffs: Mapping[str, float],
                       *, metric: str = "f1") -> BestThreshold:
    """Best null-score-difference threshold for SQuAD v2.0 fine-tuning (BERT's `null_score_diff_threshold`).

    predictions: the best non-null answer text per question id. null_score_diffs:
    score(null span at [CLS]) - score(best non-null span) per question id. Answer a
    question when its difference <= the returned threshold, else predict "".
    metric: "f1" or "exact" — which raw score the sweep maximizes. When answering no
    question is best, the threshold is 1.0 below the smallest finite difference (the
    differences can be negative, so the official sweep's 0.0 would answer some).
    """
    if metric not in ("f1", "exact"):
        raise ConfigError(f"metric {metric!r}: expected f1 or exact")
    _check_questions(dataset)
    probabilities = _no_answer_probabilities(dataset, predictions, null_score_diffs)
    exact_raw, f1_raw = raw_scores_v2(dataset, predictions)
    finite = [value for value in probabilities.values() if math.isfinite(value)]
    below_all = min(finite, default=0.0) - 1.0
    return best_threshold_sweep(dataset, predictions, f1_raw if metric == "f1" else exact_raw, probabilities,
                                na_prob_order=list(null_score_diffs), nothing_threshold=below_all)


def _summary(questions, exact: Mapping[str, float], f1: Mapping[str, float]) -> dict[str, float]:
    total = len(questions)
    return {"exact": percent(sum(exact[q.qid] for q in questions), total),
            "f1": percent(sum(f1[q.qid] for q in questions), total), "total": total}


def _no_answer_probabilities(dataset: SquadDataset, predictions: Mapping[str, str],
                             na_probs: Mapping[str, float] | None) -> dict[str, float]:
    """A no-answer probability for every predicted question (BertkitError if na_probs lacks one)."""
    if na_probs is None:
        return {q.qid: float(predictions[q.qid] == "") for q in dataset.questions if q.qid in predictions}
    probabilities = {}
    for question in dataset.questions:
        if question.qid in predictions:
            if question.qid not in na_probs:
                raise BertkitError(f"no no-answer probability for question id {question.qid!r}")
            probabilities[question.qid] = na_probs[question.qid]
    return probabilities


def _scoring_version(dataset: SquadDataset, version: str | int) -> int:
    if str(version) == "auto":
        return dataset.scoring_version()
    if str(version) in ("1", "1.1", "v1.1"):
        return 1
    if str(version) in ("2", "2.0", "v2.0"):
        return 2
    raise ConfigError(f"version {version!r}: expected auto, 1 or 2")


def _check_questions(dataset: SquadDataset) -> None:
    if not dataset.questions:
        raise BertkitError("the SQuAD dataset has no questions")


def _warn_about_ids(dataset: SquadDataset, predictions: Mapping[str, str]) -> None:
    missing = [q.qid for q in dataset.questions if q.qid not in predictions]
    if missing:
        warnings.warn(f"{len(missing)} of {len(dataset.questions)} questions have no prediction and score 0 "
                      f"(first: {missing[0]})", MissingPredictionWarning, stacklevel=3)
    known = {q.qid for q in dataset.questions}
    unknown = [qid for qid in predictions if qid not in known]
    if unknown:
        warnings.warn(f"{len(unknown)} predictions are for question ids not in the dataset and are ignored "
                      f"(first: {unknown[0]})", UnknownPredictionWarning, stacklevel=3)


# ---------------------------------------------------------------- files


def read_squad_dataset(path: str | Path) -> SquadDataset:
    """Read an official SQuAD JSON file (`data[].paragraphs[].qas[]`; `.gz` allowed)."""
    document = _read_json(path)
    if not isinstance(document, dict) or not isinstance(document.get("data"), list):
        raise BertkitError(f"{path}: not a SQuAD dataset (expected a JSON object with a 'data' list)")
    return parse_squad_dataset(document, name=str(path))


def parse_squad_dataset(document: Mapping, name: str = "<squad>") -> SquadDataset:
    """A SquadDataset from the parsed JSON object; errors name `name` and the JSON path."""
    questions, marks_impossible = [], False
    for a, article in enumerate(document["data"]):
        paragraphs = article.get("paragraphs") if isinstance(article, dict) else None
        if not isinstance(paragraphs, list):
            raise BertkitError(f"{name}: data[{a}]: expected an object with a 'paragraphs' list")
        for p, paragraph in enumerate(paragraphs):
            qas = paragraph.get("qas") if isinstance(paragraph, dict) else None
            if not isinstance(qas, list):
                raise BertkitError(f"{name}: data[{a}].paragraphs[{p}]: expected an object with a 'qas' list")
            for q, qa in enumerate(qas):
                where = f"{name}: data[{a}].paragraphs[{p}].qas[{q}]"
                if not isinstance(qa, dict) or not isinstance(qa.get("id"), str):
                    raise BertkitError(f"{where}: expected an object with a string 'id'")
                answers = qa.get("answers")
                if not isinstance(answers, list) or not all(
                        isinstance(answer, dict) and isinstance(answer.get("text"), str) for answer in answers):
                    raise BertkitError(f"{where}: expected 'answers' to be a list of objects with a string 'text'")
                marks_impossible = marks_impossible or "is_impossible" in qa
                questions.append(SquadQuestion(qa["id"], tuple(answer["text"] for answer in answers)))
    version = document.get("version")
    return SquadDataset(tuple(questions), str(version) if version is not None else None, marks_impossible)


def read_predictions(path: str | Path) -> dict[str, str]:
    """Read a predictions file: a JSON object {question id: answer text} ("" = no answer)."""
    document = _read_json(path)
    if not isinstance(document, dict):
        raise BertkitError(f"{path}: expected a JSON object mapping question ids to answer texts, "
                           f"got a JSON {_json_type(document)}")
    for qid, text in document.items():
        if not isinstance(text, str):
            raise BertkitError(f"{path}: prediction for {qid!r} is not a string (got JSON {_json_type(text)})")
    return document


def read_na_probs(path: str | Path) -> dict[str, float]:
    """Read a no-answer probability file: a JSON object {question id: number}."""
    document = _read_json(path)
    if not isinstance(document, dict):
        raise BertkitError(f"{path}: expected a JSON object mapping question ids to numbers, "
                           f"got a JSON {_json_type(document)}")
    for qid, value in document.items():
        if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value):
            raise BertkitError(f"{path}: no-answer probability for {qid!r} is {value!r}, expected a number")
    return {qid: float(value) for qid, value in document.items()}


def _json_type(value) -> str:
    names = {dict: "object", list: "array", str: "string", bool: "boolean", int: "number", float: "number"}
    return "null" if value is None else names.get(type(value), type(value).__name__)


def _read_json(path: str | Path):
    with open_binary(path) as handle:
        try:
            raw = handle.read()
        except (OSError, EOFError) as exc:
            raise BertkitError(f"{path}: cannot read ({exc})") from exc
    try:
        return json.loads(raw)
    except UnicodeDecodeError as exc:
        raise BertkitError(f"{path}: not valid UTF-8 text") from exc
    except json.JSONDecodeError as exc:
        raise BertkitError(f"{path}: not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})") from exc
