"""experiments/quality_table.py's subsets: seeded, disjoint, and a held-out part that does
not depend on how much of the rest is used for training (so every model is scored on the
same examples)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "experiments"))
from quality_table import split_indices, squad_subset  # noqa: E402

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "tasks"


def test_split_is_disjoint_seeded_and_held_out_is_stable():
    train, held = split_indices(100, 20, seed=7)
    assert len(held) == 20 and len(train) == 80 and not set(train) & set(held)
    assert sorted([*train, *held]) == list(range(100))
    small, held_again = split_indices(100, 20, seed=7, train=25)
    assert np.array_equal(held, held_again) and len(small) == 25 and set(small) <= set(train)
    assert not np.array_equal(split_indices(100, 20, seed=8)[1], held)


def test_squad_subset_keeps_layout_and_count():
    data = json.loads((FIXTURES / "squad_dev-v1.1.json").read_text(encoding="utf-8"))
    ids = [qa["id"] for a in data["data"] for p in a["paragraphs"] for qa in p["qas"]]
    subset, count = squad_subset(data, 3, seed=1)
    kept = [qa for a in subset["data"] for p in a["paragraphs"] for qa in p["qas"]]
    assert count == len(kept) == 3 and {qa["id"] for qa in kept} <= set(ids)
    assert [qa["id"] for qa in kept] == [i for i in ids if i in {qa["id"] for qa in kept}]  # file order kept
    assert all(p["qas"] for a in subset["data"] for p in a["paragraphs"]) and subset["version"] == data["version"]
    assert squad_subset(data, 3, seed=1) == (subset, 3)
    assert squad_subset(data, len(ids) + 5, seed=1)[1] == len(ids)
