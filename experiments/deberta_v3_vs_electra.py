"""DeBERTa-v3's objective (RTD + gradient-disentangled embedding sharing) against ELECTRA's, at equal steps
and at equal training FLOPs, the same tiny size (2 layers, hidden 128; each objective's own generator:
ELECTRA's quarter-width, DeBERTa-v3's half-depth), on 64-token packed WikiText-2 (valid split, its own
held-out part).

    python experiments/deberta_v3_vs_electra.py --work W [--steps 300] [--arms ...] [--seed 1]
    python experiments/deberta_v3_vs_electra.py --table      # the docs/ablations.md table (j) from the results

`electra_tiny_equal_flops` runs ELECTRA for the steps whose FLOPs equal --steps deberta-v3 steps
(`equal_flops_steps`: matmul FLOPs of forward + backward, `experiments/ablations.py`'s counting, with
`deberta_v3_step_flops` for the disentangled attention). Writes experiments/results/deberta_v3_vs_electra.jsonl:
one line per arm and seed with the held-out generator MLM loss / accuracy, discriminator BCE / accuracy /
recall and replaced fraction at each evaluation, the FLOPs per step and in all, the wall time and the CPU load
average while it ran (the machine is shared: read the timings with it).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "experiments"))
from ablations import encoder_flops, step_flops  # noqa: E402  (the ablations' matmul FLOPs counting)

TEXT = REPO.parent / "shared" / "data" / "wikitext-2-raw" / "wiki.valid.raw"
RESULTS = REPO / "experiments" / "results" / "deberta_v3_vs_electra.jsonl"
ARMS = {  # arm -> (objective, preset, extra flags)
    "electra_tiny": ("electra", "tiny", []),
    # (j) was measured before the generator's enhanced mask decoder became the default; its FLOPs count has no EMD
    "deberta_v3_tiny": ("deberta-v3", "deberta-tiny", ["--set", "objective.enhanced_mask_decoder=false"]),
    "electra_tiny_equal_flops": ("electra", "tiny", []),  # --steps: deberta_v3_tiny's FLOPs (`equal_flops_steps`)
}
BATCH, SEQ_LEN, VOCAB, MASKED = 32, 64, 4000, 0.15  # the runs' batch, packed length, WordPiece size, mask rate


def deberta_v3_step_flops(config: dict, generator_layers: int, batch_size: int, seq_len: int, masked: float) -> float:
    """Matmul FLOPs of one deberta-v3 step (forward + backward = 3 x forward, as `step_flops`): a
    DeBERTa-v2 discriminator (`config`'s fields) with the replaced-token head (dense + classifier at
    every position), a generator of the same width with `generator_layers` layers and its MLM head
    (dense + tied decoder) at the `masked` positions. Each layer adds to BERT's (`encoder_flops`), per
    position term (c2p, p2c), the projection of the 2k-row relative table (query_proj / key_proj,
    shared key) and every query (key) against all 2k distances before the gather: bertkit's and
    transformers' disentangled attention score the whole table, whatever the sequence length."""
    h, i, v = config["hidden_size"], config["intermediate_size"], config["vocab_size"]
    tokens = float(batch_size * seq_len)
    terms = len([t for t in ("c2p", "p2c") if t in (config.get("pos_att_type") or ())]) if config.get(
        "relative_attention") else 0
    rows = 2 * (config["position_buckets"] if config.get("position_buckets", -1) > 0 else
                config["max_relative_positions"] if config.get("max_relative_positions", -1) >= 1 else
                config["max_position_embeddings"])

    def encoder(layers: int) -> float:
        return encoder_flops(tokens, seq_len, layers, h, i) + 6.0 * layers * terms * (rows * h * h + tokens * rows * h)

    disc = encoder(config["num_hidden_layers"]) + 6.0 * tokens * (h * h + h)  # + mask_predictions
    return disc + encoder(generator_layers) + 6.0 * masked * (h * h + h * v)  # + lm_head dense, decoder


def arm_step_flops(objective: str, preset: str, batch_size: int = BATCH, seq_len: int = SEQ_LEN,
                   vocab_size: int = VOCAB) -> float:
    """FLOPs of one training step of an arm at the runs' shapes: packed rows of `seq_len` tokens,
    15% of the seq_len - 2 text tokens masked, each objective's default generator."""
    masked = batch_size * MASKED * (seq_len - 2)
    if objective == "electra":
        from bertkit.model.electra import ElectraConfig
        from bertkit.model.electra.config import generator_config
        from bertkit.objectives.electra import ElectraSettings

        config = ElectraConfig(**{**ElectraConfig.presets[preset], "vocab_size": vocab_size})
        generator = generator_config(config, ElectraSettings().generator_size)
        return step_flops("electra", config.to_dict(), batch_size, seq_len, masked, generator=generator.to_dict())
    if objective == "deberta-v3":
        from bertkit.model.deberta.config import DebertaV2Config
        from bertkit.objectives.deberta_v3 import DebertaV3Settings, generator_config

        config = DebertaV2Config(**{**DebertaV2Config.presets[preset], "vocab_size": vocab_size})
        layers = generator_config(config, DebertaV3Settings().generator_depth).num_hidden_layers
        return deberta_v3_step_flops(config.to_dict(), layers, batch_size, seq_len, masked)
    raise ValueError(f"no FLOPs formula for objective {objective!r}")


