"""Sequence classification and regression on [CLS]: GLUE tasks and any labelled table.

Examples are `(text, pair, label)`; the model is `BertForSequenceClassification`
(K labels -> cross-entropy; a regression task has one output and MSE).

GLUE files are read in their release layout (one TSV per split):
  CoLA   no header: source, label, original mark, sentence   (test: index, sentence)
  SST-2  sentence, label
  MRPC   Quality, #1 ID, #2 ID, #1 String, #2 String          (UTF-8 BOM)
  STS-B  ..., sentence1, sentence2, score (float 0-5: regression)
  QQP    id, qid1, qid2, question1, question2, is_duplicate
  MNLI   ..., sentence1, sentence2, label1 [... label5], gold_label (matched and
         mismatched dev are two files of one task, "mnli" and "mnli-mm")
  QNLI   index, question, sentence, label (entailment / not_entailment)
  RTE, WNLI   index, sentence1, sentence2, label
  AX     index, sentence1, sentence2 (MNLI's labels, unlabelled)
Columns are found by header name; a test file (no label column) gives label None.
Each task's label list is fixed (the original BERT `run_classifier.py` lists: the
sorted label strings), so a dev file missing a class still gets the full map and the
ids agree with checkpoints fine-tuned elsewhere.

Any other CSV / TSV / JSONL: choose the text, optional pair and label columns (or
fields); `regression=True` reads float labels. The label map is built from the
training examples (`build_label_map`: sorted, numerically when every label is an
integer) and checked against a checkpoint's (`check_label_map`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from bertkit.errors import BertkitError
from bertkit.evaluation.metrics import percentages
from bertkit.tasks.records import (
    as_text,
    column_index,
    file_kind,
    iter_jsonl,
    missing_field,
    read_table,
    record_field,
)
from bertkit.tasks.scoring import cross_entropy, softmax

ENCODE_BATCH = 1000  # texts per tokenizer call: big enough for Rust's parallelism, small enough for a progress bar


@dataclass
class ClassificationExample:
    """One labelled text or text pair. label: a label name, a float (regression) or None
    (unlabelled test data). source: "file:line", for error messages."""

    text: str
    pair: str | None
    label: str | float | None
    source: str


@dataclass(frozen=True)
class GlueTask:
    """Where a GLUE task keeps its fields (header names) and its labels (None: regression)."""

    text: str
    pair: str | None
    label: str
    labels: tuple[str, ...] | None


_NLI = ("contradiction", "entailment", "neutral")
_ENTAIL = ("entailment", "not_entailment")
GLUE_TASKS: dict[str, GlueTask] = {
    "cola": GlueTask("sentence", None, "label", ("0", "1")),
    "sst2": GlueTask("sentence", None, "label", ("0", "1")),
    "mrpc": GlueTask("#1 String", "#2 String", "Quality", ("0", "1")),
    "qqp": GlueTask("question1", "question2", "is_duplicate", ("0", "1")),
    "stsb": GlueTask("sentence1", "sentence2", "score", None),
    "mnli": GlueTask("sentence1", "sentence2", "gold_label", _NLI),
    "mnli-mm": GlueTask("sentence1", "sentence2", "gold_label", _NLI),
    "qnli": GlueTask("question", "sentence", "label", _ENTAIL),
    "rte": GlueTask("sentence1", "sentence2", "label", _ENTAIL),
    "wnli": GlueTask("sentence1", "sentence2", "label", ("0", "1")),
    "ax": GlueTask("sentence1", "sentence2", "label", _NLI),
}
# GLUE's label names (TFDS's and Hugging Face datasets' glue features; T5's label words), by the
# file's label: a GLUE example carries the name, so best/'s id2label, predict, /predict, ONNX
# outputs and reports say "positive" where the file says "1". MNLI, QNLI, RTE and AX use names already.
GLUE_LABEL_NAMES: dict[str, dict[str, str]] = {
    "cola": {"0": "unacceptable", "1": "acceptable"},
    "sst2": {"0": "negative", "1": "positive"},
    "mrpc": {"0": "not_equivalent", "1": "equivalent"},
    "qqp": {"0": "not_duplicate", "1": "duplicate"},
    "wnli": {"0": "not_entailment", "1": "entailment"},
}
# CoLA's train/dev files have no header: (label, sentence) are fields 1 and 3 of 4.
_COLA_LABEL_FIELD, _COLA_TEXT_FIELD, _COLA_FIELDS = 1, 3, 4


def model_class():
    """The head this task family trains before any checkpoint is read: the first registered model
    family's that has it (bertkit.model.families; imported lazily: reading data never needs torch)."""
    from bertkit.model.families import default_task_class
    from bertkit.tasks.registry import CLASSIFICATION

    return default_task_class(CLASSIFICATION)


