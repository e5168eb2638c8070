"""Wall-clock budgets and recipes (issue 19): `--budget` parses or fails in one line, the
lr follows the fraction of the time spent (an injected clock, no sleeping), a `--budget 5s`
run stops on time with final/ saved and evaluated, a budget run resumes with its time
spent, and `--recipe budget` sets its defaults (each still overridable) and records them."""

from __future__ import annotations

import json
import time

import pytest

from bertkit.cli import main
from bertkit.errors import ConfigError
from bertkit.training.budget import BudgetClock, budget_lr_factor, describe_budget, parse_budget
from bertkit.training.config import TrainingConfig

from tests.training.test_resume import QUIET, TINY, build_data, one_line_error


@pytest.mark.parametrize("text, seconds", [("90s", 90), ("10m", 600), ("2h", 7200), ("1.5h", 5400), (" 5s ", 5)])
def test_budget_parses_seconds_minutes_hours(text, seconds):
    assert parse_budget(text) == seconds


@pytest.mark.parametrize("text", ["10", "10x", "m", "-5s", "0s", "1h30m", ""])
def test_bad_budget_is_one_line_naming_the_flag(text):
    with pytest.raises(ConfigError) as info:
        parse_budget(text)
    assert str(info.value).startswith("--budget ") and "\n" not in str(info.value)


def test_bad_budget_on_the_command_line_is_one_line(tmp_path, capsys):
    assert main(["pretrain", "--budget", "ten minutes", "--data", str(tmp_path), "--output-dir", str(tmp_path / "o")]) != 0
    assert "--budget 'ten minutes'" in one_line_error(capsys)


def test_describe_budget_round_trips():
    assert [describe_budget(parse_budget(t)) for t in ("90s", "10m", "2h", "90m")] == ["90s", "10m", "2h", "90m"]


def test_schedule_warms_up_then_decays_over_the_time_fraction():
    assert budget_lr_factor(0.0, 0.1) == 0.0
    assert budget_lr_factor(0.05, 0.1) == pytest.approx(0.5)
    assert budget_lr_factor(0.1, 0.1) == pytest.approx(1.0)
    assert budget_lr_factor(0.55, 0.1) == pytest.approx(0.5)
    assert budget_lr_factor(1.0, 0.1) == 0.0
    assert budget_lr_factor(1.3, 0.1) == 0.0  # past the budget (the last step): no negative lr
    assert budget_lr_factor(0.5, 0.0) == pytest.approx(0.5)  # no warm-up: decay from the start


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_clock_counts_restored_time_and_marks_evaluations():
    clock = FakeClock()
    budget = BudgetClock(100.0, evaluations=4, already=30.0, clock=clock)
    budget.start()
    assert budget.fraction() == pytest.approx(0.3)
    assert not budget.evaluation_due()  # the 25% mark was passed before the resume
    clock.now += 19.0
    assert not budget.evaluation_due()
    clock.now += 2.0  # 51%
    assert budget.evaluation_due() and not budget.evaluation_due()  # once per mark
    assert not budget.spent(reserve=10.0)
    clock.now += 40.0  # 91%
    assert budget.spent(reserve=10.0) and not budget.spent()
    assert budget_lr_factor(budget.fraction(), 0.1) == pytest.approx(0.1)


def test_budget_config_refuses_step_warmup():
    with pytest.raises(ConfigError, match="warmup_steps"):
        TrainingConfig(budget_seconds=60.0, warmup_steps=10)
    with pytest.raises(ConfigError, match="budget_seconds"):
        TrainingConfig(budget_seconds=0.0)


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    return build_data(tmp_path_factory.mktemp("budget"), "data", 400)


def budget_args(data, out, budget, *extra):
    return ["pretrain", "--recipe", "budget", "--budget", budget, "--preset", "tiny", "--data", str(data),
            "--output-dir", str(out), *TINY, *QUIET, "--set", "batch_size=8", "--set", "log_steps=1", *extra]


def records(out):
    return [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]


