"""`bertkit pretrain --objective bilm`: the word rule, the word vocabulary, per-direction perplexity
in metrics.jsonl and the report, exact resume after SIGKILL, and one-line errors."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from _sigkill import assert_killed_run_resumes_bit_identical
from _successor_data import FIXTURE, build_data

from bertkit.cli import main
from bertkit.data.words import TokenWords
from bertkit.errors import BertkitError
from bertkit.objectives.bilm import WordVocabulary

QUIET = ["--set", "progress=false", "--set", "tensorboard=false"]


def pretrain_args(data: Path, out: Path, *extra: str) -> list[str]:
    return ["pretrain", "--objective", "bilm", "--preset", "elmo-tiny", "--data", str(data), "--output-dir", str(out),
            *QUIET, "--set", "batch_size=8", "--set", "warmup_steps=1", "--set", "lr=1e-3", "--set", "max_steps=4",
            "--set", "eval_steps=4", "--set", "softmax_words=100", *extra]


@pytest.fixture(scope="module")
def packed(tmp_path_factory) -> Path:
    return build_data(tmp_path_factory.mktemp("bilm"), "wordpiece", "packed")


def test_words_are_whole_words_of_the_tokenizer(packed):
    from bertkit.tokenization import Tokenizer

    tokenizer = Tokenizer.from_pretrained(packed / "tokenizer")
    words = TokenWords(tokenizer)
    ids = np.array(tokenizer("Elizabeth walked, unhurried.")["input_ids"])  # [CLS] ... [SEP]: not words
    assert len(ids) > 7  # "unhurried" is several pieces of this 400-token vocabulary
    assert words.words(ids) == ["elizabeth", "walked", ",", "unhurried", "."]
    assert words.text_words(["Elizabeth walked, unhurried."]) == [["elizabeth", "walked", ",", "unhurried", "."]]
    encoded = tokenizer(["U.S.", "Élan", "visits"], is_split_into_words=True)
    ids, given = np.array(encoded["input_ids"]), np.array([-1 if w is None else w for w in encoded.word_ids()])
    found, index = words.grouped_words(ids, given)
    assert found == ["u.s.", "elan", "visits"]  # pre-split words stay one word each
    assert index[0] == -1 and index[-1] == -1 and index[1] == 0 and index.max() == 2


def test_word_vocabulary_file_errors(tmp_path):
    path = tmp_path / "words.txt"
    path.write_text("<S>\n</S>\nthe\n")
    with pytest.raises(BertkitError, match=r"words.txt: the word vocabulary has no <UNK> line"):
        WordVocabulary.read(path)
    path.write_bytes(b"<UNK>\nthe\n\xff\xfe\n")
    with pytest.raises(BertkitError, match=r"words.txt:3: not UTF-8"):
        WordVocabulary.read(path)
    vocabulary = WordVocabulary(["<S>", "</S>", "<UNK>", "the"])
    assert vocabulary.index("the") == 3 and vocabulary.index("zebra") == 2


def test_pretrain_bilm_reports_perplexity_per_direction(packed, tmp_path):
    out = tmp_path / "run"
    assert main(pretrain_args(packed, out)) == 0
    records = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    evals = [r for r in records if "eval_loss" in r]
    assert evals and {"eval_forward_perplexity", "eval_backward_perplexity"} <= set(evals[-1])
    assert evals[-1]["eval_loss"] == pytest.approx(evals[-1]["eval_forward_loss"] + evals[-1]["eval_backward_loss"])
    report = (out / "report.md").read_text()
    assert "eval_forward_perplexity" in report and "biLM 2 x LSTM 32 cells" in report
    words = (out / "final" / "elmo_words.txt").read_text().splitlines()
    assert words[:3] == ["<S>", "</S>", "<UNK>"] and len(words) == 103
    config = json.loads((out / "final" / "config.json").read_text())
    assert config["model_type"] == "elmo" and config["n_tokens_vocab"] == 103


def test_sigkill_then_resume_ends_bit_identical(packed, tmp_path):
    steps = ["--set", "max_steps=8", "--set", "save_steps=4", "--set", "eval_steps=8", "--set", "save_total_limit=3"]
    assert_killed_run_resumes_bit_identical(lambda out, *extra: pretrain_args(packed, out, *extra), tmp_path, steps)


def test_a_vocabulary_without_unk_is_one_line(packed, tmp_path, capsys):
    bad = tmp_path / "words.txt"
    bad.write_text("<S>\n</S>\nthe\n")
    assert main(pretrain_args(packed, tmp_path / "run", "--set", f"word_vocab={bad}")) != 0
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "words.txt: the word vocabulary has no <UNK> line" in err[0]


def test_two_process_ddp_matches_one_process(packed, tmp_path):
    import os
    import subprocess
    import sys

    common = ["--set", "max_steps=3", "--set", "log_steps=1", "--set", "save_steps=100", "--set", "eval_steps=100",
              "--set", "model.dropout=0"]
    assert main(pretrain_args(packed, tmp_path / "single", *common)) == 0
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2", "--master-port", "29547", "-m",
           "bertkit", *pretrain_args(packed, tmp_path / "ddp", *common)]
    done = subprocess.run(cmd, env={**os.environ, "OMP_NUM_THREADS": "1"}, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]

    def losses(run: Path) -> list[float]:
        return [json.loads(line)["loss"] for line in (run / "metrics.jsonl").read_text().splitlines() if '"loss"' in line]

    assert len(losses(tmp_path / "single")) == 3
    assert losses(tmp_path / "ddp") == pytest.approx(losses(tmp_path / "single"), rel=1e-5)


def test_a_transformer_preset_is_one_line(packed, tmp_path, capsys):
    args = pretrain_args(packed, tmp_path / "run")
    args[args.index("elmo-tiny")] = "tiny"
    assert main(args) != 0
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "unknown preset 'tiny'; choose one of elmo-tiny, elmo-small, elmo-original" in err[0]
