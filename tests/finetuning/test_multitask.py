"""`bertkit finetune multitask` (MT-DNN) on a tiny random BERT and three GLUE fixtures: the
batches' task sampling (proportional, one task per batch), the saved folder (shared encoder,
a head per task), `predict --task` / `evaluate glue --task` on it, per-task fine-tuning
starting from it, and one-line errors for bad task names and missing folders."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import load_file

from bertkit.cli import main
from bertkit.errors import ConfigError
from bertkit.tasks.multitask import TaskBatches

from conftest import QUIET, stdout_jsonl

TASKS = {"rte": "RTE", "mrpc": "MRPC", "stsb": "STS-B"}
STEPS = ["--batch-size", "4", "--max-seq-length", "32", "--seed", "3", "--lr", "1e-3", "--epochs", "2", *QUIET]


def test_batches_come_from_one_task_in_proportion_to_its_size():
    sizes, batch = [300, 100, 20], 8
    slots = TaskBatches(sizes, batch)
    assert slots.batches == [38, 13, 3] and slots.total == 54 * batch
    first_tasks, per_epoch = [], []
    for epoch in range(600):
        permutation = np.random.default_rng([5, epoch]).permutation(slots.total)
        order = slots.order(permutation, np.random.default_rng([7, epoch]))
        assert sorted(order.tolist()) == list(range(slots.total))  # every slot once an epoch
        tasks = (np.searchsorted(slots.offsets, order, side="right") - 1).reshape(-1, batch)
        assert (tasks == tasks[:, :1]).all()  # each batch from one task
        per_epoch.append(np.bincount(tasks[:, 0], minlength=3))
        first_tasks.append(tasks[0, 0])
    assert (np.array(per_epoch) == slots.batches).all()  # every task's batches, once each
    # the first batch's task over 600 epochs: a draw in proportion to the tasks' batches
    expected = np.array(slots.batches) / sum(slots.batches)
    observed = np.bincount(first_tasks, minlength=3) / len(first_tasks)
    assert np.all(np.abs(observed - expected) < 4 * np.sqrt(expected * (1 - expected) / len(first_tasks)))
    # the features of a task's slots cover the task (the last batch topped up with its first ones)
    assert sorted({slots.locate(s)[1] for s in range(304, 304 + 13 * batch)}) == list(range(100))
    assert slots.locate(304) == (1, 0) and slots.locate(303) == (0, 3)  # task 0's last batch: features 296-299, 0-3


@pytest.fixture(scope="module")
def glue(tmp_path_factory, fixtures) -> Path:
    """RTE, MRPC and STS-B folders, each the fixture's dev rows as train and dev."""
    root = tmp_path_factory.mktemp("glue")
    for folder in TASKS.values():
        (root / folder).mkdir()
        for split in ("train", "dev"):
            shutil.copy(fixtures / "glue" / folder / "dev.tsv", root / folder / f"{split}.tsv")
    return root


@pytest.fixture(scope="module")
def run(tmp_path_factory, glue, tiny_model_dir) -> tuple[Path, str]:
    output = tmp_path_factory.mktemp("mtdnn")
    import contextlib
    import io

    err, out = io.StringIO(), io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
        assert main(["finetune", "multitask", "--tasks", "rte,mrpc,sts-b", "--data", str(glue),
                     "--model", str(tiny_model_dir), "--output-dir", str(output), "--overwrite", *STEPS]) == 0
    return output, err.getvalue() + out.getvalue()


def test_run_trains_every_task_and_reports(run):
    output, said = run
    assert said.count("initialised fresh") == 1 and "stsb: classifier.bias, classifier.weight" in said
    records = [json.loads(line) for line in (output / "metrics.jsonl").read_text().splitlines()]
    evals = [r for r in records if "eval_average" in r]
    assert len(evals) == 2  # every epoch
    last = evals[-1]
    for key in ("eval_rte_accuracy", "eval_mrpc_f1", "eval_mrpc_accuracy", "eval_stsb_pearson", "eval_stsb_spearmanr"):
        assert key in last
    assert last["eval_average"] == pytest.approx(np.mean([last["eval_rte_accuracy"], last["eval_mrpc_f1"],
                                                           last["eval_stsb_spearmanr"]]))
    # 10 + 12 + 10 examples in batches of 4: 3 + 3 + 3 batches an epoch
    assert max(r["step"] for r in records) == 18
    report = (output / "report.md").read_text()
    assert "| rte | 10 | 3 | 33.3% |" in report and "| average | rte_accuracy | mrpc_f1 | stsb_spearmanr |" in report


