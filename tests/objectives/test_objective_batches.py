"""Every objective's batches for a given (seed, epoch, index), and its held-out batches, are
bit-identical to the recorded ones (tests/fixtures/objective_batches/, written by
_objective_batches.py before objectives owned their batches)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from _objective_batches import CASES, FIXTURE_DIR, case_batches


@pytest.fixture(scope="module")
def data_root(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("objective_batches")


@pytest.mark.parametrize("case", sorted(CASES))
def test_batches_are_bit_identical_to_the_recorded_ones(case, data_root):
    with np.load(FIXTURE_DIR / f"{case}.npz") as recorded:
        expected = {key: recorded[key] for key in recorded.files}
    made = case_batches(case, data_root)
    assert sorted(made) == sorted(expected)
    for key, value in made.items():
        assert value.dtype == expected[key].dtype, key
        assert value.shape == expected[key].shape, key
        assert np.array_equal(value, expected[key]), key