def canonical_glue_task(task: str) -> str:
    """Canonical GLUE task name ("SST-2" -> "sst2"); ConfigError naming the choices otherwise."""
    from bertkit.evaluation.metrics import glue_task_name

    return glue_task_name(task)


def glue_labels(task: str) -> list[str] | None:
    """The label names of a GLUE task in id order (`GLUE_LABEL_NAMES`); None for STS-B (regression)."""
    task = canonical_glue_task(task)
    labels, names = GLUE_TASKS[task].labels, GLUE_LABEL_NAMES.get(task, {})
    return None if labels is None else [names.get(label, label) for label in labels]


def glue_label_map(task: str, label2id: Mapping[str, int] | None) -> dict[str, int] | None:
    """A GLUE checkpoint's label map in GLUE's names: one fine-tuned before bertkit named
    GLUE's labels says the file's "0"/"1"; any other map is returned as it is."""
    names = GLUE_LABEL_NAMES.get(canonical_glue_task(task), {})
    if label2id and names and set(label2id) == set(names):
        return {names[label]: index for label, index in label2id.items()}
    return None if label2id is None else dict(label2id)


# ---------------------------------------------------------------------------- reading


def read_examples(
    path: str | Path,
    *,
    glue_task: str | None = None,
    text_column: str | None = None,
    pair_column: str | None = None,
    label_column: str | None = "label",
    regression: bool = False,
) -> list[ClassificationExample]:
    """Examples of a GLUE file (`glue_task`) or of any CSV/TSV/JSONL with the given columns.

    text_column is required without glue_task; pair_column None = single texts;
    label_column None (or absent from a file's header) = unlabelled. GLUE labels are
    checked against the task's label list; regression labels must be numbers.
    Errors name the file and line: a row with the wrong number of fields, an unknown
    column, a label outside the label set, an empty file.
    """
    if glue_task is not None:
        examples = _read_glue(path, canonical_glue_task(glue_task))
    else:
        if not text_column:
            raise BertkitError(f"{path}: choose the text column (text_column / --text-column)")
        examples = _read_generic(path, text_column, pair_column, label_column, regression)
    if not examples:
        raise BertkitError(f"{path}: empty file (no examples)")
    return examples


def _read_glue(path: str | Path, task: str) -> list[ClassificationExample]:
    spec = GLUE_TASKS[task]
    if task == "cola":
        _, rows = read_table(path, has_header=False)
        first = rows[0][1]
        if len(first) == _COLA_FIELDS and first[0].strip() != "index":  # train/dev: no header
            return _named(task, [
                _example(path, line_no, fields[_COLA_TEXT_FIELD], None, fields[_COLA_LABEL_FIELD], spec.labels, task)
                for line_no, fields in rows
            ])
    header, rows = read_table(path)
    text = column_index(header, spec.text, path)
    pair = column_index(header, spec.pair, path) if spec.pair else None
    label = header.index(spec.label) if spec.label in header else None  # test files have no labels
    return _named(task, [
        _example(
            path, line_no, fields[text], None if pair is None else fields[pair],
            None if label is None else fields[label], spec.labels, task,
        )
        for line_no, fields in rows
    ])


def _named(task: str, examples: list[ClassificationExample]) -> list[ClassificationExample]:
    """GLUE examples with the label's name (`GLUE_LABEL_NAMES`) instead of the file's "0"/"1"."""
    names = GLUE_LABEL_NAMES.get(task)
    if not names:
        return examples
    return [ex if ex.label is None else dataclasses.replace(ex, label=names[ex.label]) for ex in examples]


