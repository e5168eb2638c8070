"""The batches each pre-training objective makes, recorded as fixtures (tests/fixtures/objective_batches/).

    PYTHONPATH=src python tests/objectives/_objective_batches.py [CASE ...]  # (re)writes the fixtures

Tiny data is built from the Austen fixture (as _successor_data does); for each case the
fixture holds the collated training batches at a few (seed, epoch, indices) and the
collated held-out batch, each key as saved by numpy (values and dtype). The test
(test_objective_batches.py) makes the same batches with the current code and compares
them bit for bit, so a refactoring of objectives, masking or data formats that changes
what a batch holds fails there.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import numpy as np

FIXTURE_DIR = Path(__file__).resolve().parents[1] / "fixtures" / "objective_batches"
# case -> (objective, data format, masking at build, extra --set fields)
CASES = {
    "mlm_nsp": ("mlm_nsp", "nsp", "dynamic", {}),
    "mlm_nsp_static": ("mlm_nsp", "nsp", "static", {}),
    "mlm": ("mlm", "sop", "dynamic", {}),
    "mlm_whole_word": ("mlm", "packed", "dynamic", {"masking": "whole_word", "max_predictions_per_seq": "6"}),
    "roberta": ("roberta", "packed", "dynamic", {}),
    "spanbert": ("spanbert", "packed", "dynamic", {}),
    "ltr": ("ltr", "nsp", "dynamic", {}),
    "electra": ("electra", "nsp", "dynamic", {}),
    "albert": ("albert", "sop", "dynamic", {}),
    "xlnet": ("xlnet", "xlnet", "dynamic", {}),
    "t5": ("t5", "packed", "dynamic", {}),
    "clm": ("clm", "packed", "dynamic", {}),
    "bilm": ("bilm", "packed", "dynamic", {"softmax_words": "100"}),
    "bart": ("bart", "packed", "dynamic", {}),
}
# cases whose model family needs its own tokenizer and preset: case -> (tokenizer train flags, preset)
CASE_MODELS = {"t5": (["--algorithm", "unigram", "--vocab-size", "500", "--sentinels", "100"], "t5-tiny"),
               "clm": (["--algorithm", "bbpe", "--layout", "gpt2", "--vocab-size", "500"], "gpt-tiny"),
               "bilm": (None, "elmo-tiny"),
               "bart": (["--algorithm", "bbpe", "--vocab-size", "600", "--layout", "bart", "--lowercase"],
                        "bart-tiny")}  # lowercased: as the batches were recorded
TRAIN_DRAWS = [(42, 0), (42, 1), (7, 0)]  # (seed, epoch) of the recorded training batches
TRAIN_INDICES = [0, 3, 8, 13]
EVAL_INDICES = [0, 1, 2, 3]


def build_data(root: Path, instance_format: str, masking: str, tokenizer: list[str] | None = None) -> Path:
    """64-token `instance_format` data (masked at build when `masking` is static) from the Austen
    fixture, with a 400-token WordPiece tokenizer or one trained with the `tokenizer` flags."""
    from _successor_data import FIXTURE

    from bertkit.cli import main

    flags = tokenizer or ["--algorithm", "wordpiece", "--vocab-size", "400"]
    name = "-".join(flag.lstrip("-") for flag in flags) if tokenizer else ""
    tok = root / f"tok{name}"
    if not tok.exists():
        assert main(["tokenizer", "train", *flags, "--output", str(tok), "--no-progress", str(FIXTURE)]) == 0
    data = root / f"data-{instance_format}-{masking}{name}"
    if not data.exists():
        assert main(["data", "build", "--tokenizer", str(tok), "--max-seq-length", "64", "--format", instance_format,
                     "--masking", masking, "--output", str(data), "--eval-fraction", "0.2", "--no-progress",
                     str(FIXTURE)]) == 0
    return data




def case_batches(case: str, root: Path) -> dict[str, np.ndarray]:
    """Every recorded batch of `case`, flattened to "train-{seed}-{epoch}/{key}" and "eval/{key}" arrays."""
    from _successor_data import make_objective

    name, instance_format, masking, fields = CASES[case]
    tokenizer, preset = CASE_MODELS.get(case, (None, "tiny"))
    data = build_data(root, instance_format, masking, tokenizer)
    arrays: dict[str, np.ndarray] = {}
    objective = None
    for seed, epoch in TRAIN_DRAWS:
        objective = make_objective(name, data, seed, fields, preset)
        batch = objective.collate([objective.train_example(i, epoch) for i in TRAIN_INDICES])
        arrays.update({f"train-{seed}-{epoch}/{k}": v.numpy() for k, v in batch.items()})
    batch = objective.collate([objective.eval_example(i) for i in EVAL_INDICES])
    arrays.update({f"eval/{k}": v.numpy() for k, v in batch.items()})
    return arrays


def main(cases: list[str]) -> int:
    """(Re)write the fixtures of `cases` (all when empty): a new objective records its own only."""
    FIXTURE_DIR.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        for case in cases or CASES:
            np.savez_compressed(FIXTURE_DIR / f"{case}.npz", **case_batches(case, Path(tmp)))
            print(f"{case}: {(FIXTURE_DIR / f'{case}.npz').stat().st_size} bytes")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    sys.exit(main(sys.argv[1:]))
