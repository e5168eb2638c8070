"""Extractive question answering (SQuAD v1.1 and v2.0): a start and an end score per token.

The question is text A, the passage text B: `[CLS] question [SEP] passage-window [SEP]`;
`BertForQuestionAnswering` scores every token as the answer's start (S . T_i) and end
(E . T_j), and the answer is the best span i <= j of passage tokens (SPEC 5(c)).

Reading (`read_examples`): the official SQuAD JSON layout,
`{"version", "data": [{"title", "paragraphs": [{"context", "qas": [{"id", "question",
"answers": [{"text", "answer_start"}], "is_impossible"?, "plausible_answers"?}]}]}]}`,
`.json` or `.json.gz`. v2.0 unanswerable questions (`is_impossible: true`, or no
answers in a v2.0 file) get `answers == []`; `plausible_answers` are not used (as in
BERT's run_squad). With `training=True` every answer must sit at its `answer_start`.

Encoding (`encode`), as Hugging Face's run_qa with a fast tokenizer:
- questions longer than `max_query_length` tokens keep their first max_query_length
  tokens (BERT's run_squad rule; run_qa does not cut questions);
- long passages become several windows of at most `max_seq_length` tokens, each
  overlapping the previous one by `doc_stride` tokens — the tokenizer's
  `truncation="only_second", stride=doc_stride, return_overflowing_tokens=True`.
  (BERT's run_squad used doc_stride for the step between window starts instead.)
- training features get `start_positions` / `end_positions`: the token indices of the
  answer's first and last token in this window, or the classification token's index
  twice ("no answer": [CLS] at 0 for BERT, <cls> at the end for XLNet's
  `A <sep> B <sep> <cls>`; 0 for a tokenizer without one) when the answer is not wholly
  inside the window or the question is unanswerable.
- evaluation features keep, besides the model inputs, side arrays whose names start
  with "_" (`collate` here drops them, so a batch feeds `model(**batch)` directly):
  `_example_index` (int, the example in the list given to `encode`), `_offsets`
  (T, 2) int32: each passage token's character span in the example's context, (-1, -1)
  on question, special and padding tokens, and `_null_index` (int): the window's
  classification token, where the null answer is scored.

Post-processing (`postprocess`): per example, over all its windows, the n-best spans by
start + end logit among passage tokens with start <= end and at most
`max_answer_length` tokens (searched exhaustively, not only among the top start/end
positions as run_qa does; the same character span seen in two windows counts once).
The answer is the context's own characters between the span's offsets. SQuAD v2.0
adds the null answer scored at the classification token (`_null_index`: [CLS] at 0
for BERT, <cls> last for XLNet; the lowest over the windows, as in BERT): null_diff =
null score - best span score, and "" is predicted when null_diff > null_threshold. `best_null_threshold` picks that threshold on dev with the official
sweep (`bertkit.evaluation.squad.squad_v2_threshold`), to be saved with the model.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from bertkit.errors import BertkitError, ConfigError
from bertkit.evaluation.squad import BestThreshold, SquadDataset, SquadQuestion, squad_v2_threshold
from bertkit.textio import lone_surrogate, open_binary, surrogate_error

ENCODE_BATCH = 1000  # examples per tokenizer call
SIDE_PREFIX = "_"  # feature keys that are not model inputs (dropped by `collate`)
NO_SPAN = -1  # offset of a token outside the passage
# The unit of the v2.0 no-answer thresholds bertkit tunes and scores with (null_threshold in
# bertkit_task.json; best_exact_thresh / best_f1_thresh of `evaluate squad --model` and of the
# dev metrics). dev_na_probs.json holds sigmoid(null_diff) instead, so the official route
# (`evaluate squad --predictions ... --na-prob ...`) gives its thresholds as probabilities.
NULL_THRESHOLD_UNIT = "null score minus best span score"
NULL_THRESHOLD_NOTE = (
    "best_exact_thresh / best_f1_thresh in the dev metrics (and null_threshold in best/bertkit_task.json) are a "
    f"score difference, {NULL_THRESHOLD_UNIT}: a question is answered when its difference is <= the threshold. "
    "`dev_na_probs.json` holds sigmoid(difference), so `bertkit evaluate squad --predictions dev_predictions.json "
    "--na-prob dev_na_probs.json` gives its thresholds as probabilities (the official script's semantics).")


@dataclass
class QAExample:
    """One question about one passage.

    answers: (text, start character in `context`) pairs; several for dev sets, [] for
    an unanswerable (v2.0) question. source: "file: data[a].paragraphs[p].qas[q]".
    dataset_version: the file's "version" string (it picks the scoring rule:
    "KorQuAD_v1.0_dev" -> KorQuAD's).
    """

    qid: str
    question: str
    context: str
    answers: list[tuple[str, int]]
    is_impossible: bool
    source: str
    dataset_version: str | None = None


@dataclass
class QAPredictions:
    """What `postprocess` returns, keyed by question id.

    predictions: the answer text ("" = no answer, SQuAD v2.0).
    best_texts: the best non-null answer (the input of `best_null_threshold`).
    null_diffs: v2.0 only (else None): null score - best non-null span score
        (+inf when no span is possible).
    nbest: the best candidates, highest score first; each a dict with text,
        start_char / end_char (None for the null answer), start_logit, end_logit, score
        (their sum) and probability (softmax over the listed candidates).
    """

    predictions: dict[str, str]
    best_texts: dict[str, str]
    null_diffs: dict[str, float] | None
    nbest: dict[str, list[dict[str, Any]]]


def model_class():
    """The head this task family trains before any checkpoint is read: the first registered model
    family's that has it (bertkit.model.families; imported lazily: reading data never needs torch)."""
    from bertkit.model.families import default_task_class
    from bertkit.tasks.registry import QA

    return default_task_class(QA)


