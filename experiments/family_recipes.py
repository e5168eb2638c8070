"""Each family's default pre-training recipe, chosen by measurement (issue 45, deliverable 1).

    python experiments/family_recipes.py prepare --work W          # tokenizers + 64-token packed data (WikiText-2 valid)
    python experiments/family_recipes.py run --work W --jobs 16    # every arm not yet recorded (resumable)
    python experiments/family_recipes.py run --work W --arms clm_lr1e-3 bilm_bert
    python experiments/family_recipes.py table [--results F]       # the markdown table from the records

Every arm is `bertkit pretrain --objective O --preset P --data D --set max_steps=300` plus its
change, run as a subprocess on one thread with evaluations every 25 steps, on the same
held-out split of the same text. An arm named `<objective>_default` passes nothing else: it is
what the family's registered recipe gives (the check that the defaults learn); `<objective>_bert`
is `--recipe bert` (the paper's BERT defaults that every objective ran before). Each run's
last held-out loss per token is recorded beside the held-out unigram baseline (`eval_unigram_loss`:
the entropy of the scored tokens' own distribution) and the wall time.
Records: experiments/results/family_recipes.jsonl (one object per arm; a recorded arm is skipped).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TEXT = REPO.parent / "shared" / "data" / "wikitext-2-raw" / "wiki.valid.raw"
RESULTS = REPO / "experiments" / "results" / "family_recipes.jsonl"
STEPS = int(os.environ.get("FAMILY_RECIPES_STEPS", "300"))  # a smoke test may shorten the runs

# tokenizer name -> `bertkit tokenizer train` arguments (4,000 tokens each), data format
TOKENIZERS = {
    "wp": (["--algorithm", "wordpiece"], "packed"),
    "gpt": (["--algorithm", "bbpe", "--layout", "gpt2"], "packed"),
    "bart": (["--algorithm", "bbpe", "--layout", "bart"], "packed"),
    "t5": (["--algorithm", "unigram", "--layout", "t5", "--sentinels", "100"], "packed"),
    "xlnet": (["--algorithm", "unigram", "--layout", "xlnet"], "xlnet"),
}
# objective -> (its tiny preset, its data, the held-out loss field compared with the unigram baseline)
OBJECTIVES = {
    "mlm": ("tiny", "wp", "eval_mlm_loss"),
    "clm": ("gpt-tiny", "gpt", "eval_lm_loss"),
    "bart": ("bart-tiny", "bart", "eval_loss"),
    "t5": ("t5-tiny", "t5", "eval_loss"),
    "bilm": ("elmo-tiny", "wp", "eval_forward_loss"),
    "electra": ("tiny", "wp", "eval_mlm_loss"),
    "xlnet": ("tiny", "xlnet", "eval_plm_loss"),
}
LRS = {
    "mlm": ["5e-4", "1e-3", "2e-3"],
    "clm": ["6e-4", "1e-3", "2e-3", "3e-3"],
    "bart": ["5e-4", "1e-3", "2e-3", "3e-3"],
    "t5": ["1e-3", "3e-3", "1e-2"],
    "bilm": ["2e-3", "5e-3", "1e-2", "2e-2"],
    "electra": ["1e-3", "2e-3"],
    "xlnet": ["1e-3", "2e-3"],
}
TEN_PERCENT_WARMUP = ["--set", "warmup_ratio=0.1"]
BUDGET = "2m"  # the equal-wall-time arms' budget, one core each


def arms() -> dict[str, tuple[str, list[str]]]:
    """arm name -> (objective, extra pretrain arguments)."""
    table: dict[str, tuple[str, list[str]]] = {}
    for objective, lrs in LRS.items():
        table[f"{objective}_default"] = (objective, [])
        table[f"{objective}_bert"] = (objective, ["--recipe", "bert"])
        for lr in lrs:  # the lr alone changed from BERT's recipe, with a 10% warm-up
            table[f"{objective}_lr{lr}"] = (objective, ["--recipe", "bert", "--set", f"lr={lr}", *TEN_PERCENT_WARMUP])
    no_dropout = {"bilm": ["model.dropout=0"], "clm": ["model.resid_pdrop=0", "model.embd_pdrop=0", "model.attn_pdrop=0"],
                  "mlm": ["model.pre_layer_norm=true", "model.hidden_dropout_prob=0",
                          "model.attention_probs_dropout_prob=0"]}
    for objective, fields in no_dropout.items():
        lr = "1e-2" if objective == "bilm" else "1e-3"
        sets = [arg for name in fields for arg in ("--set", name)]
        table[f"{objective}_lr{lr}_nodropout"] = (objective, ["--recipe", "bert", "--set", f"lr={lr}",
                                                              *TEN_PERCENT_WARMUP, *sets])
    # stage 2, from stage 1's best lr of each: no dropout (pre-LN for BERT), a batch of 64, a higher lr, warm-up
    off = {"bilm": ["model.dropout=0"], "clm": no_dropout["clm"], "mlm": no_dropout["mlm"],
           "bart": ["model.dropout=0", "model.attention_dropout=0", "model.activation_dropout=0"],
           "t5": ["model.dropout_rate=0"]}
    stage2 = [("bart", "2e-3", True, 32), ("bart", "2e-3", False, 64), ("bart", "2e-3", True, 64),
              ("mlm", "2e-3", True, 32), ("mlm", "2e-3", False, 64), ("mlm", "2e-3", True, 64), ("mlm", "3e-3", True, 32),
              ("bilm", "2e-2", True, 32), ("bilm", "5e-2", True, 32), ("bilm", "2e-2", False, 64),
              ("bilm", "2e-2", True, 64), ("clm", "3e-3", True, 32), ("clm", "3e-3", False, 64),
              ("t5", "3e-3", True, 32), ("t5", "5e-3", False, 32), ("t5", "3e-3", False, 64)]
    for objective, lr, dropout_off, batch in stage2:
        name = f"{objective}_lr{lr}" + ("_nodropout" if dropout_off else "") + (f"_batch{batch}" if batch != 32 else "")
        sets = [arg for field in off[objective] for arg in ("--set", field)] if dropout_off else []
        table[name] = (objective, ["--recipe", "bert", "--set", f"lr={lr}", *TEN_PERCENT_WARMUP, *sets,
                                   "--set", f"batch_size={batch}"])
    # equal wall time: `--recipe budget --budget 2m` (batch 16) against the same at batch 32, and BERT's recipe
    for objective in LRS:
        table[f"{objective}_budget"] = (objective, ["--recipe", "budget", "--budget", BUDGET])
        table[f"{objective}_budget_batch32"] = (objective, ["--recipe", "budget", "--budget", BUDGET,
                                                            "--set", "batch_size=32"])
    for lr in ("1e-3", "2e-3"):  # T5's budget at 3e-3 went non-finite after ~650 steps at both batches
        table[f"t5_budget_lr{lr}"] = ("t5", ["--recipe", "budget", "--budget", BUDGET, "--set", f"lr={lr}"])
    for objective in ("clm", "bart"):
        table[f"{objective}_budget_bert"] = (objective, ["--recipe", "bert", "--budget", BUDGET])
    for objective, lr, warmup in (("clm", "3e-3", "0.05"), ("bilm", "2e-2", "0.3"), ("mlm", "2e-3", "0.05")):
        table[f"{objective}_lr{lr}_warmup{warmup}"] = (objective, ["--recipe", "bert", "--set", f"lr={lr}",
                                                                   "--set", f"warmup_ratio={warmup}"])
    return table


# the arms whose settings the families' recipes took (bertkit.model.<family>.recipes): each default, and the
# budget arm each budget recipe follows
CHOSEN = {f"{objective}_default" for objective in OBJECTIVES} | {
    "mlm_budget", "clm_budget", "bart_budget", "t5_budget_lr2e-3", "bilm_budget_batch32", "electra_budget_batch32",
    "xlnet_budget_batch32"}
MARKERS = ("<!-- family_recipes table: written by `python experiments/family_recipes.py table` -->",
           "<!-- end family_recipes table -->")
DOC = REPO / "docs" / "pretraining.md"


def with_table(doc: str, table: str) -> str:
    """`doc` with the text between the table's markers replaced by `table`."""
    start, end = doc.index(MARKERS[0]) + len(MARKERS[0]), doc.index(MARKERS[1])
    return doc[:start] + "\n" + table + doc[end:]


