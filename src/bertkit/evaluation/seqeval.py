"""Entity-level precision / recall / F1 for token tagging (CoNLL-2003 NER), seqeval-compatible.

A tag is `O` or `P-TYPE` with prefix P in B (begin), I (inside), E (end), S (single);
a bare prefix (`B`) has type `_`. Entities are `(type, start, end)` token spans with
`end` exclusive, found per sentence (an entity never crosses a sentence boundary).

Two ways to read a tag sequence into entities, matching the `seqeval` package:
- default (lenient, conlleval's rules): one reader for every scheme — IOB1, IOB2,
  IOE1/IOE2 and IOBES/BIOES. An entity ends after E-/S-, before B-/S-/O, and wherever
  the type changes; it starts at B-/S-, at I-/E- after O/E-/S-, and wherever the type
  changes. So a stray `I-PER` after `O` still opens an entity.
- strict (`strict=True`, needs `scheme`): only well-formed chunks count. IOB2: B-X
  followed by any run of I-X. IOBES: S-X, or B-X (I-X)* E-X. Anything else (an I- with
  no B-, an unfinished B- I-) is not an entity; a prefix the scheme does not allow
  is an error.

Argument order is `(predictions, labels)` as in `bertkit.evaluation.metrics` — the
reverse of seqeval's `(y_true, y_pred)`. A predicted entity is correct when its type,
start and end all equal a gold entity's in the same sentence.

`iob1_to_iob2` / `iob2_to_iob1` convert between the CoNLL-2003 file scheme (IOB1: B-
only between two adjacent entities of one type) and the BIO scheme models train on.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import NamedTuple

from bertkit.errors import BertkitError, ConfigError

PREFIXES = frozenset("BIES")
# Prefixes each scheme allows ("O" always); IOBES is also known as BIOES.
SCHEME_PREFIXES = {"IOB1": "BI", "IOB2": "BI", "IOE1": "IE", "IOE2": "IE", "IOBES": "BIES"}
STRICT_SCHEMES = ("IOB2", "IOBES")
_SCHEME_ALIASES = {"BIO": "IOB2", "BIOES": "IOBES"}


class Entity(NamedTuple):
    """One entity of a sentence: tokens `start <= i < end` of type `type`."""

    type: str
    start: int
    end: int


def scheme_name(scheme: str) -> str:
    """Canonical scheme name (`"bioes"` -> `"IOBES"`); ConfigError for unknown schemes."""
    key = scheme.strip().upper()
    key = _SCHEME_ALIASES.get(key, key)
    if key not in SCHEME_PREFIXES:
        allowed = ", ".join([*SCHEME_PREFIXES, *_SCHEME_ALIASES])
        raise ConfigError(f"scheme {scheme!r}: unknown tagging scheme; expected one of {allowed}")
    return key


def split_tag(tag: str) -> tuple[str, str]:
    """`"B-PER"` -> `("B", "PER")`, `"O"` -> `("O", "")`, `"B"` -> `("B", "_")`; BertkitError if malformed."""
    if tag == "O":
        return "O", ""
    if tag and tag[0] in PREFIXES:
        if len(tag) == 1:
            return tag, "_"
        if tag[1] == "-":
            return tag[0], tag[2:] or "_"
    raise BertkitError(f"tag {tag!r}: expected 'O' or one of B-, I-, E-, S- followed by an entity type")


def get_entities(tags: Sequence[str], *, strict: bool = False, scheme: str | None = None) -> list[Entity]:
    """Entities of one tag sequence, in order of their start (see the module docstring for the rules).

    `scheme` (IOB1, IOB2, IOE1, IOE2, IOBES/BIOES) is optional in default mode — when
    given, tags whose prefix the scheme does not allow are an error — and required when
    `strict` (IOB2 or IOBES).
    """
    parsed = [split_tag(tag) for tag in tags]
    if scheme is not None:
        scheme = scheme_name(scheme)
        allowed = SCHEME_PREFIXES[scheme] + "O"
        for position, (prefix, _) in enumerate(parsed):
            if prefix not in allowed:
                raise BertkitError(f"tag {tags[position]!r} at position {position}: prefix {prefix}- "
                                   f"is not part of the {scheme} scheme")
    if not strict:
        return _lenient_entities(parsed)
    if scheme not in STRICT_SCHEMES:
        raise ConfigError(f"scheme {scheme!r}: strict mode needs scheme IOB2 (BIO) or IOBES (BIOES)")
    return _strict_entities(parsed, closing="E" if scheme == "IOBES" else "BI")


def _lenient_entities(parsed: list[tuple[str, str]]) -> list[Entity]:
    """conlleval's chunk rules over (prefix, type) pairs."""
    entities: list[Entity] = []
    start, prev_prefix, prev_type = None, "O", ""
    for position, (prefix, type_) in enumerate([*parsed, ("O", "")]):
        type_changed = type_ != prev_type
        ends = prev_prefix != "O" and (prev_prefix in "ES" or prefix in "BSO" or type_changed)
        starts = prefix != "O" and (prefix in "BS" or prev_prefix in "OES" or type_changed)
        if ends:
            entities.append(Entity(prev_type, start, position))
        if starts:
            start = position
        prev_prefix, prev_type = prefix, type_
    return entities