# ---------------------------------------------------------------------------- reading


def read_examples(path: str | Path, version: str | int = "auto", *, training: bool = False) -> list[QAExample]:
    """The questions of a SQuAD JSON file, in file order.

    version: "auto" (2 when the file's "version" starts with 2 or any question has
        `is_impossible`), 1 ("1.1": every question needs an answer) or 2 ("2.0").
    training: also check that every answer's text is at its `answer_start` in the
        context (the error names the file, the question id and what is there instead).
    Errors (one line, naming the file and the JSON position): empty file, no "data"
    list, missing fields, empty or whitespace-only questions / contexts, repeated ids.
    """
    document = _load_json(path)
    if not isinstance(document, dict) or not isinstance(document.get("data"), list):
        raise BertkitError(f"{path}: not a SQuAD file (expected a JSON object with a 'data' list of articles)")
    number = _file_version(document, version)
    declared = document.get("version")
    declared = str(declared) if declared is not None else None
    examples: list[QAExample] = []
    seen: dict[str, str] = {}
    for a, article in enumerate(document["data"]):
        paragraphs = article.get("paragraphs") if isinstance(article, dict) else None
        if not isinstance(paragraphs, list):
            raise BertkitError(f"{path}: data[{a}]: expected an object with a 'paragraphs' list")
        for p, paragraph in enumerate(paragraphs):
            where = f"{path}: data[{a}].paragraphs[{p}]"
            qas = paragraph.get("qas") if isinstance(paragraph, dict) else None
            if not isinstance(qas, list):
                raise BertkitError(f"{where}: expected an object with a 'qas' list")
            if not qas:
                continue
            context = paragraph.get("context")
            if not isinstance(context, str) or not context.strip():
                raise BertkitError(f"{where}: the 'context' is missing, empty or whitespace only")
            for q, qa in enumerate(qas):
                example = _example(qa, context, f"{where}.qas[{q}]", number, training, declared)
                if example.qid in seen:
                    raise BertkitError(f"{example.source} (id {example.qid}): the same id as {seen[example.qid]}")
                seen[example.qid] = example.source
                examples.append(example)
    if not examples:
        raise BertkitError(f"{path}: no questions in the file")
    if training and number == 2 and str(version) != "auto" \
            and (declared or "").strip().lower().lstrip("v").startswith("1") \
            and not any(example.is_impossible for example in examples):
        # training v2.0 on it would teach a no-answer head from no examples; scoring a v1.1
        # file with v2.0's keys (evaluate --version 2) is harmless and stays allowed
        raise BertkitError(f"{path}: training as SQuAD v2.0 (version 2), but the file says version {declared} and "
                           "has no unanswerable questions; train it as version 1 (or auto)")
    return examples


def _load_json(path: str | Path) -> Any:
    with open_binary(path) as handle:
        try:
            raw = handle.read()
        except (OSError, EOFError) as exc:
            raise BertkitError(f"{path}: cannot read ({exc})") from exc
    if not raw.strip():
        raise BertkitError(f"{path}: empty file")
    try:
        document = json.loads(raw)
    except UnicodeDecodeError:
        raise BertkitError(f"{path}: not valid UTF-8 text") from None
    except json.JSONDecodeError as exc:
        raise BertkitError(f"{path}: not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})") from None
    escape = lone_surrogate(raw.decode("utf-8", "replace"), document)
    if escape is not None:
        raise surrogate_error(str(path), escape)
    return document