def test_saved_folder_holds_the_shared_encoder_and_every_head(run):
    output, _ = run
    best = output / "best"
    tasks = json.loads((best / "multitask.json").read_text())["tasks"]
    assert list(tasks) == ["rte", "mrpc", "stsb"]
    encoder = load_file(best / "model.safetensors")
    heads = {}
    for task in tasks:
        weights = load_file(best / "tasks" / task / "model.safetensors")
        for key, value in encoder.items():  # the same encoder in every task's model
            assert torch.equal(weights[f"bert.{key}"], value), (task, key)
        heads[task] = weights["classifier.weight"]
        spec = json.loads((best / "tasks" / task / "bertkit_task.json").read_text())
        assert spec["glue_task"] == task and spec["regression"] == (task == "stsb")
    assert heads["stsb"].shape[0] == 1 and heads["rte"].shape[0] == 2
    assert not torch.equal(heads["rte"], heads["mrpc"])  # a head per task
    # transformers reads a task's folder as a whole model (the logits as ours)
    import transformers

    from bertkit.inference.loading import load_finetuned

    theirs = transformers.BertForSequenceClassification.from_pretrained(best / "tasks" / "mrpc").eval()
    ours = load_finetuned(best / "tasks" / "mrpc", device="cpu").model
    ids = torch.tensor([[2, 10, 11, 3, 12, 13, 3]])
    with torch.no_grad():
        torch.testing.assert_close(ours(input_ids=ids).logits, theirs(input_ids=ids).logits, atol=1e-5, rtol=0)


def test_predict_and_evaluate_take_a_task_of_the_saved_folder(run, glue, capsys):
    output, _ = run
    best = output / "best"
    assert main(["predict", "--task", "rte", "--model", str(best), "A man sleeps.", "Nobody sleeps."]) == 0
    rows = stdout_jsonl(capsys.readouterr().out)
    assert len(rows) == 1 and rows[0]["label"] in ("entailment", "not_entailment")
    assert main(["predict", "--task", "sts-b", "--model", str(best), "A man sleeps.", "Nobody sleeps."]) == 0
    assert "score" in stdout_jsonl(capsys.readouterr().out)[0]
    assert main(["evaluate", "glue", "--task", "sts-b", "--model", str(best), "--data", str(glue / "STS-B"),
                 "--no-progress"]) == 0
    scored = json.loads(capsys.readouterr().out)
    recorded = json.loads((best / "best_metrics.json").read_text())
    assert scored["spearmanr"] == pytest.approx(recorded["eval_stsb_spearmanr"], abs=1e-4)
    assert main(["predict", "--model", str(best), "A man sleeps."]) == 1
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "multi-task checkpoint (rte, mrpc, stsb); choose one with --task" in err


def test_per_task_finetuning_starts_from_the_shared_encoder(run, glue, tmp_path, capsys):
    output, _ = run
    assert main(["finetune", "glue", "--task", "rte", "--data", str(glue / "RTE"), "--model", str(output / "final"),
                 "--output-dir", str(tmp_path / "rte"), "--batch-size", "4", "--max-seq-length", "32",
                 "--max-train-samples", "4", "--epochs", "1", *QUIET]) == 0
    err = capsys.readouterr().err
    fresh = [line for line in err.splitlines() if "initialised fresh" in line]
    assert fresh == [f"bertkit: BertForSequenceClassification from {output / 'final'}: "
                     "initialised fresh: classifier.bias, classifier.weight"]
    assert (tmp_path / "rte" / "best" / "model.safetensors").is_file()


@pytest.mark.parametrize("tasks, message", [
    ("rte,nope", "field 'tasks': 'nope' is not a GLUE task"),
    ("rte,rte", "field 'tasks': rte is named twice"),
    ("rte,cola", "field 'tasks': cola: no folder"),
    ("mnli,rte", "with train.tsv and dev_matched.tsv); add it or drop mnli from --tasks"),
    ("rte,qnli", "field 'tasks': qnli: no {glue}/QNLI/train.tsv (each task's folder needs train.tsv and dev.tsv); "
                 "add it or drop qnli from --tasks"),
])
def test_bad_tasks_fail_in_one_line_naming_the_field(tasks, message, glue, tiny_model_dir, tmp_path, capsys):
    message = message.format(glue=glue)
    (glue / "QNLI").mkdir(exist_ok=True)  # as the shared data's: a dev set and no training set
    shutil.copy(glue / "RTE" / "dev.tsv", glue / "QNLI" / "dev.tsv")
    code = main(["finetune", "multitask", "--tasks", tasks, "--data", str(glue), "--model", str(tiny_model_dir),
                 "--output-dir", str(tmp_path / "x"), *QUIET])
    err = capsys.readouterr().err.strip()
    assert code == 1 and err.count("\n") == 0 and message in err, err
    assert not (tmp_path / "x").exists()


def test_config_checks_tasks_without_the_command():
    from bertkit.finetuning_multitask import MultitaskConfig

    assert MultitaskConfig(tasks=["SST-2", "sts-b"]).tasks == ["sst2", "stsb"]
    with pytest.raises(ConfigError, match="field 'tasks': 'ax' has no training set"):
        MultitaskConfig(tasks=["ax"])
