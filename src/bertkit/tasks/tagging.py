"""Token tagging (CoNLL-2003 NER): one label per word, predicted on its first sub-token.

Reading: CoNLL column files — one token per line (`word ... tag`, whitespace separated,
the tag in the last column unless told otherwise), a blank line between sentences,
`-DOCSTART-` lines between documents (skipped), CRLF or LF. A file with one column is
unlabelled text (words only).

Schemes: IOB1 (the original CoNLL-2003 files: B- only between two adjacent entities of
one type), IOB2/BIO (B- on every entity's first word) and IOBES are accepted.
`detect_scheme` tells IOB1 from IOB2 by whether any I- tag opens an entity. The model
trains on IOB2 (IOB1 input is converted, so every entity start is one label), and
`predictions_to_tags` converts predictions back, so output is in the input's scheme.
IOBES trains and predicts as is.

Encoding (`encode`): words are tokenized as pre-split words; the word's label goes on
its first sub-token, -100 (no loss) on its other sub-tokens and on [CLS]/[SEP].
Long sentences are *windowed*, not truncated: a sentence whose sub-tokens exceed
max_seq_length is cut at word boundaries into consecutive windows that each fit
(greedy, no overlap), so every word is labelled and predicted exactly once. (A single
word longer than a whole window keeps only its first sub-tokens.) Words that produce
no sub-tokens (e.g. a lone zero-width space) cannot be predicted and come out as "O".

Features carry `example_index` (the sentence) and `word_ids` (T,) (the word each token
belongs to, -1 on special tokens) besides the model inputs, for `predictions_to_tags`;
they are not model inputs.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from bertkit.labels import IGNORE_INDEX
from bertkit.errors import BertkitError
from bertkit.evaluation.seqeval import iob1_to_iob2, iob2_to_iob1, split_tag
from bertkit.tasks.records import iter_lines
from bertkit.evaluation.metrics import percent, percentages
from bertkit.tasks.scoring import cross_entropy, softmax

DOCSTART = "-DOCSTART-"
OUTSIDE = "O"
SCHEMES = ("IOB1", "IOB2", "IOBES")
ENCODE_BATCH = 1000  # sentences per tokenizer call


@dataclass
class TaggingExample:
    """One sentence: its words and their tags (None: unlabelled). `path`/`line`: where
    the sentence starts (word i is on line `line + i`)."""

    words: list[str]
    tags: list[str] | None
    path: str
    line: int

    @property
    def source(self) -> str:
        return f"{self.path}:{self.line}"


def model_class():
    """The head this task family trains before any checkpoint is read: the first registered model
    family's that has it (bertkit.model.families; imported lazily: reading data never needs torch)."""
    from bertkit.model.families import default_task_class
    from bertkit.tasks.registry import TAGGING

    return default_task_class(TAGGING)


# ---------------------------------------------------------------------------- reading


def read_examples(path: str | Path, tag_column: int = -1) -> list[TaggingExample]:
    """Sentences of a CoNLL file. tag_column: which whitespace-separated column holds the
    tag (default the last). Every token line must have as many columns as the first."""
    examples: list[TaggingExample] = []
    words: list[str] = []
    tags: list[str] = []
    start = 0
    width: tuple[int, int] | None = None  # (columns, line of the first token)

    def flush() -> None:
        if words:
            examples.append(TaggingExample(list(words), list(tags) if width[0] > 1 else None, str(path), start))
            words.clear()
            tags.clear()

    for line_no, line in iter_lines(path):
        fields = line.split()
        if not fields:
            flush()
            continue
        if fields[0] == DOCSTART:
            flush()
            continue
        if width is None:
            width = (len(fields), line_no)
            if width[0] > 1 and not -width[0] <= tag_column < width[0]:
                raise BertkitError(f"{path}:{line_no}: no tag column {tag_column} (the line has {width[0]} columns)")
        elif len(fields) != width[0]:
            raise BertkitError(
                f"{path}:{line_no}: expected {width[0]} whitespace-separated columns (as line {width[1]}), "
                f"found {len(fields)}"
            )
        if not words:
            start = line_no
        words.append(fields[0])
        if width[0] > 1:
            tag = fields[tag_column]
            try:
                split_tag(tag)
            except BertkitError as exc:
                raise BertkitError(f"{path}:{line_no}: {exc}") from None
            tags.append(tag)
    flush()
    if not examples:
        raise BertkitError(f"{path}: empty file (no sentences)")
    return examples


# ---------------------------------------------------------------------------- schemes