def version_number(version: str | int) -> int:
    """1 for 1 / "1" / "1.1" / "v1.1", 2 for 2 / "2" / "2.0" / "v2.0"; ConfigError otherwise."""
    text = str(version).strip().lower().lstrip("v")
    if text in ("1", "1.1"):
        return 1
    if text in ("2", "2.0"):
        return 2
    raise ConfigError(f"SQuAD version {version!r}: expected 1 (1.1) or 2 (2.0)")


def _file_version(document: Mapping[str, Any], version: str | int) -> int:
    if str(version) != "auto":
        return version_number(version)
    declared = str(document.get("version") or "").strip().lower().lstrip("v")
    if declared.startswith("2"):
        return 2
    for article in document["data"]:
        for paragraph in (article.get("paragraphs") or []) if isinstance(article, dict) else []:
            for qa in (paragraph.get("qas") or []) if isinstance(paragraph, dict) else []:
                if isinstance(qa, dict) and "is_impossible" in qa:
                    return 2
    return 1


def _example(qa: Any, context: str, where: str, version: int, training: bool,
             dataset_version: str | None = None) -> QAExample:
    if not isinstance(qa, dict):
        raise BertkitError(f"{where}: expected a question object")
    qid = qa.get("id")
    if isinstance(qid, int) and not isinstance(qid, bool):
        qid = str(qid)
    if not isinstance(qid, str) or not qid:
        raise BertkitError(f"{where}: no question 'id' (a non-empty string)")
    source = f"{where} (id {qid})"
    question = qa.get("question")
    if not isinstance(question, str) or not question.strip():
        raise BertkitError(f"{source}: the 'question' is missing, empty or whitespace only")
    impossible = qa.get("is_impossible", False)
    if impossible not in (True, False):  # also accepts 0 / 1
        raise BertkitError(f"{source}: 'is_impossible' must be true or false, got {impossible!r}")
    raw = qa.get("answers", [])
    if not isinstance(raw, list):
        raise BertkitError(f"{source}: 'answers' must be a list")
    if impossible and raw:
        raise BertkitError(f"{source}: is_impossible is true but 'answers' lists {len(raw)} answer(s)")
    answers = [_answer(answer, context, f"{source}: answers[{i}]", training) for i, answer in enumerate(raw)]
    if not answers and version == 1:
        raise BertkitError(
            f"{source}: no answers (a SQuAD v1.1 question needs one; read the file as version 2 for "
            "unanswerable questions)"
        )
    return QAExample(qid, question, context, answers, not answers, where, dataset_version)


def _answer(answer: Any, context: str, where: str, training: bool) -> tuple[str, int]:
    """(text, answer_start) of one answer object; -1 for a missing start outside training."""
    if not isinstance(answer, dict) or not isinstance(answer.get("text"), str):
        raise BertkitError(f"{where}: expected an object with a string 'text'")
    text, start = answer["text"], answer.get("answer_start")
    if isinstance(start, bool) or not isinstance(start, int):
        if training:
            raise BertkitError(f"{where}: 'answer_start' must be an integer (a character index), got {start!r}")
        start = -1
    if training:
        check_answer(text, start, context, where)
    return text, start


def check_answer(text: str, start: int, context: str, where: str) -> None:
    """A training answer must be non-blank text found at `start` in `context`; the
    one-line error names `where` (file, position, question id) and what is there instead."""
    if not text.strip():
        raise BertkitError(f"{where}: the answer text is empty or whitespace only")
    if start < 0:
        raise BertkitError(f"{where}: answer {text!r} has no answer_start (needed for training)")
    found = context[start : start + len(text)]
    if found != text:
        there = f"holds {found!r}" if found else "is past the end of the context"
        elsewhere = context.find(text)
        hint = f"; the text occurs at {elsewhere}" if elsewhere >= 0 else "; the text is not in the context"
        raise BertkitError(f"{where}: answer {text!r} is not at answer_start {start} (the context there {there}{hint})")


# ---------------------------------------------------------------------------- scoring helpers


