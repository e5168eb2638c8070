"""experiments/budget_downstream.py's pure pieces: run_mlm's grouping, the calibrated step
count, the wall-clock callback (a fake clock), and the targets' verdicts."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "experiments"))
import budget_downstream as bd  # noqa: E402


def test_group_texts_concatenates_and_drops_the_remainder():
    examples = {"input_ids": [[1, 2, 3], [4, 5], [6, 7, 8, 9]], "special_tokens_mask": [[1, 0, 1], [0, 0], [1, 0, 0, 1]]}
    grouped = bd.group_texts(examples, 4)
    assert grouped == {"input_ids": [[1, 2, 3, 4], [5, 6, 7, 8]], "special_tokens_mask": [[1, 0, 1, 0], [0, 1, 0, 0]]}
    assert bd.group_texts({"input_ids": [[1, 2]]}, 4) == {"input_ids": []}


def test_hf_blocks_group_within_each_map_batch(monkeypatch):
    monkeypatch.setattr(bd, "RUN_MLM_MAP_BATCH", 2)

    def tokenizer(lines, return_special_tokens_mask):  # each line "n" -> [CLS] n tokens [SEP]
        ids = [[101] + [int(line)] * int(line) + [102] for line in lines]
        zeros = [[0] * len(x) for x in ids]
        return {"input_ids": ids, "token_type_ids": zeros, "attention_mask": [[1] * len(x) for x in ids],
                "special_tokens_mask": [[1] + [0] * (len(x) - 2) + [1] for x in ids]}

    blocks = bd.hf_blocks(tokenizer, ["1", "2", "3"], 4)
    # batch ["1", "2"]: 3 + 4 = 7 ids -> one block, 3 dropped; batch ["3"]: 5 ids -> one block, 1 dropped
    assert [b["input_ids"] for b in blocks] == [[101, 1, 102, 101], [101, 3, 3, 3]]
    assert blocks[0]["special_tokens_mask"] == [1, 0, 1, 1] and set(blocks[0]) == {
        "input_ids", "token_type_ids", "attention_mask", "special_tokens_mask"}


def test_calibration_sets_max_steps_to_end_the_decay_at_the_budget():
    ends = [0.0, 5.0, 5.5, 6.0, 6.5, 7.0]  # a slow first step, then 0.5 s a step
    assert bd.seconds_per_step(ends, skip=1) == pytest.approx(0.5)
    assert bd.steps_for_budget(60.0, 0.5) == 120 and bd.steps_for_budget(60.0, 0.7) == 86
    assert bd.steps_for_budget(1.0, 5.0) == 1
    with pytest.raises(ValueError, match="calibration"):
        bd.seconds_per_step([1.0, 2.0], skip=1)


class FakeClock:
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


def test_wall_clock_callback_stops_on_time_and_marks_each_tenth():
    from transformers import TrainerControl, TrainerState

    clock, marks = FakeClock(), []
    callback = bd.make_wall_clock_callback(10.0, 10, lambda model, elapsed, step: marks.append((model, elapsed, step)),
                                           clock=clock)
    state, control = TrainerState(), TrainerControl()
    callback.on_train_begin(None, state, control)
    for step, now in enumerate([100.5, 101.2, 101.3, 103.5, 109.9], start=1):
        clock.now, state.global_step = now, step
        callback.on_step_end(None, state, control, model="m")
        assert not control.should_training_stop
    # 1.2 s passes the 1 s mark; 3.5 s passes 2 and 3 s at once: one mark, the next due at 4 s
    assert [(round(e, 1), s) for _, e, s in marks] == [(1.2, 2), (3.5, 4), (9.9, 5)] and marks[0][0] == "m"
    clock.now, state.global_step = 110.0, 6
    callback.on_step_end(None, state, control, model="m")
    assert control.should_training_stop and callback.stopped_by_budget and callback.elapsed == pytest.approx(10.0)
    assert len(marks) == 3  # no mark at the end: the final model is saved after training


TASKS = bd.CORPORA["en"]["tasks"]


def test_verdicts_say_each_target_met_or_missed():
    scores = {("bertkit", "sst2", "accuracy"): [80.0, 82.0], ("random", "sst2", "accuracy"): [77.0, 77.0],
              ("hf", "sst2", "accuracy"): [79.0],
              ("bertkit", "mrpc", "f1"): [80.0], ("random", "mrpc", "f1"): [81.0], ("hf", "mrpc", "f1"): [81.0],
              ("bertkit", "mrpc", "accuracy"): [70.0], ("random", "mrpc", "accuracy"): [69.0],
              ("hf", "mrpc", "accuracy"): [69.0]}
    lines = bd.verdicts(scores, TASKS, {"bertkit": 5.1, "hf": 5.5}, {"bertkit": 5.0, "hf": 4.9})
    assert lines == ["SST-2 accuracy: (a) - (c) = +4.0 points, target >= 3: met",
                     "(a) not worse than (c) on every task metric: MISSED (MRPC f1 -1.0)",
                     "(a) higher than (b) on every task metric: MISSED (MRPC f1 -1.0)",
                     "(a)'s held-out MLM loss below (b)'s: 5.100 vs 5.500: met",
                     "(a)'s held-out MLM loss below (b)'s (64-token set): 5.000 vs 4.900: MISSED"]
    scores[("bertkit", "sst2", "accuracy")] = [79.0]
    assert bd.verdicts(scores, TASKS, {})[0] == "SST-2 accuracy: (a) - (c) = +2.0 points, target >= 3: MISSED"
    assert bd.verdicts({}, bd.CORPORA["ko"]["tasks"], {})[:2] == [
        "NSMC accuracy: (a) - (c) >= 3 points: not measured yet", "(a) vs (c) downstream: not measured yet"]


def test_three_arms_pretrain_at_equal_time_and_are_scored_on_one_held_out_set(tmp_path, capsys):
    fixture = REPO / "tests" / "fixtures" / "austen_small.txt"
    small = ["model.hidden_size=32", "model.intermediate_size=64", "model.num_attention_heads=2", "batch_size=8"]
    args = ["--work-dir", str(tmp_path), "--threads", "1", "run", "--budget", "2s", "--corpus-file", str(fixture),
            "--vocab-size", "400", "--calibration-steps", "6", "--pretrain-only"] + [f"--set={v}" for v in small]
    assert bd.main(args) == 0
    rows = bd.read_results(tmp_path)
    assert list(rows) == ["pt-bertkit-en", "pt-hf-en", "pt-random-en"]
    hf = rows["pt-hf-en"]
    assert hf["steps"] > 0 and hf["ended_by"] in ("budget", "max_steps") and hf["training_seconds"] < 10
    assert hf["curve"][-1]["final"] and all(0 <= r["common_mlm_accuracy"] <= 100 for r in rows.values())
    assert all(0 <= r["common64_mlm_accuracy"] <= 100 for r in rows.values())  # the 64-token score too
    assert "--data " + str(tmp_path / "en" / "data-packed-64") in rows["pt-bertkit-en"]["command"]  # the recipe's data
    like = json.loads((tmp_path / "en" / "runs" / "bertkit" / "final" / "config.json").read_text())
    theirs = json.loads((tmp_path / "en" / "runs" / "hf" / "final" / "config.json").read_text())
    assert (theirs["hidden_size"], theirs["vocab_size"], theirs["architectures"]) == (32, like["vocab_size"],
                                                                                     ["BertForMaskedLM"])
    assert (tmp_path / "curves-en.png").stat().st_size > 0
    table = (tmp_path / "results.md").read_text()
    assert "| (b) transformers run_mlm-style |" in table and "(a)'s held-out MLM loss below (b)'s" in table
    assert bd.main(args) == 0  # recorded steps are skipped
    assert "pt-hf-en: recorded, skipped" in capsys.readouterr().out


def test_arms_run_apart_with_the_size_of_another_model(tmp_path):
    """--arms hf --like M: (b) alone, its size taken from M, not from (a)'s run (which may still run)."""
    fixture = REPO / "tests" / "fixtures" / "austen_small.txt"
    small = ["model.hidden_size=32", "model.intermediate_size=64", "model.num_attention_heads=2", "batch_size=8"]
    common = ["--threads", "1", "run", "--budget", "2s", "--corpus-file", str(fixture), "--vocab-size", "400",
              "--calibration-steps", "6", "--pretrain-only"] + [f"--set={v}" for v in small]
    assert bd.main(["--work-dir", str(tmp_path / "first"), *common, "--arms", "bertkit"]) == 0
    like = tmp_path / "first" / "en" / "runs" / "bertkit" / "final"
    assert bd.main(["--work-dir", str(tmp_path / "second"), *common, "--arms", "hf", "--like", str(like)]) == 0
    assert list(bd.read_results(tmp_path / "second")) == ["pt-hf-en"]
    theirs = json.loads((tmp_path / "second" / "en" / "runs" / "hf" / "final" / "config.json").read_text())
    assert theirs["hidden_size"] == 32 and not (tmp_path / "second" / "en" / "runs" / "bertkit").exists()


