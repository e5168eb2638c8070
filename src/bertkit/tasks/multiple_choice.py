"""Multiple choice (SWAG, PIQA, CommonsenseQA): score each (context, choice) pair, pick one.

Each choice is encoded as `[CLS] context [SEP] choice [SEP]` (the longer side trimmed
first); `BertForMultipleChoice` turns each pair's [CLS] into one score and takes a
softmax over the choices. A batch is (B, C, T): every example of a file must have the
same number of choices C.

Formats read by `read_examples`:
- SWAG CSV (`.csv`/`.tsv` with a header): `sent1` is the context; choice i is
  `sent2 + " " + ending{i}` (the ending continues sent2, as in BERT's run_swag);
  `label` (absent in the test split) is the right ending's index.
- JSONL, one question per line:
  context  "context" / "question" / "goal" (PIQA) / "ctx" / "sent1"; when both a
           "context" and a "question" are given they are joined;
           CommonsenseQA's original layout {"question": {"stem", "choices"}} too;
  choices  "choices" / "endings": a list of strings, {"label": [...], "text": [...]}
           (CommonsenseQA as exported by HF datasets), or a list of {"label", "text"};
           otherwise "sol1", "sol2", ... (PIQA) or "ending0", "ending1", ...;
  label    "label" (index, or a choice label) or "answerKey" ("A".. via the choice
           labels); PIQA keeps labels in a separate file, one index per line —
           `labels_path`, found automatically as `<name>-labels.lst` beside `<name>.jsonl`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from bertkit.errors import BertkitError
from bertkit.tasks.records import as_text, column_index, file_kind, iter_jsonl, iter_lines, missing_field, read_table
from bertkit.evaluation.metrics import percent
from bertkit.tasks.scoring import cross_entropy, softmax

CONTEXT_FIELDS = ("context", "question", "goal", "ctx", "sent1")
CHOICE_FIELDS = ("choices", "endings")
SWAG_COLUMNS = ("", "video-id", "fold-ind", "startphrase", "sent1", "sent2", "gold-source", "label")  # + ending0..
NUMBERED_CHOICE_PREFIXES = ("sol", "ending")  # sol1, sol2 (PIQA, from 1); ending0.. (SWAG, from 0)
ENCODE_BATCH = 1000  # (context, choice) pairs per tokenizer call


@dataclass
class MultipleChoiceExample:
    """A context, its C choices, and the right choice's index (None: unlabelled)."""

    context: str
    choices: list[str]
    label: int | None
    path: str
    line: int

    @property
    def source(self) -> str:
        return f"{self.path}:{self.line}"


def model_class():
    """The head this task family trains before any checkpoint is read: the first registered model
    family's that has it (bertkit.model.families; imported lazily: reading data never needs torch)."""
    from bertkit.model.families import default_task_class
    from bertkit.tasks.registry import MULTIPLE_CHOICE

    return default_task_class(MULTIPLE_CHOICE)


# ---------------------------------------------------------------------------- reading


def read_examples(path: str | Path, labels_path: str | Path | None = None) -> list[MultipleChoiceExample]:
    """Examples of a SWAG CSV or a multiple-choice JSONL file (see the module docstring).

    Errors name the file and line: a malformed row, a missing field, a label that is
    not one of the choices, a different number of choices than the first example, an
    empty file, a labels file of another length.
    """
    if file_kind(path) == "jsonl":
        examples = [_json_example(path, line_no, record) for line_no, record in iter_jsonl(path)]
    else:
        examples = _read_swag(path)
    if not examples:
        raise BertkitError(f"{path}: empty file (no examples)")
    if labels_path is None:
        sibling = Path(path).with_name(Path(path).name.split(".")[0] + "-labels.lst")
        if all(ex.label is None for ex in examples) and sibling.is_file():
            labels_path = sibling
    if labels_path is not None:
        _attach_labels(examples, labels_path)
    width = len(examples[0].choices)
    for ex in examples:
        if len(ex.choices) != width:
            raise BertkitError(
                f"{ex.source}: {len(ex.choices)} choices, but {examples[0].source} has {width} "
                "(every example of a file needs the same number)"
            )
        if ex.label is not None and not 0 <= ex.label < width:
            raise BertkitError(f"{ex.source}: label {ex.label} is not a choice index (0..{width - 1})")
    return examples


