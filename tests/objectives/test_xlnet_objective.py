"""`--objective xlnet`: the masks as the paper defines them (enumerated on small cases and
checked through the model), examples from (seed, epoch, index) alone, held-out targets from
eval_seed, bi_data and mem_len, one-line errors before training, exact resume after SIGKILL."""

from __future__ import annotations

import itertools
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch
from _successor_data import FIXTURE, QUIET, TINY_XLNET_FIELDS, make_objective
from safetensors.torch import load_file

from bertkit.cli import main
from bertkit.model.xlnet import XLNetLMHeadModel
from bertkit.model.xlnet.config import XLNetConfig
from bertkit.objectives.xlnet import backward_example, permutation_mask, target_rows, xlnet_inputs

TINY = [arg for key, value in TINY_XLNET_FIELDS.items() for arg in ("--set", f"{key}={value}")]


@pytest.fixture(scope="module")
def root(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("xlnet")
    assert main(["tokenizer", "train", "--algorithm", "wordpiece", "--vocab-size", "400", "--output", str(root / "tok"),
                 "--no-progress", str(FIXTURE)]) == 0
    for fmt, length in (("xlnet", 64), ("nsp", 64), ("packed", 64), ("xlnet", 63)):
        assert main(["data", "build", "--tokenizer", str(root / "tok"), "--max-seq-length", str(length), "--format", fmt,
                     "--output", str(root / f"data-{fmt}-{length}"), "--eval-fraction", "0.2", "--no-progress",
                     str(FIXTURE)]) == 0
    return root


def pretrain_args(data: Path, out: Path, *extra: str) -> list[str]:
    return ["pretrain", "--objective", "xlnet", "--preset", "tiny", "--data", str(data), "--output-dir", str(out),
            *TINY, *QUIET, "--set", "batch_size=8", "--set", "warmup_steps=2", "--set", "lr=1e-3", *extra]


# ---- the masks ----------------------------------------------------------------------------------

def visible_by_definition(order: list[int], num_context: int, i: int, stream: str) -> set[int]:
    """Who position i attends to for the factorization order `order` (positions, first to last)
    whose first `num_context` entries are the non-targets: a non-target sees every non-target
    (they are context, never predicted); a target z_t sees x_{z<t} in the query stream and
    x_{z<=t} in the content stream."""
    step = order.index(i)
    if step < num_context:
        return set(order[:num_context])
    return set(order[:step + (stream == "content")])


@pytest.mark.parametrize("length", [1, 2, 3, 4, 5])
def test_masks_match_the_paper_on_every_small_case(length):
    """Every target set and every order of the targets of up to 5 positions."""
    for targets in itertools.product([False, True], repeat=length):
        context = [p for p in range(length) if not targets[p]]
        chosen = [p for p in range(length) if targets[p]]
        for target_order in itertools.permutations(chosen):
            ranks = torch.zeros(1, length, dtype=torch.long)
            for step, position in enumerate(target_order):
                ranks[0, position] = step + 1
            blocked = permutation_mask(ranks)[0]  # (T, T), 1 = may not attend
            order = context + list(target_order)
            for i in range(length):
                query = {j for j in range(length) if blocked[i, j] == 0}
                content = query | {i}  # the model lets the content stream see itself
                if targets[i]:
                    assert i not in query  # a target never sees itself in the query stream
                    assert query == visible_by_definition(order, len(context), i, "query")
                assert content == visible_by_definition(order, len(context), i, "content") | (
                    {i} if not targets[i] else set())


def test_target_rows_pick_the_targets_in_position_order_and_pad():
    ranks = torch.tensor([[0, 2, 0, 1, 0], [3, 0, 0, 0, 0]])
    input_ids = torch.tensor([[10, 11, 12, 13, 14], [20, 21, 22, 23, 24]])
    mapping, labels = target_rows(ranks, input_ids)
    assert mapping.shape == (2, 2, 5)
    assert mapping[0].argmax(-1).tolist() == [1, 3] and labels[0].tolist() == [11, 13]
    assert mapping[1, 0].argmax().item() == 0 and mapping[1, 1].sum() == 0 and labels[1].tolist() == [20, -100]


def test_the_model_sees_what_the_order_allows():
    """Through XLNetLMHeadModel: a target's prediction ignores its own token and the targets
    after it in the order, and changes with a target before it and with the context."""
    torch.manual_seed(0)
    model = XLNetLMHeadModel(XLNetConfig(vocab_size=50, d_model=32, n_layer=2, n_head=2, d_inner=64, dropout=0.0,
                                         mem_len=None)).eval()
    ids = torch.tensor([[5, 6, 7, 8, 9, 10, 11, 12]])
    ranks = torch.tensor([[0, 2, 0, 3, 0, 1, 0, 0]])  # order: context {0,2,4,6,7}, then 5, 1, 3
    batch = {"input_ids": ids, "token_type_ids": torch.zeros_like(ids), "attention_mask": torch.ones_like(ids),
             "perm_rank": ranks}

    def logits(changed: int | None = None) -> torch.Tensor:
        inputs = xlnet_inputs({**batch, "input_ids": ids.clone()})
        if changed is not None:
            inputs["input_ids"][0, changed] = 40
        inputs.pop("labels")
        with torch.no_grad():
            return model(**inputs).logits[0]  # (3, V): rows for positions 1, 3, 5

    base = logits()
    row = {1: 0, 3: 1, 5: 2}
    for position, rank in ((1, 2), (3, 3), (5, 1)):
        assert torch.allclose(logits(position)[row[position]], base[row[position]])  # not its own token
        for other, other_rank in ((1, 2), (3, 3), (5, 1)):
            same = torch.allclose(logits(other)[row[position]], base[row[position]])
            assert same == (other_rank >= rank), (position, other)  # only earlier targets matter
    assert not torch.allclose(logits(0)[0], base[0])  # the context does


# ---- examples -------------------------------------------------------------------------------------

def test_examples_come_from_seed_epoch_and_index_only(root):
    data = root / "data-xlnet-64"
    a, b = make_objective("xlnet", data, seed=3), make_objective("xlnet", data, seed=3)
    first = a.example(a.train, 5, 1, 3)
    assert all(np.array_equal(first[k], b.example(b.train, 5, 1, 3)[k]) for k in first)
    a.example(a.train, 9, 0, 3)  # other draws in between change nothing
    assert np.array_equal(a.example(a.train, 5, 1, 3)["perm_rank"], first["perm_rank"])
    for other in (a.example(a.train, 5, 2, 3), a.example(a.train, 5, 1, 4)):
        assert not np.array_equal(other["perm_rank"], first["perm_rank"])
    ids, types, ranks = first["input_ids"], first["token_type_ids"], first["perm_rank"]
    tokenizer = a.tokenizer
    assert ids[-1] == tokenizer.cls_token_id and types[-1] == 2 and set(types[:-1]) <= {0, 1}
    assert (ranks > 0).sum() == round(64 / 6) or len(ids) < 64
    assert not (ranks[np.isin(ids, tokenizer.all_special_ids)] > 0).any()
    assert sorted(ranks[ranks > 0]) == list(range(1, (ranks > 0).sum() + 1))


def test_held_out_targets_come_from_eval_seed(root):
    data = root / "data-xlnet-64"
    one, two = make_objective("xlnet", data, seed=1), make_objective("xlnet", data, seed=2)
    for index in range(3):
        assert np.array_equal(one.eval_example(index)["perm_rank"], two.eval_example(index)["perm_rank"])
    other = make_objective("xlnet", data, seed=1, fields={"eval_seed": "99"})
    assert not np.array_equal(other.eval_example(0)["perm_rank"], one.eval_example(0)["perm_rank"])


def test_held_out_metrics_are_loss_and_accuracy_in_percent(root):
    objective = make_objective("xlnet", root / "data-xlnet-64", seed=1)
    from bertkit.training.distributed import DistContext

    metrics = objective.evaluate(objective.model.eval(), DistContext(), batch_size=8, max_batches=2)
    assert set(metrics) >= {"loss", "plm_loss", "plm_accuracy"} and 0.0 <= metrics["plm_accuracy"] <= 100.0
    assert metrics["loss"] == pytest.approx(np.log(400), rel=0.1)  # an untrained model: about uniform


def test_num_predict_and_k_are_settings(root):
    data = root / "data-xlnet-64"
    assert make_objective("xlnet", data, 1, {"objective.num_predict": "20"}).num_predict == 20
    assert make_objective("xlnet", data, 1, {"objective.prediction_k": "8"}).num_predict == 8
    example = make_objective("xlnet", data, 1, {"objective.num_predict": "20"}).train_example(0, 0)
    assert (example["perm_rank"] > 0).sum() == round(20 * len(example["input_ids"]) / 64)


# ---- bi_data and mem_len -----------------------------------------------------------------------------

def test_backward_example_reads_the_text_in_reverse():
    ids = np.array([11, 12, 13, 2, 21, 22, 2, 1])  # A=11 12 13 <sep> B=21 22 <sep> <cls>
    example = {"input_ids": ids, "token_type_ids": np.array([0, 0, 0, 0, 1, 1, 1, 2]),
               "perm_rank": np.array([0, 1, 0, 0, 2, 0, 0, 0])}
    moved = backward_example(example)
    assert moved["input_ids"].tolist() == [22, 21, 2, 13, 12, 11, 2, 1]
    assert moved["token_type_ids"].tolist() == [0, 0, 0, 1, 1, 1, 1, 2]
    assert moved["perm_rank"].tolist() == [0, 2, 0, 0, 1, 0, 0, 0]  # the targets and their order move along


def test_bi_data_turns_the_second_half_of_a_batch_backwards(root):
    objective = make_objective("xlnet", root / "data-xlnet-64", 1, {"objective.bi_data": "true"})
    assert objective.model.config.bi_data
    examples = [objective.train_example(i, 0) for i in range(3)]
    batch = objective.collate(examples)
    assert batch["input_ids"].shape[0] == 4  # odd: one more backward row, without targets
    assert (batch["perm_rank"][3] == 0).all()
    length = len(examples[2]["input_ids"])
    assert batch["input_ids"][2, :length].tolist() == backward_example(examples[2])["input_ids"].tolist()
    loss, stats = objective.compute_loss(objective.model, batch, objective.loss_counts(batch))
    assert torch.isfinite(loss) and stats["mlm_count"] == float((batch["perm_rank"] > 0).sum())


def test_mem_len_runs_the_second_half_with_the_first_as_memory(root):
    objective = make_objective("xlnet", root / "data-xlnet-64", 1, {"objective.mem_len": "32"})
    assert objective.model.config.mem_len == 32
    example = objective.train_example(0, 0)
    ranks = example["perm_rank"]
    num_predict = round(64 / 6)
    assert (ranks[:32] > 0).sum() == num_predict - num_predict // 2  # the original's split of num_predict
    assert (ranks[32:] > 0).sum() == round(num_predict // 2 * (len(ranks) - 32) / 32)
    calls = []
    forward = objective.model.forward

    def recording(*args, **kwargs):
        calls.append((kwargs["input_ids"].shape, kwargs.get("mems")))
        return forward(*args, **kwargs)

    objective.model.forward = recording
    batch = objective.collate([objective.train_example(i, 0) for i in range(4)])
    assert batch["input_ids"].shape == (4, 64)
    objective.compute_loss(objective.model, batch, objective.loss_counts(batch))
    (first, no_memory), (second, memory) = calls
    assert first == second == (4, 32) and no_memory is None
    assert len(memory) == 2 and memory[0].shape == (32, 4, 32) and not memory[0].requires_grad


# ---- runs ------------------------------------------------------------------------------------------

def test_pretrain_learns_and_saves_an_xlnet_lm_head_model(root, tmp_path):
    out = tmp_path / "run"
    assert main(pretrain_args(root / "data-xlnet-64", out, "--set", "max_steps=40", "--set", "log_steps=10",
                              "--set", "eval_steps=40", "--set", "model.dropout=0")) == 0
    records = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    losses = [r["loss"] for r in records if "loss" in r]
    assert losses[-1] < losses[0] - 0.2
    assert any("eval_plm_accuracy" in r for r in records)
    config = json.loads((out / "final" / "config.json").read_text())
    assert config["architectures"] == ["XLNetLMHeadModel"] and "max_position_embeddings" not in config
    import transformers

    _, info = transformers.XLNetLMHeadModel.from_pretrained(out / "final", output_loading_info=True)
    assert not info["missing_keys"] and not info["unexpected_keys"]


def test_a_unigram_tokenizer_with_xlnet_specials_trains(tmp_path):
    """The intended setup: `tokenizer train --algorithm unigram` (<sep>, <cls>, <mask>, ▁ word starts)."""
    tok, data = tmp_path / "tok-uni", tmp_path / "data"
    assert main(["tokenizer", "train", "--algorithm", "unigram", "--vocab-size", "300", "--output", str(tok),
                 "--no-progress", str(FIXTURE)]) == 0
    assert main(["data", "build", "--tokenizer", str(tok), "--format", "xlnet", "--max-seq-length", "64",
                 "--output", str(data), "--eval-fraction", "0.2", "--no-progress", str(FIXTURE)]) == 0
    objective = make_objective("xlnet", data, seed=1)
    tokenizer = objective.tokenizer
    assert (tokenizer.sep_token, tokenizer.cls_token, tokenizer.mask_token) == ("<sep>", "<cls>", "<mask>")
    example = objective.train_example(0, 0)
    ids, ranks = example["input_ids"], example["perm_rank"]
    assert ids[-1] == tokenizer.cls_token_id and not (ranks[np.isin(ids, tokenizer.all_special_ids)] > 0).any()
    starts = objective._position_starts(ids)
    pieces = tokenizer.convert_ids_to_tokens(ids.tolist())
    assert all(starts[i] == (pieces[i].startswith("\u2581") or i == 0 or ids[i - 1] in tokenizer.all_special_ids
                             or ids[i] in tokenizer.all_special_ids) for i in range(len(ids)))
    assert main(pretrain_args(data, tmp_path / "run", "--set", "max_steps=2")) == 0


@pytest.mark.parametrize("extra", [[], ["--bi-data", "true", "--mem-len", "32"]], ids=["plain", "bi_data-mem_len"])
def test_sigkill_then_resume_ends_bit_identical(root, tmp_path, extra):
    data = root / "data-xlnet-64"
    steps = ["--set", "max_steps=30", "--set", "save_steps=5", "--set", "eval_steps=15", "--set", "save_total_limit=3",
             *extra]
    reference = tmp_path / "ref"
    assert main(pretrain_args(data, reference, *steps)) == 0
    killed = tmp_path / "killed"
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}  # the threads of the in-process runs: bit-identical needs the same
    proc = subprocess.Popen([sys.executable, "-m", "bertkit", *pretrain_args(data, killed, *steps)], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 180
    while not (killed / "checkpoint-0000010" / "training_state.pt").exists():
        assert proc.poll() is None and time.time() < deadline, "the run ended before it could be killed"
        time.sleep(0.01)
    proc.send_signal(signal.SIGKILL)
    assert proc.wait() == -signal.SIGKILL
    assert main(pretrain_args(data, killed, *steps, "--resume")) == 0
    ref, resumed = load_file(str(reference / "final" / "model.safetensors")), load_file(str(killed / "final" / "model.safetensors"))
    assert ref.keys() == resumed.keys() and all(torch.equal(ref[k], resumed[k]) for k in ref)


# ---- bad input -------------------------------------------------------------------------------------

@pytest.mark.parametrize("case, extra, expected", [
    ("nsp data", [], "built as 'nsp' instances, but objective 'xlnet' needs 'xlnet'"),
    ("packed data", [], "built as 'packed' instances, but objective 'xlnet' needs 'xlnet'"),
    ("num_predict", ["--num-predict", "62"], "field 'num_predict' (62) must be at most the 61 predictable tokens"),
    ("odd length", ["--mem-len", "16"], "field 'max_seq_length' must be even with objective.mem_len > 0"),
    ("bad k", ["--prediction-k", "1"], "field 'prediction_k' must be greater than 1"),
    ("num_predict halves", ["--mem-len", "32", "--num-predict", "60"], "field 'num_predict' (60) is too large for two halves of 32"),
])
def test_bad_input_is_one_line_naming_the_field_before_training(root, tmp_path, capsys, case, extra, expected):
    data = {"nsp data": "data-nsp-64", "packed data": "data-packed-64", "odd length": "data-xlnet-63"}.get(
        case, "data-xlnet-64")
    out = tmp_path / "run"
    capsys.readouterr()
    assert main(pretrain_args(root / data, out, "--set", "max_steps=2", *extra)) == 1
    message = capsys.readouterr().err.strip()
    assert message.startswith("bertkit: error: ") and "\n" not in message and expected in message, message
    assert not (out / "metrics.jsonl").exists()
