"""Benchmark: bertkit's tokenizer trainers vs the `tokenizers` library's WordPieceTrainer.

Same corpus (default: ../shared/data/corpus-en/*.txt.gz, ~44M characters), same vocab
size (30000), same special tokens, one run of this script. Each trainer runs end to end
from the files (reading, normalizing, counting, merging) in a fresh process, so its
time and memory are its own:
  reference        tokenizers WordPieceTrainer, fed batches of lines of the gzip files
                   through `train_from_iterator` (BertNormalizer + BertPreTokenizer)
  wordpiece        bertkit, likelihood rule, default score gain (pure Python +
                   multiprocessing counting)
  wordpiece-pmi    the same with --score pmi
  wordpiece-freq   bertkit on the library's WordPieceTrainer (deterministic feeding)
  bpe, bbpe        bertkit on the library's BpeTrainer
Time is the wall time of the training call (best of --repeats). Peak memory is the
largest summed PSS (proportional set size: pages shared by forked workers are split
between them, not counted twice) of the process and its workers, sampled every 20 ms.
Targets: wordpiece (either score) <= 5x the reference time, the others <= 1.2x.
"""

from __future__ import annotations

import argparse
import glob
import json
import multiprocessing
import os
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(__file__))
from common import data_dir  # noqa: E402

TRAINERS = ["reference", "wordpiece", "wordpiece-pmi", "wordpiece-freq", "bpe", "bbpe"]
TARGETS = {"wordpiece": 5.0, "wordpiece-pmi": 5.0, "wordpiece-freq": 1.2, "bpe": 1.2, "bbpe": 1.2}

CHILD = r"""
import gzip, json, sys, time
name, vocab_size, files, workers = sys.argv[1], int(sys.argv[2]), json.loads(sys.argv[3]), int(sys.argv[4])
if name == "reference":
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, trainers
    def lines():  # batches of ~128 KiB of lines: cheaper than one line at a time
        for path in files:
            with (gzip.open if path.endswith(".gz") else open)(path, "rt", encoding="utf-8") as handle:
                while batch := handle.readlines(1 << 17):
                    yield batch
    start = time.perf_counter()
    tok = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    trainer = trainers.WordPieceTrainer(vocab_size=vocab_size, special_tokens=specials, show_progress=False)
    tok.train_from_iterator(lines(), trainer)
    size = tok.get_vocab_size()
else:
    from bertkit.tokenization.train import TrainOptions, train_tokenizer
    start = time.perf_counter()
    algorithm, score = ("wordpiece", "pmi") if name == "wordpiece-pmi" else (name, None)
    options = TrainOptions(
        algorithm=algorithm, score=score, vocab_size=vocab_size, workers=workers or None, show_progress=False
    )
    result = train_tokenizer(files, None, options)
    size = result.vocab_size
print(json.dumps({"seconds": time.perf_counter() - start, "vocab": size}))
"""


def tree_memory_bytes(root: int) -> int:
    """Summed proportional set size (PSS: shared pages split between the processes sharing
    them) of `root` and all its descendants (Linux /proc)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as handle:
                ppid = int(handle.read().rsplit(")", 1)[1].split()[1])
        except OSError:
            continue
        children.setdefault(ppid, []).append(int(entry))
    total, stack = 0, [root]
    while stack:
        pid = stack.pop()
        total += _pss_bytes(pid)
        stack.extend(children.get(pid, []))
    return total


def _pss_bytes(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/smaps_rollup") as handle:
            for line in handle:
                if line.startswith("Pss:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def run_one(name: str, vocab_size: int, files: list[str], workers: int) -> tuple[float, float, int]:
    """(seconds, peak MiB, vocab size) of one trainer in a fresh process."""
    proc = subprocess.Popen(
        [sys.executable, "-c", CHILD, name, str(vocab_size), json.dumps(files), str(workers)],
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
        sys.exit(f"bench: {name} failed (exit {proc.returncode})")
    result = json.loads(out.strip().splitlines()[-1])
    return result["seconds"], peak / 2**20, result["vocab"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("files", nargs="*", help="corpus files (default: corpus-en/*.txt.gz)")
    parser.add_argument("--vocab-size", type=int, default=30000)
    parser.add_argument("--repeats", type=int, default=1, help="runs per trainer; the best time counts")
    parser.add_argument("--workers", type=int, default=0, help="bertkit counting processes (0: all cores)")
    parser.add_argument("--only", nargs="+", choices=TRAINERS[1:], help="bertkit trainers to run (default: all)")
    args = parser.parse_args()
    files = args.files or sorted(glob.glob(str(data_dir() / "corpus-en" / "*.txt.gz")))
    names = ["reference"] + (args.only or TRAINERS[1:])
    chars = sum(os.path.getsize(f) for f in files)
    print(
        f"corpus: {len(files)} files ({chars / 2**20:.1f} MiB on disk), vocab {args.vocab_size}, "
        f"{multiprocessing.cpu_count()} cores, best of {args.repeats}, wall time of each trainer's own process"
    )
    results: dict[str, tuple[float, float, int]] = {}
    for _ in range(args.repeats):  # interleaved, so a busy moment hurts every trainer alike
        for name in names:
            seconds, peak, vocab = run_one(name, args.vocab_size, files, args.workers)
            best = results.get(name)
            results[name] = (min(seconds, best[0]) if best else seconds, max(peak, best[1]) if best else peak, vocab)
    ref_time, ref_peak, _ = results["reference"]
    print(f"{'trainer':<16}{'time s':>9}{'x ref':>8}{'target':>8}{'peak MiB':>10}{'x ref':>8}{'vocab':>8}")
    for name in names:
        seconds, peak, vocab = results[name]
        target = f"<={TARGETS[name]:.1f}" if name in TARGETS else ""
        ratios = f"{seconds / ref_time:>8.2f}{target:>8}{peak:>10.0f}{peak / ref_peak:>8.2f}"
        print(f"{name:<16}{seconds:>9.1f}{ratios}{vocab:>8}")


if __name__ == "__main__":
    main()
