"""Helpers shared by the benchmarks: locating ../shared/data and timing.

Every bench times with one `Clock`, chosen once per run (`clock_of(args)`: `--cpu-time` or
`--clock cpu` picks process CPU time, else wall time) and passed to everything it times: the
steps, the references and the arithmetic floor (`gemm_rate`). Nothing else in bench/ reads
`time` (tests/test_bench_floor.py checks), so a ratio never divides one clock by another.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Callable

REPO = Path(__file__).resolve().parents[1]


def data_dir() -> Path:
    """The shared data sets: $BERTKIT_DATA, else ../shared/data next to the repo."""
    path = Path(os.environ.get("BERTKIT_DATA", REPO.parent / "shared" / "data"))
    if not path.is_dir():
        sys.exit(f"bench: data directory {path} not found (set BERTKIT_DATA)")
    return path


class Clock:
    """The one clock a bench run reads: "wall" (`time.perf_counter`) or "cpu" (`time.process_time`,
    this process's CPU seconds over all its threads: steadier on a machine shared with other
    jobs, meaningful for one thread). On a GPU (`device` not "cpu") a wall reading first waits
    for the queued kernels; CPU time cannot see a GPU's work and is refused."""

    READERS = {"wall": time.perf_counter, "cpu": time.process_time}
    LABELS = {"wall": "wall time", "cpu": "CPU time"}

    def __init__(self, kind: str = "wall", device: str = "cpu"):
        if kind not in self.READERS:
            raise ValueError(f"clock: {kind!r} is not one of {', '.join(self.READERS)}")
        if kind == "cpu" and device != "cpu":
            raise ValueError(f"clock: CPU time does not see the kernels of device {device!r}; time it on the wall clock")
        self.kind, self.device = kind, device
        self._read = self.READERS[kind]

    @property
    def label(self) -> str:
        """"wall time" or "CPU time", printed beside every ratio timed with this clock."""
        return self.LABELS[self.kind]

    def __call__(self) -> float:
        if self.device != "cpu":
            import torch

            torch.cuda.synchronize()
        return self._read()

    def elapsed(self, fn: Callable[[], object]) -> tuple[float, object]:
        """Seconds `fn()` took on this clock, and what it returned."""
        start = self()
        value = fn()
        return self() - start, value

    def __repr__(self) -> str:
        return f"Clock({self.kind!r}, device={self.device!r})"


WALL = Clock("wall")


class BothClocks:
    """Wall and process CPU time of a `with` block (`.wall`, `.cpu`), and the 1-minute load
    average around it (`.load_before`, `.load_after`): for whole runs reported on both clocks,
    each ratio dividing like by like."""

    def __enter__(self):
        self.load_before = os.getloadavg()[0]
        self._wall, self._cpu = Clock("wall"), Clock("cpu")
        self.wall, self.cpu = self._wall(), self._cpu()
        return self

    def __exit__(self, *exc):
        self.wall = self._wall() - self.wall
        self.cpu = self._cpu() - self.cpu
        self.load_after = os.getloadavg()[0]


def clock_of(args, parser=None) -> Clock:
    """The run's clock from its options: CPU time when `--cpu-time` (or `--clock cpu`) was given,
    else wall time; on `args.device` when it has one. CPU time needs one thread (`--threads 1`),
    where the bench has a `--threads` option (`parser.error` names the option otherwise)."""
    kind = "cpu" if getattr(args, "cpu_time", False) or getattr(args, "clock", "wall") == "cpu" else "wall"
    threads = getattr(args, "threads", 1)
    if kind == "cpu" and threads != 1:
        message = "--cpu-time needs --threads 1 (CPU time sums the threads' seconds)"
        if parser is None:
            raise ValueError(message)
        parser.error(message)
    return Clock(kind, getattr(args, "device", "cpu"))


def interleaved_best(
    candidates: dict[str, Callable[[], object]], repeats: int = 3, clock: Clock = WALL
) -> tuple[dict[str, float], dict]:
    """Best (minimum) time of each candidate on `clock` over `repeats` rounds, and its last result.

    Rounds are interleaved (A B A B ...), so a drift in machine load hits every candidate
    alike instead of biasing the ratio. `clock=Clock("cpu")` times CPU instead of
    wall time (for one-thread runs on a machine shared with other jobs).
    """
    best = {name: float("inf") for name in candidates}
    results: dict[str, object] = {}
    for _ in range(repeats):
        for name, fn in candidates.items():
            start = clock()
            results[name] = fn()
            best[name] = min(best[name], clock() - start)
    return best, results


def synchronized(step: Callable[[], object], device: str) -> Callable[[], object]:
    """`step` followed by a CUDA synchronize on a GPU (so its time is the kernels' time); as is on CPU."""
    if device == "cpu":
        return step
    import torch

    def run():
        value = step()
        torch.cuda.synchronize()
        return value

    return run