def _read_generic(
    path: str | Path, text_column: str, pair_column: str | None, label_column: str | None, regression: bool
) -> list[ClassificationExample]:
    if file_kind(path) == "jsonl":
        examples = []
        for line_no, record in iter_jsonl(path):
            values = []
            for name in (text_column, pair_column, label_column):
                found, value = (False, None) if name is None else record_field(record, name)
                if name is None:
                    values.append(None)
                elif not found:
                    raise missing_field(path, line_no, [name], record)
                elif name == label_column:
                    values.append(_json_label(value, path, line_no, name))
                else:
                    values.append(as_text(value, path, line_no, name))
            examples.append(_example(path, line_no, *values, None, "regression" if regression else None))
        return examples
    header, rows = read_table(path)
    text = column_index(header, text_column, path)
    pair = column_index(header, pair_column, path) if pair_column else None
    label = column_index(header, label_column, path) if label_column else None
    kind = "regression" if regression else None
    return [
        _example(
            path, line_no, fields[text], None if pair is None else fields[pair],
            None if label is None else fields[label], None, kind,
        )
        for line_no, fields in rows
    ]


def _json_label(value: Any, path: str | Path, line_no: int, name: str) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    return as_text(value, path, line_no, name)


def _example(
    path: str | Path,
    line_no: int,
    text: str,
    pair: str | None,
    label: str | None,
    labels: Sequence[str] | None,
    task: str | None,
) -> ClassificationExample:
    """Build one example; `labels` None with task "regression"/"stsb" parses a float."""
    source = f"{path}:{line_no}"
    if not text.strip():
        raise BertkitError(f"{source}: the text is empty or whitespace only (fill it or remove the row)")
    if pair is not None and not pair.strip():
        raise BertkitError(f"{source}: the second text of the pair is empty or whitespace only (fill it or remove the row)")
    value: str | float | None = None
    if label is not None:
        label = label.strip()
        if labels is None and task in ("regression", "stsb"):
            try:
                value = float(label)
            except ValueError:
                raise BertkitError(f"{source}: label {label!r} is not a number (a regression task)") from None
            if not np.isfinite(value):
                raise BertkitError(f"{source}: label {label!r} is not a finite number")
        elif labels is not None and label not in labels:
            raise BertkitError(f"{source}: label {label!r} is not one of {task}'s labels ({', '.join(labels)})")
        elif not label:
            raise BertkitError(f"{source}: empty label")
        else:
            value = label
    return ClassificationExample(text, pair, value, source)


# ---------------------------------------------------------------------------- label maps


def build_label_map(examples: Sequence[ClassificationExample]) -> dict[str, int]:
    """label -> id over the labels seen, sorted (numerically when all are integers)."""
    names = {ex.label for ex in examples if ex.label is not None}
    if any(not isinstance(name, str) for name in names):
        raise BertkitError("build_label_map: regression examples have no label map")
    return {name: i for i, name in enumerate(sort_labels(names))}


def sort_labels(names) -> list[str]:
    """Labels in a stable order: as integers when all parse as integers, else as strings."""
    names = list(set(names))
    try:
        return sorted(names, key=lambda n: (int(n), n))
    except ValueError:
        return sorted(names)


def check_labels(examples: Sequence[ClassificationExample], label_map: Mapping[str, int], origin: str) -> None:
    """Every example's label must be in `label_map`; the error names the example's file:line
    and `origin` (where the map came from, e.g. a checkpoint's config.json)."""
    for ex in examples:
        if ex.label is not None and ex.label not in label_map:
            known = ", ".join(sorted(label_map, key=label_map.__getitem__))
            raise BertkitError(f"{ex.source}: label {ex.label!r} is not in the label map of {origin} ({known})")


def check_label_map(
    checkpoint_label2id: Mapping[str, int] | None,
    examples: Sequence[ClassificationExample],
    origin: str,
) -> dict[str, int] | None:
    """The checkpoint's label map when it has real label names and covers the data's labels.

    Returns None when the checkpoint has no label names (a backbone, or transformers'
    LABEL_0.. placeholders): the caller builds the map from the data. Raises, naming the
    first example whose label the checkpoint does not know, when they disagree.
    """
    if not checkpoint_label2id or any(isinstance(ex.label, float) for ex in examples):  # regression: no map
        return None
    if set(checkpoint_label2id) == {f"LABEL_{i}" for i in range(len(checkpoint_label2id))}:
        return None
    check_labels(examples, checkpoint_label2id, origin)
    return dict(checkpoint_label2id)