def _read_swag(path: str | Path) -> list[MultipleChoiceExample]:
    """Examples of a SWAG CSV. The choices are the columns ending0..ending{C-1}: a gap in
    their numbers, a column that looks like a misnamed ending ("ending_3", "Ending3") or a
    label >= C fails in one line naming the ending columns found."""
    header, rows = read_table(path)
    context = column_index(header, "sent1", path)
    start = column_index(header, "sent2", path)
    numbered = sorted((number, column) for column, name in enumerate(header)
                      if (number := _numbered(name, "ending")) is not None)
    endings = [column for _, column in numbered]
    if not endings:
        column_index(header, "ending0", path)  # raises: names the missing column
    found = f"choices come from columns {', '.join(header[column] for column in endings)}"
    if [number for number, _ in numbered] != list(range(len(numbered))):
        raise BertkitError(f"{path}:1: {found}; they must be numbered ending0..ending{len(numbered) - 1} without gaps "
                           "(is a column misnamed?)")
    lookalikes = [name for name in header if name not in SWAG_COLUMNS and _numbered(name, "ending") is None
                  and re.fullmatch(r"endings?\d*", re.sub(r"[\W_]", "", name.lower()))]
    if lookalikes:
        raise BertkitError(f"{path}:1: column {lookalikes[0]!r} looks like a choice but is not read ({found}); "
                           f"name it ending{len(endings)}")
    unknown = [name for name in header if name not in SWAG_COLUMNS and _numbered(name, "ending") is None]
    label = header.index("label") if "label" in header else None
    examples = []
    for line_no, fields in rows:
        choices = [f"{fields[start]} {fields[column]}".strip() for column in endings]
        value = None if label is None else _index_label(fields[label], path, line_no)
        if value is not None and not 0 <= value < len(endings):
            other = f" (other columns: {', '.join(unknown)})" if unknown else ""
            raise BertkitError(f"{path}:{line_no}: label {value} is not a choice index (0..{len(endings) - 1}): "
                               f"{found}{other}; is a column misnamed?")
        examples.append(MultipleChoiceExample(fields[context], choices, value, str(path), line_no))
    return examples


def _numbered(name: str, prefix: str) -> int | None:
    """3 for "ending3" with prefix "ending"; None when `name` is not prefix + digits."""
    rest = name[len(prefix):] if name.startswith(prefix) else ""
    return int(rest) if rest.isdigit() else None


def _json_example(path: str | Path, line_no: int, record: dict[str, Any]) -> MultipleChoiceExample:
    question = record.get("question")
    choice_labels: list[str] | None = None
    if isinstance(question, dict):  # CommonsenseQA's original layout
        if "stem" not in question:
            raise missing_field(path, line_no, ["stem"], question)
        context = as_text(question["stem"], path, line_no, "question.stem")
        raw_choices = question.get("choices", record.get("choices"))
    else:
        present = [name for name in CONTEXT_FIELDS if name in record]
        if not present:
            raise missing_field(path, line_no, CONTEXT_FIELDS, record)
        if "context" in present and "question" in present:
            context = " ".join(as_text(record[n], path, line_no, n) for n in ("context", "question"))
        else:
            context = as_text(record[present[0]], path, line_no, present[0])
        raw_choices = next((record[name] for name in CHOICE_FIELDS if name in record), None)
    if raw_choices is None:
        choices = _numbered_fields(record, path, line_no)
    else:
        choices, choice_labels = _parse_choices(raw_choices, path, line_no)
    if "sent2" in record:  # SWAG as JSON: endings continue sent2
        lead = as_text(record["sent2"], path, line_no, "sent2")
        choices = [f"{lead} {choice}".strip() for choice in choices]
    label = None
    for name in ("label", "answerKey"):
        if name in record and record[name] not in (None, ""):
            label = _json_label(record[name], choice_labels, path, line_no, name)
            break
    return MultipleChoiceExample(context, choices, label, str(path), line_no)


def _numbered_fields(record: Mapping[str, Any], path: str | Path, line_no: int) -> list[str]:
    for prefix in NUMBERED_CHOICE_PREFIXES:
        numbered = sorted((_numbered(name, prefix), name) for name in record if _numbered(name, prefix) is not None)
        if numbered:
            return [as_text(record[name], path, line_no, name) for _, name in numbered]
    raise missing_field(path, line_no, [*CHOICE_FIELDS, "sol1", "ending0"], dict(record))