def to_squad_dataset(examples: Sequence[QAExample]) -> SquadDataset:
    """The examples as a `bertkit.evaluation.squad.SquadDataset` (gold answer texts per id),
    for `evaluate_squad` and the v2.0 threshold search. Version "2.0" when any question
    is unanswerable, else "1.1"."""
    impossible = any(ex.is_impossible for ex in examples)
    questions = tuple(SquadQuestion(ex.qid, tuple(text for text, _ in ex.answers)) for ex in examples)
    return SquadDataset(questions, "2.0" if impossible else "1.1", impossible)


def best_null_threshold(
    examples: Sequence[QAExample],
    null_diffs: Mapping[str, float],
    best_texts: Mapping[str, str],
    *,
    metric: str = "f1",
) -> BestThreshold:
    """The null_threshold (for `postprocess`) that maximizes the dev score of SQuAD v2.0.

    null_diffs, best_texts: `QAPredictions.null_diffs` / `.best_texts` on `examples`.
    Returns (threshold, score in percent): answer when null_diff <= threshold.
    """
    return squad_v2_threshold(to_squad_dataset(examples), best_texts, null_diffs, metric=metric)


# ---------------------------------------------------------------------------- encoding


def encode(
    examples: Sequence[QAExample],
    tokenizer,
    max_seq_length: int = 384,
    label_map: Mapping[str, int] | None = None,
    *,
    doc_stride: int = 128,
    max_query_length: int = 64,
    training: bool = False,
    show_progress: bool = False,
) -> list[dict[str, Any]]:
    """Tokenize (question, passage) pairs into windows for `collate` (see the module docstring).

    `label_map` is unused (answers are positions); it is accepted so every family's
    `encode` has one signature. Each feature: input_ids, token_type_ids (T,) int32,
    T <= max_seq_length; with `training`: start_positions, end_positions (int; 0 = no
    answer in this window); otherwise `_example_index` (int) and `_offsets` (T, 2)
    int32. An example gives one feature per window, in window order.
    """
    del label_map
    for name, value, least in (("max_seq_length", max_seq_length, 1), ("doc_stride", doc_stride, 0),
                               ("max_query_length", max_query_length, 1)):
        if isinstance(value, bool) or not isinstance(value, int) or value < least:
            raise ConfigError(f"{name}={value!r} must be an integer >= {least}")
    if not examples:
        raise BertkitError("encode: no examples")
    if training:
        for ex in examples:
            if not ex.is_impossible:
                check_answer(*ex.answers[0], ex.context, f"{ex.source} (id {ex.qid}): answers[0]")
    specials = _pair_special_tokens(tokenizer)
    cls_id = getattr(tokenizer, "cls_token_id", None)
    from tqdm.auto import tqdm

    features: list[dict[str, Any]] = []
    starts = range(0, len(examples), ENCODE_BATCH)
    for first in tqdm(starts, desc="encode", unit="batch", disable=not show_progress or None):
        chunk = examples[first : first + ENCODE_BATCH]
        questions = _cut_questions(chunk, tokenizer, max_query_length)
        for ex, (_, length) in zip(chunk, questions, strict=True):
            room = max_seq_length - length - specials
            if room <= doc_stride:
                fits = (max_seq_length - max_query_length - specials) // 2  # a stride any question leaves room for
                fix = f"--doc-stride {fits} or " if fits > 0 else ""
                raise BertkitError(
                    f"{ex.source} (id {ex.qid}): max_seq_length={max_seq_length} leaves {max(room, 0)} passage "
                    f"tokens per window beside the {length}-token question; doc_stride={doc_stride} must be smaller "
                    f"(e.g. {fix}a larger --max-seq-length)"
                )
        enc = tokenizer(
            [text for text, _ in questions], [ex.context for ex in chunk],
            truncation="only_second", max_length=max_seq_length, stride=doc_stride,
            return_overflowing_tokens=True, return_offsets_mapping=True,
            return_token_type_ids=True,  # the features' fixed layout; the model's inputs pick
        )
        for row, sample in enumerate(enc["overflow_to_sample_mapping"]):
            ex = chunk[sample]
            in_passage = np.asarray([s == 1 for s in enc.sequence_ids(row)], dtype=bool)  # (T,)
            offsets = np.asarray(enc["offset_mapping"][row], dtype=np.int32).reshape(-1, 2)  # (T, 2)
            offsets[~in_passage] = NO_SPAN
            feature: dict[str, Any] = {
                "input_ids": np.asarray(enc["input_ids"][row], dtype=np.int32),
                "token_type_ids": np.asarray(enc["token_type_ids"][row], dtype=np.int32),
            }
            null_index = null_position(feature["input_ids"], cls_id)
            if training:
                feature["start_positions"], feature["end_positions"] = answer_positions(ex, offsets, null_index)
            else:
                feature["_example_index"] = first + sample
                feature["_offsets"] = offsets
                feature["_null_index"] = null_index
            features.append(feature)
    return features


