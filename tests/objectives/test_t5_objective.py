"""`bertkit pretrain --objective t5`: raw chunks of packed data corrupted to exactly max_seq_length,
examples from (seed, epoch, index) only, a checkpoint transformers loads as T5ForConditionalGeneration,
exact resume after SIGKILL, and one-line errors on data or tokenizers it cannot use."""

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
from bertkit.objectives.t5 import input_and_target_lengths

T5_TOKENIZER, T5_PRESET = CASE_MODELS["t5"]
MAX_SEQ_LENGTH = 64  # raw chunks of 70 tokens, 14 target tokens


@pytest.fixture(scope="module")
def data_root(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("t5")


@pytest.fixture(scope="module")
def packed(data_root) -> Path:
    return build_batch_data(data_root, "packed", "dynamic", T5_TOKENIZER)


def pretrain_args(data: Path, out: Path, *extra: str) -> list[str]:
    return ["pretrain", "--objective", "t5", "--preset", T5_PRESET, "--data", str(data), "--output-dir", str(out),
            *QUIET, "--set", "batch_size=8", "--set", "warmup_steps=1", "--set", "lr=1e-3", "--set", "max_steps=2",
            "--set", "eval_steps=2", "--set", "eval_batches=2", *extra]


def test_examples_fill_max_seq_length_and_hold_text_sentinels_and_eos_only(packed):
    objective = make_objective("t5", packed, 42, preset=T5_PRESET)
    tokenizer = objective.tokenizer
    raw, targets = input_and_target_lengths(MAX_SEQ_LENGTH, 0.15, 3.0)
    assert (objective.raw_length, objective.target_length) == (raw, targets) == (70, 14)
    assert objective.sentinel_ids[0] == max(objective.sentinel_ids)  # <extra_id_0> highest, as T5
    assert objective.eos_id == tokenizer.eos_token_id
    bert_specials = {tokenizer.cls_token_id, tokenizer.sep_token_id, tokenizer.pad_token_id} - {None}
    sentinels = set(objective.sentinel_ids.tolist())
    for index in range(objective.num_train_examples()):
        example = objective.train_example(index, 0)
        inputs, labels = example["input_ids"], example["labels"]
        assert len(inputs) == MAX_SEQ_LENGTH and len(labels) == targets
        assert inputs[-1] == labels[-1] == objective.eos_id
        assert not (set(inputs[:-1].tolist()) | set(labels[:-1].tolist())) & (bert_specials | {objective.eos_id})
        assert sorted(set(inputs.tolist()) & sentinels) == sorted(set(labels.tolist()) & sentinels)


def test_raw_chunks_are_the_packed_text_in_order(packed):
    """Chunk k = tokens [70k, 70k + 70) of the packed instances' text with the format's specials dropped."""
    objective = make_objective("t5", packed, 42, preset=T5_PRESET)
    data = PretrainingDataset.open(packed, "train")
    info = data.info
    stream = np.concatenate([data[i]["input_ids"] for i in range(len(data))])
    stream = stream[~np.isin(stream, [info.cls_token_id, info.sep_token_id])]
    chunks = objective.train_chunks
    assert len(chunks) == len(stream) // 70 == objective.num_train_examples()
    assert np.array_equal(np.concatenate([chunks[k] for k in range(len(chunks))]), stream[:len(chunks) * 70])
    assert objective.num_eval_examples() == len(objective.eval_chunks) > 0


def test_examples_come_from_seed_epoch_and_index_alone(packed):
    first = make_objective("t5", packed, 42, preset=T5_PRESET)
    again = make_objective("t5", packed, 42, preset=T5_PRESET)
    other = make_objective("t5", packed, 7, preset=T5_PRESET)

    def same(a, b):
        return all(np.array_equal(a[k], b[k]) for k in a)

    for index in (0, 5, 11):
        example = first.train_example(index, 1)
        assert same(example, again.train_example(index, 1))  # a fresh objective: the same draw
        assert same(example, first.train_example(index, 1))  # asked again: no running stream
        assert not same(example, first.train_example(index, 2))  # another epoch: another mask
        assert not same(example, other.train_example(index, 1))  # another seed: another mask
        assert same(first.eval_example(index % 3), other.eval_example(index % 3))  # held out: eval_seed only
    # the order examples are asked in changes nothing
    forwards = [first.train_example(i, 0)["labels"] for i in range(6)]
    backwards = [again.train_example(i, 0)["labels"] for i in reversed(range(6))][::-1]
    assert all(np.array_equal(a, b) for a, b in zip(forwards, backwards))


def test_collate_pads_inputs_and_targets_separately(packed):
    objective = make_objective("t5", packed, 42, preset=T5_PRESET)
    short = {"input_ids": np.array([5, 6, 1]), "labels": np.array([9, 1])}
    batch = objective.collate([objective.train_example(0, 0), short])
    assert batch["input_ids"].shape == (2, MAX_SEQ_LENGTH) and batch["labels"].shape == (2, 14)
    assert batch["input_ids"][1, 3:].eq(objective.pad_id).all() and batch["attention_mask"][1].sum() == 3
    assert batch["labels"][1, 2:].eq(-100).all()


@pytest.fixture(scope="module")
def t5_run(packed, data_root) -> Path:
    out = data_root / "run"
    assert main(pretrain_args(packed, out)) == 0
    return out


def test_pretrain_t5_checkpoint_loads_in_transformers(t5_run, packed):
    import transformers

    records = [json.loads(line) for line in (t5_run / "metrics.jsonl").read_text().splitlines()]
    evals = [r for r in records if "eval_loss" in r]
    assert evals and 0 <= evals[-1]["eval_token_accuracy"] <= 100 and evals[-1]["eval_seed"] == 1234
    config = json.loads((t5_run / "final" / "config.json").read_text())
    assert config["model_type"] == "t5" and config["architectures"] == ["T5ForConditionalGeneration"]
    assert "| masking | span corruption, noise density 0.15, mean span 3 (70 raw -> 64 input, 14 target tokens) |" in (
        t5_run / "report.md").read_text()
    objective = make_objective("t5", packed, 42, preset=T5_PRESET)
    assert config["eos_token_id"] == objective.eos_id and config["decoder_start_token_id"] == objective.pad_id
    reference, info = transformers.T5ForConditionalGeneration.from_pretrained(t5_run / "final", output_loading_info=True)
    assert not info["missing_keys"] and not info["unexpected_keys"]
    from bertkit.model.t5 import T5ForConditionalGeneration

    ours = T5ForConditionalGeneration.from_pretrained(t5_run / "final").eval()
    batch = objective.collate([objective.eval_example(i) for i in range(3)])
    with torch.no_grad():
        expected = reference.eval()(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"],
                                    labels=batch["labels"])
        got = ours(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"], labels=batch["labels"])
    torch.testing.assert_close(got.loss, expected.loss, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(got.logits, expected.logits, atol=1e-4, rtol=1e-4)  # trained logits reach ~10


def test_sigkill_then_resume_ends_bit_identical(packed, tmp_path):
    steps = ["--set", "max_steps=12", "--set", "save_steps=4", "--set", "eval_steps=6", "--set", "save_total_limit=3"]
    assert_killed_run_resumes_bit_identical(lambda out, *extra: pretrain_args(packed, out, *extra), tmp_path, steps)


def one_line_error(args: list[str], capsys) -> str:
    capsys.readouterr()
    assert main(args) != 0
    captured = capsys.readouterr()
    message = captured.err.strip()
    assert len(message.splitlines()) == 1 and "Traceback" not in message, message
    return message


def test_t5_refuses_paired_data_before_training(data_root, tmp_path, capsys):
    nsp = build_batch_data(data_root, "nsp", "dynamic")  # WordPiece: T5's tokenizer has no [CLS] for pairs
    message = one_line_error(pretrain_args(nsp, tmp_path / "nsp"), capsys)
    assert str(nsp) in message and "'nsp'" in message and "'packed'" in message
    assert not (tmp_path / "nsp").exists()
    tok = next(data_root.glob("tokalgorithm-unigram*"))
    message = one_line_error(["data", "build", "--tokenizer", str(tok), "--format", "nsp", "--output",
                              str(tmp_path / "nsp-t5"), "--no-progress", str(FIXTURE)], capsys)
    assert str(tok) in message and "no cls token" in message


def test_t5_refuses_a_tokenizer_without_sentinels_or_eos(data_root, tmp_path, capsys):
    wordpiece = build_batch_data(data_root, "packed", "dynamic")  # BERT's WordPiece: no <extra_id_N>
    message = one_line_error(pretrain_args(wordpiece, tmp_path / "wp"), capsys)
    assert str(wordpiece / "tokenizer") in message and "<extra_id_0>" in message
    # sentinels but no EOS: WordPiece with <extra_id_0> added
    tok = tmp_path / "tok-no-eos"
    assert main(["tokenizer", "train", "--algorithm", "wordpiece", "--vocab-size", "400", "--output", str(tok),
                 "--no-progress", str(FIXTURE)]) == 0
    config = json.loads((tok / "tokenizer_config.json").read_text())
    (tok / "tokenizer_config.json").write_text(json.dumps({**config, "additional_special_tokens": ["<extra_id_0>"]}))
    data = tmp_path / "data-no-eos"
    assert main(["data", "build", "--tokenizer", str(tok), "--max-seq-length", "64", "--format", "packed",
                 "--output", str(data), "--no-progress", str(FIXTURE)]) == 0
    message = one_line_error(pretrain_args(data, tmp_path / "no-eos"), capsys)
    assert str(data / "tokenizer") in message and "end-of-sequence" in message


def test_t5_refuses_fewer_sentinels_than_spans(tmp_path, capsys):
    tok, data = tmp_path / "tok", tmp_path / "data"
    assert main(["tokenizer", "train", "--algorithm", "unigram", "--vocab-size", "300", "--sentinels", "2",
                 "--output", str(tok), "--no-progress", str(FIXTURE)]) == 0
    assert main(["data", "build", "--tokenizer", str(tok), "--max-seq-length", "64", "--format", "packed",
                 "--output", str(data), "--no-progress", str(FIXTURE)]) == 0
    message = one_line_error(pretrain_args(data, tmp_path / "run"), capsys)
    assert str(data / "tokenizer") in message and "2 sentinel tokens" in message and "3 spans" in message


def test_t5_settings_are_checked_by_name(packed, tmp_path, capsys):
    message = one_line_error(pretrain_args(packed, tmp_path / "bad", "--set", "objective.noise_density=1.5"), capsys)
    assert "noise_density" in message
    message = one_line_error(pretrain_args(packed, tmp_path / "bad", "--mean-noise-span-length", "0.5"), capsys)
    assert "mean_noise_span_length" in message