def _parse_choices(raw: Any, path: str | Path, line_no: int) -> tuple[list[str], list[str] | None]:
    """Choice texts and, when the file names them ("A".."E"), their labels."""
    if isinstance(raw, dict) and "text" in raw:
        texts = raw["text"]
        labels = raw.get("label")
        labels_ok = labels is None or (isinstance(labels, list) and len(labels) == len(texts))
        if not isinstance(texts, list) or not labels_ok:
            raise BertkitError(f"{path}:{line_no}: 'choices' needs a 'text' list and a 'label' list of the same length")
        return [as_text(t, path, line_no, "choices.text") for t in texts], (
            None if labels is None else [str(label) for label in labels])
    if isinstance(raw, list) and all(isinstance(c, dict) for c in raw):
        if not all("text" in c for c in raw):
            raise BertkitError(f"{path}:{line_no}: every choice object needs a 'text' field")
        labels = [str(c["label"]) for c in raw] if all("label" in c for c in raw) else None
        return [as_text(c["text"], path, line_no, "choices.text") for c in raw], labels
    if isinstance(raw, list):
        return [as_text(c, path, line_no, "choices") for c in raw], None
    raise BertkitError(f"{path}:{line_no}: 'choices' must be a list or {{'label': [...], 'text': [...]}}")


def _json_label(value: Any, choice_labels: list[str] | None, path: str | Path, line_no: int, name: str) -> int:
    if isinstance(value, str) and choice_labels is not None and value in choice_labels:
        return choice_labels.index(value)
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        return int(value)
    if isinstance(value, str) and choice_labels is None and len(value) == 1 and value.isalpha() and value.isupper():
        return ord(value) - ord("A")  # "A" -> 0 when the choices are not labelled
    known = f" (the choices are {', '.join(choice_labels)})" if choice_labels else ""
    raise BertkitError(f"{path}:{line_no}: {name} {value!r} is not one of the choices{known}")


def _index_label(value: str, path: str | Path, line_no: int) -> int:
    value = value.strip()
    if not value.lstrip("-").isdigit():
        raise BertkitError(f"{path}:{line_no}: label {value!r} is not a choice index")
    return int(value)


def _attach_labels(examples: list[MultipleChoiceExample], labels_path: str | Path) -> None:
    """Labels from a file with one choice index per line (PIQA's valid-labels.lst)."""
    labels = [(line_no, line.strip()) for line_no, line in iter_lines(labels_path) if line.strip()]
    if len(labels) != len(examples):
        raise BertkitError(
            f"{labels_path}: {len(labels)} labels for {len(examples)} examples in {examples[0].path}"
        )
    for ex, (line_no, value) in zip(examples, labels, strict=True):
        ex.label = _index_label(value, labels_path, line_no)


# ---------------------------------------------------------------------------- encoding


def encode(
    examples: Sequence[MultipleChoiceExample],
    tokenizer,
    max_seq_length: int,
    label_map: Mapping[str, int] | None = None,
    show_progress: bool = False,
) -> list[dict[str, Any]]:
    """Tokenize every (context, choice) pair. `label_map` is unused (labels are choice
    indices); it is accepted so every family's `encode` has one signature.

    Each feature: input_ids, token_type_ids (C, L) int32 — the example's choices padded
    with the pad id to its longest one, L <= max_seq_length — `lengths` (C,) int32 (real
    tokens per choice) and `labels` (int) when labelled. Batch them with `collate`.
    """
    del label_map
    if not examples:
        raise BertkitError("encode: no examples")
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    pairs = [(ex.context, choice) for ex in examples for choice in ex.choices]
    from tqdm.auto import tqdm

    ids: list[list[int]] = []
    types: list[list[int]] = []
    starts = range(0, len(pairs), ENCODE_BATCH)
    for start in tqdm(starts, desc="encode", unit="batch", disable=not show_progress or None):
        chunk = pairs[start : start + ENCODE_BATCH]
        enc = tokenizer(
            [a for a, _ in chunk], [b for _, b in chunk], truncation="longest_first", max_length=max_seq_length,
            return_token_type_ids=True,  # the features' fixed layout; the model's inputs pick
        )
        ids += enc["input_ids"]
        types += enc["token_type_ids"]
    from bertkit.data.collate import stack_sequences

    features = []
    row = 0
    for ex in examples:
        count = len(ex.choices)
        feature: dict[str, Any] = stack_sequences(ids[row : row + count], types[row : row + count], pad_id)  # (C, L)
        if ex.label is not None:
            feature["labels"] = ex.label
        features.append(feature)
        row += count
    return features