def detect_scheme(examples: Sequence[TaggingExample]) -> str:
    """"IOBES" if any E-/S- tag occurs; else "IOB1" if some I- tag opens an entity
    (follows O, another type, or starts a sentence); else "IOB2"."""
    iob1_at = None
    for ex in examples:
        previous = ""
        for i, tag in enumerate(ex.tags or ()):
            prefix, type_ = split_tag(tag)
            if prefix in ("E", "S"):
                return "IOBES"
            if prefix == "I" and type_ != previous and iob1_at is None:
                iob1_at = i
            previous = type_
    return "IOB1" if iob1_at is not None else "IOB2"


def training_tags(tags: Sequence[str], scheme: str) -> list[str]:
    """Tags as the model learns them: IOB1 -> IOB2; IOB2 and IOBES unchanged."""
    return iob1_to_iob2(tags) if scheme == "IOB1" else list(tags)


def output_tags(tags: Sequence[str], scheme: str) -> list[str]:
    """Predicted (training-scheme) tags back in the input's scheme."""
    return iob2_to_iob1(tags) if scheme == "IOB1" else list(tags)


def build_label_map(examples: Sequence[TaggingExample], scheme: str) -> dict[str, int]:
    """label -> id: "O" first, then for each entity type (sorted) every prefix of the
    training scheme (B, I; or B, I, E, S for IOBES), seen in the data or not — so a
    train and a dev file of the same types give the same map."""
    types = set()
    for ex in examples:
        for tag in ex.tags or ():
            prefix, type_ = split_tag(tag)
            if prefix != OUTSIDE:
                types.add(type_)
    prefixes = "BIES" if scheme == "IOBES" else "BI"
    labels = [OUTSIDE] + [f"{p}-{t}" for t in sorted(types) for p in prefixes]
    return {label: i for i, label in enumerate(labels)}


def check_label_map(
    checkpoint_label2id: Mapping[str, int] | None, examples: Sequence[TaggingExample], scheme: str, origin: str
) -> dict[str, int] | None:
    """The checkpoint's label map if it has real names covering the data's (training) tags;
    None for a checkpoint without label names; raises naming file:line otherwise."""
    if not checkpoint_label2id:
        return None
    if set(checkpoint_label2id) == {f"LABEL_{i}" for i in range(len(checkpoint_label2id))}:
        return None
    _check_tags(examples, checkpoint_label2id, scheme, f"the label map of {origin}")
    return dict(checkpoint_label2id)


def _check_tags(examples: Sequence[TaggingExample], label_map: Mapping[str, int], scheme: str, origin: str) -> None:
    for ex in examples:
        for i, tag in enumerate(training_tags(ex.tags, scheme) if ex.tags else ()):
            if tag not in label_map:
                known = ", ".join(sorted(label_map, key=label_map.__getitem__))
                shown = tag if tag == ex.tags[i] else f"{ex.tags[i]} (as {scheme}->IOB2: {tag})"
                raise BertkitError(f"{ex.path}:{ex.line + i}: tag {shown!r} is not in {origin} ({known})")


# ---------------------------------------------------------------------------- encoding


def encode(
    examples: Sequence[TaggingExample],
    tokenizer,
    max_seq_length: int,
    label_map: Mapping[str, int] | None,
    scheme: str = "IOB2",
    show_progress: bool = False,
) -> list[dict[str, Any]]:
    """Tokenize sentences into windows for `bertkit.data.collate`.

    Each feature: input_ids, token_type_ids (all 0) (T,) int32; `labels` (T,) int64 —
    the word's label id on its first sub-token, -100 elsewhere (absent when the
    examples are unlabelled or `label_map` is None); `word_ids` (T,) int32 (word index
    in the sentence, -1 on special tokens) and `example_index` (int): which sentence.
    """
    if scheme not in SCHEMES:
        raise BertkitError(f"scheme {scheme!r}: expected one of {', '.join(SCHEMES)}")
    if not examples:
        raise BertkitError("encode: no examples")
    labelled = label_map is not None and all(ex.tags is not None for ex in examples)
    if labelled:
        _check_tags(examples, label_map, scheme, "the label set")
    from tqdm.auto import tqdm

    features: list[dict[str, Any]] = []
    starts = range(0, len(examples), ENCODE_BATCH)
    for start in tqdm(starts, desc="encode", unit="batch", disable=not show_progress or None):
        chunk = examples[start : start + ENCODE_BATCH]
        enc = tokenizer([ex.words for ex in chunk], is_split_into_words=True)
        for offset, ex in enumerate(chunk):
            label_ids = None
            if labelled:
                label_ids = [label_map[tag] for tag in training_tags(ex.tags, scheme)]
            ids = enc["input_ids"][offset]
            word_ids = [-1 if w is None else w for w in enc.word_ids(offset)]
            for window in _windows(ids, word_ids, max_seq_length):
                features.append(_feature(window, label_ids, start + offset))
    return features