def _strict_entities(parsed: list[tuple[str, str]], closing: str) -> list[Entity]:
    """Well-formed chunks only: B-X / S-X, then I-X (and for IOBES E-X) continuing it.

    `closing`: prefixes allowed on the last token of a multi-token chunk ("BI" for IOB2,
    where a chunk ends wherever it stops continuing; "E" for IOBES).
    """
    entities: list[Entity] = []
    position = 0
    while position < len(parsed):
        prefix, type_ = parsed[position]
        if prefix == "S":
            entities.append(Entity(type_, position, position + 1))
        if prefix != "B":
            position += 1
            continue
        end = position + 1  # extend over I-X, and over a final E-X that closes the chunk
        while end < len(parsed) and parsed[end][1] == type_ and parsed[end][0] in "IE" and parsed[end - 1][0] != "E":
            end += 1
        if parsed[end - 1][0] in closing:
            entities.append(Entity(type_, position, end))
        position = end
    return entities


def entity_counts(predictions: Sequence[Sequence[str]], labels: Sequence[Sequence[str]], *, strict: bool = False,
                  scheme: str | None = None) -> dict[str, tuple[int, int, int]]:
    """Per entity type: (correct, predicted, gold) counts over all sentences, types sorted by name."""
    _check_sequences(predictions, labels)
    correct: Counter[str] = Counter()
    predicted: Counter[str] = Counter()
    gold: Counter[str] = Counter()
    for predicted_tags, gold_tags in zip(predictions, labels):
        predicted_entities = set(get_entities(predicted_tags, strict=strict, scheme=scheme))
        gold_entities = set(get_entities(gold_tags, strict=strict, scheme=scheme))
        predicted.update(entity.type for entity in predicted_entities)
        gold.update(entity.type for entity in gold_entities)
        correct.update(entity.type for entity in predicted_entities & gold_entities)
    return {name: (correct[name], predicted[name], gold[name]) for name in sorted(predicted.keys() | gold.keys())}


def classification_report(predictions: Sequence[Sequence[str]], labels: Sequence[Sequence[str]], *,
                          strict: bool = False, scheme: str | None = None) -> dict[str, dict[str, float]]:
    """seqeval's `classification_report(output_dict=True)`: per type and averaged scores.

    Returns `{TYPE: {"precision", "recall", "f1-score", "support"}, "micro avg": ...,
    "macro avg": ..., "weighted avg": ...}`; support = number of gold entities; a ratio
    with a zero denominator is 0.0. Micro pools the counts of all types; macro is the
    unweighted mean over types seen in predictions or labels; weighted weighs by support.
    """
    counts = entity_counts(predictions, labels, strict=strict, scheme=scheme)
    report = {name: _scores(*c) for name, c in counts.items()}
    report["micro avg"] = _scores(*(sum(c[i] for c in counts.values()) for i in range(3)))
    per_type = [report[name] for name in counts]
    total_support = sum(row["support"] for row in per_type)
    report["macro avg"] = {key: sum(row[key] for row in per_type) / len(per_type) if per_type else 0.0
                           for key in ("precision", "recall", "f1-score")}
    report["weighted avg"] = {key: sum(row[key] * row["support"] for row in per_type) / total_support
                              if total_support else 0.0 for key in ("precision", "recall", "f1-score")}
    for average in ("macro avg", "weighted avg"):
        report[average]["support"] = total_support
    return report


