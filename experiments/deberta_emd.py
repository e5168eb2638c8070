"""DeBERTa's enhanced mask decoder on the deberta-v3 generator: the same tiny run (deberta-tiny, 300 steps,
64-token packed WikiText-2 valid split with its own held-out part, seed 1, one thread) with
`objective.enhanced_mask_decoder` false and true, and true with the absolute positions zeroed (the
extra layer applications alone); the held-out generator MLM loss decides the default.

    python experiments/deberta_emd.py --work W [--steps 300]   # both arms one after the other
    python experiments/deberta_emd.py --work W --collect      # record arms run elsewhere (W/runs/emd_{off,on}, W/*.done)
    python experiments/deberta_emd.py --table                 # the docs/successors.md table from the results

W/data: `bertkit data build --format packed --max-seq-length 64` of wiki.valid.raw with a 4,000-entry
WordPiece tokenizer (experiments/deberta_v3_vs_electra.py's `prepare` builds the same).
Writes experiments/results/deberta_emd.jsonl: one line per arm (held-out figures at each evaluation, the
wall time and the CPU load average around it: the machine is shared, both arms ran side by side).
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
RESULTS = REPO / "experiments" / "results" / "deberta_emd.jsonl"
ARMS = {"emd_off": "false", "emd_on": "true", "emd_no_positions": "true"}
# the control: the EMD's extra layer applications without the absolute positions (I = 0): depth alone
NO_POSITIONS = ("import sys, torch; from bertkit.model.deberta.modeling import DebertaV2Embeddings as E; "
                "E.absolute_positions = lambda self, n: torch.zeros_like(self.position_embeddings.weight[:n]); "
                "from bertkit.cli import main; sys.exit(main(sys.argv[1:]))")


def run_name(arm: str, seed: int) -> str:
    return arm if seed == 1 else f"{arm}-s{seed}"


def command(work: Path, arm: str, steps: int, seed: int = 1) -> list[str]:
    runner = ["-c", NO_POSITIONS] if arm == "emd_no_positions" else ["-m", "bertkit"]
    return [sys.executable, *runner, "pretrain", "--objective", "deberta-v3", "--preset", "deberta-tiny",
            "--data", str(work / "data"), "--output-dir", str(work / "runs" / run_name(arm, seed)), "--overwrite",
            "--threads", "1", "--seed", str(seed), "--set", f"max_steps={steps}", "--set", f"eval_steps={steps // 3}", "--set",
            "save_checkpoints=false", "--set", "progress=false", "--set", "tensorboard=false",
            "--set", f"objective.enhanced_mask_decoder={ARMS[arm]}"]


def record(work: Path, arm: str, seconds: float | None, load: list[float] | None, seed: int = 1) -> dict:
    rows = [json.loads(line) for line in (work / "runs" / run_name(arm, seed) / "metrics.jsonl").read_text().splitlines() if line.strip()]
    evals = [r for r in rows if "eval_mlm_loss" in r]
    return {"arm": arm, "enhanced_mask_decoder": ARMS[arm] == "true", "positions": arm != "emd_no_positions",
            "preset": "deberta-tiny", "seed": seed,
            "steps": max(r["step"] for r in rows),
            "eval": {r["step"]: {"mlm_loss": round(r["eval_mlm_loss"], 4), "mlm_accuracy": round(r["eval_mlm_accuracy"], 2),
                                 "disc_accuracy": round(r["eval_disc_accuracy"], 2)} for r in evals},
            "final_mlm_loss": evals[-1]["eval_mlm_loss"], "seconds": seconds, "load_average": load, "threads": 1}


def collect(work: Path) -> list[dict]:
    """Arms run by a shell loop: W/<arm>[-s<seed>].done holds 'rc=0 seconds=S load=A-B'."""
    out = []
    for seed in (1, 2, 3):
        for arm in [a for a in ARMS if (work / f"{run_name(a, seed)}.done").exists()]:
            fields = dict(x.split("=", 1) for x in (work / f"{run_name(arm, seed)}.done").read_text().split())
            out.append(record(work, arm, round(float(fields["seconds"]), 1),
                              [float(x) for x in fields["load"].split("-")], seed))
    return out


def table() -> str:
    lines = ["| generator | seed | step | held-out MLM loss | MLM acc % | disc. acc % | wall s (load avg) |",
             "|---|---|---|---|---|---|---|"]
    for line in RESULTS.read_text().splitlines():
        r = json.loads(line)
        for step, e in r["eval"].items():
            name = ("EMD" if r.get("positions", True) else "EMD, I = 0") if r["enhanced_mask_decoder"] else "plain"
            lines.append(f"| {name} | {r.get('seed', 1)} | {step} | {e['mlm_loss']:.3f} | "
                         f"{e['mlm_accuracy']:.1f} | {e['disc_accuracy']:.1f} | {r['seconds']:.0f} "
                         f"({'-'.join(str(x) for x in r['load_average'])}) |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--work", type=Path)
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--collect", action="store_true")
    parser.add_argument("--table", action="store_true")
    args = parser.parse_args()
    if args.table:
        print(table())
        return
    if args.collect:
        records = collect(args.work)
    else:
        records = []
        env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
        for arm in ARMS:
            load, started = os.getloadavg()[0], time.perf_counter()
            subprocess.run(command(args.work, arm, args.steps), env=env, check=True, capture_output=True)
            records.append(record(args.work, arm, round(time.perf_counter() - started, 1),
                                  [round(load, 2), round(os.getloadavg()[0], 2)]))
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text("".join(json.dumps(r) + "\n" for r in records))
    print(table())


if __name__ == "__main__":
    main()