def test_budget_run_stops_on_time_saved_and_evaluated(data, tmp_path, capsys):
    out = tmp_path / "run"
    started = time.perf_counter()
    assert main(budget_args(data, out, "5s", "--set", "budget_evals=3")) == 0
    seconds = time.perf_counter() - started
    # the fixture's data is NSP pairs: the run goes on, with a note naming the data the recipe was measured on
    assert (f"{data}: nsp instances of 64 tokens; the budget recipe was measured on packed instances of 64 "
            "(bertkit data build --format packed --max-seq-length 64)") in capsys.readouterr().err
    assert (out / "final" / "model.safetensors").is_file()
    rows = records(out)
    last_step = max(r["step"] for r in rows)
    evals = [r for r in rows if "eval_mlm_accuracy" in r]
    assert evals and evals[-1]["step"] == last_step  # the final model is evaluated
    assert last_step < 1_000_000  # the budget ended it, not a step count
    saved = json.loads((out / "run_config.json").read_text())
    assert saved["budget_seconds"] == 5.0 and saved["recipe"] == "budget" and saved["objective"] == "mlm"
    assert saved["model"]["pre_layer_norm"] is True
    report = (out / "report.md").read_text()
    assert "| recipe | budget |" in report and "5s; spent" in report
    state_time = seconds  # setup (data, model) is outside the budget; the loop's share must be on time
    assert state_time < 5.0 * 1.05 + 30  # generous: loading and the final save on a shared machine
    spent = float(report.split("5s; spent ")[1].split("s")[0])
    assert 5.0 * 0.95 <= spent <= 5.0 * 1.05 + 2.0  # on time, plus at most one step and the final save


def test_budget_run_resumes_with_its_time_spent(data, tmp_path):
    out = tmp_path / "run"
    # first part: a 60s budget cut to a few steps by max_steps (the cap), a checkpoint at each step
    assert main(budget_args(data, out, "60s", "--set", "max_steps=3", "--set", "save_steps=1")) == 0
    from bertkit.training.checkpoints import load_training_state

    state = load_training_state(out / "checkpoint-0000003")
    spent_before = state["elapsed_seconds"]
    assert 0 < spent_before < 60
    # second part: resume with a budget that the first part has already mostly spent
    budget = f"{spent_before + 3:.0f}s"
    assert main(["pretrain", "--output-dir", str(out), "--resume", *QUIET, "--budget", budget,
                 "--set", "max_steps=1000000"]) == 0
    rows = records(out)
    resumed = [r for r in rows if "lr" in r and r["step"] > 3]
    assert resumed, "the resumed run trained"
    assert (out / "final" / "model.safetensors").is_file()
    # the time spent before the resume counts: the resumed part ran only the rest of the budget
    seconds = float(budget.removesuffix("s"))
    report = (out / "report.md").read_text()
    spent = float(report.split(f"{budget}; spent ")[1].split("s")[0])
    assert spent_before < spent <= seconds * 1.05 + 2.0
    assert "checkpoint-0000003 (step 3); changed:" in report and "budget_seconds" in report


@pytest.mark.parametrize("recipe, instance_format, length, noted", [
    ("budget", "packed", 64, False), ("budget", "packed", 128, True), ("budget", "nsp", 64, True),
    ("bert", "packed", 512, False)])  # `bert` is the plain defaults: no data is wrong for it
def test_recipe_data_note_only_when_a_budget_runs_on_other_data(monkeypatch, recipe, instance_format, length, noted):
    from types import SimpleNamespace

    from bertkit.data.dataset import PretrainingDataset
    from bertkit.pretraining import recipe_data_note

    info = SimpleNamespace(instance_format=instance_format, max_seq_length=length)
    monkeypatch.setattr(PretrainingDataset, "open", classmethod(lambda cls, directory, split: SimpleNamespace(info=info)))
    note = recipe_data_note(SimpleNamespace(recipe=recipe, data="d/", objective="mlm"))
    assert (note is not None) == noted
    if noted:
        assert note.startswith(f"d/: {instance_format} instances of {length} tokens; the budget recipe")


def test_recipe_defaults_stay_overridable(data, tmp_path):
    out = tmp_path / "run"
    assert main(budget_args(data, out, "3s", "--set", "lr=2e-4", "--set", "model.pre_layer_norm=false",
                            "--objective", "mlm_nsp")) == 0
    saved = json.loads((out / "run_config.json").read_text())
    assert saved["lr"] == 2e-4 and saved["model"]["pre_layer_norm"] is False and saved["objective"] == "mlm_nsp"
    assert saved["adam_beta2"] == 0.98  # the recipe's, not overridden


