"""Decoder tokenizers: `--algorithm bbpe --layout gpt2|kogpt2` (GPT-2's and KoGPT2's specials, no
template), folders of that kind written by transformers load in bertkit with the same ids, and
packed data built with them joins documents by EOS."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from tokenizers import Tokenizer as RustTokenizer
from tokenizers import decoders, models, normalizers, pre_tokenizers
from transformers import AutoTokenizer, PreTrainedTokenizerFast

from bertkit.cli import main
from bertkit.data.dataset import PretrainingDataset
from bertkit.errors import ConfigError
from bertkit.tokenization import Tokenizer
from bertkit.tokenization.train import TrainOptions, train_tokenizer

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
AUSTEN = FIXTURES / "austen_small.txt"
NSMC = FIXTURES / "nsmc_reviews_50.txt"
ENGLISH = ["It is a truth universally acknowledged.", "Mr. Darcy  danced; Elizabeth laughed!"]
KOREAN = ["이 영화 정말 재미있어요", "배우들의 연기가 좋았다. 다시 볼래요!"]


@pytest.fixture(scope="module")
def gpt2_dir(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("tok") / "gpt2"
    assert main(["tokenizer", "train", "--algorithm", "bbpe", "--layout", "gpt2", "--vocab-size", "500",
                 "--output", str(out), "--no-progress", str(AUSTEN)]) == 0
    return out


@pytest.fixture(scope="module")
def kogpt2_dir(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("tok") / "kogpt2"
    assert main(["tokenizer", "train", "--algorithm", "bbpe", "--layout", "kogpt2", "--vocab-size", "700",
                 "--output", str(out), "--no-progress", str(NSMC)]) == 0
    return out


def test_gpt2_layout_has_one_end_of_text_token_and_no_template(gpt2_dir):
    tok = Tokenizer.from_pretrained(gpt2_dir)
    assert tok.convert_ids_to_tokens(0) == "<|endoftext|>"
    assert (tok.bos_token, tok.eos_token, tok.unk_token) == ("<|endoftext|>",) * 3
    assert tok.cls_token is None and tok.sep_token is None and tok.pad_token is None and tok.mask_token is None
    ids = tok("It is a truth.")["input_ids"]
    assert 0 not in ids and tok.decode(ids).strip() == "It is a truth."  # cased, nothing added
    assert len(tok) == 500
    assert {"vocab.json", "merges.txt", "tokenizer.json"} <= {p.name for p in gpt2_dir.iterdir()}


def test_kogpt2_layout_specials_and_ids(kogpt2_dir):
    tok = Tokenizer.from_pretrained(kogpt2_dir)
    assert tok.convert_ids_to_tokens(list(range(9))) == ["<s>", "</s>", "<usr>", "<pad>", "<sys>", "<unk>", "<mask>",
                                                         "<d>", "</d>"]
    assert tok.convert_ids_to_tokens([9, 108]) == ["<unused0>", "<unused99>"]
    assert (tok.bos_token, tok.eos_token, tok.unk_token, tok.pad_token, tok.mask_token) == (
        "</s>", "</s>", "<unk>", "<pad>", "<mask>")
    assert tok.cls_token is None and tok.sep_token is None  # no <s> A </s> template guessed from the vocabulary
    for text in KOREAN:
        ids = tok(text)["input_ids"]
        assert tok.decode(ids).strip() == text and tok.unk_token_id not in ids


@pytest.mark.parametrize("layout", ["gpt2", "kogpt2"])
def test_transformers_reads_the_trained_folder_alike(layout, gpt2_dir, kogpt2_dir):
    directory = gpt2_dir if layout == "gpt2" else kogpt2_dir
    ours, ref = Tokenizer.from_pretrained(directory), AutoTokenizer.from_pretrained(directory)
    assert (ref.bos_token, ref.eos_token) == (ours.bos_token, ours.eos_token)
    for text in ENGLISH + KOREAN:
        assert ours(text)["input_ids"] == ref(text)["input_ids"]
    pair = ours(ENGLISH[0], ENGLISH[1])["input_ids"]
    assert pair == ours(ENGLISH[0])["input_ids"] + ours(ENGLISH[1])["input_ids"]  # a decoder frames nothing


def _gpt2_tokenizer_object(gpt2_dir: Path) -> RustTokenizer:
    """GPT-2's own pipeline (byte-level, no prefix space, no normalizer) over a trained vocabulary."""
    vocab = json.loads((gpt2_dir / "vocab.json").read_text())
    merges = [tuple(line.split(" ")) for line in (gpt2_dir / "merges.txt").read_text().splitlines()[1:] if line]
    backend = RustTokenizer(models.BPE(vocab, merges))
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    backend.decoder = decoders.ByteLevel()
    return backend