def _pair_special_tokens(tokenizer) -> int:
    """How many special tokens the tokenizer adds to a pair (3 for BERT's [CLS] A [SEP] B [SEP])."""
    processor = getattr(getattr(tokenizer, "backend", None), "post_processor", None)
    if processor is not None:
        return processor.num_special_tokens_to_add(True)
    count = getattr(tokenizer, "num_special_tokens_to_add", None)  # a transformers tokenizer
    return count(pair=True) if count is not None else 0


def _cut_questions(examples: Sequence[QAExample], tokenizer, max_query_length: int) -> list[tuple[str, int]]:
    """(question text, its token count) with questions over max_query_length tokens cut
    after their max_query_length-th token (at that token's last character: re-tokenizing
    the cut text gives exactly those tokens)."""
    enc = tokenizer([ex.question for ex in examples], add_special_tokens=False, return_offsets_mapping=True)
    cut = []
    for ex, ids, offsets in zip(examples, enc["input_ids"], enc["offset_mapping"], strict=True):
        if len(ids) > max_query_length:
            cut.append((ex.question[: offsets[max_query_length - 1][1]], max_query_length))
        else:
            cut.append((ex.question, len(ids)))
    return cut


def null_position(input_ids: np.ndarray, cls_id: int | None) -> int:
    """Where a window's "no answer" is scored: its classification token ([CLS] first for
    BERT, <cls> last for XLNet), 0 when the tokenizer has none or the window lacks it."""
    if cls_id is None:
        return 0
    found = np.flatnonzero(np.asarray(input_ids) == cls_id)
    return int(found[0]) if len(found) else 0


def answer_positions(example: QAExample, offsets: np.ndarray, null_index: int = 0) -> tuple[int, int]:
    """(start, end) token indices of the example's first answer in one window, or
    (null_index, null_index): the window's classification token, "no answer".

    offsets: (T, 2) the window's `_offsets` (passage tokens' character spans, -1 elsewhere).
    The start token is the first passage token ending after the answer's first character,
    the end token the last one starting before its end; no answer when the question is
    unanswerable or the answer is not wholly inside this window's passage tokens.
    """
    none = (null_index, null_index)
    if example.is_impossible:
        return none
    text, start_char = example.answers[0]
    end_char = start_char + len(text)
    tokens = np.flatnonzero(offsets[:, 0] != NO_SPAN)  # (P,) positions of passage tokens
    if not len(tokens):
        return none
    starts, ends = offsets[tokens, 0], offsets[tokens, 1]
    if starts[0] > start_char or ends[-1] < end_char:
        return none
    first = int(np.searchsorted(ends, start_char, side="right"))
    last = int(np.searchsorted(starts, end_char, side="left")) - 1
    if first > last:
        return none
    return int(tokens[first]), int(tokens[last])


def collate(features: Sequence[Mapping[str, Any]], pad_token_id: int, pad_to_multiple_of: int | None = 8) -> dict:
    """Pad features of `encode` into (B, T) int64 tensors (+ (B,) start/end positions when
    training) through `bertkit.data.collate`; side keys ("_..." ) are left out."""
    from bertkit.data.collate import collate as collate_rows

    rows = [{k: v for k, v in f.items() if not k.startswith(SIDE_PREFIX)} for f in features]
    return collate_rows(rows, pad_token_id, pad_to_multiple_of)


# ---------------------------------------------------------------------------- post-processing


