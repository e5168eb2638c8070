"""Token-tagging data: CoNLL reading (CRLF, -DOCSTART-, blank lines), IOB1/IOB2
detection and round trip, first-sub-token labels against transformers' word_ids,
windowing of long sentences, and errors naming file and line."""

from __future__ import annotations

import numpy as np
import pytest

from bertkit.errors import BertkitError
from bertkit.evaluation.seqeval import iob1_to_iob2
from bertkit.tasks import tagging

IGNORE = -100


@pytest.fixture(scope="module")
def iob1(fixtures):
    return tagging.read_examples(fixtures / "conll2003" / "eng.testa")


@pytest.fixture(scope="module")
def iob2(fixtures):
    return tagging.read_examples(fixtures / "conll2003" / "iob2" / "valid.txt")


def _reference_sentences(path):
    """Plain re-reading of a CoNLL file: (words, tags) per sentence."""
    sentences, current = [], []
    for line in path.read_bytes().decode("utf-8").splitlines():
        fields = line.split()
        if not fields or fields[0] == "-DOCSTART-":
            if current:
                sentences.append(current)
            current = []
        else:
            current.append((fields[0], fields[3]))
    return sentences + ([current] if current else [])


def test_conll_reader_copes_with_crlf_docstart_and_blank_lines(fixtures, iob1, iob2):
    raw = (fixtures / "conll2003" / "eng.testa").read_bytes()
    assert b"\r\n" in raw and raw.startswith(b"-DOCSTART-")
    ref = _reference_sentences(fixtures / "conll2003" / "eng.testa")
    assert len(iob1) == len(ref) == 8
    assert [ex.words for ex in iob1] == [[w for w, _ in s] for s in ref]
    assert [ex.tags for ex in iob1] == [[t for _, t in s] for s in ref]
    assert not any("\r" in w or "\r" in t for ex in iob1 for w, t in zip(ex.words, ex.tags))
    assert iob1[0].source.endswith("eng.testa:3") and iob1[0].words[:3] == ["CRICKET", "-", "LEICESTERSHIRE"]
    assert [ex.words for ex in iob2] == [ex.words for ex in iob1]


def test_scheme_detection_and_conversion(iob1, iob2):
    assert tagging.detect_scheme(iob1) == "IOB1"
    assert tagging.detect_scheme(iob2) == "IOB2"
    for a, b in zip(iob1, iob2, strict=True):  # the two copies differ only in scheme
        assert tagging.training_tags(a.tags, "IOB1") == b.tags == iob1_to_iob2(a.tags)
        assert tagging.output_tags(b.tags, "IOB1") == a.tags
    assert any(t.startswith("B-") for ex in iob1 for t in ex.tags)  # the adjacent-entities case is in the cut
    ex = tagging.TaggingExample(["a", "b"], ["S-PER", "O"], "x", 1)
    assert tagging.detect_scheme([ex]) == "IOBES"
    assert tagging.build_label_map(iob1, "IOB1") == tagging.build_label_map(iob2, "IOB2") == {
        "O": 0, "B-LOC": 1, "I-LOC": 2, "B-MISC": 3, "I-MISC": 4, "B-ORG": 5, "I-ORG": 6, "B-PER": 7, "I-PER": 8}


def test_first_subtoken_labels_match_transformers_word_ids(iob2, tokenizer, hf_tokenizer):
    label_map = tagging.build_label_map(iob2, "IOB2")
    features = tagging.encode(iob2, tokenizer, 128, label_map, "IOB2")
    assert len(features) == len(iob2)
    for ex, feature in zip(iob2, features, strict=True):
        ref = hf_tokenizer(ex.words, is_split_into_words=True)
        expected, previous = [], None
        for word in ref.word_ids():  # the usual transformers recipe
            expected.append(IGNORE if word is None or word == previous else label_map[ex.tags[word]])
            previous = word
        assert feature["input_ids"].tolist() == ref["input_ids"]
        assert feature["labels"].tolist() == expected
        assert feature["word_ids"].tolist() == [-1 if w is None else w for w in ref.word_ids()]
    batch = tagging.collate(features[:3], tokenizer.pad_token_id)
    assert batch["labels"].shape == batch["input_ids"].shape and batch["labels"].shape[1] % 8 == 0
    assert (batch["labels"][batch["attention_mask"] == 0] == IGNORE).all()


