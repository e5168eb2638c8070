"""BigBird's pre-training lr at bigbird-tiny: objective mlm on WikiText-2's validation text at 256 tokens
(above bigbird-tiny's 176-token threshold, so the block-sparse path trains), batch 16, a few hundred steps,
10% warm-up; one arm per lr. Each arm's held-out MLM loss curve goes to
experiments/results/bigbird_recipes.jsonl, which src/bertkit/model/bigbird/recipes.py cites.

    python experiments/bigbird_recipes.py WORK_DIR [LR ...]
    python experiments/bigbird_recipes.py table      # the markdown table of the results (docs/successors.md)
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TEXT = REPO.parent / "shared" / "data" / "wikitext-2-raw" / "wiki.valid.raw"
RESULTS = REPO / "experiments" / "results" / "bigbird_recipes.jsonl"
STEPS = int(os.environ.get("BIGBIRD_RECIPES_STEPS", "200"))
BERTKIT = [sys.executable, "-m", "bertkit"]


def prepare(work: Path) -> Path:
    tok, data = work / "tok", work / "data256"
    if not tok.exists():
        subprocess.run([*BERTKIT, "tokenizer", "train", "--algorithm", "wordpiece", "--vocab-size", "4000",
                        "--output", str(tok), str(TEXT)], check=True, stdout=subprocess.DEVNULL)
    if not data.exists():
        subprocess.run([*BERTKIT, "data", "build", "--tokenizer", str(tok), "--format", "packed", "--max-seq-length",
                        "256", "--output", str(data), str(TEXT)], check=True, stdout=subprocess.DEVNULL)
    return data


def run_arm(work: Path, data: Path, lr: str) -> dict:
    output = work / f"run-lr{lr}"
    command = [*BERTKIT, "pretrain", "--objective", "mlm", "--preset", "bigbird-tiny", "--data", str(data),
               "--output-dir", str(output), "--overwrite", "--lr", lr, "--batch-size", "16",
               "--set", f"max_steps={STEPS}", "--set", f"eval_steps={STEPS // 4}", "--set", "warmup_ratio=0.1",
               "--set", "save_checkpoints=false", "--set", "progress=false", "--set", "tensorboard=false"]
    started = time.perf_counter()
    subprocess.run(command, check=True, capture_output=True, env={**os.environ, "OMP_NUM_THREADS": "1"})
    seconds = time.perf_counter() - started
    records = [json.loads(line) for line in (output / "metrics.jsonl").read_text().splitlines() if line.strip()]
    evals = [r for r in records if "eval_mlm_loss" in r]
    return {"arm": f"bigbird-tiny_lr{lr}", "preset": "bigbird-tiny", "lr": float(lr), "steps": STEPS,
            "seq_len": 256, "batch_size": 16, "curve": {r["step"]: round(r["eval_mlm_loss"], 4) for r in evals},
            "final": round(evals[-1]["eval_mlm_loss"], 4), "unigram": evals[-1].get("eval_unigram_loss"),
            "seconds": round(seconds, 1), "load_average": os.getloadavg()[0]}


def table() -> str:
    rows = [json.loads(line) for line in RESULTS.read_text().splitlines() if line.strip()]
    steps = sorted({int(step) for row in rows for step in row["curve"]})
    lines = ["| arm | " + " | ".join(f"step {s}" for s in steps) + " | unigram | seconds (load) |",
             "|---" * (len(steps) + 3) + "|"]
    for row in rows:
        curve = " | ".join(f"{row['curve'].get(str(s), float('nan')):.3f}" for s in steps)
        lines.append(f"| {row['arm']} | {curve} | {row['unigram']:.3f} | {row['seconds']:.0f} "
                     f"({row['load_average']:.0f}) |")
    return "\n".join(lines)


def main() -> None:
    if sys.argv[1:] == ["table"]:
        print(table())
        return
    work = Path(sys.argv[1])
    lrs = sys.argv[2:] or ["1e-3", "2e-3"]
    data = prepare(work)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    for lr in lrs:
        row = run_arm(work, data, lr)
        print(json.dumps(row))
        with RESULTS.open("a") as out:
            out.write(json.dumps(row) + "\n")


if __name__ == "__main__":
    main()
