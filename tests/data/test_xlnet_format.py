"""`--format xlnet`: contiguous `A <sep> B <sep> <cls>` windows, B the continuation or a
random stretch of whole sentences (50/50), as the original `_split_a_and_b`."""

from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np
import pytest
from scipy.stats import binomtest

from bertkit.cli import main
from bertkit.data.dataset import PretrainingDataset
from bertkit.data.formats.xlnet import Stream, XLNetFormat, xlnet_instances
from bertkit.data.instances import IS_NEXT, NOT_NEXT

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "austen_small.txt"
CLS, SEP = 1, 2


def made_up_documents(rng: random.Random, count: int = 40) -> list[list[list[int]]]:
    """Documents of sentences of 1..12 tokens; every token id is unique, so positions can be traced back."""
    documents, next_id = [], 100
    for _ in range(count):
        document = []
        for _ in range(rng.randint(1, 15)):
            length = rng.randint(1, 12)
            document.append(list(range(next_id, next_id + length)))
            next_id += length
        documents.append(document)
    return documents


def split(instance: tuple[list[int], int, int]) -> tuple[list[int], list[int]]:
    ids, segment_b, _ = instance
    assert ids[-2:] == [SEP, CLS] and ids[segment_b - 1] == SEP
    return ids[: segment_b - 1], ids[segment_b:-2]


def test_windows_follow_the_original_rules():
    rng = random.Random(0)
    documents = made_up_documents(rng)
    pool = Stream(documents)
    sentence_starts = {sentence[0] for document in documents for sentence in document}
    labels = []
    for document in documents:
        stream = Stream([document])
        position = {token: i for i, token in enumerate(stream.ids)}
        previous = -1
        for instance in xlnet_instances(stream, pool, 24, rng, CLS, SEP):
            ids, _, label = instance
            a, b = split(instance)
            assert len(ids) <= 24 and a and b
            begin = position[a[0]]
            assert a == stream.ids[begin:begin + len(a)] and a[0] in sentence_starts  # contiguous, from a boundary
            assert begin > previous  # windows move forward through the document
            previous = begin
            assert b[0] in sentence_starts  # B: whole sentences (up to the right-trimming)
            if label == IS_NEXT:  # the text after A's window cut, in the same document
                start = position[b[0]]
                assert start > position[a[-1]] and b == stream.ids[start:start + len(b)]
            else:
                assert label == NOT_NEXT
            labels.append(label)
        assert previous >= 0
    # a window without a sentence boundary inside is always NOT_NEXT; with one, a coin flip
    assert 0.3 < labels.count(IS_NEXT) / len(labels) < 0.7


def test_the_coin_is_fair_where_there_is_a_choice():
    """Documents of many short sentences always have a cut point: IS_NEXT is then Binomial(n, 1/2)."""
    rng = random.Random(1)
    documents = [[[1000 * d + 10 * s + t for t in range(3)] for s in range(60)] for d in range(50)]
    pool = Stream(documents)
    labels = [label for document in documents
              for _, _, label in xlnet_instances(Stream([document]), pool, 32, rng, CLS, SEP)]
    assert len(labels) > 300
    assert binomtest(labels.count(IS_NEXT), len(labels), 0.5).pvalue > 1e-3


def test_format_make_uses_the_held_out_pool():
    rng = random.Random(2)
    documents, others = made_up_documents(rng, 3), made_up_documents(random.Random(3), 5)
    borrowed = {t for d in others for s in d for t in s}
    recipe = {"max_seq_length": 20}
    instances = XLNetFormat().make(documents, recipe, rng, CLS, SEP, random_documents=others)
    for instance in instances:
        if instance[2] == NOT_NEXT:
            assert set(split(instance)[1]) <= borrowed


def test_data_build_format_xlnet(tmp_path):
    tok = tmp_path / "tok"
    assert main(["tokenizer", "train", "--vocab-size", "300", "--output", str(tok), "--no-progress", str(FIXTURE)]) == 0
    out = tmp_path / "data"
    assert main(["data", "build", "--tokenizer", str(tok), "--format", "xlnet", "--max-seq-length", "48",
                 "--no-progress", "--output", str(out), str(FIXTURE)]) == 0
    data = PretrainingDataset.open(out, "train")
    assert data.info.instance_format == "xlnet"
    tokenizer = data.tokenizer()
    for i in range(len(data)):
        item = data[i]
        ids, types = item["input_ids"], item["token_type_ids"]
        assert len(ids) <= 48 and ids[-1] == tokenizer.cls_token_id and ids[-2] == tokenizer.sep_token_id
        assert (ids == tokenizer.sep_token_id).sum() == 2
        b_start = int(np.argmax(types == 1))
        assert ids[b_start - 1] == tokenizer.sep_token_id and (types[:b_start] == 0).all() and (types[b_start:] == 1).all()


def without_special(tok: Path, token: str, role: str) -> None:
    """Make the trained tokenizer at `tok` lose its `role` token (renamed to a plain word)."""
    for name in ("tokenizer_config.json", "special_tokens_map.json"):
        config = json.loads((tok / name).read_text())
        config.pop(role, None)
        (tok / name).write_text(json.dumps(config))
    (tok / "vocab.txt").write_text((tok / "vocab.txt").read_text().replace(f"{token}\n", "plainword\n"))
    (tok / "tokenizer.json").write_text((tok / "tokenizer.json").read_text().replace(f'"{token}"', '"plainword"'))


@pytest.mark.parametrize("token, role", [("[MASK]", "mask"), ("[SEP]", "sep"), ("[CLS]", "cls")])
def test_a_tokenizer_without_a_special_token_is_refused_in_one_line(tmp_path, capsys, token, role):
    tok = tmp_path / "tok"
    assert main(["tokenizer", "train", "--vocab-size", "300", "--output", str(tok), "--no-progress", str(FIXTURE)]) == 0
    without_special(tok, token, f"{role}_token")
    capsys.readouterr()
    assert main(["data", "build", "--tokenizer", str(tok), "--format", "xlnet", "--no-progress",
                 "--output", str(tmp_path / "data"), str(FIXTURE)]) == 1
    message = capsys.readouterr().err.strip()
    assert message.startswith("bertkit: error: ") and "\n" not in message
    # the data build names the directory; a WordPiece vocabulary without [CLS]/[SEP] is refused on loading
    assert f"{tok}: the tokenizer has no {role} token" in message or f"{tok / 'vocab.txt'}: no {role}_token" in message
