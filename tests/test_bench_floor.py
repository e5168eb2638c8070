"""bench/common.py's arithmetic floor: the FLOP count of a step and the largest ratio it allows."""

from __future__ import annotations

import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
from common import gemm_rate, matmul_flops, report_floor  # noqa: E402


def test_matmul_flops_counts_a_training_step_s_products():
    layer = torch.nn.Linear(8, 4, bias=False)
    x = torch.randn(5, 8)

    def step():
        layer(x).sum().backward()

    # forward 2*5*8*4; backward: the weight's gradient (another 2*5*8*4); x needs none
    assert matmul_flops(step) == 2 * (2 * 5 * 8 * 4)


def test_the_floor_names_the_largest_ratio_and_whether_the_target_is_beyond_it(capsys):
    assert gemm_rate([(16, 16, 16)], repeats=2) > 0
    times = {"bertkit": 2.0, "transformers": 3.0}
    report_floor(100e9, 100e9, times, 3.0)  # floor 1 s: at most 3.0x transformers
    out = capsys.readouterr().out
    assert "= 1000 ms" in out and "bertkit at 50% of it" in out and "3.00x transformers" in out
    assert "not ruled out" in out
    report_floor(150e9, 100e9, times, 3.0)  # floor 1.5 s: at most 2x
    assert "beyond any fp32 step" in capsys.readouterr().out
