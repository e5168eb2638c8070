"""Held-out scores that compare: every objective masks its held-out split (and ELECTRA samples
its replacements) from `eval_seed`, not from the run's `seed`, so two runs of different seeds,
two objectives' shared metrics or two arms of an ablation are scored on the same tokens;
training batches still follow the run's seed. metrics.jsonl names the eval seed."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from _successor_data import build_data, make_objective, pretrain

from bertkit.cli import main
from bertkit.pretraining import RUN_CONFIG_FILE
from bertkit.training.config import EVAL_SEED
from bertkit.training.distributed import DistContext

FORMATS = {"mlm_nsp": "nsp", "mlm": "nsp", "roberta": "packed", "spanbert": "packed", "electra": "nsp",
           "albert": "sop", "ltr": "packed"}


@pytest.fixture(scope="module")
def data_dirs(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("eval_seed")
    return {fmt: build_data(root, "wordpiece", fmt) for fmt in sorted(set(FORMATS.values()))}




def same_example(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a)


@pytest.mark.parametrize("name", sorted(FORMATS))
def test_held_out_examples_do_not_depend_on_the_run_seed(name, data_dirs):
    data = data_dirs[FORMATS[name]]
    one, two = make_objective(name, data, seed=1), make_objective(name, data, seed=2)
    assert one.eval_seed == two.eval_seed == EVAL_SEED
    held_out = range(len(one.eval_data))
    assert all(same_example(one.eval_example(i), two.eval_example(i)) for i in held_out)
    if FORMATS[name] != "packed":  # the pairs' NSP / SOP labels are part of what is scored, both kinds present
        assert {int(one.eval_example(i)["next_sentence_label"]) for i in held_out} == {0, 1}
    if name != "ltr":  # training masks still follow the run's seed (ltr does not mask)
        assert not all(same_example(one.train_example(i, 0), two.train_example(i, 0)) for i in range(20))
        other = make_objective(name, data, seed=1, fields={"eval_seed": "7"})
        assert not all(same_example(one.eval_example(i), other.eval_example(i)) for i in held_out)


@pytest.mark.parametrize("name", sorted(FORMATS))
def test_held_out_metrics_equal_for_runs_of_different_seeds(name, data_dirs):
    """The same weights score the same under either run's objective (ELECTRA's replacements included)."""
    data = data_dirs[FORMATS[name]]
    one, two = make_objective(name, data, seed=1), make_objective(name, data, seed=2)
    model = one.model.eval()
    with torch.no_grad():
        first, second = (objective.evaluate(model, DistContext(), 8, None) for objective in (one, two))
    assert first and first == second


def test_objectives_share_the_masked_positions(data_dirs):
    """MLM+NSP, MLM alone and ELECTRA's generator predict the same held-out positions, so their
    `eval_mlm_*` metrics compare (ELECTRA only replaces them differently: no random tokens)."""
    data = data_dirs["nsp"]
    bert, mlm, electra = (make_objective(name, data, seed=s) for name, s in (("mlm_nsp", 1), ("mlm", 2), ("electra", 3)))
    for i in range(len(bert.eval_data)):
        assert same_example(bert.eval_example(i), mlm.eval_example(i))
        assert np.array_equal(bert.eval_example(i)["labels"], electra.eval_example(i)["labels"])


def test_metrics_record_the_eval_seed(data_dirs, tmp_path):
    data = data_dirs["nsp"]
    assert pretrain("mlm_nsp", data, tmp_path / "default", "--set", "seed=3") == 0
    assert pretrain("mlm_nsp", data, tmp_path / "seven", "--set", "eval_seed=7") == 0
    for run, expected in (("default", EVAL_SEED), ("seven", 7)):
        records = [json.loads(line) for line in (tmp_path / run / "metrics.jsonl").read_text().splitlines()]
        evals = [r for r in records if "eval_loss" in r]
        assert evals and all(r["eval_seed"] == expected for r in evals)
        report = (tmp_path / run / "report.md").read_text()
        assert f"drawn from eval_seed {expected}" in report
        assert "eval_seed" not in report.split("Final metrics")[1].split("Files")[0]  # a detail, not a metric


def test_runs_saved_before_eval_seed_keep_their_masks_on_resume(data_dirs, tmp_path):
    """A run_config.json without `eval_seed` (written before it existed) scored its held-out split
    with its run seed's masks: resuming it keeps them, so its evaluations and best model compare."""
    run = tmp_path / "old"
    assert pretrain("mlm_nsp", data_dirs["nsp"], run, "--set", "seed=5") == 0
    path = run / RUN_CONFIG_FILE
    values = json.loads(path.read_text())
    del values["eval_seed"]
    path.write_text(json.dumps(values))
    assert main(["pretrain", "--output-dir", str(run), "--resume", "--set", "max_steps=4", "--set", "progress=false"]) == 0
    records = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    resumed_evals = [r for r in records if "eval_loss" in r and r["step"] > 2]
    assert resumed_evals and all(r["eval_seed"] == 5 for r in resumed_evals)