def _windows(ids: list[int], word_ids: list[int], max_seq_length: int) -> list[tuple[list[int], list[int]]]:
    """Cut one encoded sentence at word boundaries into pieces of at most max_seq_length
    tokens, each keeping the sentence's leading and trailing special tokens."""
    if len(ids) <= max_seq_length:
        return [(ids, word_ids)]
    content = [i for i, w in enumerate(word_ids) if w >= 0]
    first, last = content[0], content[-1]
    prefix, suffix = slice(0, first), slice(last + 1, len(ids))
    budget = max_seq_length - first - (len(ids) - last - 1)
    if budget < 1:
        raise BertkitError(f"max_seq_length={max_seq_length} leaves no room for text beside the special tokens")
    windows = []
    begin = first
    while begin <= last:
        end = min(begin + budget, last + 1)  # exclusive
        if end <= last and word_ids[end] == word_ids[end - 1]:  # would split a word: back up to its start
            word_start = end - 1
            while word_start > begin and word_ids[word_start - 1] == word_ids[end]:
                word_start -= 1
            if word_start > begin:
                end = word_start
            else:  # one word longer than a window: keep its first sub-tokens, skip the rest
                windows.append((begin, end))
                while end <= last and word_ids[end] == word_ids[begin]:
                    end += 1
                begin = end
                continue
        windows.append((begin, end))
        begin = end
    return [
        (ids[prefix] + ids[a:b] + ids[suffix], word_ids[prefix] + word_ids[a:b] + word_ids[suffix]) for a, b in windows
    ]


def _feature(window: tuple[list[int], list[int]], label_ids: list[int] | None, example_index: int) -> dict[str, Any]:
    ids, word_ids = window
    words = np.asarray(word_ids, dtype=np.int32)  # (T,)
    feature: dict[str, Any] = {
        "input_ids": np.asarray(ids, dtype=np.int32),
        "token_type_ids": np.zeros(len(ids), dtype=np.int32),
    }
    if label_ids is not None:
        labels = np.full(len(ids), IGNORE_INDEX, dtype=np.int64)
        firsts = _first_subtokens(words)
        labels[firsts] = np.asarray(label_ids, dtype=np.int64)[words[firsts]]
        feature["labels"] = labels
    feature["word_ids"] = words
    feature["example_index"] = example_index
    return feature


def _first_subtokens(word_ids: np.ndarray) -> np.ndarray:
    """Positions whose token starts a word: a word id >= 0 that differs from the previous token's."""
    previous = np.concatenate([[-1], word_ids[:-1]])
    return np.flatnonzero((word_ids >= 0) & (word_ids != previous))


# ---------------------------------------------------------------------------- decoding


def predictions_to_tags(
    examples: Sequence[TaggingExample],
    features: Sequence[Mapping[str, Any]],
    predictions: Sequence[Sequence[int]] | np.ndarray,
    id2label: Mapping[int, str],
    scheme: str = "IOB2",
) -> list[list[str]]:
    """Per sentence, one tag per word in the input's scheme, from per-token predicted ids.

    predictions[k]: label ids for the tokens of features[k] (padded rows are fine: only
    the first len(input_ids) positions are read). Words without sub-tokens get "O".
    """
    tags = [[OUTSIDE] * len(ex.words) for ex in examples]
    for feature, predicted in zip(features, predictions, strict=True):
        words = np.asarray(feature["word_ids"])
        predicted = np.asarray(predicted)[: len(words)]
        sentence = tags[int(feature["example_index"])]
        for position in _first_subtokens(words):
            sentence[int(words[position])] = id2label[int(predicted[position])]
    return [output_tags(sentence, scheme) for sentence in tags]


def collate(features: Sequence[Mapping[str, Any]], pad_token_id: int, pad_to_multiple_of: int | None = 8) -> dict:
    """Pad features of `encode` into (B, T) int64 tensors (labels padded with -100) and
    stack the per-example values: `bertkit.data.collate`."""
    from bertkit.data.collate import collate as collate_rows

    return collate_rows(features, pad_token_id, pad_to_multiple_of)


# ---------------------------------------------------------------------------- the family's hooks
# (bertkit.tasks.hooks: what fine-tuning, evaluation, `predict` and their reports ask of a family)

WORD_PATTERN = re.compile(r"\w+(?:[-.&]\w+)*|'s\b|’s\b|[^\w\s]")


def spec_from_config(config) -> dict[str, Any]:
    return {"scheme": "IOB2"}  # a tagger fine-tuned elsewhere: HF's token classification examples use IOB2


def metrics(spec, data, outputs, id2label) -> dict[str, float]:

    return tagging_metrics(data, outputs, id2label)


def evaluation_label_map(spec, config, examples: list, origin: str) -> dict[str, int] | None:
    from bertkit.tasks.hooks import missing_label_names

    if spec.regression:
        return None
    if not config.has_label_names:
        raise missing_label_names(origin)
    check_label_map(config.label2id, examples, spec.scheme or "IOB2", origin)
    return dict(config.label2id)


