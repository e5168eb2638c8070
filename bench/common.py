"""Helpers shared by the benchmarks: locating ../shared/data and timing."""

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


def interleaved_best(
    candidates: dict[str, Callable[[], object]], repeats: int = 3, clock: Callable[[], float] = time.perf_counter
) -> tuple[dict[str, float], dict]:
    """Best (minimum) wall time of each candidate over `repeats` rounds, and its last result.

    Rounds are interleaved (A B A B ...), so a drift in machine load hits every candidate
    alike instead of biasing the ratio. `clock=time.process_time` times CPU instead of
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
    parser.add_argument("--cpu-time", action="store_true", help="time CPU seconds (with --threads 1) instead of wall")


def step_clock(parser, args) -> tuple[Callable[[], float], str]:
    """Set torch's threads from `args` (of `add_step_arguments`); the clock to time with and
    a header describing it (torch version, threads or GPU, wall or CPU time)."""
    import torch

    if args.cpu_time and args.threads != 1:
        parser.error("--cpu-time needs --threads 1")
    torch.set_num_threads(args.threads)
    where = f"{args.threads} thread(s)" if args.device == "cpu" else torch.cuda.get_device_name()
    header = f"torch {torch.__version__}, {where}, {'CPU' if args.cpu_time else 'wall'} time"
    return (time.process_time if args.cpu_time else time.perf_counter), header


def compare_steps(steps: dict[str, Callable[[], object]], device: str, repeats: int,
                  clock: Callable[[], float], tokens: int) -> dict[str, float]:
    """Warm each step up once (optimizer state, allocator, kernels), time them interleaved
    (best of `repeats`), print ms and tokens/s per step and the transformers / bertkit ratio."""
    candidates = {name: synchronized(step, device) for name, step in steps.items()}
    for step in candidates.values():
        step()
    times, _ = interleaved_best(candidates, repeats, clock)
    for name, seconds in times.items():
        print(f"  {name:14s} step {seconds * 1e3:8.1f} ms  {tokens / seconds:9.0f} tokens/s")
    print(f"  ratio transformers / bertkit: {times['transformers'] / times['bertkit']:.2f}")
    return times


def interleaved_median(
    candidates: dict[str, Callable[[], object]], repeats: int = 5, clock: Callable[[], float] = time.perf_counter
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
                    clock: Callable[[], float], unit: str, count: int) -> dict[str, float]:
    """Warm each step up once, time them interleaved (median of `repeats`), print ms and
    `unit`/s per step, the transformers / bertkit ratio and the load around the timing."""
    candidates = {name: synchronized(step, device) for name, step in steps.items()}
    for step in candidates.values():
        step()
    before = load_average()
    times, _ = interleaved_median(candidates, repeats, clock)
    for name, seconds in times.items():
        print(f"  {name:14s} {seconds * 1e3:8.1f} ms  {count / seconds:9.0f} {unit}/s")
    print(f"  ratio transformers / bertkit: {times['transformers'] / times['bertkit']:.2f}   "
          f"({before} before, {load_average()} after)")
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


def gemm_rate(shapes: list[tuple[int, int, int]], repeats: int = 10) -> float:
    """The best fp32 GEMM rate (FLOP/s) this machine reaches now, over (M, K, N) products of
    the step's own shapes with torch's current threads, by MKL (torch's matmul) or by oneDNN
    on a packed weight (often faster at these shapes): the most fp32 code gets here."""
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
                start = time.perf_counter()
                for _ in range(repeats):
                    product()
            best = max(best, 2.0 * m * k * n * repeats / (time.perf_counter() - start))
    return best


def report_floor(flops: float, rate: float, times: dict[str, float], target_ratio: float | None) -> None:
    """Print the step's arithmetic floor (its matmul FLOPs at the machine's best GEMM rate) and
    the largest transformers / bertkit ratio that floor allows (against `target_ratio`)."""
    floor = flops / rate
    most = times["transformers"] / floor
    verdict = "" if not target_ratio else (f": the target {target_ratio} is not ruled out by arithmetic" if most >= target_ratio
                                           else f": the target {target_ratio} is beyond any fp32 step on this machine")
    print(f"  floor: {flops / 1e9:.1f} GFLOP of matmuls a step (bertkit's, FlopCounterMode) at the best fp32 GEMM "
          f"rate measured now, {rate / 1e9:.0f} GFLOP/s = {floor * 1e3:.0f} ms; bertkit at {floor / times['bertkit']:.0%} "
          f"of it; the most any fp32 step could be is {most:.2f}x transformers{verdict}")
