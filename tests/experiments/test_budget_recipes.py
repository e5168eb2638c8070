"""experiments/budget_recipes.py runs its arms at equal wall time and scores them on the
common held-out set (a tiny corpus, two arms, a few seconds each)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "experiments"))
import budget_recipes  # noqa: E402

FIXTURE = REPO / "tests" / "fixtures" / "austen_small.txt"
SMALL = ["model.hidden_size=32", "model.intermediate_size=64", "model.num_attention_heads=2", "batch_size=8",
         "log_steps=1"]


def test_two_arms_run_and_make_a_table(tmp_path, capsys):
    args = ["--work-dir", str(tmp_path), "run", "--arms", "base", "mask40", "--budget", "3s", "--corpus", str(FIXTURE),
            "--vocab-size", "400", "--jobs", "2", "--threads", "1"] + [f"--set={value}" for value in SMALL]
    assert budget_recipes.main(args) == 0
    rows = [json.loads(line) for line in (tmp_path / "results.jsonl").read_text().splitlines()]
    assert sorted(r["arm"] for r in rows) == ["base", "mask40"]  # two at once: either may finish first
    for row in rows:
        assert row["steps"] > 0 and 0 <= row["common_mlm_accuracy"] <= 100 and row["common_mlm_loss"] > 0
    table = (tmp_path / "results.md").read_text()
    assert "| base | 3s |" in table and "mlm_probability=0.4" in table
    assert budget_recipes.main(args) == 0  # recorded arms are skipped
    assert "base seed 1: recorded, skipped" in capsys.readouterr().out