def test_fine_tuning_fields_reach_every_run_and_the_table(tmp_path, monkeypatch):
    """--ft-set KEY=VALUE: passed to each fine-tuning command as --set and named in the table."""
    import ablations

    commands = []

    def fake_run(command, log):
        commands.append(command)
        best = Path(command[command.index("--output-dir") + 1]) / "best"
        best.mkdir(parents=True)
        (best / "best_metrics.json").write_text(json.dumps({"eval_accuracy": 80.0}))
        return 1.0

    monkeypatch.setattr(ablations, "run_command", fake_run)
    cut = {"train": tmp_path / "train.tsv", "dev": tmp_path / "dev.tsv"}
    result = ablations.finetune(tmp_path, "ft-x", ["finetune", "glue", "--task", "sst2"], cut, tmp_path / "model",
                                epochs=1, lr=1e-4, seed=1, max_seq_length=32, metrics=("accuracy",),
                                log=tmp_path / "log", sets=("model.classifier_pooling=mean",))
    assert result["metrics"] == {"accuracy": 80.0}
    assert "--set=model.classifier_pooling=mean" in commands[0]
    for row in ({"step": "pt-bertkit-ko", "arm": "bertkit", "corpus": "ko", "budget": "60m", "preset": "tiny",
                 "steps": 5, "batch_size": 16, "common_mlm_loss": 5.0, "common_mlm_accuracy": 20.0},
                {"step": "ft-bertkit-nsmc-s1", "arm": "bertkit", "corpus": "ko", "task": "nsmc", "seed": 1,
                 "ft_sets": ["model.classifier_pooling=mean"], "metrics": {"accuracy": 80.0}}):
        bd.record(tmp_path, row)
    assert "### ko: budget 60m, preset tiny, fine-tuning model.classifier_pooling=mean" in bd.write_table(tmp_path).read_text()