# ---------------------------------------------------------------------------- encoding


def encode(
    examples: Sequence[ClassificationExample],
    tokenizer,
    max_seq_length: int,
    label_map: Mapping[str, int] | None,
    show_progress: bool = False,
    both_orders: bool = False,
) -> list[dict[str, Any]]:
    """Tokenize into model inputs for `bertkit.data.collate`.

    Each feature: input_ids, token_type_ids (T,) int32 — `[CLS] text [SEP] (pair [SEP])`,
    the longer text trimmed first to fit max_seq_length — and `labels`: the class id
    (int) via `label_map`, or the float target when `label_map` is None (regression).
    Unlabelled examples get no `labels` key (all examples must agree).
    `both_orders` (pairs only; GPT-1's similarity rule): input_ids, token_type_ids (2, L)
    — (text, pair) then (pair, text), each encoded as above — and `lengths` (2,), batched
    as (B, 2, T) by `collate`.
    """
    if both_orders:
        return _encode_both_orders(examples, tokenizer, max_seq_length, label_map, show_progress)
    if not examples:
        raise BertkitError("encode: no examples")
    labelled = {ex.label is not None for ex in examples}
    if len(labelled) > 1:
        first = next(ex for ex in examples if ex.label is None)
        raise BertkitError(f"{first.source}: unlabelled example in a labelled set")
    has_pairs = {ex.pair is not None for ex in examples}
    if len(has_pairs) > 1:
        first = next(ex for ex in examples if ex.pair is None)
        raise BertkitError(f"{first.source}: missing text pair (the other examples have one)")
    if label_map is not None:
        check_labels(examples, label_map, "the label set")
    from tqdm.auto import tqdm

    features: list[dict[str, Any]] = []
    starts = range(0, len(examples), ENCODE_BATCH)
    for start in tqdm(starts, desc="encode", unit="batch", disable=not show_progress or None):
        chunk = examples[start : start + ENCODE_BATCH]
        pairs = [ex.pair for ex in chunk] if True in has_pairs else None
        enc = tokenizer([ex.text for ex in chunk], pairs, truncation="longest_first", max_length=max_seq_length,
                        return_token_type_ids=True)  # the features' fixed layout; the model's inputs pick
        for ex, ids, types in zip(chunk, enc["input_ids"], enc["token_type_ids"], strict=True):
            feature: dict[str, Any] = {
                "input_ids": np.asarray(ids, dtype=np.int32),
                "token_type_ids": np.asarray(types, dtype=np.int32),
            }
            if ex.label is not None:
                if label_map is not None:
                    feature["labels"] = label_map[ex.label]
                elif isinstance(ex.label, float):
                    feature["labels"] = ex.label
                else:
                    raise BertkitError(f"{ex.source}: label {ex.label!r} needs a label map (not a regression task)")
            features.append(feature)
    return features


def _encode_both_orders(examples, tokenizer, max_seq_length, label_map, show_progress) -> list[dict[str, Any]]:
    """`encode`'s features of each pair in both orders, stacked (2, L) per example."""
    from bertkit.data.collate import stack_sequences

    if any(ex.pair is None for ex in examples):
        first = next(ex for ex in examples if ex.pair is None)
        raise BertkitError(f"{first.source}: a single text, but this model reads each pair in both orders "
                           "(both_orders): give text pairs")
    swapped = [dataclasses.replace(ex, text=ex.pair, pair=ex.text) for ex in examples]
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    features = []
    for forward, backward in zip(encode(examples, tokenizer, max_seq_length, label_map, show_progress),
                                 encode(swapped, tokenizer, max_seq_length, label_map), strict=True):
        feature = stack_sequences([forward["input_ids"], backward["input_ids"]],
                                  [forward["token_type_ids"], backward["token_type_ids"]], pad_id)  # (2, L)
        if "labels" in forward:
            feature["labels"] = forward["labels"]
        features.append(feature)
    return features