def postprocess(
    examples: Sequence[QAExample],
    features: Sequence[Mapping[str, Any]],
    start_logits: Sequence[Any] | np.ndarray,
    end_logits: Sequence[Any] | np.ndarray,
    *,
    n_best_size: int = 20,
    max_answer_length: int = 30,
    version: str | int = 1,
    null_threshold: float = 0.0,
    show_progress: bool = False,
) -> QAPredictions:
    """Answer texts from the model's logits (see the module docstring for the rules).

    features: evaluation features of `encode(examples, ..., training=False)`.
    start_logits, end_logits: per feature, its T scores — a (N, T') array (padded rows
    are fine: only the first len(input_ids) positions are read) or a list of (T,) arrays.
    version 1: the best span is the answer. version 2: "" when null_diff > null_threshold.
    """
    number = version_number(version)
    for name, value in (("n_best_size", n_best_size), ("max_answer_length", max_answer_length)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ConfigError(f"{name}={value!r} must be a positive integer")
    if len(start_logits) != len(features) or len(end_logits) != len(features):
        raise BertkitError(
            f"postprocess: {len(features)} features but {len(start_logits)} start and {len(end_logits)} end logit rows"
        )
    by_example: list[list[int]] = [[] for _ in examples]
    for k, feature in enumerate(features):
        if "_offsets" not in feature or "_example_index" not in feature:
            raise BertkitError("postprocess: the features have no '_offsets'; encode them with training=False")
        index = int(feature["_example_index"])
        if not 0 <= index < len(examples):
            raise BertkitError(f"postprocess: feature {k} is for example {index}, but there are {len(examples)}")
        by_example[index].append(k)

    from tqdm.auto import tqdm

    result = QAPredictions({}, {}, {} if number == 2 else None, {})
    for ex, feature_ids in tqdm(
        list(zip(examples, by_example, strict=True)), desc="answers", unit="question", disable=not show_progress or None
    ):
        spans: dict[tuple[int, int], tuple[float, float, float]] = {}  # (start_char, end_char) -> (score, s, e)
        null: tuple[float, float, float] | None = None
        for k in feature_ids:
            length = len(features[k]["input_ids"])
            start = np.asarray(start_logits[k], dtype=np.float64)[:length]  # (T,)
            end = np.asarray(end_logits[k], dtype=np.float64)[:length]  # (T,)
            cls = int(features[k].get("_null_index", 0))  # the window's classification token
            if null is None or start[cls] + end[cls] < null[0]:
                null = (float(start[cls] + end[cls]), float(start[cls]), float(end[cls]))
            for span, scores in _best_spans(start, end, features[k]["_offsets"], n_best_size, max_answer_length):
                if span not in spans or scores[0] > spans[span][0]:
                    spans[span] = scores
        ranked = sorted(spans.items(), key=lambda item: -item[1][0])[:n_best_size]
        candidates = [_candidate(ex.context[a:b], a, b, *scores) for (a, b), scores in ranked]
        best = candidates[0] if candidates else None
        result.best_texts[ex.qid] = best["text"] if best else ""
        answer = result.best_texts[ex.qid]
        if number == 2:
            null_diff = null[0] - best["score"] if best and null is not None else math.inf
            result.null_diffs[ex.qid] = null_diff
            if null_diff > null_threshold:
                answer = ""
            if null is not None:
                candidates.append(_candidate("", None, None, *null))
                candidates.sort(key=lambda c: -c["score"])
        result.predictions[ex.qid] = answer
        result.nbest[ex.qid] = _with_probabilities(candidates)
    return result


def _best_spans(
    start: np.ndarray, end: np.ndarray, offsets: Any, n_best: int, max_answer_length: int
) -> list[tuple[tuple[int, int], tuple[float, float, float]]]:
    """The n_best passage spans of one window by start[i] + end[j] (i <= j < i + max_answer_length):
    ((start_char, end_char), (score, start logit, end logit)), best first."""
    offsets = np.asarray(offsets)
    length = len(start)
    in_passage = offsets[:length, 0] != NO_SPAN  # (T,)
    width = min(max_answer_length, length)
    ends = np.arange(length)[:, None] + np.arange(width)[None, :]  # (T, W): end index of span (i, i + w)
    inside = ends < length
    ends = np.minimum(ends, length - 1)
    valid = in_passage[:, None] & inside & in_passage[ends]  # (T, W)
    count = int(valid.sum())
    if count == 0:
        return []
    scores = np.where(valid, start[:, None] + end[ends], -np.inf).ravel()  # (T * W,)
    keep = min(n_best, count)
    top = np.argpartition(-scores, keep - 1)[:keep]
    top = top[np.argsort(-scores[top], kind="stable")]
    spans = []
    for flat in top:
        i, w = divmod(int(flat), width)
        j = i + w
        spans.append(((int(offsets[i, 0]), int(offsets[j, 1])), (float(scores[flat]), float(start[i]), float(end[j]))))
    return spans


def _candidate(text: str, start_char: int | None, end_char: int | None, score: float, s: float, e: float) -> dict:
    return {"text": text, "start_char": start_char, "end_char": end_char,
            "start_logit": s, "end_logit": e, "score": score}


def _with_probabilities(candidates: list[dict]) -> list[dict]:
    if candidates:
        scores = np.asarray([c["score"] for c in candidates], dtype=np.float64)
        weights = np.exp(scores - scores.max())
        for c, p in zip(candidates, weights / weights.sum(), strict=True):
            c["probability"] = float(p)
    return candidates


# ---------------------------------------------------------------------------- the family's hooks
# (bertkit.tasks.hooks: what fine-tuning, evaluation, `predict` and their reports ask of a family)


def head_config(config, spec, labels: list[str] | None):
    """Two outputs (start, end), no label names."""
    import dataclasses

    return dataclasses.replace(config, extra=dict(config.extra), id2label=None, label2id=None, problem_type=None)


def metrics(spec, data, outputs, id2label) -> dict[str, float]:
    """The official scores at the spec's no-answer threshold (`bertkit evaluate`; dev
    evaluation during training tunes it: QuestionAnsweringProgram.metrics)."""

    return qa_metrics(spec, data, outputs, tune_threshold=False)[0]


def describe(spec) -> str:
    return (f"SQuAD v{'2.0' if spec.squad_version == 2 else '1.1'} (doc_stride {spec.doc_stride}, "
            f"max_query_length {spec.max_query_length})")


def report_details(spec, dev) -> dict[str, str]:
    """With a dev set: the line naming the answer rule that scored it (SQuAD's or KorQuAD 1.0's)."""
    if dev is None:
        return {}

    rule = qa_answer_metric(spec, dev)
    version = dev.examples[0].dataset_version if dev.examples else None
    return {"dev scoring": f"{rule.description} ({rule.name}; the dev file's version: {version or 'none'})"}


def report_sections(spec, dev) -> list[tuple[str, Any]]:
    """SQuAD v2.0 with a dev set (where the thresholds are chosen): the unit of the no-answer thresholds."""
    if spec.squad_version != 2 or dev is None:
        return []
    return [("No-answer threshold unit", NULL_THRESHOLD_NOTE)]


def report_files(spec, dev, outputs) -> str:
    """The best model's dev answers (write_dev_predictions), for `bertkit evaluate squad --predictions`."""
    if outputs is None or dev is None:
        return ""
    na_probs = ", `dev_na_probs.json` (their no-answer probabilities, for --na-prob)" if spec.squad_version == 2 else ""
    return f", `dev_predictions.json` (best/'s dev answers){na_probs}"


def write_dev_predictions(spec, dev, outputs, output_dir: Path) -> None:
    """The best model's dev answers as `dev_predictions.json` ({id: answer}, "" = no answer
    at the threshold chosen on dev) and, for v2.0, `dev_na_probs.json` (sigmoid of the
    null-score difference: monotone, so the official threshold sweep is unchanged) — the
    inputs of `bertkit evaluate squad --predictions ... --na-prob ...`."""
    if outputs is None or dev is None:
        return
    from bertkit.atomic import write_text_atomic

    _, threshold = qa_metrics(spec, dev, outputs)
    answers = qa_answers(spec, dev, outputs, null_threshold=threshold)
    write_text_atomic(Path(output_dir) / "dev_predictions.json",
                      json.dumps(answers.predictions, ensure_ascii=False) + "\n")
    if answers.null_diffs is not None:
        probabilities = {qid: 1.0 / (1.0 + math.exp(-min(max(diff, -700.0), 700.0)))
                         for qid, diff in answers.null_diffs.items()}
        write_text_atomic(Path(output_dir) / "dev_na_probs.json", json.dumps(probabilities) + "\n")


def _question_and_context(item: Any, source: str) -> tuple[str, str]:
    if isinstance(item, dict):
        if "question" not in item or "context" not in item:
            raise BertkitError(f"{source}: expected {{'question': ..., 'context': ...}}, got keys {sorted(item)}")
        question, context = item["question"], item["context"]
    elif isinstance(item, tuple) and len(item) == 2:
        question, context = item
    else:
        raise BertkitError(f"{source}: expected (question, context) or {{'question', 'context'}}, got {item!r:.80}")
    if not all(isinstance(t, str) and t.strip() for t in (question, context)):
        raise BertkitError(f"{source}: the question and the context must be non-empty texts")
    return question, context


def predict(loaded, batch: list[Any], max_seq_length: int, batch_size: int, progress: bool) -> list[dict[str, Any]]:
    """(question, context) or {"question", "context"} -> the answer, its character span in
    the context and its probability among the n-best spans; a v2.0 model answers
    no_answer when the null score beats the best span by more than its threshold."""
    import dataclasses

    from bertkit.tasks.hooks import INPUT_SOURCE

    spec = dataclasses.replace(loaded.spec, max_seq_length=max_seq_length)
    examples = []
    for i, item in enumerate(batch):
        source = f"{INPUT_SOURCE}:{i + 1}"
        question, context = _question_and_context(item, source)
        examples.append(QAExample(str(i), question, context, [], False, source))
    data = loaded.program_cls.encode(INPUT_SOURCE, examples, loaded.tokenizer, spec, None)
    answers = qa_answers(spec, data, loaded.outputs(data.features, batch_size, progress))
    results = []
    for ex in examples:
        text, candidates = answers.predictions[ex.qid], answers.nbest[ex.qid]
        spans = [c for c in candidates if c["start_char"] is not None]
        if text == "" and spec.squad_version == 2 or not spans:
            null = next((c for c in candidates if c["start_char"] is None), None)
            results.append({"answer": "", "start": None, "end": None, "no_answer": True,
                            "score": float(null["probability"]) if null else 0.0})
        else:
            best = spans[0]
            results.append({"answer": text, "start": best["start_char"], "end": best["end_char"],
                            "score": float(best["probability"])})
    return results


def inputs_from_texts(texts: list[str], spec) -> list[Any]:
    if len(texts) % 2:
        raise BertkitError(f"question answering: give questions and contexts two by two (got {len(texts)} texts)")
    return [(a, b) for a, b in zip(texts[::2], texts[1::2])]


def inputs_from_file(path: str, spec) -> list[Any] | None:
    """A SQuAD JSON file's questions; JSONL records go through `input_from_record`."""
    from bertkit.tasks.records import file_kind

    if file_kind(path) == "jsonl":
        return None
    return [(ex.question, ex.context) for ex in read_examples(path)]


def input_from_record(record: dict[str, Any], spec, path: str, line_no: int, text_field: str, pair_field: str) -> Any:
    from bertkit.tasks.records import as_text, missing_field

    for name in ("question", "context"):
        if name not in record:
            raise missing_field(path, line_no, [name], record)
    return (as_text(record["question"], path, line_no, "question"), as_text(record["context"], path, line_no, "context"))


def input_from_line(text: str, spec, source: str) -> Any:
    from bertkit.tasks.hooks import tab_pair

    return tab_pair(text, source)


def echo(item: Any) -> dict[str, Any]:
    return {"question": item[0], "context": item[1]}


def qa_answers(spec, data, outputs: list[np.ndarray], null_threshold: float | None = None):
    """`bertkit.tasks.qa.postprocess` of per-window (T_i, 2) start / end logits."""

    return postprocess(data.examples, data.features, [o[:, 0] for o in outputs], [o[:, 1] for o in outputs],
                       n_best_size=spec.n_best_size, max_answer_length=spec.max_answer_length,
                       version=spec.squad_version or 1,
                       null_threshold=spec.null_threshold if null_threshold is None else null_threshold)


def qa_metrics(spec, data, outputs: list[np.ndarray],
               tune_threshold: bool = True) -> tuple[dict[str, float], float]:
    """Official SQuAD scores (percent) and the v2.0 null threshold used.

    v1.1: {"exact_match", "f1"}, with the answer rule of `qa_answer_metric` (KorQuAD
    1.0's for a KorQuAD file). v2.0: the official evaluate-v2.0 keys with the best
    non-null answers and their null-score differences as the no-answer scores; "exact"
    and "f1" at the threshold — tuned on `data` (best dev F1) or the spec's."""
    from bertkit.evaluation.squad import evaluate_squad

    answers = qa_answers(spec, data, outputs)
    dataset = to_squad_dataset(data.examples)
    metric = qa_answer_metric(spec, data).name
    if (spec.squad_version or 1) == 1:
        return evaluate_squad(dataset, answers.predictions, version=1, metric=metric), spec.null_threshold
    threshold = spec.null_threshold
    if tune_threshold:
        threshold = best_null_threshold(data.examples, answers.null_diffs, answers.best_texts).threshold
    values = evaluate_squad(dataset, answers.best_texts, answers.null_diffs, version=2, na_prob_thresh=threshold,
                            metric=metric)
    return values, threshold


def qa_answer_metric(spec, data):
    """The answer rule (`bertkit.evaluation.squad.AnswerMetric`) scoring `data`: the spec's
    `qa_metric`, else the one the file's version string asks for."""
    from bertkit.evaluation.squad import resolve_answer_metric

    version = data.examples[0].dataset_version if data.examples else None
    return resolve_answer_metric(spec.qa_metric, version)