def test_demo_prints_examples_hits_and_the_summary(tmp_path, capsys):
    """`bertkit demo` on a small corpus for a few seconds: each example with the corpus's
    word and whether the top 5 holds it, the K of N line and the held-out accuracy line."""
    from tests.training.test_resume import FIXTURE

    assert main(["demo", "--output-dir", str(tmp_path), "--corpus", str(FIXTURE), "--vocab-size", "400",
                 "--budget", "4s", "--max-seq-length", "64", "--set", "progress=false", "--set", "model.hidden_size=32",
                 "--set", "model.intermediate_size=64", "--no-downstream"]) == 0
    out = capsys.readouterr().out
    words = [line.split("corpus's word: ")[1].split()[0] for line in out.splitlines() if "corpus's word: " in line]
    holds = [line.rsplit(" ", 1)[1] for line in out.splitlines() if "top 5 holds it: " in line]
    assert len(words) == 10 and set(holds) <= {"yes", "no"}
    assert f"fill-mask: {holds.count('yes')} of 10 examples have the corpus's word in the top 5" in out
    assert "held-out MLM accuracy " in out and "%) (step " not in out and " -> " in out
    assert (tmp_path / "run" / "final" / "model.safetensors").is_file() and (tmp_path / "run" / "report.md").is_file()
    # the examples were drawn before training and left out of the text it trained on
    trained_on = (tmp_path / "corpus.txt").read_text(encoding="utf-8")
    sentences = [line.strip() for line in out.splitlines() if "[MASK]" in line and line.startswith("  ")]
    assert len(sentences) == 10 and "paragraphs holding them are left out of the training text" in out
    assert "this CPU: " in out and "steps/s" in out


def test_two_process_budget_run_ends_together(data, tmp_path):
    """Under torchrun every process follows the main process's clock: the same lr, the same
    evaluations and the same last step (a rank that stopped alone would hang the other). The
    budget recipe's MLM-only objective leaves the NSP head without gradients, which stopped a
    DDP run before the head's output joined the loss at weight 0."""
    import os
    import subprocess
    import sys

    from tests.training.test_multiprocess_faults import BOUND, free_port

    out = tmp_path / "run"
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2", "--master-port", str(free_port()),
           "-m", "bertkit", *budget_args(data, out, "4s", "--set", "budget_evals=2")]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=BOUND)
    assert done.returncode == 0, done.stderr[-3000:]
    assert (out / "final" / "model.safetensors").is_file()
    rows = records(out)
    assert [r for r in rows if "eval_mlm_accuracy" in r][-1]["step"] == max(r["step"] for r in rows)


def test_demo_with_a_bad_budget_fails_before_any_work(tmp_path, capsys):
    assert main(["demo", "--output-dir", str(tmp_path / "demo"), "--budget", "ten minutes"]) != 0
    assert "--budget 'ten minutes'" in one_line_error(capsys)
    assert not (tmp_path / "demo" / "tokenizer").exists()  # nothing trained before the error


def test_demo_refuses_a_zero_sequence_length(tmp_path, capsys):
    """0 is a length the user gave, not 'unset': it is refused, not replaced by the recipe's 64."""
    from tests.training.test_resume import FIXTURE

    assert main(["demo", "--output-dir", str(tmp_path), "--corpus", str(FIXTURE), "--vocab-size", "400",
                 "--max-seq-length", "0", "--no-progress"]) != 0
    assert "max_seq_length=0" in one_line_error(capsys)


def test_the_budget_recipe_names_its_model_size_and_a_flag_still_wins():
    from bertkit.pretraining import build_config, with_recipe

    paths = {"data": "d", "output_dir": "o"}
    assert build_config(with_recipe(dict(paths), "budget"), {}).preset == "tiny"  # measured best at equal time
    assert build_config(with_recipe({**paths, "preset": "mini"}, "budget"), {}).preset == "mini"
    assert build_config(with_recipe(dict(paths), "bert"), {}).preset == "mini"  # the paper's recipe: unchanged