def add_step_arguments(parser) -> None:
    """The options of a bertkit-vs-transformers training-step bench (bench_albert, bench_objectives_roberta)."""
    parser.add_argument("--sizes", nargs="+", default=["tiny", "mini"], choices=["tiny", "mini", "small", "medium", "base"])
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--seq-len", type=int, default=128)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--device", default="cpu", help="cpu or cuda (fp32 on both sides)")
    add_clock_argument(parser)


def add_clock_argument(parser) -> None:
    """`--cpu-time`: the run's one clock is process CPU time (with --threads 1) instead of wall."""
    parser.add_argument("--cpu-time", action="store_true",
                        help="time CPU seconds (with --threads 1) instead of wall, for the steps and the floor alike")


def step_clock(parser, args) -> tuple[Clock, str]:
    """Set torch's threads from `args` (of `add_step_arguments`); the run's one clock and a
    header describing it (torch version, threads or GPU, wall or CPU time)."""
    import torch

    clock = clock_of(args, parser)
    torch.set_num_threads(args.threads)
    where = f"{args.threads} thread(s)" if args.device == "cpu" else torch.cuda.get_device_name()
    return clock, f"torch {torch.__version__}, {where}, {clock.label}"


EQUAL = "-eq"  # suffix of a reference arm run with bertkit's optimizer


def reference_optimizers(model, name: str = "transformers", training=None, **shipped) -> dict[str, object]:
    """The reference arm's two optimizers, by arm name: `name`, as it ships (`torch.optim.AdamW(
    **shipped)`: by default the for-each implementation on a CPU, weight decay 0.01 on every
    parameter), and `name + EQUAL`, bertkit's own (the training loop's `build_optimizer` with
    `training`, a TrainingConfig, default its defaults: fused AdamW, decay on matrices only), so
    a ratio can leave the optimizer out. `model`: a module, or a tuple of modules that train together."""
    import torch

    from bertkit.training.config import TrainingConfig
    from bertkit.training.optim import build_optimizer

    module = torch.nn.ModuleList(model) if isinstance(model, (tuple, list)) else model
    return {name: torch.optim.AdamW(module.parameters(), **shipped),
            name + EQUAL: build_optimizer(module, training or TrainingConfig())}


def with_references(ours_step: Callable[[], object], optimizers: dict[str, object],
                    make_step: Callable[[object], Callable[[], object]]) -> dict[str, Callable[[], object]]:
    """The steps to compare: bertkit's, then the reference's once per optimizer of
    `reference_optimizers` (`make_step(optimizer)`), keyed by arm name."""
    return {"bertkit": ours_step, **{name: make_step(optimizer) for name, optimizer in optimizers.items()}}


def print_ratios(times: dict[str, float], clock: Clock, reference: str = "transformers", ours: str = "bertkit") -> str:
    """Print `reference` / `ours` time ratios on `clock`: as each ships and, where the run has the
    `reference + EQUAL` arm, with equal optimizers; returns the line."""
    line = f"  ratio {reference} / {ours} ({clock.label}, both sides): {times[reference] / times[ours]:.2f} as each ships"
    if reference + EQUAL in times:
        line += f", {times[reference + EQUAL] / times[ours]:.2f} equal optimizer (bertkit's fused AdamW, decay on matrices only)"
    print(line)
    return line


def compare_steps(steps: dict[str, Callable[[], object]], device: str, repeats: int,
                  clock: Clock, tokens: int) -> dict[str, float]:
    """Warm each step up once (optimizer state, allocator, kernels), time them interleaved
    (best of `repeats`) on `clock`, print ms and tokens/s per step and the transformers /
    bertkit ratios (as each ships; equal optimizer where a "transformers-eq" arm runs)."""
    candidates = {name: synchronized(step, device) for name, step in steps.items()}
    for step in candidates.values():
        step()
    times, _ = interleaved_best(candidates, repeats, clock)
    for name, seconds in times.items():
        print(f"  {name:15s} step {seconds * 1e3:8.1f} ms  {tokens / seconds:9.0f} tokens/s")
    print_ratios(times, clock)
    return times


def interleaved_median(
    candidates: dict[str, Callable[[], object]], repeats: int = 5, clock: Clock = WALL
) -> tuple[dict[str, float], dict]:
    """Like `interleaved_best`, but the median time of each candidate over its rounds (less
    flattering than the best, steadier than the mean under the odd slow round)."""
    import statistics

    times: dict[str, list[float]] = {name: [] for name in candidates}
    results: dict[str, object] = {}
    for _ in range(repeats):
        for name, fn in candidates.items():
            start = clock()
            results[name] = fn()
            times[name].append(clock() - start)
    return {name: statistics.median(values) for name, values in times.items()}, results


def load_average() -> str:
    """The machine's 1/5/15-minute load averages, printed with the figures (a shared machine's
    load explains a noisy run)."""
    return "load average " + " / ".join(f"{value:.2f}" for value in os.getloadavg())


