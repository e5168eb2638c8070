"""DeBERTa-v3's objective (RTD + gradient-disentangled embedding sharing) against ELECTRA's, at equal steps
and the same tiny size (2 layers, hidden 128; each objective's own generator: ELECTRA's quarter-width,
DeBERTa-v3's half-depth), on 64-token packed WikiText-2 (valid split, its own held-out part).

    python experiments/deberta_v3_vs_electra.py --work W [--steps 300]
    python experiments/deberta_v3_vs_electra.py --table      # the docs/ablations.md table (j) from the results

Writes experiments/results/deberta_v3_vs_electra.jsonl: one line per arm with the held-out generator MLM
loss / accuracy and discriminator accuracy at each evaluation, the parameters, the wall time and the CPU
load average while it ran (the machine is shared: read the timings with it).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TEXT = REPO.parent / "shared" / "data" / "wikitext-2-raw" / "wiki.valid.raw"
RESULTS = REPO / "experiments" / "results" / "deberta_v3_vs_electra.jsonl"
ARMS = {  # arm -> (objective, preset, extra flags)
    "electra_tiny": ("electra", "tiny", []),
    "deberta_v3_tiny": ("deberta-v3", "deberta-tiny", []),
}


def bertkit(*args: str) -> list[str]:
    return [sys.executable, "-m", "bertkit", *args]


def prepare(work: Path) -> Path:
    tok, data = work / "tok", work / "data"
    if not tok.exists():
        subprocess.run(bertkit("tokenizer", "train", "--algorithm", "wordpiece", "--vocab-size", "4000", "--output",
                               str(tok), str(TEXT)), check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    if not data.exists():
        subprocess.run(bertkit("data", "build", "--tokenizer", str(tok), "--format", "packed", "--max-seq-length", "64",
                               "--output", str(data), str(TEXT)), check=True, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
    return data


def held_out(out: Path) -> dict:
    """The held-out figures of a run folder's metrics.jsonl, at each evaluation and the last."""
    records = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines() if line.strip()]
    evals = [r for r in records if "eval_mlm_loss" in r]
    return {
        "eval": {r["step"]: {"mlm_loss": round(r["eval_mlm_loss"], 4), "mlm_accuracy": round(r["eval_mlm_accuracy"], 2),
                             "disc_loss": round(r["eval_disc_loss"], 4), "disc_accuracy": round(r["eval_disc_accuracy"], 2),
                             "disc_recall": round(r.get("eval_disc_recall", 0.0), 2)} for r in evals},
        "final_mlm_loss": evals[-1]["eval_mlm_loss"], "final_disc_loss": evals[-1]["eval_disc_loss"],
        "final_disc_accuracy": evals[-1]["eval_disc_accuracy"],
        "unigram_loss": evals[-1].get("eval_unigram_loss"), "majority_accuracy": evals[-1].get("eval_majority_accuracy"),
    }


def collect(work: Path) -> None:
    """Re-read the held-out figures of the recorded arms from their run folders (timings kept)."""
    records = [json.loads(line) for line in RESULTS.read_text().splitlines() if line.strip()]
    RESULTS.write_text("".join(json.dumps({**r, **held_out(work / "runs" / r["arm"])}) + "\n" for r in records))


def run_arm(work: Path, data: Path, arm: str, steps: int) -> dict:
    objective, preset, extra = ARMS[arm]
    out = work / "runs" / arm
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    command = bertkit("pretrain", "--objective", objective, "--preset", preset, "--data", str(data), "--output-dir",
                      str(out), "--overwrite", "--set", f"max_steps={steps}", "--set", f"eval_steps={steps // 3}",
                      "--set", "save_checkpoints=false", "--set", "progress=false", "--set", "tensorboard=false",
                      "--seed", "1", *extra)
    load_before, started = os.getloadavg()[0], time.perf_counter()
    done = subprocess.run(command, env=env, capture_output=True, text=True)
    seconds, load_after = time.perf_counter() - started, os.getloadavg()[0]
    if done.returncode:
        return {"arm": arm, "error": (done.stderr or done.stdout).strip().splitlines()[-1:]}
    recipe = next((line for line in done.stderr.splitlines() if line.startswith("bertkit: recipe")), "")
    return {"arm": arm, "objective": objective, "preset": preset, "steps": steps, "recipe": recipe, **held_out(out),
            "seconds": round(seconds, 1), "load_average": [round(load_before, 2), round(load_after, 2)],
            "threads": 1, "cpu_count": os.cpu_count()}


def table() -> str:
    """The markdown table of docs/ablations.md (j): held-out figures at each evaluation, per arm."""
    lines = ["| arm | step | generator MLM loss | generator MLM acc % | disc. BCE | disc. acc % | disc. recall % | "
             "wall s (load avg) |", "|---|---|---|---|---|---|---|---|"]
    for line in RESULTS.read_text().splitlines():
        record = json.loads(line)
        if "error" in record:
            continue
        for step, e in record["eval"].items():
            lines.append(f"| {record['arm']} | {step} | {e['mlm_loss']:.3f} | {e['mlm_accuracy']:.1f} | "
                         f"{e['disc_loss']:.4f} | {e['disc_accuracy']:.1f} | {e['disc_recall']:.1f} | {record['seconds']:.0f} "
                         f"({'-'.join(str(x) for x in record['load_average'])}) |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--work", type=Path)
    parser.add_argument("--table", action="store_true")
    parser.add_argument("--collect", action="store_true", help="re-read the recorded arms' run folders in --work")
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--arms", nargs="*", default=list(ARMS))
    args = parser.parse_args()
    if args.table:
        print(table())
        return
    if args.collect:
        collect(args.work)
        return
    data = prepare(args.work)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    for arm in args.arms:
        record = run_arm(args.work, data, arm, args.steps)
        with RESULTS.open("a") as f:
            f.write(json.dumps(record) + "\n")
        print(json.dumps(record))


if __name__ == "__main__":
    main()