def bertkit(*args: str) -> list[str]:
    return [sys.executable, "-m", "bertkit", *args]


def prepare(work: Path, text: Path) -> None:
    work.mkdir(parents=True, exist_ok=True)
    for name, (train_args, fmt) in TOKENIZERS.items():
        tok, data = work / f"tok-{name}", work / f"data-{name}"
        if not tok.exists():
            subprocess.run(bertkit("tokenizer", "train", *train_args, "--vocab-size", "4000", "--output", str(tok),
                                   str(text)), check=True, stdout=subprocess.DEVNULL)
        if not data.exists():
            subprocess.run(bertkit("data", "build", "--tokenizer", str(tok), "--format", fmt, "--max-seq-length", "64",
                                   "--output", str(data), str(text)), check=True, stdout=subprocess.DEVNULL)


def recorded(path: Path) -> set[str]:
    if not path.exists():
        return set()
    return {json.loads(line)["arm"] for line in path.read_text().splitlines() if line.strip()}


def run_arm(work: Path, arm: str, objective: str, extra: list[str]) -> dict:
    preset, data, field = OBJECTIVES[objective]
    output = work / "runs" / arm
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    command = bertkit("pretrain", "--objective", objective, "--preset", preset, "--data", str(work / f"data-{data}"),
                      "--output-dir", str(output), "--overwrite", "--set", "save_checkpoints=false",
                      "--set", "progress=false", "--set", "tensorboard=false", *extra)
    if "--budget" not in extra:  # a budget run ends on time and evaluates at each tenth of it
        command += ["--set", f"max_steps={STEPS}", "--set", "eval_steps=25"]
    started = time.perf_counter()
    done = subprocess.run(command, env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        return {"arm": arm, "objective": objective, "args": extra,
                "error": (done.stderr or done.stdout).strip().splitlines()[-1:]}
    records = [json.loads(line) for line in (output / "metrics.jsonl").read_text().splitlines() if line.strip()]
    evals = [r for r in records if field in r]
    first_line = next((line for line in done.stderr.splitlines() if line.startswith("bertkit: recipe")), "")
    steps = max(r["step"] for r in records)
    return {"arm": arm, "objective": objective, "preset": preset, "args": extra, "steps": steps,
            "field": field, "curve": {r["step"]: round(r[field], 4) for r in evals},
            "final": evals[-1][field], "unigram": evals[-1].get("eval_unigram_loss"),
            "perplexity_25": _perplexity(evals, 25, objective), "perplexity_300": _perplexity(evals, STEPS, objective),
            "eval_accuracy": {k: v for k, v in evals[-1].items() if k.startswith("eval_") and k.endswith("accuracy")},
            "seconds": round(seconds, 1), "recipe_line": first_line, "cpu": cpu_class()}


def _perplexity(evals: list[dict], step: int, objective: str) -> float | None:
    key = "eval_forward_perplexity" if objective == "bilm" else None
    for r in evals:
        if r["step"] == step:
            return r.get(key) if key else None
    return None


def cpu_class() -> str:
    try:
        flags = next(line for line in open("/proc/cpuinfo") if line.startswith("flags")).split()
    except (OSError, StopIteration):
        return "unknown"
    return "avx512+vnni" if "avx512_vnni" in flags else "avx2" if "avx2" in flags else "other"


def run(work: Path, names: list[str] | None, jobs: int, results: Path) -> None:
    table = arms()
    todo = [name for name in (names or table) if name not in recorded(results)]
    results.parent.mkdir(parents=True, exist_ok=True)

    def one(name: str) -> None:
        objective, extra = table[name]
        record = run_arm(work, name, objective, extra)
        with results.open("a") as handle:
            handle.write(json.dumps(record) + "\n")
        print(name, record.get("final"), record.get("unigram"), record.get("error", ""), flush=True)

    with ThreadPoolExecutor(max_workers=jobs) as pool:
        list(pool.map(one, todo))


def _describe(record: dict) -> str:
    """An arm's settings in words: the recipe and every --set beyond the run's fixed ones."""
    args = record.get("args", [])
    recipe = args[args.index("--recipe") + 1] if "--recipe" in args else "default"
    sets = [args[i + 1] for i, arg in enumerate(args) if arg == "--set"]
    budget = f", --budget {args[args.index('--budget') + 1]}" if "--budget" in args else ""
    return f"`{recipe}`{budget}" + (": " + ", ".join(sets) if sets else "")


def baselines(work: Path, path: Path) -> None:
    """Each objective's held-out unigram baseline as bertkit now reports it (`eval_unigram_loss`: the held-out
    targets' cross-entropy under the training targets' frequencies), from a one-step run on the same data;
    the stage-1/2 runs recorded an earlier, in-sample figure (the held-out targets' own entropy)."""
    records = []
    for objective, (preset, data, _) in OBJECTIVES.items():
        output = work / "runs" / f"{objective}_baseline"
        subprocess.run(bertkit("pretrain", "--objective", objective, "--preset", preset, "--data",
                               str(work / f"data-{data}"), "--output-dir", str(output), "--overwrite", "--set",
                               "max_steps=1", "--set", "eval_steps=1", "--set", "save_checkpoints=false",
                               "--set", "tensorboard=false", "--no-progress"), check=True, capture_output=True)
        last = [json.loads(line) for line in (output / "metrics.jsonl").read_text().splitlines() if "eval_" in line][-1]
        records.append({"objective": objective, "unigram_loss": last["eval_unigram_loss"],
                        "majority_accuracy": last["eval_majority_accuracy"]})
    path.write_text("".join(json.dumps(r) + "\n" for r in records))


def table_markdown(results: Path, baselines_path: Path | None = None) -> str:
    """Two tables per the records: equal steps (300) and equal wall time (the budget arms), each row the arm's
    last held-out loss per token beside the unigram baseline of the same held-out tokens."""
    rows = [json.loads(line) for line in results.read_text().splitlines() if line.strip()]
    rows = {r["arm"]: r for r in rows}  # a re-run arm: its last record
    baselines_path = baselines_path or results.with_name(results.stem + "_baselines.jsonl")
    unigram = {r["objective"]: r["unigram_loss"] for r in map(json.loads, baselines_path.read_text().splitlines())}
    out = []
    for title, budget in (("Equal steps (300, batch 32 unless set)", False), ("Equal wall time (2 minutes, one core)", True)):
        out += [f"**{title}**", "",
                "| objective | arm | settings | steps | held-out loss | unigram | below unigram | s |",
                "|---|---|---|---|---|---|---|---|"]
        for objective in OBJECTIVES:
            for name, r in rows.items():
                if r["objective"] != objective or ("--budget" in r.get("args", [])) != budget:
                    continue
                arm = f"**{name}**" if name in CHOSEN else name
                if "error" in r:
                    out.append(f"| {objective} | {arm} | {_describe(r)} | | non-finite (stopped) | | | |")
                    continue
                margin = unigram[objective] - r["final"]
                out.append(f"| {objective} | {arm} | {_describe(r)} | {r['steps']} | {r['final']:.2f} | "
                           f"{unigram[objective]:.2f} | {margin:+.2f} | {r['seconds']:.0f} |")
        out.append("")
    return "\n".join(out).rstrip() + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("prepare")
    p.add_argument("--work", type=Path, required=True)
    p.add_argument("--text", type=Path, default=TEXT)
    r = sub.add_parser("run")
    r.add_argument("--work", type=Path, required=True)
    r.add_argument("--arms", nargs="*")
    r.add_argument("--jobs", type=int, default=1)
    r.add_argument("--results", type=Path, default=RESULTS)
    b = sub.add_parser("baselines")
    b.add_argument("--work", type=Path, required=True)
    b.add_argument("--results", type=Path, default=RESULTS.with_name(RESULTS.stem + "_baselines.jsonl"))
    t = sub.add_parser("table")
    t.add_argument("--results", type=Path, default=RESULTS)
    t.add_argument("--write", action="store_true", help="write the table into docs/pretraining.md")
    args = parser.parse_args()
    if args.command == "prepare":
        prepare(args.work, args.text)
    elif args.command == "baselines":
        baselines(args.work, args.results)
    elif args.command == "run":
        run(args.work, args.arms, args.jobs, args.results)
    elif args.write:
        DOC.write_text(with_table(DOC.read_text(), table_markdown(args.results)))
    else:
        print(table_markdown(args.results))


if __name__ == "__main__":
    main()