def equal_flops_steps(steps: int = 300) -> int:
    """ELECTRA's steps for the FLOPs of `steps` deberta-v3 steps (both at tiny)."""
    return round(steps * arm_step_flops("deberta-v3", "deberta-tiny") / arm_step_flops("electra", "tiny"))


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
                             "disc_recall": round(r.get("eval_disc_recall", 0.0), 2),
                             "replaced_fraction": round(r.get("eval_replaced_fraction", float("nan")), 4)} for r in evals},
        "final_mlm_loss": evals[-1]["eval_mlm_loss"], "final_disc_loss": evals[-1]["eval_disc_loss"],
        "final_disc_accuracy": evals[-1]["eval_disc_accuracy"],
        "unigram_loss": evals[-1].get("eval_unigram_loss"), "majority_accuracy": evals[-1].get("eval_majority_accuracy"),
    }


def collect(work: Path) -> None:
    """Re-read the held-out figures of the recorded arms from their run folders (timings kept) and
    (re)count their FLOPs."""
    records = [json.loads(line) for line in RESULTS.read_text().splitlines() if line.strip()]
    RESULTS.write_text("".join(json.dumps({**r, **held_out(work / "runs" / run_name(r["arm"], r.get("seed", 1))),
                                           **flops(r)}) + "\n"
                               for r in records if "error" not in r))


def flops(record: dict) -> dict:
    per_step = arm_step_flops(record["objective"], record["preset"])
    return {"flops_per_step": per_step, "flops_total": per_step * record["steps"]}


def run_name(arm: str, seed: int) -> str:
    """An arm's run folder (and table label): the arm, with its seed unless 1."""
    return arm if seed == 1 else f"{arm}_seed{seed}"


def run_arm(work: Path, data: Path, arm: str, steps: int, seed: int = 1) -> dict:
    objective, preset, extra = ARMS[arm]
    out = work / "runs" / run_name(arm, seed)
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    command = bertkit("pretrain", "--objective", objective, "--preset", preset, "--data", str(data), "--output-dir",
                      str(out), "--overwrite", "--set", f"max_steps={steps}", "--set", f"eval_steps={math.ceil(steps / 3)}",
                      "--set", "save_checkpoints=false", "--set", "progress=false", "--set", "tensorboard=false",
                      "--seed", str(seed), *extra)
    load_before, started = os.getloadavg()[0], time.perf_counter()
    done = subprocess.run(command, env=env, capture_output=True, text=True)
    seconds, load_after = time.perf_counter() - started, os.getloadavg()[0]
    if done.returncode:
        return {"arm": arm, "error": (done.stderr or done.stdout).strip().splitlines()[-1:]}
    recipe = next((line for line in done.stderr.splitlines() if line.startswith("bertkit: recipe")), "")
    return {"arm": arm, "objective": objective, "preset": preset, "steps": steps, "recipe": recipe, **held_out(out),
            **flops({"objective": objective, "preset": preset, "steps": steps}),
            "seconds": round(seconds, 1), "load_average": [round(load_before, 2), round(load_after, 2)],
            "threads": 1, "cpu_count": os.cpu_count(), "seed": seed}


def base_rate_bce(p: float) -> float:
    """The held-out BCE (nats) of a discriminator that says "replaced" with probability p everywhere, p the
    replaced fraction: the entropy of the labels, what a detector must beat."""
    return -(p * math.log(p) + (1 - p) * math.log(1 - p)) if 0.0 < p < 1.0 else math.nan


def table() -> str:
    """The markdown table of docs/ablations.md (j): per arm and evaluation, the training FLOPs (per step
    and spent so far) and the held-out figures."""
    lines = ["| arm | step | GFLOPs / step | TFLOPs so far | generator MLM loss | generator MLM acc % | replaced % | "
             "disc. BCE | base-rate BCE | disc. acc % | disc. recall % | wall s (load avg) |",
             "|---|---:|---:|---:|---|---|---|---|---|---|---|---|"]
    for line in RESULTS.read_text().splitlines():
        record = json.loads(line)
        if "error" in record:
            continue
        per_step = record.get("flops_per_step") or arm_step_flops(record["objective"], record["preset"])
        for step, e in record["eval"].items():
            lines.append(f"| {run_name(record['arm'], record.get('seed', 1))} | {step} | {per_step / 1e9:.2f} | {int(step) * per_step / 1e12:.2f} | "
                         f"{e['mlm_loss']:.3f} | {e['mlm_accuracy']:.1f} | {100 * e.get('replaced_fraction', math.nan):.1f} | "
                         f"{e['disc_loss']:.4f} | {base_rate_bce(e.get('replaced_fraction', math.nan)):.4f} | {e['disc_accuracy']:.1f} | "
                         f"{e['disc_recall']:.1f} | {record['seconds']:.0f} "
                         f"({'-'.join(str(x) for x in record['load_average'])}) |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--work", type=Path)
    parser.add_argument("--table", action="store_true")
    parser.add_argument("--collect", action="store_true", help="re-read the recorded arms' run folders in --work")
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--arms", nargs="*", default=list(ARMS))
    parser.add_argument("--seed", type=int, default=1)
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
        steps = equal_flops_steps(args.steps) if arm.endswith("_equal_flops") else args.steps
        record = run_arm(args.work, data, arm, steps, args.seed)
        with RESULTS.open("a") as f:
            f.write(json.dumps(record) + "\n")
        print(json.dumps(record))


if __name__ == "__main__":
    main()