def test_a_gpt2_folder_written_by_transformers_loads(tmp_path, gpt2_dir):
    ref = PreTrainedTokenizerFast(tokenizer_object=_gpt2_tokenizer_object(gpt2_dir), bos_token="<|endoftext|>",
                                  eos_token="<|endoftext|>", unk_token="<|endoftext|>")
    ref.save_pretrained(tmp_path)
    ours = Tokenizer.from_pretrained(tmp_path)
    assert ours.eos_token_id == ref.eos_token_id == 0 and ours.cls_token is None and ours.sep_token is None
    for text in ENGLISH:
        assert ours(text)["input_ids"] == ref(text)["input_ids"]
        assert ours.decode(ours(text)["input_ids"]) == ref.decode(ref(text)["input_ids"])


def kogpt2_kind_folder(directory: Path, corpus: Path = NSMC, vocab_size: int = 600) -> Path:
    """A tokenizer folder of KoGPT2's kind, written by `tokenizers` and transformers: Metaspace BPE
    (SentencePiece-style, as KoGPT2's tokenizer.json) with KoGPT2's added specials and roles."""
    from tokenizers import trainers

    specials = ["<s>", "</s>", "<usr>", "<pad>", "<sys>", "<unk>", "<mask>", "<d>", "</d>",
                *(f"<unused{i}>" for i in range(100))]
    backend = RustTokenizer(models.BPE(unk_token="<unk>"))
    backend.normalizer = normalizers.NFKC()
    backend.pre_tokenizer = pre_tokenizers.Metaspace()
    backend.decoder = decoders.Metaspace()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=specials, show_progress=False)
    backend.train([str(corpus)], trainer)
    hf = PreTrainedTokenizerFast(tokenizer_object=backend, bos_token="</s>", eos_token="</s>", unk_token="<unk>",
                                 pad_token="<pad>", mask_token="<mask>")
    hf.save_pretrained(directory)
    return directory


def test_a_kogpt2_kind_folder_loads_with_kogpt2_roles(tmp_path):
    directory = kogpt2_kind_folder(tmp_path / "kogpt2")
    ours, ref = Tokenizer.from_pretrained(directory), AutoTokenizer.from_pretrained(directory)
    assert ours.bos_token == ours.eos_token == "</s>" and ours.eos_token_id == 1
    assert ours.cls_token is None and ours.pad_token_id == 3
    for text in KOREAN:
        assert ours(text)["input_ids"] == ref(text)["input_ids"]
        assert ours.decode(ours(text)["input_ids"]) == ref.decode(ref(text)["input_ids"], skip_special_tokens=True)


def test_packed_data_joins_documents_by_eos(tmp_path, gpt2_dir):
    data = tmp_path / "data"
    assert main(["data", "build", "--tokenizer", str(gpt2_dir), "--format", "packed", "--max-seq-length", "64",
                 "--output", str(data), "--no-progress", str(AUSTEN)]) == 0
    train = PretrainingDataset.open(data, "train")
    assert train.info.sep_token_id == 0 and train.info.pad_token_id == 0 and train.info.cls_token_id is None
    rows = [np.asarray(train[i]["input_ids"]) for i in range(len(train))]
    assert all(row[-1] == 0 for row in rows) and all(len(row) <= 64 for row in rows)
    assert any((row[:-1] == 0).any() for row in rows)  # a document break inside an instance


def test_layout_errors_are_one_line(tmp_path, capsys):
    with pytest.raises(ConfigError, match="layout='gpt3' is unknown for bbpe"):
        TrainOptions(algorithm="bbpe", layout="gpt3")
    with pytest.raises(ConfigError, match="layout applies only to algorithm='unigram' or 'bbpe'"):
        TrainOptions(algorithm="wordpiece", layout="gpt2")
    assert main(["tokenizer", "train", "--algorithm", "bbpe", "--layout", "gpt2", "--cls-token", "<c>",
                 "--output", str(tmp_path / "x"), str(AUSTEN)]) != 0
    err = capsys.readouterr().err
    assert "--layout gpt2 has its own special tokens" in err and len(err.strip().splitlines()) == 1
    # RoBERTa's stays the default
    result = train_tokenizer([AUSTEN], None, TrainOptions(algorithm="bbpe", vocab_size=400, show_progress=False))
    assert result.tokenizer.id_to_token(0) == "<s>"
