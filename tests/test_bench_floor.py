"""bench/common.py: the arithmetic floor (the FLOP count of a step and the largest ratio it allows),
and the one clock every bench times with (the floor, the steps and the references alike)."""

from __future__ import annotations

import argparse
import ast
import inspect
import sys
import time
from pathlib import Path

import pytest
import torch

BENCH = Path(__file__).resolve().parents[1] / "bench"
sys.path.insert(0, str(BENCH))
from common import (EQUAL, WALL, Clock, clock_of, compare_steps, gemm_rate, matmul_flops,  # noqa: E402
                    reference_optimizers, report_floor)

# the readings of a clock: only bench/common.py's Clock may take them
CLOCK_READERS = {"perf_counter", "perf_counter_ns", "process_time", "process_time_ns", "time", "time_ns",
                 "monotonic", "monotonic_ns", "thread_time", "thread_time_ns", "clock_gettime"}


class TickClock(Clock):
    """A CPU-kind clock that advances one second a reading: what it times is known exactly."""

    def __init__(self):
        super().__init__("cpu")
        self.now = 0.0

    def __call__(self) -> float:
        self.now += 1.0
        return self.now


def test_matmul_flops_counts_a_training_step_s_products():
    layer = torch.nn.Linear(8, 4, bias=False)
    x = torch.randn(5, 8)

    def step():
        layer(x).sum().backward()

    # forward 2*5*8*4; backward: the weight's gradient (another 2*5*8*4); x needs none
    assert matmul_flops(step) == 2 * (2 * 5 * 8 * 4)


def test_the_floor_names_the_largest_ratio_and_whether_the_target_is_beyond_it(capsys):
    assert gemm_rate([(16, 16, 16)], WALL, repeats=2) > 0
    times = {"bertkit": 2.0, "transformers": 3.0}
    report_floor(100e9, 100e9, times, 3.0, Clock("cpu"))  # floor 1 s: at most 3.0x transformers
    out = capsys.readouterr().out
    assert "= 1000 ms" in out and "bertkit at 50% of it" in out and "3.00x transformers" in out
    assert "not ruled out" in out and "rate and steps in CPU time" in out
    report_floor(150e9, 100e9, times, 3.0, WALL)  # floor 1.5 s: at most 2x
    out = capsys.readouterr().out
    assert "beyond any fp32 step" in out and "in wall time" in out


def test_the_gemm_rate_is_timed_on_the_clock_it_is_given():
    # each timed block reads the clock twice: one second a block, `repeats` products in it
    assert gemm_rate([(16, 16, 16)], TickClock(), repeats=3) == 2.0 * 16**3 * 3
    assert inspect.signature(gemm_rate).parameters["clock"].default is inspect.Parameter.empty


def test_the_run_s_clock_comes_from_its_options():
    assert clock_of(argparse.Namespace()).kind == "wall"
    assert clock_of(argparse.Namespace(cpu_time=False, threads=2)).label == "wall time"
    cpu = clock_of(argparse.Namespace(cpu_time=True, threads=1))
    assert cpu.kind == "cpu" and cpu.label == "CPU time"
    assert clock_of(argparse.Namespace(clock="cpu", threads=1)).kind == "cpu"
    with pytest.raises(ValueError, match="--threads 1"):
        clock_of(argparse.Namespace(cpu_time=True, threads=2))
    parser = argparse.ArgumentParser()
    with pytest.raises(SystemExit):
        clock_of(argparse.Namespace(cpu_time=True, threads=2), parser)
    with pytest.raises(ValueError, match="wall clock"):
        Clock("cpu", device="cuda")
    with pytest.raises(ValueError, match="'sundial' is not one of wall, cpu"):
        Clock("sundial")


def test_cpu_time_does_not_count_a_sleep_and_wall_time_does():
    cpu_seconds, _ = Clock("cpu").elapsed(lambda: time.sleep(0.05))
    wall_seconds, value = WALL.elapsed(lambda: time.sleep(0.05) or "done")
    assert cpu_seconds < 0.03 and wall_seconds >= 0.05 and value == "done"


def test_a_step_comparison_prints_its_clock_and_both_ratios(capsys):
    steps = {"bertkit": lambda: None, "transformers": lambda: None, "transformers" + EQUAL: lambda: None}
    times = compare_steps(steps, "cpu", 2, TickClock(), tokens=10)
    assert times == {"bertkit": 1.0, "transformers": 1.0, "transformers-eq": 1.0}
    out = capsys.readouterr().out
    assert "(CPU time, both sides): 1.00 as each ships, 1.00 equal optimizer" in out


def test_the_reference_gets_bertkit_s_optimizer_beside_its_own():
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.LayerNorm(4))
    optimizers = reference_optimizers(model)
    shipped, equal = optimizers["transformers"], optimizers["transformers-eq"]
    # as transformers' scripts build it: every parameter decays, torch's default implementation
    assert [len(g["params"]) for g in shipped.param_groups] == [4] and shipped.param_groups[0]["weight_decay"] == 0.01
    assert not shipped.param_groups[0]["fused"]
    # bertkit's loop: fused, the matrix alone decays
    assert [(len(g["params"]), g["weight_decay"]) for g in equal.param_groups] == [(1, 0.01), (3, 0.0)]
    assert all(g["fused"] for g in equal.param_groups)
    shared = reference_optimizers((model, torch.nn.Sequential(model[0])), name="ref", betas=(0.9, 0.98))
    assert sorted(shared) == ["ref", "ref-eq"] and len(shared["ref"].param_groups[0]["params"]) == 4
    assert shared["ref"].param_groups[0]["betas"] == (0.9, 0.98)


def clock_readings(path: Path) -> list[str]:
    """`line: text` of every place `path` reads a clock itself (time.perf_counter and the like,
    called or passed around, or imported from time), outside bench/common.py's Clock class."""
    tree = ast.parse(path.read_text(), str(path))
    allowed = set()
    if path.name == "common.py":
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef) and node.name == "Clock":
                allowed = {id(inner) for inner in ast.walk(node)}
    found = []
    for node in ast.walk(tree):
        if id(node) in allowed:
            continue
        if isinstance(node, ast.Attribute) and node.attr in CLOCK_READERS and isinstance(node.value, ast.Name) \
                and node.value.id == "time":
            found.append(f"{path.name}:{node.lineno}: time.{node.attr}")
        if isinstance(node, ast.ImportFrom) and node.module == "time":
            found += [f"{path.name}:{node.lineno}: from time import {a.name}" for a in node.names if a.name in CLOCK_READERS]
    return found


def test_no_bench_reads_a_clock_of_its_own():
    """A bench that timed one side (or its floor) with time.perf_counter and the other with the
    run's clock would divide one clock by another: every reading goes through common.Clock."""
    files = sorted(BENCH.glob("*.py"))
    assert len(files) > 20
    assert [found for path in files for found in clock_readings(path)] == []


def test_the_clock_check_sees_a_mixed_bench(tmp_path):
    mixed = tmp_path / "bench_mixed.py"
    mixed.write_text("import time\nfrom time import process_time\n"
                     "def run(clock):\n    start = time.perf_counter()\n    rate = gemm_rate(shapes, clock)\n"
                     "    return interleaved_best(steps, 3, time.process_time)\n")
    assert sorted(clock_readings(mixed)) == ["bench_mixed.py:2: from time import process_time",
                                             "bench_mixed.py:4: time.perf_counter", "bench_mixed.py:6: time.process_time"]
