"""The budget recipe's table (issue 19, deliverable 1): pre-training arms at equal wall time.

    python experiments/budget_recipes.py list                              # the arms
    python experiments/budget_recipes.py run --budget 10m --seeds 1 2      # every arm not yet done (resumable)
    python experiments/budget_recipes.py run --arms base post_ln --budget 20s --seeds 1
    python experiments/budget_recipes.py run --budget 6m --jobs 2 --threads 1   # two arms at once, one core each
    python experiments/budget_recipes.py table                             # results.md from results.jsonl

Every arm is `bertkit pretrain --recipe budget --budget B` plus its change (the base arm is
the budget recipe as RECIPES defines it), run as a subprocess with the same tokenizer,
corpus, seed(s) and budget. Each finished arm is scored on ONE common held-out set — the
held-out documents of the packed 128-token data, masked at 15% from the fixed eval seed —
so arms of another mask rate, sequence length or data format compare on the same tokens
(each run's own evaluations use its own masking, so they are kept but not compared).
Results: <work-dir>/results.jsonl (one object per arm and seed, appended; a recorded arm
is skipped) and <work-dir>/results.md (mean over seeds). Run it on a quiet machine: the
arms are equal in wall time, so the machine's load changes what each can do.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DATA = REPO.parent / "shared" / "data"
CORPUS = DATA / "corpus-en" / "austen_novels.txt.gz"
COMMON = ("packed", 128)  # the data variant whose held-out split scores every arm
# also scored at the shorter lengths some arms train at: a model trained on 64-token sequences has never
# trained the position embeddings past 64, so the 128-token set alone would judge those arms on untrained
# positions; the short sets hold the same held-out documents cut shorter (and are closer to the downstream
# tasks' lengths: an SST-2 sentence is ~25 tokens)
SHORT_SCORES = (("packed", 64), ("packed", 32))

# The table was measured against the provisional budget recipe (batch 32, 128-token packed data); the
# chosen recipe (RECIPES["budget"]: batch 16, RECIPE_DATA: 64-token packed data) is the arm seq64_batch16.
# Every arm starts from the provisional recipe's batch, so each row stays what it was.
TABLE_BASE = ["--set", "batch_size=32"]
# arm -> (data variant (format, max_seq_length), extra pretrain arguments); base = the provisional recipe
ARMS: dict[str, tuple[tuple[str, int], list[str]]] = {
    "base": (("packed", 128), []),
    "mlm_nsp": (("nsp", 128), ["--objective", "mlm_nsp"]),
    "post_ln": (("packed", 128), ["--set", "model.pre_layer_norm=false"]),
    "mask30": (("packed", 128), ["--set", "mlm_probability=0.3"]),
    "mask40": (("packed", 128), ["--set", "mlm_probability=0.4"]),
    "lr5e-4": (("packed", 128), ["--set", "lr=5e-4"]),
    "lr2e-3": (("packed", 128), ["--set", "lr=2e-3"]),
    "warmup0.3": (("packed", 128), ["--set", "warmup_ratio=0.3"]),
    "batch16": (("packed", 128), ["--set", "batch_size=16"]),
    "batch64": (("packed", 128), ["--set", "batch_size=64"]),
    # the recipe's batch (32) grown by accumulation from a quarter of it over the first half of the budget
    "ramp": (("packed", 128), ["--set", "batch_ramp_start=8", "--set", "batch_ramp_ratio=0.5"]),
    "seq64": (("packed", 64), []),
    "seq64_batch64": (("packed", 64), ["--set", "batch_size=64"]),  # seq 64 at the base's tokens per step
    "seq32_batch128": (("packed", 32), ["--set", "batch_size=128"]),
    "mini": (("packed", 128), ["--preset", "mini"]),
    "small": (("packed", 128), ["--preset", "small"]),
    "bert": (("nsp", 128), ["--recipe", "bert"]),  # the paper's defaults over the same budget (the control)
    # stage 2: one change at a time from the seq64 arm (64-token sequences, batch 32), the first stage's best
    "seq64_lr2e-3": (("packed", 64), ["--set", "lr=2e-3"]),
    "seq64_mask30": (("packed", 64), ["--set", "mlm_probability=0.3"]),
    "seq64_post_ln": (("packed", 64), ["--set", "model.pre_layer_norm=false"]),
    "seq64_batch16": (("packed", 64), ["--set", "batch_size=16"]),
    "seq64_batch8": (("packed", 64), ["--set", "batch_size=8"]),
    "seq64_mini": (("packed", 64), ["--preset", "mini"]),
    "seq32": (("packed", 32), []),
}


def bertkit(*args: str) -> list[str]:
    return [sys.executable, "-m", "bertkit", *args]


def run(command: list[str], log: Path) -> float:
    """Run `command` with its output appended to `log`; the wall time. Raises on failure, naming the log."""
    log.parent.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    with log.open("a", encoding="utf-8") as handle:
        handle.write("$ " + " ".join(command) + "\n")
        handle.flush()
        code = subprocess.call(command, stdout=handle, stderr=subprocess.STDOUT, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    if code:
        raise SystemExit(f"failed ({code}): {' '.join(command)} (log: {log})")
    return time.perf_counter() - started


def tokenizer(work: Path, corpus: Path, vocab_size: int, extra: tuple[str, ...] = ()) -> Path:
    """A WordPiece of `vocab_size` trained on `corpus` in work/tokenizer (`extra`: more
    `tokenizer train` flags, e.g. --morphemes kiwi); kept when already there."""
    target = work / "tokenizer"
    if not (target / "vocab.txt").is_file():
        run(bertkit("tokenizer", "train", "--algorithm", "wordpiece", "--vocab-size", str(vocab_size), *extra,
                    "--output", str(target), "--no-progress", str(corpus)), work / "logs" / "tokenizer.log")
    return target


def data(work: Path, corpus: Path, tok: Path, variant: tuple[str, int]) -> Path:
    fmt, length = variant
    target = work / f"data-{fmt}-{length}"
    if not any(target.glob("build-*.json")):  # a finished build writes its manifest last
        run(bertkit("data", "build", "--tokenizer", str(tok), "--format", fmt, "--max-seq-length", str(length),
                    "--output", str(target), "--no-progress", str(corpus)), work / "logs" / f"data-{fmt}-{length}.log")
    return target


def common_score(model_dir: Path, common_data: Path, prefix: str = "common") -> dict[str, float]:
    """Held-out MLM loss and accuracy of the model at `model_dir` on `common_data`'s eval
    split, 15% token masks from the fixed eval seed (the same tokens for every arm)."""
    import torch

    from bertkit.data.dataset import PretrainingDataset
    from bertkit.data.masking import MaskingConfig
    from bertkit.objectives.mlm_nsp import MlmObjective
    from bertkit.training.config import EVAL_SEED
    from bertkit.training.distributed import DistContext

    model = MlmObjective.load_model(model_dir).eval()
    train = PretrainingDataset.open(common_data, "train")
    objective = MlmObjective(model, train, PretrainingDataset.open(common_data, "eval"), MaskingConfig(), seed=0,
                             eval_seed=EVAL_SEED)
    with torch.no_grad():
        metrics = objective.evaluate(model, DistContext(), 32, None)
    return {f"{prefix}_mlm_accuracy": metrics["mlm_accuracy"], f"{prefix}_mlm_loss": metrics["mlm_loss"]}


def all_scores(model_dir: Path, work: Path, corpus: Path, tok: Path) -> dict[str, float]:
    """The common score (128 tokens) and the short ones (`common64_...`, `common32_...`)."""
    scores = common_score(model_dir, data(work, corpus, tok, COMMON))
    for variant in SHORT_SCORES:
        scores.update(common_score(model_dir, data(work, corpus, tok, variant), prefix=f"common{variant[1]}"))
    return scores


def rescore(args: argparse.Namespace) -> None:
    """Add the short scores to recorded arms that lack them (results.jsonl rewritten in place)."""
    import torch

    work, corpus = Path(args.work_dir), Path(args.corpus)
    tok = tokenizer(work, corpus, args.vocab_size)
    if args.threads:
        torch.set_num_threads(args.threads)
    rows = read_results(work)
    for row in rows:
        if f"common{SHORT_SCORES[-1][1]}_mlm_accuracy" not in row:
            row.update(all_scores(work / "runs" / f"{row['arm']}-{row['budget']}-seed{row['seed']}" / "final", work,
                                  corpus, tok))
    temporary = work / "results.jsonl.tmp"
    temporary.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    temporary.replace(work / "results.jsonl")
    write_table(work)


def read_results(work: Path) -> list[dict]:
    path = work / "results.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.exists() else []


def run_arms(args: argparse.Namespace) -> None:
    """Every (arm, seed) not yet recorded; `--jobs N` runs N at once (give each `--threads`:
    the arms must share the machine alike, so run them on an otherwise quiet one)."""
    import torch

    work = Path(args.work_dir)
    corpus = Path(args.corpus)
    tok = tokenizer(work, corpus, args.vocab_size)
    for variant in (COMMON, *SHORT_SCORES):
        data(work, corpus, tok, variant)
    done = {(r["arm"], r["seed"], r["budget"]) for r in read_results(work)}
    todo = []
    for arm in args.arms or list(ARMS):
        data(work, corpus, tok, ARMS[arm][0])  # built before any arm runs: concurrent arms share it
        for seed in args.seeds:
            if (arm, seed, args.budget) in done:
                print(f"{arm} seed {seed}: recorded, skipped")
            else:
                todo.append((arm, seed))
    if args.threads:
        torch.set_num_threads(args.threads)
    lock = threading.Lock()

    def run_one(arm: str, seed: int) -> None:
        variant, extra = ARMS[arm]
        out = work / "runs" / f"{arm}-{args.budget}-seed{seed}"
        threads = ["--threads", str(args.threads)] if args.threads else []
        command = bertkit("pretrain", "--recipe", "budget", "--budget", args.budget, "--preset", args.preset,
                          "--data", str(data(work, corpus, tok, variant)), "--output-dir", str(out), *threads,
                          "--overwrite", "--set", f"seed={seed}", "--set", "progress=false",
                          "--set", "tensorboard=false", *TABLE_BASE, *args.set_args, *extra)
        seconds = run(command, work / "logs" / f"{out.name}.log")
        rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
        own = [r for r in rows if "eval_mlm_accuracy" in r]
        result = {"arm": arm, "seed": seed, "budget": args.budget, "data": f"{variant[0]}-{variant[1]}",
                  "changes": " ".join(extra), "steps": max(r["step"] for r in rows), "wall_s": round(seconds, 1),
                  "threads": args.threads, "jobs": args.jobs,
                  "own_final_mlm_accuracy": own[-1]["eval_mlm_accuracy"] if own else None,
                  **all_scores(out / "final", work, corpus, tok), "load_average": os.getloadavg()[0]}
        with lock:
            with (work / "results.jsonl").open("a", encoding="utf-8") as handle:
                handle.write(json.dumps(result) + "\n")
            print(f"{arm} seed {seed}: {result['steps']} steps, common held-out MLM accuracy "
                  f"{result['common_mlm_accuracy']:.2f}%", flush=True)

    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        for future in [pool.submit(run_one, arm, seed) for arm, seed in todo]:
            future.result()
    write_table(work)


def write_table(work: Path) -> Path:
    """results.md: one row per arm and budget, mean over seeds (and each seed's value)."""
    groups: dict[tuple[str, str], list[dict]] = {}
    for row in read_results(work):
        groups.setdefault((row["arm"], row["budget"]), []).append(row)
    short = [f"common{length}" for _, length in SHORT_SCORES]
    lines = ["| arm | budget | change | data | seeds | steps (mean) | held-out MLM acc % (128 tokens) | "
             "held-out MLM loss (128) | " + " | ".join(f"acc % ({name[6:]})" for name in short) + " |",
             "|---|---|---|---|---|---|---|---|" + "---|" * len(short)]
    for (arm, budget), rows in sorted(groups.items(), key=lambda item: -_mean(item[1], "common_mlm_accuracy")):
        accuracies = ", ".join(f"{r['common_mlm_accuracy']:.2f}" for r in rows)
        shorts = " | ".join(f"{_mean(rows, name + '_mlm_accuracy'):.2f}" if all(name + "_mlm_accuracy" in r for r in rows)
                            else "-" for name in short)
        lines.append(f"| {arm} | {budget} | {rows[0]['changes'] or '(budget recipe)'} | {rows[0]['data']} | {len(rows)} | "
                     f"{_mean(rows, 'steps'):.0f} | {_mean(rows, 'common_mlm_accuracy'):.2f} ({accuracies}) | "
                     f"{_mean(rows, 'common_mlm_loss'):.3f} | {shorts} |")
    target = work / "results.md"
    target.write_text("\n".join(lines) + "\n", encoding="utf-8")
    print(target.read_text(), end="")
    return target


def _mean(rows: list[dict], key: str) -> float:
    return sum(r[key] for r in rows) / len(rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work-dir", default=str(REPO / "runs" / "budget-recipes"))
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("list")
    r = sub.add_parser("run")
    r.add_argument("--arms", nargs="+", choices=list(ARMS), help="default: every arm")
    r.add_argument("--budget", default="10m", help="wall-clock budget of every arm (default: 10m)")
    r.add_argument("--seeds", nargs="+", type=int, default=[1])
    r.add_argument("--preset", default="tiny")
    r.add_argument("--jobs", type=int, default=1, help="arms run at once (default: 1)")
    r.add_argument("--threads", type=int, help="torch threads of each arm (default: pretrain's own)")
    r.add_argument("--corpus", default=str(CORPUS))
    r.add_argument("--vocab-size", type=int, default=8192)
    r.add_argument("--set", dest="set_args", action="append", default=[], type=lambda v: f"--set={v}",
                   help="a pretrain field for every arm, e.g. --set model.hidden_size=32")
    sub.add_parser("table")
    s = sub.add_parser("rescore", help="add the short held-out scores to recorded arms that lack them")
    s.add_argument("--corpus", default=str(CORPUS))
    s.add_argument("--vocab-size", type=int, default=8192)
    s.add_argument("--threads", type=int)
    args = parser.parse_args(argv)
    if args.command == "list":
        for arm, (variant, extra) in ARMS.items():
            print(f"{arm:10s} {variant[0]}-{variant[1]:<4d} {' '.join(extra) or '(the budget recipe)'}")
    elif args.command == "run":
        run_arms(args)
    elif args.command == "rescore":
        rescore(args)
    else:
        write_table(Path(args.work_dir))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