def describe(spec) -> str:
    return f"tagging ({spec.scheme})"


def split_words(text: str) -> tuple[list[str], list[tuple[int, int]]]:
    """Words of raw text and their (start, end) character spans: whitespace and punctuation
    split; hyphens, periods and ampersands inside a word keep it whole ("U.S", "1996-08-30");
    "'s" is its own word, as in CoNLL."""
    matches = list(WORD_PATTERN.finditer(text))
    return [m.group() for m in matches], [m.span() for m in matches]


def _join_words(words: list[str]) -> tuple[list[str], list[tuple[int, int]], str]:
    spans, position = [], 0
    for word in words:
        spans.append((position, position + len(word)))
        position += len(word) + 1
    return words, spans, " ".join(words)


def predict(loaded, batch: list[Any], max_seq_length: int, batch_size: int, progress: bool) -> list[dict[str, Any]]:
    """"raw text" or a list of words -> entities with character spans and scores, the
    words and their tags (in the scheme the model was trained on)."""
    from bertkit.evaluation.seqeval import get_entities
    from bertkit.tasks.hooks import INPUT_SOURCE

    spec = loaded.spec
    texts, words, spans = [], [], []
    for i, item in enumerate(batch):
        if isinstance(item, str):
            text = item
            item_words, item_spans = split_words(text)
        elif isinstance(item, (list, tuple)) and all(isinstance(w, str) and w and not w.isspace() for w in item):
            item_words, item_spans, text = _join_words(list(item))
        else:
            raise BertkitError(f"{INPUT_SOURCE}:{i + 1}: expected a text or a list of non-empty words, "
                               f"got {item!r:.80}")
        texts.append(text)
        words.append(item_words)
        spans.append(item_spans)
    results: list[dict[str, Any]] = [{"entities": [], "words": w, "tags": []} for w in words]
    present = [i for i, w in enumerate(words) if w]
    if not present:
        return results
    examples = [TaggingExample(words[i], None, INPUT_SOURCE, i + 1) for i in present]
    scheme = spec.scheme or "IOB2"
    features = encode(examples, loaded.tokenizer, max_seq_length, None, scheme=scheme)
    outputs = loaded.outputs(features, batch_size, progress)  # (T_i, K) each
    tags = predictions_to_tags(examples, features, [o.argmax(-1) for o in outputs], loaded.id2label, scheme)
    word_scores = [np.zeros(len(ex.words)) for ex in examples]
    for feature, logits in zip(features, outputs):
        word_ids = np.asarray(feature["word_ids"])
        probs = softmax(logits)  # (T, K)
        firsts = _first_subtokens(word_ids)
        word_scores[int(feature["example_index"])][word_ids[firsts]] = probs[firsts].max(-1)
    for k, i in enumerate(present):
        entities = []
        for entity in get_entities(tags[k]):
            start, end = spans[i][entity.start][0], spans[i][entity.end - 1][1]
            entities.append({"type": entity.type, "text": texts[i][start:end], "start": start, "end": end,
                             "score": float(word_scores[k][entity.start : entity.end].mean())})
        results[i] = {"entities": entities, "words": words[i], "tags": tags[k]}
    return results


def input_from_record(record: dict[str, Any], spec, path: str, line_no: int, text_field: str, pair_field: str) -> Any:
    from bertkit.tasks import hooks
    from bertkit.tasks.records import as_text

    if "words" in record and isinstance(record["words"], list):
        return tuple(as_text(w, path, line_no, "words") for w in record["words"])
    return hooks.input_from_record(record, spec, path, line_no, text_field, pair_field)


def echo(item: Any) -> dict[str, Any]:
    return {"text": " ".join(item)} if isinstance(item, tuple) else {"text": item}  # a tuple: pre-split words


def tagging_metrics(data, outputs: list[np.ndarray], id2label: dict[int, str]) -> dict[str, float]:
    """Entity-level precision / recall / F1 (seqeval's default, conlleval rules) and token
    accuracy over words, in percent, and the mean loss over the labelled first sub-tokens."""
    from bertkit.evaluation import seqeval

    predicted = predictions_to_tags(data.examples, data.features, [o.argmax(-1) for o in outputs], id2label,
                                    data.scheme or "IOB2")
    gold = [ex.tags for ex in data.examples]
    scores = seqeval.precision_recall_f1(predicted, gold)
    logits = np.concatenate([o for o in outputs])  # (tokens, K)
    labels = np.concatenate([f["labels"] for f in data.features])
    tagged = labels != -100
    loss = cross_entropy(logits[tagged], labels[tagged]) if tagged.any() else 0.0
    return {**percentages(scores), "accuracy": percent(seqeval.accuracy_score(predicted, gold)), "loss": loss}