def collate(features: Sequence[Mapping[str, Any]], pad_token_id: int, pad_to_multiple_of: int | None = 8) -> dict:
    """Batch features of `encode` into (B, C, T) input_ids / token_type_ids /
    attention_mask int64 tensors (T = longest choice in the batch, rounded up) and (B,)
    labels, through `bertkit.data.collate.collate_groups`. (A head reading each choice's last
    real token, GPT's <extract>, gets its position from the mask: bertkit.model.families
    `model_inputs`.)"""
    from bertkit.data.collate import collate_groups

    return collate_groups(features, pad_token_id, pad_to_multiple_of, "choices")


# ---------------------------------------------------------------------------- the family's hooks
# (bertkit.tasks.hooks: what fine-tuning, evaluation, `predict` and their reports ask of a family)


def metrics(spec, data, outputs, id2label) -> dict[str, float]:

    return multiple_choice_metrics(data, outputs)


def _context_and_choices(item: Any, source: str) -> tuple[str, list[str]]:
    if isinstance(item, dict):
        if "context" not in item or "choices" not in item:
            raise BertkitError(f"{source}: expected {{'context': ..., 'choices': [...]}}, got keys {sorted(item)}")
        context, choices = item["context"], item["choices"]
    elif isinstance(item, tuple) and len(item) == 2:
        context, choices = item
    else:
        raise BertkitError(f"{source}: expected (context, [choices]) or {{'context', 'choices'}}, got {item!r:.80}")
    if not isinstance(context, str) or not isinstance(choices, (list, tuple)) or len(choices) < 2 \
            or not all(isinstance(c, str) for c in choices):
        raise BertkitError(f"{source}: the context must be a text and the choices a list of at least two texts")
    return context, list(choices)


def input_tokens(tokenizer, spec, item: Any, max_seq_length: int) -> tuple[int, bool]:
    """One (context, choice) sequence per choice, each trimmed to max_seq_length as `encode` does."""
    from bertkit.tasks import hooks

    try:
        context, choices = _context_and_choices(item, "")
    except BertkitError:  # not a multiple-choice input: `predict` names the problem
        return hooks.input_tokens(tokenizer, spec, item, max_seq_length)
    lengths = [len(ids) for ids in tokenizer([context] * len(choices), choices)["input_ids"]]
    return sum(min(n, max_seq_length) for n in lengths), max(lengths) > max_seq_length


def predict(loaded, batch: list[Any], max_seq_length: int, batch_size: int, progress: bool) -> list[dict[str, Any]]:
    """{"context": ..., "choices": [...]} or (context, [choices]) -> the chosen index, its
    probability and every choice's."""
    from bertkit.tasks.hooks import INPUT_SOURCE

    examples = []
    for i, item in enumerate(batch):
        context, choices = _context_and_choices(item, f"{INPUT_SOURCE}:{i + 1}")
        examples.append(MultipleChoiceExample(context, choices, None, INPUT_SOURCE, i + 1))
    features = encode(examples, loaded.tokenizer, max_seq_length)
    outputs: list[np.ndarray | None] = [None] * len(examples)
    for count in sorted({len(ex.choices) for ex in examples}):  # one choice count per batch
        group = [i for i, ex in enumerate(examples) if len(ex.choices) == count]
        for i, logits in zip(group, loaded.outputs([features[i] for i in group], batch_size, progress)):
            outputs[i] = logits
    results = []
    for logits in outputs:
        probs = softmax(logits)
        best = int(probs.argmax())
        results.append({"label": best, "score": float(probs[best]), "scores": [float(p) for p in probs]})
    return results


def inputs_from_texts(texts: list[str], spec) -> list[Any]:
    if len(texts) < 3:
        raise BertkitError("multiple choice: give the context and at least two choices")
    return [(texts[0], texts[1:])]


def inputs_from_file(path: str, spec) -> list[Any] | None:
    return [(ex.context, ex.choices) for ex in read_examples(path)]


def echo(item: Any) -> dict[str, Any]:
    return {"context": item[0], "choices": list(item[1])}


def multiple_choice_metrics(data, outputs: list[np.ndarray]) -> dict[str, float]:
    from bertkit.evaluation.metrics import accuracy

    widths = {len(o) for o in outputs}
    if len(widths) > 1:
        raise BertkitError(f"{data.path}: examples with different numbers of choices")
    logits = np.stack(outputs)  # (N, C)
    labels = np.asarray([f["labels"] for f in data.features], dtype=np.int64)
    return {"accuracy": percent(accuracy(logits.argmax(-1), labels)), "loss": cross_entropy(logits, labels)}


def input_axes() -> tuple[str, ...]:
    """(B, C, T) inputs: each example's choices side by side (collate)."""
    return ("batch_size", "num_choices", "sequence_length")
