"""`bertkit pretrain --objective clm`: next-token prediction on packed data joined by EOS, for GPT-2
(gpt-*) and GPT-1 (gpt1-*) shapes; metrics, transformers loads final/ with the same logits, resume
after SIGKILL is bit-identical, and bad input fails in one line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
import transformers
from _objective_batches import CASE_MODELS
from _objective_batches import build_data as build_batch_data
from _sigkill import assert_killed_run_resumes_bit_identical
from _successor_data import QUIET, make_objective
from safetensors.torch import load_file

from bertkit.cli import main
from bertkit.objectives.clm import next_token_statistics

CLM_TOKENIZER, CLM_PRESET = CASE_MODELS["clm"]
TINY = ["--set", "model.n_embd=32", "--set", "model.n_layer=2", "--set", "model.n_head=2",
        "--set", "model.n_positions=64"]


@pytest.fixture(scope="module")
def data_root(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("clm")


@pytest.fixture(scope="module")
def packed(data_root) -> Path:
    return build_batch_data(data_root, "packed", "dynamic", CLM_TOKENIZER)


def pretrain_args(data: Path, out: Path, *extra: str, preset: str = CLM_PRESET) -> list[str]:
    return ["pretrain", "--objective", "clm", "--preset", preset, "--data", str(data), "--output-dir", str(out),
            *TINY, *QUIET, "--set", "batch_size=8", "--set", "warmup_steps=1", "--set", "lr=1e-3",
            "--set", "max_steps=2", "--set", "eval_steps=2", "--set", "eval_batches=2", *extra]


def test_examples_are_the_packed_text_and_labels_are_the_inputs(packed):
    objective = make_objective("clm", packed, 42, preset=CLM_PRESET)
    eos = objective.tokenizer.eos_token_id
    example = objective.train_example(3, 0)
    assert np.array_equal(example["input_ids"], example["labels"]) and example["input_ids"][-1] == eos
    batch = objective.collate([objective.train_example(i, 0) for i in range(4)])
    pad = batch["attention_mask"] == 0
    assert (batch["labels"][pad] == -100).all()  # padding is never a target
    assert objective.loss_counts(batch)["lm"] == float(batch["attention_mask"][:, 1:].sum())


def test_next_token_statistics_score_position_t_on_token_t_plus_1():
    logits = torch.full((1, 4, 5), -10.0)
    for t, nxt in enumerate([2, 3, 4]):
        logits[0, t, nxt] = 10.0  # predicts 2, 3, 4 after positions 0, 1, 2
    labels = torch.tensor([[1, 2, 3, -100]])
    loss, stats = next_token_statistics(logits, labels)
    assert stats == {"lm_loss_sum": pytest.approx(float(loss) * 2), "lm_correct": 2.0, "lm_count": 2.0}


@pytest.mark.parametrize("preset,architecture", [("gpt-tiny", "GPT2LMHeadModel"),
                                                 ("gpt1-mini", "OpenAIGPTLMHeadModel")])
def test_pretrain_clm_end_to_end_and_transformers_loads_it(packed, tmp_path, preset, architecture):
    out = tmp_path / "run"
    assert main(pretrain_args(packed, out, preset=preset)) == 0
    records = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert any("lm_accuracy" in r for r in records)
    assert any("eval_lm_perplexity" in r and "eval_lm_accuracy" in r for r in records)
    report = (out / "report.md").read_text()
    assert "eval_lm_perplexity" in report
    config = json.loads((out / "final" / "config.json").read_text())
    assert config["architectures"] == [architecture]
    ref, info = getattr(transformers, architecture).from_pretrained(out / "final", output_loading_info=True)
    assert not info["missing_keys"] and not info["unexpected_keys"]
    from bertkit.model.families import family_of

    ours = family_of(out / "final").generator_class().from_pretrained(out / "final").eval()
    ids = torch.randint(5, config["vocab_size"], (2, 12))
    with torch.no_grad():
        torch.testing.assert_close(ours(input_ids=ids).logits, ref.eval()(input_ids=ids).logits,
                                   atol=1e-5, rtol=1e-5)


def test_budget_recipe_in_gpt_terms(packed, tmp_path):
    out = tmp_path / "budget"
    args = pretrain_args(packed, out, "--recipe", "budget", "--budget", "1m")
    del args[args.index("--preset"):args.index("--preset") + 2]  # the recipe's size: BERT tiny -> gpt-tiny
    del args[args.index("warmup_steps=1") - 1:args.index("warmup_steps=1") + 1]  # a budget warms up by time
    assert main(args) == 0
    config = json.loads((out / "run_config.json").read_text())
    assert (config["recipe"], config["preset"], config["lr"]) == ("budget", "gpt-tiny", 1e-3)
    assert {config["model"][k] for k in ("resid_pdrop", "embd_pdrop", "attn_pdrop")} == {0.0}
    assert "pre_layer_norm" not in config["model"]


def test_sigkill_then_resume_ends_bit_identical(packed, tmp_path):
    steps = ["--set", "max_steps=8", "--set", "save_steps=4", "--set", "eval_steps=4", "--set", "save_total_limit=3"]
    assert_killed_run_resumes_bit_identical(lambda out, *extra: pretrain_args(packed, out, *extra), tmp_path, steps)


def test_two_processes_match_one_process(packed, tmp_path):
    common = ["--set", "max_steps=3", "--set", "log_steps=1", "--set", "save_steps=100", "--set", "eval_steps=100",
              "--set", "model.resid_pdrop=0", "--set", "model.embd_pdrop=0", "--set", "model.attn_pdrop=0"]
    single = tmp_path / "single"
    assert main(pretrain_args(packed, single, *common)) == 0
    double = tmp_path / "ddp"
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2", "--master-port", "29561",
           "-m", "bertkit", *pretrain_args(packed, double, *common, "--set", "parallel=ddp")]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]

    def losses(run: Path) -> list[float]:
        return [json.loads(x)["loss"] for x in (run / "metrics.jsonl").read_text().splitlines() if '"loss"' in x
                and "eval_loss" not in x]

    assert len(losses(single)) == 3 and losses(double) == pytest.approx(losses(single), rel=1e-5)
    a, b = load_file(single / "final" / "model.safetensors"), load_file(double / "final" / "model.safetensors")
    for key in a:
        torch.testing.assert_close(a[key], b[key], atol=1e-5, rtol=1e-4)


def test_non_utf8_text_names_the_file_and_line(data_root, tmp_path, capsys):
    bad = tmp_path / "latin1.txt"
    bad.write_bytes("It is a truth.\n\nCaf\u00e9 au lait.\n".encode("latin-1"))
    tok = next(data_root.glob("tok*bbpe*"))
    message = one_line_error(["data", "build", "--tokenizer", str(tok), "--format", "packed", "--output",
                              str(tmp_path / "data"), "--no-progress", str(bad)], capsys)
    assert f"{bad}:3" in message
    message = one_line_error(["tokenizer", "train", "--algorithm", "bbpe", "--layout", "gpt2", "--output",
                              str(tmp_path / "tok"), "--no-progress", str(bad)], capsys)
    assert f"{bad}:3" in message


def one_line_error(args: list[str], capsys) -> str:
    capsys.readouterr()
    assert main(args) != 0
    message = capsys.readouterr().err.strip()
    assert len(message.splitlines()) == 1 and "Traceback" not in message, message
    return message


def test_clm_refuses_paired_data_a_tokenizer_without_eos_and_an_encoder_preset(data_root, packed, tmp_path, capsys):
    nsp = build_batch_data(data_root, "nsp", "dynamic")  # WordPiece: no EOS either
    message = one_line_error(pretrain_args(nsp, tmp_path / "nsp"), capsys)
    assert str(nsp) in message and "'nsp'" in message and "'packed'" in message
    sop = build_batch_data(data_root, "sop", "dynamic")
    assert "'sop'" in one_line_error(pretrain_args(sop, tmp_path / "sop"), capsys)
    wordpiece_packed = build_batch_data(data_root, "packed", "dynamic")
    message = one_line_error(pretrain_args(wordpiece_packed, tmp_path / "wp"), capsys)
    assert "tokenizer" in message and "no end-of-text token (eos_token" in message
    message = one_line_error(pretrain_args(packed, tmp_path / "bert", preset="mini"), capsys)
    assert "field 'preset'" in message and "gpt-mini" in message
    assert not any((tmp_path / name).exists() for name in ("nsp", "sop", "wp", "bert"))
