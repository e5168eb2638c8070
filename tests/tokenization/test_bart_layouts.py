"""`--layout bart` and `--layout kobart` for the BPE algorithms: BART's specials (RoBERTa's ids)
and KoBART's, `<s> A </s>` inputs, BOS / EOS roles, identical ids in transformers."""

from __future__ import annotations

import json

import pytest
from transformers import AutoTokenizer

from bertkit.cli import main
from bertkit.errors import ConfigError
from bertkit.tokenization import Tokenizer
from bertkit.tokenization.train import TrainOptions

from tests.tokenization.test_train_algorithms import HELD_OUT, english_corpus

EXPECTED = {
    "bart": ["<s>", "<pad>", "</s>", "<unk>", "<mask>"],
    "kobart": ["<s>", "</s>", "<usr>", "<pad>", "<sys>", "<unk>", "<mask>"],
}


@pytest.mark.parametrize("algorithm,layout", [("bbpe", "bart"), ("bbpe", "kobart"), ("bpe", "kobart")])
def test_layout_specials_template_and_transformers(tmp_path, algorithm, layout):
    corpus = english_corpus(tmp_path / "en.txt")
    out = tmp_path / "tok"
    assert main(["tokenizer", "train", "--algorithm", algorithm, "--vocab-size", "400", "--layout", layout,
                 "--output", str(out), "--no-progress", str(corpus)]) == 0
    ours = Tokenizer.from_pretrained(out)
    specials = EXPECTED[layout]
    assert [ours.convert_ids_to_tokens(i) for i in range(len(specials))] == specials
    assert (ours.bos_token, ours.eos_token, ours.mask_token, ours.pad_token) == ("<s>", "</s>", "<mask>", "<pad>")
    ids = ours(HELD_OUT[0])["input_ids"]
    assert ids[0] == ours.bos_token_id and ids[-1] == ours.eos_token_id
    theirs = AutoTokenizer.from_pretrained(out)
    for text in HELD_OUT:
        assert ours(text)["input_ids"] == theirs(text)["input_ids"], text
    assert ours(HELD_OUT[0], HELD_OUT[1])["input_ids"] == theirs(HELD_OUT[0], HELD_OUT[1])["input_ids"]
    config = json.loads((out / "tokenizer_config.json").read_text())
    assert config["bertkit_training"]["layout"] == layout
    # cased, as BART's and KoBART's published vocabularies (and GPT-2's): "The" is not "the"
    assert ours("The")["input_ids"] != ours("the")["input_ids"]


def test_layout_refused_where_it_does_not_apply(tmp_path):
    with pytest.raises(ConfigError, match="layout='bart' does not apply to algorithm='wordpiece'"):
        TrainOptions(algorithm="wordpiece", layout="bart")
    with pytest.raises(ConfigError, match="layout='xlnet' does not apply to algorithm='bbpe'"):
        TrainOptions(algorithm="bbpe", layout="xlnet")
    code = main(["tokenizer", "train", "--algorithm", "wordpiece", "--layout", "kobart", "--output",
                 str(tmp_path / "t"), str(english_corpus(tmp_path / "en.txt"))])
    assert code != 0