def compare_medians(steps: dict[str, Callable[[], object]], device: str, repeats: int,
                    clock: Clock, unit: str, count: int) -> dict[str, float]:
    """Warm each step up once, time them interleaved (median of `repeats`) on `clock`, print ms
    and `unit`/s per step, the transformers / bertkit ratios and the load around the timing."""
    candidates = {name: synchronized(step, device) for name, step in steps.items()}
    for step in candidates.values():
        step()
    before = load_average()
    times, _ = interleaved_median(candidates, repeats, clock)
    for name, seconds in times.items():
        print(f"  {name:15s} {seconds * 1e3:8.1f} ms  {count / seconds:9.0f} {unit}/s")
    print_ratios(times, clock)
    print(f"  ({before} before, {load_average()} after)")
    return times


def rust_encode_batch(tokenizer_json, max_length: int, pad_id: int, pad_token: str, read_fields: bool,
                      padding_side: str = "right"):
    """The tokenizers library's own `encode_batch` on a saved tokenizer.json, truncating and
    padding as the bertkit call it is compared with (read_fields: also read ids, types, mask)."""
    from tokenizers import Tokenizer as RustTokenizer

    backend = RustTokenizer.from_file(str(tokenizer_json))
    backend.enable_truncation(max_length, strategy="longest_first")
    backend.enable_padding(direction=padding_side, pad_id=pad_id, pad_token=pad_token)

    def run(texts):
        encodings = backend.encode_batch(texts)
        if read_fields:
            return ([e.ids for e in encodings], [e.type_ids for e in encodings], [e.attention_mask for e in encodings])
        return encodings

    return run


def report_target(times: dict[str, float], target_ratio: float | None) -> None:
    """Print PASS/MISS for the reference/bertkit time ratio against `target_ratio` (None: no target)."""
    if target_ratio:
        ratio = times["transformers"] / times["bertkit"]
        print(f"  target >= {target_ratio}: {'PASS' if ratio >= target_ratio else 'MISS'}")


def matmul_flops(step: Callable[[], object]) -> float:
    """Matmul FLOPs of one call of `step` (forward, backward, optimizer) as torch's
    FlopCounterMode counts them (mm, addmm, bmm, baddbmm, SDPA, einsum's matmuls)."""
    from torch.utils.flop_counter import FlopCounterMode

    counter = FlopCounterMode(display=False)
    with counter:
        step()
    return float(counter.get_total_flops())


def repeated(fn: Callable[[], object], times: int) -> None:
    """Call `fn` `times` times, keeping none of its results alive."""
    for _ in range(times):
        fn()


def gemm_rate(shapes: list[tuple[int, int, int]], clock: Clock, repeats: int = 10) -> float:
    """The best fp32 GEMM rate (FLOP/s) this machine reaches now, over (M, K, N) products of
    the step's own shapes with torch's current threads, by MKL (torch's matmul) or by oneDNN
    on a packed weight (often faster at these shapes): the most fp32 code gets here. Timed on
    `clock`, the clock the step it is a floor for is timed on (no default: a wall-clock rate
    under a CPU-time step reads low on a loaded machine and flatters the step)."""
    import torch

    from bertkit.model.packed_linear import packed_matmul, packed_weights

    best = 0.0
    for m, k, n in shapes:
        a, weight = torch.randn(m, k), torch.randn(n, k)
        # MKL's product, then generate's packed path (packed on the warm-up's second call)
        for product in (lambda: a @ weight.t(), lambda: packed_matmul(a, weight)):
            with torch.no_grad(), packed_weights():
                for _ in range(3):
                    product()
                seconds, _ = clock.elapsed(lambda: repeated(product, repeats))
            best = max(best, 2.0 * m * k * n * repeats / seconds)
    return best


def report_floor(flops: float, rate: float, times: dict[str, float], target_ratio: float | None, clock: Clock) -> None:
    """Print the step's arithmetic floor (its matmul FLOPs at the machine's best GEMM rate, both
    timed on `clock`) and the largest transformers / bertkit ratio that floor allows (against
    `target_ratio`)."""
    floor = flops / rate
    most = times["transformers"] / floor
    verdict = "" if not target_ratio else (f": the target {target_ratio} is not ruled out by arithmetic" if most >= target_ratio
                                           else f": the target {target_ratio} is beyond any fp32 step on this machine")
    print(f"  floor: {flops / 1e9:.1f} GFLOP of matmuls a step (bertkit's, FlopCounterMode) at the best fp32 GEMM "
          f"rate measured now, {rate / 1e9:.0f} GFLOP/s = {floor * 1e3:.0f} ms; bertkit at {floor / times['bertkit']:.0%} "
          f"of it; the most any fp32 step could be is {most:.2f}x transformers{verdict} (rate and steps in {clock.label})")
