"""Benchmark: BigBird's block-sparse attention against full attention on long inputs.

A bigbird-tiny encoder (2 layers, hidden 128, block 16, 3 random blocks; a 4,000-piece vocabulary),
eval mode, one sequence of 512 / 1,024 / 2,048 / 3,072 / 4,096 tokens: the forward's time (interleaved rounds, best of
`--repeats`, one clock for both) and its peak memory (how far the resident set rises above its level before
one forward, sampled every millisecond, each in a fresh child process), block_sparse vs original_full with the same weights.
Full attention's scores grow as T^2 per head, block-sparse ones as T * (7 + r) * block.

    python bench/bench_bigbird_lengths.py [--clock cpu --threads 1] [--output experiments/results/bigbird_lengths.json]
    python bench/bench_bigbird_lengths.py --plot-from experiments/results/bigbird_lengths.json   # docs/benchmarks/bigbird_lengths.png
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time

import torch

sys.path.insert(0, os.path.dirname(__file__))
from common import clock_of, interleaved_best, load_average  # noqa: E402

MODES = ("block_sparse", "original_full")
PLOT = "docs/benchmarks/bigbird_lengths.png"


def model(mode: str):
    from bertkit import BigBirdConfig, BigBirdModel

    torch.manual_seed(0)  # the same weights in both modes
    config = BigBirdConfig.from_preset("bigbird-tiny", vocab_size=4000, attention_type=mode)
    return BigBirdModel(config, add_pooling_layer=False).eval()


def inputs(length: int, batch: int) -> torch.Tensor:
    return torch.randint(5, 4000, (batch, length), generator=torch.Generator().manual_seed(length))


def resident_bytes() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def peak_growth_mib(mode: str, length: int, batch: int) -> float:
    """In this process: MiB the resident set rises above its level before one forward (after a warm-up),
    sampled every millisecond by a thread while the forward runs."""
    encoder = model(mode)
    ids = inputs(length, batch)
    with torch.no_grad():
        encoder(inputs(256, 1))
        before, peak, running = resident_bytes(), [0], [True]

        def sample() -> None:
            while running[0]:
                peak[0] = max(peak[0], resident_bytes())
                time.sleep(0.001)

        sampler = threading.Thread(target=sample)
        sampler.start()
        encoder(ids)
        running[0] = False
        sampler.join()
    return max(peak[0] - before, 0) / 2**20


def measure_memory(mode: str, length: int, batch: int, threads: int) -> float:
    done = subprocess.run([sys.executable, __file__, "--memory-of", mode, str(length), "--batch-size", str(batch),
                           "--threads", str(threads)], capture_output=True, text=True, check=True)
    return float(done.stdout.strip().splitlines()[-1])


def table(results: dict) -> str:
    """The markdown table of a results file (docs/successors.md's BigBird section)."""
    lines = [f"{results['model']}, batch {results['batch_size']}, {results['threads']} thread(s), "
             f"{results['clock']} (best of {results['repeats']}), load average {results['load_average'][0]:.1f}", "",
             "| tokens | block_sparse s | original_full s | full / sparse | block_sparse peak MiB | original_full peak MiB |",
             "|---|---|---|---|---|---|"]
    for row in results["rows"]:
        seconds, memory = row["seconds"], row["peak_mib"]
        lines.append(f"| {row['tokens']} | {seconds['block_sparse']:.3f} | {seconds['original_full']:.3f} | "
                     f"{seconds['original_full'] / seconds['block_sparse']:.2f} | {memory['block_sparse']:.0f} | "
                     f"{memory['original_full']:.0f} |")
    return "\n".join(lines)


def plot(results: dict, path: str) -> None:
    """Two panels from a results file: forward seconds and peak MiB against tokens, one line per mode."""
    from bertkit.plots import new_figure, save_png

    figure = new_figure(9, 3.6)
    tokens = [row["tokens"] for row in results["rows"]]
    for index, (key, title) in enumerate((("seconds", f"forward time, s ({results['clock']})"),
                                          ("peak_mib", "peak memory above baseline, MiB"))):
        axes = figure.add_subplot(1, 2, index + 1)
        for mode in MODES:
            axes.plot(tokens, [row[key][mode] for row in results["rows"]], marker="o", label=mode)
        axes.set_xlabel("tokens")
        axes.set_title(title, fontsize=10)
        axes.set_xticks(tokens)
        axes.grid(alpha=0.3)
        axes.legend(fontsize=8)
    figure.suptitle(f"{results['model']}, batch {results['batch_size']}, {results['threads']} thread(s), "
                    f"load average {results['load_average'][0]:.1f}", fontsize=9)
    figure.tight_layout()
    save_png(figure, path)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lengths", type=int, nargs="+", default=[512, 1024, 2048, 3072, 4096])
    parser.add_argument("--batch-size", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--clock", choices=("wall", "cpu"), default="wall")
    parser.add_argument("--output", help="write the figures as JSON here")
    parser.add_argument("--table", metavar="JSON", help="print the markdown table of a results file and stop")
    parser.add_argument("--plot", metavar="PNG", help=f"draw the figures as a PNG here (default with --plot-from: {PLOT})")
    parser.add_argument("--plot-from", metavar="JSON", help="draw the PNG of a results file and stop")
    parser.add_argument("--memory-of", nargs=2, metavar=("MODE", "LENGTH"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    if args.memory_of:
        print(peak_growth_mib(args.memory_of[0], int(args.memory_of[1]), args.batch_size))
        return
    if args.table:
        print(table(json.load(open(args.table))))
        return
    if args.plot_from:
        plot(json.load(open(args.plot_from)), args.plot or PLOT)
        return
    clock = clock_of(args, parser)
    models = {mode: model(mode) for mode in MODES}
    rows = []
    print(f"bigbird-tiny forward, batch {args.batch_size}, {args.threads} thread(s), {clock.label}, {load_average()}")
    for length in args.lengths:
        ids = inputs(length, args.batch_size)
        with torch.no_grad():
            times, _ = interleaved_best({mode: (lambda m=m: m(ids)) for mode, m in models.items()}, args.repeats, clock)
        memory = {mode: measure_memory(mode, length, args.batch_size, args.threads) for mode in MODES}
        rows.append({"tokens": length, "seconds": times, "peak_mib": memory})
        print(json.dumps(rows[-1]), flush=True)
    results = {"model": "bigbird-tiny (vocab 4000)", "batch_size": args.batch_size, "threads": args.threads,
               "clock": clock.label, "repeats": args.repeats, "load_average": os.getloadavg(), "rows": rows}
    print(table(results))
    if args.output:
        with open(args.output, "w") as out:
            json.dump(results, out, indent=1)
            out.write("\n")
    if args.plot:
        plot(results, args.plot)


if __name__ == "__main__":
    main()