@pytest.mark.parametrize("max_seq_length", [6, 9, 16])
def test_long_sentences_are_windowed_and_round_trip(iob1, tokenizer, max_seq_length):
    label_map = tagging.build_label_map(iob1, "IOB1")
    id2label = {i: name for name, i in label_map.items()}
    features = tagging.encode(iob1, tokenizer, max_seq_length, label_map, "IOB1")
    assert len(features) > len(iob1)
    labelled_words: dict[int, list[int]] = {}
    for feature in features:
        ids = feature["input_ids"]
        assert len(ids) <= max_seq_length and ids[0] == tokenizer.cls_token_id and ids[-1] == tokenizer.sep_token_id
        firsts = feature["labels"] != IGNORE
        labelled_words.setdefault(feature["example_index"], []).extend(feature["word_ids"][firsts].tolist())
    for index, ex in enumerate(iob1):  # every word labelled exactly once, in order
        assert labelled_words[index] == list(range(len(ex.words)))
    # perfect predictions come back as the input's IOB1 tags
    predictions = [np.where(f["labels"] == IGNORE, 0, f["labels"]) for f in features]
    assert tagging.predictions_to_tags(iob1, features, predictions, id2label, "IOB1") == [ex.tags for ex in iob1]


def test_overlong_word_and_wordless_tokens(tokenizer):
    words = ["Hello", "antidisestablishmentarianism", "\u200b", "world"]
    ex = tagging.TaggingExample(words, ["O", "B-MISC", "O", "B-LOC"], "x.conll", 1)
    label_map = {"O": 0, "B-LOC": 1, "I-LOC": 2, "B-MISC": 3, "I-MISC": 4}
    pieces = tokenizer.tokenize(words[1])
    assert len(pieces) > 3
    features = tagging.encode([ex], tokenizer, 5, label_map)  # 3 content tokens per window
    assert [f["word_ids"].tolist() for f in features] == [[-1, 0, -1], [-1, 1, 1, 1, -1], [-1, 3, -1]]
    assert [f["labels"].tolist() for f in features] == [[IGNORE, 0, IGNORE], [IGNORE, 3, IGNORE, IGNORE, IGNORE],
                                                        [IGNORE, 1, IGNORE]]
    predictions = [np.array([0, 1, 0]), np.array([0, 3, 0, 0, 0]), np.array([0, 1, 0])]
    id2label = {i: n for n, i in label_map.items()}
    assert tagging.predictions_to_tags([ex], features, predictions, id2label) == [["B-LOC", "B-MISC", "O", "B-LOC"]]


def test_unlabelled_file_has_no_labels(tmp_path, tokenizer):
    path = tmp_path / "words.txt"
    path.write_text("Peter\nlives\n\nin\nBerlin\n")
    examples = tagging.read_examples(path)
    assert [(ex.words, ex.tags) for ex in examples] == [(["Peter", "lives"], None), (["in", "Berlin"], None)]
    features = tagging.encode(examples, tokenizer, 16, {"O": 0})
    assert "labels" not in features[0] and features[1]["example_index"] == 1


@pytest.mark.parametrize("content,message", [
    ("EU NNP B-NP B-ORG\nrejects VBZ B-VP O\nGerman JJ B-NP\n", r"x.conll:3: expected 4 whitespace-separated "
                                                               r"columns \(as line 1\), found 3$"),
    ("EU NNP B-NP B-ORG\nrejects VBZ B-VP X-ORG\n", r"x.conll:2: tag 'X-ORG': expected 'O' or one of B-, I-"),
    ("-DOCSTART- -X- -X- O\n\n\n", r"x.conll: empty file \(no sentences\)$"),
    ("", r"x.conll: empty file"),
])
def test_bad_conll_input(tmp_path, content, message):
    path = tmp_path / "x.conll"
    path.write_text(content)
    with pytest.raises(BertkitError, match=message):
        tagging.read_examples(path)


def test_label_outside_the_checkpoint_map_names_the_token_line(tmp_path, tokenizer):
    path = tmp_path / "dev.txt"
    path.write_text("-DOCSTART- -X- -X- O\n\nPeter NNP B-NP I-PER\nvisits VBZ B-VP O\n\nthe DT B-NP O\n"
                    "Louvre NNP I-NP I-FAC\n")
    examples = tagging.read_examples(path)
    checkpoint = {"O": 0, "B-PER": 1, "I-PER": 2}
    with pytest.raises(BertkitError, match=r"dev.txt:7: tag 'I-FAC \(as IOB1->IOB2: B-FAC\)' is not in the label "
                                           r"map of ckpt/config.json \(O, B-PER, I-PER\)$"):
        tagging.check_label_map(checkpoint, examples, "IOB1", "ckpt/config.json")
    assert tagging.check_label_map({"LABEL_0": 0}, examples, "IOB1", "ckpt") is None
    with pytest.raises(BertkitError, match=r"dev.txt:7: tag 'I-FAC .*' is not in the label set"):
        tagging.encode(examples, tokenizer, 16, checkpoint, "IOB1")