def precision_recall_f1(predictions: Sequence[Sequence[str]], labels: Sequence[Sequence[str]], *,
                        average: str = "micro", strict: bool = False, scheme: str | None = None) -> dict[str, float]:
    """`{"precision", "recall", "f1"}` averaged over types ("micro", "macro" or "weighted")."""
    if average not in ("micro", "macro", "weighted"):
        raise ConfigError(f"average {average!r}: expected one of micro, macro, weighted")
    row = classification_report(predictions, labels, strict=strict, scheme=scheme)[f"{average} avg"]
    return {"precision": row["precision"], "recall": row["recall"], "f1": row["f1-score"]}


def f1_score(predictions: Sequence[Sequence[str]], labels: Sequence[Sequence[str]], *, average: str = "micro",
             strict: bool = False, scheme: str | None = None) -> float:
    """Entity-level F1 (micro by default: the CoNLL-2003 metric)."""
    return precision_recall_f1(predictions, labels, average=average, strict=strict, scheme=scheme)["f1"]


def accuracy_score(predictions: Sequence[Sequence[str]], labels: Sequence[Sequence[str]]) -> float:
    """Token-level accuracy: fraction of tags equal to the gold tag."""
    _check_sequences(predictions, labels)
    total = sum(len(tags) for tags in labels)
    if total == 0:
        raise BertkitError("no tags to score (all sentences are empty)")
    correct = sum(p == g for pred_tags, gold_tags in zip(predictions, labels) for p, g in zip(pred_tags, gold_tags))
    return correct / total


def iob1_to_iob2(tags: Sequence[str]) -> list[str]:
    """IOB1 (CoNLL-2003 files) -> IOB2 (BIO): every entity's first token gets B-.

    An I-X starts an entity when the previous tag is O or of another type; an IOB1
    B-X (only used right after another X entity) stays B-X.
    """
    converted = []
    prev_type = ""
    for tag in tags:
        prefix, type_ = _split_checked(tag, "IOB1")
        if prefix == "I" and type_ != prev_type:
            tag = "B" + tag[1:]
        converted.append(tag)
        prev_type = type_
    return converted


def iob2_to_iob1(tags: Sequence[str]) -> list[str]:
    """IOB2 (BIO) -> IOB1: B-X becomes I-X unless the previous token is also of type X."""
    converted = []
    prev_type = ""
    for tag in tags:
        prefix, type_ = _split_checked(tag, "IOB2")
        if prefix == "B" and type_ != prev_type:
            tag = "I" + tag[1:]
        converted.append(tag)
        prev_type = type_
    return converted


def _split_checked(tag: str, scheme: str) -> tuple[str, str]:
    prefix, type_ = split_tag(tag)
    if prefix not in SCHEME_PREFIXES[scheme] + "O":
        raise BertkitError(f"tag {tag!r}: prefix {prefix}- is not part of the {scheme} scheme")
    return prefix, type_


def _scores(correct: int, predicted: int, gold: int) -> dict[str, float]:
    precision = correct / predicted if predicted else 0.0
    recall = correct / gold if gold else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {"precision": precision, "recall": recall, "f1-score": f1, "support": gold}


def _check_sequences(predictions: Sequence[Sequence[str]], labels: Sequence[Sequence[str]]) -> None:
    if len(labels) == 0:
        raise BertkitError("no sentences to score (empty input)")
    if isinstance(labels[0], str) or isinstance(predictions[0] if len(predictions) else [], str):
        raise BertkitError("expected a list of tag sequences (one list of tags per sentence), got a flat list of tags")
    if len(predictions) != len(labels):
        raise BertkitError(f"{len(predictions)} predicted sentences but {len(labels)} gold sentences")
    for index, (predicted_tags, gold_tags) in enumerate(zip(predictions, labels)):
        if len(predicted_tags) != len(gold_tags):
            raise BertkitError(f"sentence {index}: {len(predicted_tags)} predicted tags but {len(gold_tags)} gold tags")
