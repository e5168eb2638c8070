"""Entity-level tagging metrics against the `seqeval` package; IOB1 <-> IOB2 on real CoNLL-2003 tags."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
import seqeval.metrics as sq
from seqeval.metrics.sequence_labeling import get_entities as sq_get_entities
from seqeval.scheme import IOB2, IOBES, Tokens

from bertkit.errors import BertkitError, ConfigError
from bertkit.evaluation.seqeval import (Entity, accuracy_score, classification_report, f1_score, get_entities,
                                        iob1_to_iob2, iob2_to_iob1, precision_recall_f1)

TYPES = ("PER", "LOC", "ORG", "MISC")
SCHEME_PREFIXES = {"IOB1": "BI", "IOB2": "BI", "IOBES": "BIES"}
SEQEVAL_SCHEMES = {"IOB2": IOB2, "IOBES": IOBES}
FIXTURE = Path(__file__).parents[1] / "fixtures" / "conll2003_testa_tags.tsv"


def random_tags(rng: random.Random, prefixes: str, length: int) -> list[str]:
    """Any tag sequence, well-formed or not (stray I-, unclosed B-, type switches)."""
    return ["O" if rng.random() < 0.4 else f"{rng.choice(prefixes)}-{rng.choice(TYPES[:3])}" for _ in range(length)]


def well_formed_tags(rng: random.Random, scheme: str, length: int) -> list[str]:
    """Tags of random entities, at least `length` long, in `scheme` (IOB1: B- only right after a same-type entity)."""
    tags, prev_type = [], None
    while len(tags) < length:
        if rng.random() < 0.4:
            tags.append("O")
            prev_type = None
            continue
        type_, size = rng.choice(TYPES), rng.randint(1, 3)
        if scheme == "IOB1":
            chunk = ["B" if type_ == prev_type else "I"] + ["I"] * (size - 1)
        elif scheme == "IOB2":
            chunk = ["B"] + ["I"] * (size - 1)
        else:
            chunk = ["S"] if size == 1 else ["B"] + ["I"] * (size - 2) + ["E"]
        tags += [f"{p}-{type_}" for p in chunk]
        prev_type = type_
    return tags  # may run a little past `length`: never cut an entity short


def corrupt(rng: random.Random, tags: list[str], prefixes: str) -> list[str]:
    """A 'prediction': the gold tags with ~15% of positions replaced by random tags."""
    return [random_tags(rng, prefixes, 1)[0] if rng.random() < 0.15 else tag for tag in tags]


def seqeval_report(predictions, labels, **kwargs) -> dict:
    return sq.classification_report(labels, predictions, output_dict=True, zero_division=0, **kwargs)


def assert_reports_equal(ours: dict, reference: dict) -> None:
    assert ours.keys() == reference.keys()
    for name, row in reference.items():
        for key, value in row.items():
            assert ours[name][key] == pytest.approx(float(value), abs=1e-12), (name, key)


@pytest.mark.parametrize("scheme", ["IOB1", "IOB2", "IOBES"])
@pytest.mark.parametrize("seed", range(3))
def test_default_mode_matches_seqeval(scheme, seed):
    rng = random.Random(seed)
    prefixes = SCHEME_PREFIXES[scheme]
    for _ in range(50):  # entity lists, sequence by sequence, on arbitrary (often ill-formed) tags
        tags = random_tags(rng, prefixes, rng.randint(0, 12))
        expected = [Entity(t, s, e + 1) for t, s, e in sq_get_entities(tags)]
        assert get_entities(tags) == expected, tags
    labels = [well_formed_tags(rng, scheme, rng.randint(1, 15)) for _ in range(60)]
    predictions = [corrupt(rng, tags, prefixes) for tags in labels]
    assert_reports_equal(classification_report(predictions, labels), seqeval_report(predictions, labels))
    assert f1_score(predictions, labels) == pytest.approx(sq.f1_score(labels, predictions))
    assert precision_recall_f1(predictions, labels, average="macro")["recall"] == pytest.approx(
        sq.recall_score(labels, predictions, average="macro", zero_division=0))
    assert accuracy_score(predictions, labels) == pytest.approx(sq.accuracy_score(labels, predictions))


@pytest.mark.parametrize("scheme", ["IOB2", "IOBES"])
@pytest.mark.parametrize("seed", range(3))
def test_strict_mode_matches_seqeval(scheme, seed):
    rng = random.Random(seed)
    prefixes = SCHEME_PREFIXES[scheme]
    for _ in range(50):
        tags = random_tags(rng, prefixes, rng.randint(0, 12))
        expected = [Entity(e.tag, e.start, e.end) for e in Tokens(tags, SEQEVAL_SCHEMES[scheme]).entities]
        assert get_entities(tags, strict=True, scheme=scheme) == expected, tags
    labels = [well_formed_tags(rng, scheme, rng.randint(1, 15)) for _ in range(60)]
    predictions = [corrupt(rng, tags, prefixes) for tags in labels]
    ours = classification_report(predictions, labels, strict=True, scheme=scheme)
    assert_reports_equal(ours, seqeval_report(predictions, labels, mode="strict", scheme=SEQEVAL_SCHEMES[scheme]))


def test_hand_made_sequences():
    iob1 = ["I-PER", "I-PER", "B-PER", "O", "I-LOC", "I-ORG"]
    assert get_entities(iob1, scheme="IOB1") == [("PER", 0, 2), ("PER", 2, 3), ("LOC", 4, 5), ("ORG", 5, 6)]
    iob2 = ["O", "I-PER", "I-PER", "B-LOC", "I-ORG", "B-MISC", "I-MISC"]
    assert get_entities(iob2) == [("PER", 1, 3), ("LOC", 3, 4), ("ORG", 4, 5), ("MISC", 5, 7)]
    assert get_entities(iob2, strict=True, scheme="BIO") == [("LOC", 3, 4), ("MISC", 5, 7)]
    bioes = ["B-PER", "E-PER", "S-LOC", "B-ORG", "I-ORG", "O", "I-MISC", "E-MISC", "B-PER"]
    assert get_entities(bioes) == [("PER", 0, 2), ("LOC", 2, 3), ("ORG", 3, 5), ("MISC", 6, 8), ("PER", 8, 9)]
    assert get_entities(bioes, strict=True, scheme="BIOES") == [("PER", 0, 2), ("LOC", 2, 3)]
    assert get_entities(["B", "I", "O"]) == [("_", 0, 2)]  # bare prefixes: type "_", as seqeval


def test_hand_worked_report():
    labels = [["B-PER", "I-PER", "O", "B-LOC"], ["B-ORG", "O", "B-PER"]]
    predictions = [["B-PER", "I-PER", "O", "B-ORG"], ["B-ORG", "O", "B-PER"]]  # LOC predicted as ORG
    report = classification_report(predictions, labels)
    assert report["PER"] == {"precision": 1.0, "recall": 1.0, "f1-score": 1.0, "support": 2}
    assert report["ORG"] == {"precision": 0.5, "recall": 1.0, "f1-score": pytest.approx(2 / 3), "support": 1}
    assert report["LOC"] == {"precision": 0.0, "recall": 0.0, "f1-score": 0.0, "support": 1}
    assert report["micro avg"] == {"precision": 0.75, "recall": 0.75, "f1-score": 0.75, "support": 4}
    assert report["macro avg"]["f1-score"] == pytest.approx((1 + 2 / 3 + 0) / 3)
    assert report["weighted avg"]["recall"] == pytest.approx((2 * 1 + 1 * 1 + 1 * 0) / 4)


def test_entities_never_cross_sentences():
    # one PER at the end of sentence 0 and one at the start of sentence 1: two entities, both correct
    labels = [["O", "I-PER"], ["I-PER", "O"]]
    assert f1_score(labels, labels) == 1.0
    assert classification_report(labels, labels)["PER"]["support"] == 2


def test_iob1_iob2_conversion_on_real_conll_tags():
    sentences = [block.splitlines() for block in FIXTURE.read_text(encoding="utf-8").split("\n\n") if block]
    iob1 = [[line.split("\t")[0] for line in block] for block in sentences]
    iob2 = [[line.split("\t")[1] for line in block] for block in sentences]
    assert sum(tag.startswith("B-") for tags in iob1 for tag in tags) >= 4  # adjacent same-type entities present
    for tags1, tags2 in zip(iob1, iob2):
        assert iob1_to_iob2(tags1) == tags2
        assert iob2_to_iob1(tags2) == tags1
        assert get_entities(tags1, scheme="IOB1") == get_entities(tags2, strict=True, scheme="IOB2")
    assert f1_score(iob1, iob2) == 1.0


def test_conversion_round_trip_on_random_sequences():
    rng = random.Random(7)
    for _ in range(200):
        iob1 = well_formed_tags(rng, "IOB1", rng.randint(1, 12))
        iob2 = iob1_to_iob2(iob1)
        assert all(not tag.startswith("I-") or prev[2:] == tag[2:] for prev, tag in zip(["O", *iob2], iob2))
        assert iob2_to_iob1(iob2) == iob1
        assert get_entities(iob1) == get_entities(iob2)


def test_bad_input():
    with pytest.raises(BertkitError, match="'PER'"):
        get_entities(["O", "PER"])
    with pytest.raises(BertkitError, match="E- is not part of the IOB2 scheme"):
        get_entities(["B-PER", "E-PER"], scheme="IOB2")
    with pytest.raises(ConfigError, match="strict mode needs scheme"):
        get_entities(["B-PER"], strict=True)
    with pytest.raises(ConfigError, match="unknown tagging scheme"):
        get_entities(["B-PER"], scheme="BILOU")
    with pytest.raises(BertkitError, match="sentence 1: 1 predicted tags but 2 gold tags"):
        f1_score([["O"], ["O"]], [["O"], ["O", "O"]])
    with pytest.raises(BertkitError, match="flat list"):
        f1_score(["O", "B-PER"], ["O", "B-PER"])
    with pytest.raises(BertkitError, match="empty input"):
        f1_score([], [])
    with pytest.raises(BertkitError, match="S- is not part of the IOB1 scheme"):
        iob1_to_iob2(["S-PER"])
