"""`bertkit pretrain --objective bart`: documents noised from (seed, epoch, index) only, the
target always the clean document, BOS / EOS kept, a checkpoint transformers loads as
BartForConditionalGeneration (same loss), `bertkit generate` on it, exact resume after
SIGKILL, and one-line errors on data, tokenizers and settings it cannot use."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from _objective_batches import CASE_MODELS
from _objective_batches import build_data as build_batch_data
from _sigkill import assert_killed_run_resumes_bit_identical
from _successor_data import FIXTURE, QUIET, make_objective

from bertkit.cli import main
from bertkit.data.dataset import PretrainingDataset

BART_TOKENIZER, BART_PRESET = CASE_MODELS["bart"]


@pytest.fixture(scope="module")
def data_root(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("bart")


@pytest.fixture(scope="module")
def packed(data_root) -> Path:
    return build_batch_data(data_root, "packed", "dynamic", BART_TOKENIZER)


def pretrain_args(data: Path, out: Path, *extra: str) -> list[str]:
    return ["pretrain", "--objective", "bart", "--preset", BART_PRESET, "--data", str(data), "--output-dir", str(out),
            *QUIET, "--set", "batch_size=8", "--set", "warmup_steps=1", "--set", "lr=1e-3", "--set", "max_steps=2",
            "--set", "eval_steps=2", "--set", "eval_batches=2", *extra]


def test_target_is_the_clean_document_and_bos_eos_survive(packed):
    objective = make_objective("bart", packed, 42, preset=BART_PRESET)
    data = PretrainingDataset.open(packed, "train")
    tokenizer = objective.tokenizer
    masked = total = 0
    for index in range(len(data)):
        example = objective.train_example(index, 0)
        assert np.array_equal(example["labels"], data[index]["input_ids"])
        inputs = example["input_ids"]
        assert inputs[0] == tokenizer.bos_token_id and inputs[-1] == tokenizer.eos_token_id
        assert example["labels"][0] == tokenizer.bos_token_id and example["labels"][-1] == tokenizer.eos_token_id
        masked += int((inputs == tokenizer.mask_token_id).sum())
        total += len(inputs)
    assert 0.05 < masked / total < 0.3  # spans of ~3 tokens over 30% become one <mask> each


def test_permutation_alone_keeps_every_token_and_moves_sentences(packed):
    objective = make_objective("bart", packed, 42, {"objective.mask_ratio": "0"}, preset=BART_PRESET)
    moved = 0
    for index in range(40):
        example = objective.train_example(index, 0)
        assert sorted(example["input_ids"].tolist()) == sorted(example["labels"].tolist())
        moved += not np.array_equal(example["input_ids"], example["labels"])
    assert moved > 5


def test_examples_come_from_seed_epoch_and_index_alone(packed):
    first = make_objective("bart", packed, 42, preset=BART_PRESET)
    again = make_objective("bart", packed, 42, preset=BART_PRESET)
    other = make_objective("bart", packed, 7, preset=BART_PRESET)
    for index in (0, 5, 11):
        example = first.train_example(index, 1)["input_ids"]
        assert np.array_equal(example, again.train_example(index, 1)["input_ids"])
        assert np.array_equal(example, first.train_example(index, 1)["input_ids"])
        assert not np.array_equal(example, first.train_example(index, 2)["input_ids"])
        assert not np.array_equal(example, other.train_example(index, 1)["input_ids"])
        assert np.array_equal(first.eval_example(index % 3)["input_ids"], other.eval_example(index % 3)["input_ids"])


def test_collate_pads_inputs_and_targets_separately(packed):
    objective = make_objective("bart", packed, 42, preset=BART_PRESET)
    batch = objective.collate([objective.train_example(i, 0) for i in range(4)])
    assert batch["labels"].shape[1] >= batch["input_ids"].shape[1]
    real = batch["attention_mask"].bool()
    assert (batch["input_ids"][~real] == objective.pad_id).all() and (batch["labels"] >= -100).all()


@pytest.fixture(scope="module")
def bart_run(packed, data_root) -> Path:
    out = data_root / "run"
    assert main(pretrain_args(packed, out)) == 0
    return out


def test_pretrain_bart_checkpoint_loads_in_transformers_and_generates(bart_run, packed, capsys):
    import transformers

    from bertkit import BartForConditionalGeneration

    config = json.loads((bart_run / "final" / "config.json").read_text())
    assert config["model_type"] == "bart" and config["architectures"] == ["BartForConditionalGeneration"]
    objective = make_objective("bart", packed, 42, preset=BART_PRESET)
    assert config["decoder_start_token_id"] == config["eos_token_id"] == objective.eos_id
    assert config["forced_bos_token_id"] == objective.bos_id
    assert "denoising: 30% masked in Poisson(3) spans" in (bart_run / "report.md").read_text()
    reference, info = transformers.BartForConditionalGeneration.from_pretrained(bart_run / "final",
                                                                                output_loading_info=True)
    assert not info["missing_keys"] and not info["unexpected_keys"]
    ours = BartForConditionalGeneration.from_pretrained(bart_run / "final").eval()
    batch = objective.collate([objective.eval_example(i) for i in range(3)])
    with torch.no_grad():
        expected = reference.eval()(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"],
                                    labels=batch["labels"])
        got = ours(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"], labels=batch["labels"])
        torch.testing.assert_close(got.loss, expected.loss, atol=1e-5, rtol=1e-5)
        ids, mask = batch["input_ids"], batch["attention_mask"]
        assert torch.equal(ours.generate(input_ids=ids, attention_mask=mask, num_beams=4, max_new_tokens=8),
                           reference.generate(input_ids=ids, attention_mask=mask, num_beams=4, max_new_tokens=8))
    capsys.readouterr()
    assert main(["generate", "--model", str(bart_run / "final"), "It is a truth <mask> acknowledged.",
                 "--num-beams", "4", "--max-new-tokens", "6"]) == 0
    assert capsys.readouterr().out.count("\n") == 1  # one line per text (two steps of training: little to say)


def test_sigkill_then_resume_ends_bit_identical(packed, tmp_path):
    steps = ["--set", "max_steps=12", "--set", "save_steps=4", "--set", "eval_steps=6", "--set", "save_total_limit=3"]
    assert_killed_run_resumes_bit_identical(lambda out, *extra: pretrain_args(packed, out, *extra), tmp_path, steps)


def one_line_error(args: list[str], capsys) -> str:
    capsys.readouterr()
    assert main(args) != 0
    message = capsys.readouterr().err.strip()
    assert len(message.splitlines()) == 1 and "Traceback" not in message, message
    return message


def test_bart_refuses_paired_data(data_root, tmp_path, capsys):
    nsp = build_batch_data(data_root, "nsp", "dynamic", BART_TOKENIZER)
    message = one_line_error(pretrain_args(nsp, tmp_path / "nsp"), capsys)
    assert str(nsp) in message and "'nsp'" in message and "'packed'" in message
    assert not (tmp_path / "nsp").exists()


def test_bart_refuses_a_tokenizer_without_mask_or_eos(data_root, tmp_path, capsys):
    wordpiece = build_batch_data(data_root, "packed", "dynamic")  # [CLS] ... [SEP]: no <s> / </s>
    message = one_line_error(pretrain_args(wordpiece, tmp_path / "wp"), capsys)
    assert str(wordpiece / "tokenizer") in message and "end-of-sequence" in message
    t5 = build_batch_data(data_root, "packed", "dynamic", CASE_MODELS["t5"][0])  # <pad> </s> <unk>: no <mask>
    message = one_line_error(pretrain_args(t5, tmp_path / "no-mask"), capsys)
    assert str(t5 / "tokenizer") in message and "mask token" in message


def test_bart_refuses_permutation_of_one_sentence_documents(tmp_path, capsys):
    corpus = tmp_path / "no-stops.txt"
    corpus.write_text("".join(f"a line of words without any stop number {i}\n\n" for i in range(60)))
    tok, data = tmp_path / "tok", tmp_path / "data"
    assert main(["tokenizer", "train", *BART_TOKENIZER, "--output", str(tok), "--no-progress", str(corpus)]) == 0
    assert main(["data", "build", "--tokenizer", str(tok), "--max-seq-length", "16", "--format", "packed",
                 "--output", str(data), "--eval-fraction", "0", "--no-progress", str(corpus)]) == 0
    message = one_line_error(pretrain_args(data, tmp_path / "run"), capsys)
    assert str(data) in message and "'objective.permute_sentences'" in message
    assert main(pretrain_args(data, tmp_path / "run", "--set", "objective.permute_sentences=0")) == 0


def test_bart_settings_and_position_limit_are_checked_by_name(packed, tmp_path, capsys):
    message = one_line_error(pretrain_args(packed, tmp_path / "bad", "--set", "objective.mask_ratio=1.5"), capsys)
    assert "mask_ratio" in message
    message = one_line_error(pretrain_args(packed, tmp_path / "bad", "--poisson-lambda", "0"), capsys)
    assert "poisson_lambda" in message
    message = one_line_error(pretrain_args(packed, tmp_path / "bad", "--set", "model.max_position_embeddings=32"),
                             capsys)
    assert "model.max_position_embeddings" in message and "max_seq_length 64" in message