def collate(features: Sequence[Mapping[str, Any]], pad_token_id: int, pad_to_multiple_of: int | None = 8) -> dict:
    """Pad features of `encode` into (B, T) int64 tensors (labels padded with -100) and
    stack the per-example values: `bertkit.data.collate`; pairs in both orders (features
    with `lengths`) into (B, 2, T) (`collate_groups`)."""
    from bertkit.data.collate import collate as collate_rows
    from bertkit.data.collate import collate_groups

    if "lengths" in features[0]:
        return collate_groups(features, pad_token_id, pad_to_multiple_of, "orders")
    return collate_rows(features, pad_token_id, pad_to_multiple_of)


# ---------------------------------------------------------------------------- the family's hooks
# (bertkit.tasks.hooks: what fine-tuning, evaluation, `predict` and their reports ask of a family)

MAX_CONFUSION_LABELS = 30  # a confusion matrix plot beyond this many labels is unreadable


def spec_from_config(config) -> dict[str, Any]:
    """A sequence classifier fine-tuned elsewhere: regression when its config says so or it has one output."""
    return {"regression": config.problem_type == "regression" or config.num_labels == 1}


def head_config(config, spec, labels: list[str] | None):
    from bertkit.tasks import hooks

    return hooks.head_config(config, spec, labels, "single_label_classification")


def metrics(spec, data, outputs, id2label) -> dict[str, float]:

    labels = np.asarray([f["labels"] for f in data.features])
    return classification_metrics(spec, np.stack(outputs), labels)


def evaluation_label_map(spec, config, examples: list, origin: str) -> dict[str, int] | None:
    from bertkit.tasks.hooks import missing_label_names

    if spec.regression:
        return None
    if config.has_label_names:
        label2id = glue_label_map(spec.glue_task, config.label2id) if spec.glue_task else dict(config.label2id)
        check_labels(examples, label2id, origin)
        return label2id
    # LABEL_0.. placeholders (fine-tuned elsewhere): ids in sorted order
    names = glue_labels(spec.glue_task) if spec.glue_task else sort_labels(
        {ex.label for ex in examples if ex.label is not None})
    if names is not None and len(names) <= config.num_labels:
        return {name: i for i, name in enumerate(names)}
    raise missing_label_names(origin)


def describe(spec) -> str:
    return spec.glue_task or ("regression" if spec.regression else "classification")


def dev_plots(spec, dev, labels: list[str] | None, outputs, output_dir: Path) -> list[Path]:
    """confusion_matrix.png of the best model's dev predictions."""
    if outputs is None or dev is None or spec.regression or not labels or len(labels) > MAX_CONFUSION_LABELS:
        return []
    from bertkit.plots import new_figure, save_png

    count = len(labels)
    predicted = np.stack(outputs).argmax(-1)
    gold = np.asarray([f["labels"] for f in dev.features], dtype=np.int64)
    matrix = np.zeros((count, count), dtype=np.int64)  # rows: gold, columns: predicted
    np.add.at(matrix, (gold, predicted), 1)
    size = max(3.5, 0.6 * count + 2)
    fig = new_figure(size, size, dpi=110)
    ax = fig.subplots()
    ax.imshow(matrix, cmap="Blues")
    ax.set_xticks(range(count), labels, rotation=45, ha="right")
    ax.set_yticks(range(count), labels)
    ax.set_xlabel("predicted")
    ax.set_ylabel("gold")
    ax.set_title("Dev confusion matrix (best model)", fontsize=10)
    threshold = matrix.max() / 2 if matrix.size else 0
    for i in range(count):
        for j in range(count):
            ax.text(j, i, str(matrix[i, j]), ha="center", va="center",
                    color="white" if matrix[i, j] > threshold else "black")
    fig.tight_layout()
    return [save_png(fig, output_dir / "confusion_matrix.png")]


