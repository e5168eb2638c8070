"""ModernBERT's default pre-training recipe at its tiny size, chosen by measurement (issue 43).

    python experiments/family_recipes.py prepare --work W        # the shared 64-token WikiText-2 data (data-wp)
    python experiments/modernbert_recipes.py run --work W [--arms A B] [--jobs 2]

Every arm is `bertkit pretrain --objective mlm --preset modernbert-tiny --data W/data-wp --set max_steps=300`
with evaluations every 25 steps on the same held-out split as experiments/family_recipes.py's arms (its
runner, `run_arm`, with objective mlm's preset set to modernbert-tiny), one thread each. ModernBERT's paper
masks 30% of the tokens (`mlm_probability=0.3`); its peak lr 8e-4 is for base at a batch of 4,608 sequences.
`modernbert_default` passes nothing: what the registered recipe gives.
Records: experiments/results/modernbert_recipes.jsonl (one object per arm; a recorded arm is skipped).

    python experiments/modernbert_recipes.py table [--write]     # the markdown table (--write: into docs/successors.md)
"""

from __future__ import annotations

import argparse
import json
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import family_recipes  # noqa: E402  (the shared runner and data)

RESULTS = family_recipes.REPO / "experiments" / "results" / "modernbert_recipes.jsonl"
PRESET = "modernbert-tiny"
WARMUP = ["--set", "warmup_ratio=0.1"]


def arms() -> dict[str, list[str]]:
    """arm name -> extra pretrain arguments."""
    table = {"modernbert_default": []}
    for lr in ("8e-4", "2e-3", "4e-3"):  # the paper's base lr and higher ones, as a tiny model takes
        table[f"modernbert_lr{lr}_mask0.3"] = ["--recipe", "bert", "--set", f"lr={lr}", *WARMUP,
                                               "--set", "mlm_probability=0.3"]
    table["modernbert_lr2e-3_mask0.15"] = ["--recipe", "bert", "--set", "lr=2e-3", *WARMUP]  # BERT's masking
    table["modernbert_budget"] = ["--recipe", "budget", "--budget", family_recipes.BUDGET]
    return table


def run(work: Path, names: list[str] | None, jobs: int, results: Path) -> None:
    table = arms()
    todo = [name for name in (names or table) if name not in family_recipes.recorded(results)]
    family_recipes.OBJECTIVES["mlm"] = (PRESET, "wp", "eval_mlm_loss")  # the runner's objective mlm: ModernBERT
    results.parent.mkdir(parents=True, exist_ok=True)

    def one(name: str) -> None:
        record = family_recipes.run_arm(work, name, "mlm", table[name])
        with results.open("a") as handle:
            handle.write(json.dumps(record) + "\n")
        print(name, record.get("final"), record.get("unigram"), record.get("seconds"), record.get("error", ""),
              flush=True)

    with ThreadPoolExecutor(max_workers=jobs) as pool:
        list(pool.map(one, todo))


MARKERS = ("<!-- modernbert_recipes table: written by `python experiments/modernbert_recipes.py table --write` -->",
           "<!-- end modernbert_recipes table -->")
DOC = family_recipes.REPO / "docs" / "successors.md"


def table_markdown(results: Path) -> str:
    """One row per arm: its settings, steps, last held-out MLM loss and accuracy beside the unigram baseline
    of the same held-out tokens, wall seconds and the CPU class."""
    rows = {r["arm"]: r for r in map(json.loads, results.read_text().splitlines())}  # a re-run arm: its last
    out = ["| arm | settings | steps | held-out MLM loss | unigram | MLM accuracy | s | CPU |",
           "|---|---|---|---|---|---|---|---|"]
    for name, r in rows.items():
        if "error" in r:
            out.append(f"| {name} | {family_recipes._describe(r)} | | {r['error']} | | | | |")
            continue
        accuracy = r["eval_accuracy"].get("eval_mlm_accuracy", float("nan"))
        out.append(f"| {name} | {family_recipes._describe(r)} | {r['steps']} | {r['final']:.2f} | {r['unigram']:.2f} | "
                   f"{accuracy:.1f}% | {r['seconds']:.0f} | {r['cpu']} |")
    return "\n".join(out) + "\n"


def write_table(table: str, doc: Path = DOC) -> None:
    text = doc.read_text()
    start, end = text.index(MARKERS[0]) + len(MARKERS[0]), text.index(MARKERS[1])
    doc.write_text(text[:start] + "\n" + table + text[end:])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("command", choices=["run", "table"])
    parser.add_argument("--work", type=Path)
    parser.add_argument("--arms", nargs="*")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--results", type=Path, default=RESULTS)
    parser.add_argument("--write", action="store_true", help="table: write it into docs/successors.md")
    args = parser.parse_args()
    if args.command == "table":
        table = table_markdown(args.results)
        write_table(table) if args.write else print(table, end="")
    else:
        run(args.work, args.arms, args.jobs, args.results)


if __name__ == "__main__":
    main()