def predict(loaded, batch: list[Any], max_seq_length: int, batch_size: int, progress: bool) -> list[dict[str, Any]]:
    """"text" or ("text", "pair") -> label, score and every label's softmax probability;
    regression -> {"score": value}."""
    from bertkit.tasks.hooks import INPUT_SOURCE

    spec = loaded.spec
    examples = []
    for i, item in enumerate(batch):
        source = f"{INPUT_SOURCE}:{i + 1}"
        if isinstance(item, str):
            if spec.has_pairs:
                raise BertkitError(f"{source}: this model classifies text pairs; give (text, pair)")
            examples.append(ClassificationExample(item, None, None, source))
        elif isinstance(item, tuple) and len(item) == 2 and all(isinstance(t, str) for t in item):
            examples.append(ClassificationExample(item[0], item[1], None, source))
        else:
            raise BertkitError(f"{source}: expected a text or a (text, pair) tuple of strings, got {item!r:.80}")
    features = encode(examples, loaded.tokenizer, max_seq_length, None, both_orders=spec.both_orders)
    logits = np.stack(loaded.outputs(features, batch_size, progress))  # (N, K)
    if spec.regression or logits.shape[1] == 1:
        return [{"score": float(row[0])} for row in logits]
    names = [loaded.id2label[i] for i in range(logits.shape[1])]
    results = []
    for probs in softmax(logits):
        best = int(probs.argmax())
        results.append({"label": names[best], "score": float(probs[best]),
                        "scores": {name: float(p) for name, p in zip(names, probs)}})
    return results


def input_tokens(tokenizer, spec, item: Any, max_seq_length: int) -> tuple[int, bool]:
    """[CLS] text [SEP] (pair [SEP]) as `encode` builds it: longer than max_seq_length is trimmed
    (a pair read in both orders costs two sequences)."""
    from bertkit.tasks import hooks

    if isinstance(item, tuple) and len(item) == 2 and all(isinstance(t, str) for t in item):
        length = len(tokenizer(item[0], item[1])["input_ids"])
        if getattr(spec, "both_orders", False):
            return 2 * min(length, max_seq_length), length > max_seq_length
    elif isinstance(item, str):
        length = len(tokenizer(item)["input_ids"])
    else:  # not a classification input: `predict` names the problem
        return hooks.input_tokens(tokenizer, spec, item, max_seq_length)
    return min(length, max_seq_length), length > max_seq_length


def inputs_from_texts(texts: list[str], spec) -> list[Any]:
    if not spec.has_pairs:
        return list(texts)
    if len(texts) % 2:
        raise BertkitError(f"this model classifies text pairs: give an even number of texts (got {len(texts)})")
    return [(a, b) for a, b in zip(texts[::2], texts[1::2])]


def input_from_record(record: dict[str, Any], spec, path: str, line_no: int, text_field: str, pair_field: str) -> Any:
    from bertkit.tasks import hooks

    text = hooks.input_from_record(record, spec, path, line_no, text_field, pair_field)
    if not spec.has_pairs:
        return text
    if pair_field not in record:
        raise missing_field(path, line_no, [pair_field], record)
    return (text, as_text(record[pair_field], path, line_no, pair_field))


def input_from_line(text: str, spec, source: str) -> Any:
    from bertkit.tasks.hooks import tab_pair

    return tab_pair(text, source) if spec.has_pairs else text


def echo(item: Any) -> dict[str, Any]:
    return {"text": item[0], "pair": item[1]} if isinstance(item, tuple) else {"text": item}


def classification_metrics(spec, logits: np.ndarray, labels: np.ndarray) -> dict[str, float]:
    """GLUE's metrics for a GLUE task; accuracy and macro F1 (classification) or Pearson,
    Spearman and MSE (regression) otherwise — scores in percent, MSE raw; plus the mean
    `loss`. logits (N, K)."""
    from bertkit.evaluation import metrics as m

    if spec.regression:
        scores = logits[:, 0]
        values = (m.glue_metrics(spec.glue_task, logits, labels) if spec.glue_task
                  else {"pearson": m.pearson(scores, labels), "spearmanr": m.spearman(scores, labels)})
        loss = float(np.mean((scores.astype(np.float64) - labels) ** 2))
        return {**percentages(values), "mse": loss, "loss": loss}
    labels = labels.astype(np.int64)
    if spec.glue_task:
        values = m.glue_metrics(spec.glue_task, logits, labels)
    else:
        predicted = logits.argmax(-1)
        values = {"accuracy": m.accuracy(predicted, labels), "f1_macro": m.f1_score(predicted, labels, average="macro")}
    return {**percentages(values), "loss": cross_entropy(logits, labels)}
