"""Does the budget recipe pay downstream? (issue 19, deliverable 2) for docs/pretraining.md.

    python experiments/budget_downstream.py --corpus en run --budget 60m          # every step not yet done (resumable)
    python experiments/budget_downstream.py --corpus ko run --budget 60m
    python experiments/budget_downstream.py table                                 # results.md from results.jsonl
    python experiments/budget_downstream.py --corpus en run --budget 20s --seeds 1 --sst2-train 300 --mrpc-train 200  # a dry run

Three pre-training arms on one corpus and one tokenizer, each the same wall-clock budget B
with --threads threads (default 2):
- (a) bertkit: `bertkit pretrain --recipe budget --budget B --preset P` (the --set
  arguments passed through) on the data the recipe was measured on (RECIPE_DATA: packed
  64-token sequences), built from the same corpus with the same document split;
- (b) transformers' own MLM recipe, as run_mlm.py does it: BertForMaskedLM of (a)'s size
  (the dims of (a)'s final config.json: same vocabulary, layers, hidden, heads, FFN; the
  rest transformers' defaults, post-LN with dropout 0.1), the TRAIN documents of (a)'s data
  (`documents_by_split`: the held-out documents are never seen) tokenized line by line by
  transformers' tokenizer loading bertkit's tokenizer folder (AutoTokenizer: BertTokenizerFast
  for the English pipeline, tokenizer.json as is for Korean's; ids checked equal to
  bertkit's), grouped into 128-token blocks per 1,000 lines (run_mlm's group_texts),
  DataCollatorForLanguageModeling(mlm_probability=0.15) and Trainer's defaults (AdamW, lr
  5e-5, linear decay, no warm-up, weight decay 0, batch 8 per device) but for two things: a
  callback stops training when B is spent, and max_steps — the length of the linear decay
  — is calibrated from a short timed run beforehand (--calibration-steps, not counted in
  B) so that the decay ends at B. This favours the reference: bertkit's own schedule follows
  the time as it goes, with no calibration run. Checkpoints are off (they would only cost
  the reference time); the model is saved at each 1/10 of B (snapshots, their save time
  counted in B) and scored afterwards, while (a) evaluates inside its budget, which favours
  the reference a little more;
- (c) the random-init control: (a)'s config and tokenizer, fresh weights (write_random_model).

Every arm's final model is scored on ONE common held-out set (budget_recipes.common_score:
the held-out documents of the packed 128-token data, 15% masks from the fixed eval seed),
and the held-out MLM loss of (a) and (b) over wall time is drawn in curves-<corpus>.png
((a): its own evaluations, which are that same scoring when its mask rate is 15%, placed at
step / final step of B, as metrics.jsonl holds no times; (b): its snapshots). Then each arm is fine-tuned with the same
recipe and --seeds seeds: en: SST-2 (a fixed random --sst2-train subset, full dev) and
MRPC (full train / dev), ablations' settings (lr 3e-4, 3 epochs, batch 32); ko: NSMC
(--nsmc-train reviews, --nsmc-held-out others of the same file), KLUE-NLI (dev split
in a training part and a 600-pair held-out part) and KLUE-STS (400 / 119 pairs, regression:
the third Korean row of docs/finetuning.md), quality_table's settings (lr 1e-4, 2 / 3 / 6
epochs). The Korean tokenizer is quality_table's syllable WordPiece unless
--ko-tokenizer morphemes (kiwi morphemes first).

Results: <work-dir>/results.jsonl (one object per step; a recorded step is skipped, an
interrupted pre-training reruns from scratch), <work-dir>/results.md (per corpus: rows
(a) (b) (c), held-out MLM loss / accuracy, each task's mean ± sd over seeds, (a)-(c) and
(a)-(b) differences, the targets said met or missed), <work-dir>/curves-<corpus>.png.
Run it on a quiet machine: the arms are equal in wall time.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import shutil
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "experiments"))
import budget_recipes  # noqa: E402
from ablations import cut_tasks, finetune, summary  # noqa: E402
from quality_table import DATA, ENV, KO_CORPUS, cut_klue, cut_nsmc, write_random_model  # noqa: E402

from bertkit.pretraining import RECIPE_DATA  # noqa: E402

ARMS = {"bertkit": "(a) bertkit --recipe budget", "hf": "(b) transformers run_mlm-style",
        "random": "(c) random init (control)"}
RECIPE_NAME = "{}-{}".format(*RECIPE_DATA["budget"])  # the data (a) trains on unless --data-format
NSMC_COLUMNS = ["--text-column", "document", "--label-column", "label"]
NLI_COLUMNS = ["--text-column", "premise", "--pair-column", "hypothesis", "--label-column", "gold_label"]
STS_COLUMNS = ["--text-column", "sentence1", "--pair-column", "sentence2", "--label-column", "labels.label", "--regression"]
# per corpus: the pre-training text, the tokenizer's vocabulary, the tasks and their fine-tuning settings
CORPORA = {
    "en": {"corpus": DATA / "corpus-en" / "austen_novels.txt.gz", "vocab_size": 8192, "ft_lr": 3e-4,
           "tasks": {"sst2": {"name": "SST-2", "head": ["finetune", "glue", "--task", "sst2"], "epochs": 3,
                              "metrics": ("accuracy",)},
                     "mrpc": {"name": "MRPC", "head": ["finetune", "glue", "--task", "mrpc"], "epochs": 3,
                              "metrics": ("f1", "accuracy")}}},
    "ko": {"corpus": KO_CORPUS, "vocab_size": 16000, "ft_lr": 1e-4,
           "tasks": {"nsmc": {"name": "NSMC", "head": ["finetune", "classify", *NSMC_COLUMNS], "epochs": 2,
                              "metrics": ("accuracy",)},
                     "klue_nli": {"name": "KLUE-NLI", "head": ["finetune", "classify", *NLI_COLUMNS], "epochs": 3,
                                  "metrics": ("accuracy",)},
                     # docs/finetuning.md's third Korean row (quality_table's settings: 6 epochs)
                     "klue_sts": {"name": "KLUE-STS", "head": ["finetune", "classify", *STS_COLUMNS], "epochs": 6,
                                  "metrics": ("pearson", "spearmanr")}}},
}
TARGET_TASKS = {"sst2": "accuracy", "nsmc": "accuracy"}  # the issue's >= 3 points over the control
TARGET_POINTS = 3.0
BLOCK = 128  # max_seq_length of (b)'s blocks and of every fine-tuning run (the common data's)
SHORT_SCORE = ("packed", 64)  # the second scoring set
RUN_MLM_MAP_BATCH = 1000  # datasets.map's default batch: run_mlm groups texts within each


# ---------------------------------------------------------------------------- pure pieces


def group_texts(examples: dict[str, list[list[int]]], block_size: int) -> dict[str, list[list[int]]]:
    """run_mlm's grouping: every field's sequences concatenated, then cut into blocks of
    `block_size`; the remainder shorter than a block is dropped."""
    joined = {k: [x for sequence in v for x in sequence] for k, v in examples.items()}
    total = (len(next(iter(joined.values()), [])) // block_size) * block_size
    return {k: [v[i:i + block_size] for i in range(0, total, block_size)] for k, v in joined.items()}


def seconds_per_step(step_ends: list[float], skip: int) -> float:
    """Mean seconds per step from the clock readings at successive step ends, leaving out the
    first `skip` steps (start-up); needs at least two readings after them."""
    kept = step_ends[skip:]
    if len(kept) < 2:
        raise ValueError(f"calibration: {len(step_ends)} steps timed, need more than {skip + 1}")
    return (kept[-1] - kept[0]) / (len(kept) - 1)


def steps_for_budget(budget_seconds: float, per_step: float) -> int:
    """max_steps whose linear decay ends when the budget is spent at `per_step` seconds a step."""
    return max(1, math.ceil(budget_seconds / per_step))


def make_wall_clock_callback(budget_seconds: float, marks: int, on_mark=None, clock=time.perf_counter):
    """A transformers TrainerCallback that stops training once `budget_seconds` of wall time
    have passed since training began (checked after each step) and calls on_mark(model,
    elapsed, step) when each 1/`marks` of the budget has passed (not at the end; at most
    once per step). `clock` is injectable so tests need not sleep."""
    from transformers import TrainerCallback

    class WallClockBudget(TrainerCallback):
        def __init__(self):
            self.started: float | None = None
            self.next_mark = 1
            self.elapsed = 0.0
            self.stopped_by_budget = False

        def on_train_begin(self, args, state, control, **kwargs):
            self.started = clock()

        def on_step_end(self, args, state, control, **kwargs):
            self.elapsed = clock() - self.started
            if self.elapsed >= budget_seconds:
                control.should_training_stop = True
                self.stopped_by_budget = True
                return control
            if self.elapsed * marks >= self.next_mark * budget_seconds:
                self.next_mark = math.floor(self.elapsed * marks / budget_seconds) + 1
                if on_mark is not None:
                    on_mark(kwargs.get("model"), self.elapsed, state.global_step)
            return control

    return WallClockBudget()


def arm_means(rows: list[dict]) -> dict[tuple[str, str, str], list[float]]:
    """(arm, task, metric) -> the fine-tuning seeds' scores (%) of finished fine-tuning rows."""
    out: dict = {}
    for row in rows:
        if row["step"].startswith("ft-"):
            for metric, value in row["metrics"].items():
                out.setdefault((row["arm"], row["task"], metric), []).append(value)
    return out


def verdicts(scores: dict[tuple[str, str, str], list[float]], tasks: dict[str, dict], losses: dict[str, float],
             short_losses: dict[str, float] | None = None) -> list[str]:
    """The issue's targets, each said met or missed: (a) >= 3 points over (c) on SST-2 / NSMC,
    (a) not below (c) on any task metric, (a)'s held-out MLM loss below (b)'s and (a) above (b)
    on every task metric (the loss said on the 128-token set, `losses`, and on the 64-token one,
    `short_losses`). A target whose numbers are missing is said so."""
    mean = {key: float(np.mean(v)) for key, v in scores.items() if v}
    lines = []
    for task, metric in TARGET_TASKS.items():
        if task in tasks:
            a, c = mean.get(("bertkit", task, metric)), mean.get(("random", task, metric))
            if a is None or c is None:
                lines.append(f"{tasks[task]['name']} {metric}: (a) - (c) >= {TARGET_POINTS:g} points: not measured yet")
            else:
                lines.append(f"{tasks[task]['name']} {metric}: (a) - (c) = {a - c:+.1f} points, target >= "
                             f"{TARGET_POINTS:g}: {'met' if a - c >= TARGET_POINTS else 'MISSED'}")
    for other, label in (("random", "(c)"), ("hf", "(b)")):
        compared = [(tasks[t]["name"], m, mean[("bertkit", t, m)] - mean[(other, t, m)])
                    for t in tasks for m in tasks[t]["metrics"]
                    if ("bertkit", t, m) in mean and (other, t, m) in mean]
        if not compared:
            lines.append(f"(a) vs {label} downstream: not measured yet")
            continue
        worse = [f"{name} {m} {d:+.1f}" for name, m, d in compared if (d < 0 if other == "random" else d <= 0)]
        want = "not worse than" if other == "random" else "higher than"
        lines.append(f"(a) {want} {label} on every task metric: "
                     + ("met" if not worse else f"MISSED ({', '.join(worse)})"))
    for label, arm_losses in (("", losses), (" (64-token set)", short_losses or {})):
        if "bertkit" in arm_losses and "hf" in arm_losses:
            a, b = arm_losses["bertkit"], arm_losses["hf"]
            lines.append(f"(a)'s held-out MLM loss below (b)'s{label}: {a:.3f} vs {b:.3f}: {'met' if a < b else 'MISSED'}")
    return lines


# ---------------------------------------------------------------------------- pre-training arms


def read_results(work: Path) -> dict[str, dict]:
    """step name -> its recorded result (results.jsonl; budget_recipes' reader, keyed here)."""
    return {row["step"]: row for row in budget_recipes.read_results(work)}


def record(work: Path, entry: dict) -> None:
    entry.update(machine=f"{platform.machine()}, {os.cpu_count()} CPUs", load_average=round(os.getloadavg()[0], 2),
                 finished=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
    with (work / "results.jsonl").open("a", encoding="utf-8") as handle:
        handle.write(json.dumps(entry, ensure_ascii=False) + "\n")


def prepare(args: argparse.Namespace) -> tuple[Path, Path, Path]:
    """(corpus folder, tokenizer, common data) of --corpus, built when missing (with the
    budget recipe's own data, RECIPE_DATA, and the 64-token scoring set)."""
    spec = CORPORA[args.corpus]
    folder = args.work_dir / args.corpus
    corpus = Path(args.corpus_file or spec["corpus"])
    extra = ("--morphemes", "kiwi") if args.corpus == "ko" and args.ko_tokenizer == "morphemes" else ()
    tok = budget_recipes.tokenizer(folder, corpus, args.vocab_size or spec["vocab_size"], extra)
    for variant in {recipe_data(args), SHORT_SCORE}:  # one build when they are the same
        budget_recipes.data(folder, corpus, tok, variant)
    return folder, tok, budget_recipes.data(folder, corpus, tok, budget_recipes.COMMON)


def recipe_data(args: argparse.Namespace) -> tuple[str, int]:
    """(a)'s data: the recipe's own (RECIPE_DATA), or --data-format's format at its length."""
    fmt, length = RECIPE_DATA["budget"]
    return (args.data_format or fmt, length)


def beside(common: Path, variant: tuple[str, int]) -> Path:
    """The data folder of `variant` that prepare() built next to the common data."""
    return common.parent / "data-{}-{}".format(*variant)


def scores(model: Path, common: Path) -> dict[str, float]:
    """The common score (128 tokens) and the 64-token one (`common64_...`): (a) trains at 64
    tokens, so its positions past 64 are untrained and the 128-token score alone misjudges it."""
    short = beside(common, SHORT_SCORE)
    return {**budget_recipes.common_score(model, common),
            **budget_recipes.common_score(model, short, prefix=f"common{SHORT_SCORE[1]}")}


def pretrain_bertkit(args: argparse.Namespace, folder: Path, common: Path) -> dict:
    out = folder / "runs" / "bertkit"
    own_data = beside(common, recipe_data(args))
    command = budget_recipes.bertkit(
        "pretrain", "--recipe", "budget", "--budget", args.budget, "--preset", args.preset, "--data", str(own_data),
        "--output-dir", str(out), "--overwrite", "--set", f"seed={args.seed}", "--set", "progress=false",
        "--set", "tensorboard=false", *args.set_args)
    seconds = budget_recipes.run(command, folder / "logs" / "pt-bertkit.log")
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines() if line.strip()]
    run_config = json.loads((out / "run_config.json").read_text())
    steps = max(r["step"] for r in rows)
    # metrics.jsonl holds steps, not times: an evaluation is placed at step / steps of the budget
    curve = [{"seconds": round(run_config["budget_seconds"] * r["step"] / steps, 1), "step": r["step"],
              "mlm_loss": r["eval_mlm_loss"], "mlm_accuracy": r["eval_mlm_accuracy"]}
             for r in rows if "eval_mlm_loss" in r]
    return {"steps": steps, "batch_size": run_config["batch_size"], "wall_s": round(seconds, 1), "curve": curve,
            "curve_masks": f"own evaluations, mlm_probability {run_config['mlm_probability']}",
            "command": " ".join(command[2:])}


def pretrain_hf(args: argparse.Namespace, folder: Path, tok: Path, common: Path) -> dict:
    """(b) in a subprocess (`hf-pretrain`, this script), then its snapshots and model scored."""
    out = folder / "runs" / "hf"
    corpus = Path(args.corpus_file or CORPORA[args.corpus]["corpus"])
    command = [sys.executable, str(Path(__file__).resolve()), "--threads", str(args.threads), "hf-pretrain",
               "--corpus-file", str(corpus), "--tokenizer", str(tok), "--data", str(common),
               "--like", str(args.like or folder / "runs" / "bertkit" / "final"), "--output", str(out),
               "--budget-seconds", str(parse_seconds(args.budget)), "--seed", str(args.seed),
               "--calibration-steps", str(args.calibration_steps)]
    seconds = budget_recipes.run(command, folder / "logs" / "pt-hf.log")
    run = json.loads((out / "hf_run.json").read_text())
    curve = []  # on the 64-token set, the one (a)'s own evaluations use
    short = beside(common, SHORT_SCORE)
    for snapshot in run["snapshots"]:
        score = budget_recipes.common_score(out / snapshot["folder"], short)
        curve.append({"seconds": round(snapshot["seconds"], 1), "step": snapshot["step"],
                      "mlm_loss": score["common_mlm_loss"], "mlm_accuracy": score["common_mlm_accuracy"]})
    return {**{k: v for k, v in run.items() if k != "snapshots"}, "wall_s": round(seconds, 1), "curve": curve,
            "curve_masks": "snapshots, the 64-token held-out set", "command": "hf-pretrain (this script)"}


def run_pretraining(args: argparse.Namespace, folder: Path, tok: Path, common: Path) -> None:
    work = args.work_dir
    for arm in args.arms:
        name = f"pt-{arm}-{args.corpus}"
        if name in read_results(work):
            print(f"{name}: recorded, skipped")
            continue
        print(f"{name}: running (log {folder / 'logs'})", flush=True)
        if arm == "bertkit":
            entry = pretrain_bertkit(args, folder, common)
        elif arm == "hf":
            entry = pretrain_hf(args, folder, tok, common)
        else:
            write_random_model(folder / "runs" / "bertkit" / "final", folder / "runs" / "random" / "final", args.seed)
            entry = {"steps": 0, "command": "write_random_model(runs/bertkit/final, runs/random/final)"}
        final = folder / "runs" / arm / "final"
        entry = {"step": name, "arm": arm, "corpus": args.corpus, "budget": args.budget, "preset": args.preset,
                 "sets": " ".join(args.set_args), "data": "{}-{}".format(*recipe_data(args)), **entry,
                 **scores(final, common)}
        if arm != "random":  # the curve ends at the final model, scored on the common set
            ended = entry.get("training_seconds", parse_seconds(args.budget))  # (b) may end its schedule early
            entry["curve"].append({"seconds": round(ended, 1), "step": entry["steps"],
                                   "mlm_loss": entry["common64_mlm_loss"],
                                   "mlm_accuracy": entry["common64_mlm_accuracy"], "final": True})
        record(work, entry)
        print(f"{name}: common held-out MLM loss {entry['common_mlm_loss']:.3f}, "
              f"accuracy {entry['common_mlm_accuracy']:.2f}%", flush=True)


def parse_seconds(budget: str) -> float:
    from bertkit.training.budget import parse_budget

    return parse_budget(budget)


# ---------------------------------------------------------------------------- (b): transformers' recipe


def training_lines(corpus: Path, data: Path, cache: Path) -> list[str]:
    """The non-blank lines of the corpus documents `data` trained on (cached in `cache`)."""
    from bertkit.atomic import write_text_atomic
    from bertkit.data.build import documents_by_split

    if not cache.is_file():
        documents = documents_by_split([corpus], data)["train"]
        write_text_atomic(cache, "".join(line + "\n" for document in documents for line in document))
    return cache.read_text(encoding="utf-8").splitlines()


def hf_blocks(tokenizer, lines: list[str], block_size: int) -> list[dict[str, list[int]]]:
    """run_mlm without --line_by_line: each line tokenized with its special tokens (and their
    mask), then grouped into `block_size` blocks per RUN_MLM_MAP_BATCH lines."""
    blocks = []
    for start in range(0, len(lines), RUN_MLM_MAP_BATCH):
        encoded = tokenizer(lines[start:start + RUN_MLM_MAP_BATCH], return_special_tokens_mask=True)
        grouped = group_texts({k: encoded[k] for k in ("input_ids", "token_type_ids", "attention_mask",
                                                        "special_tokens_mask")}, block_size)
        blocks += [dict(zip(grouped, values)) for values in zip(*grouped.values())]
    return blocks


def hf_config(like: Path):
    """transformers' BertConfig of the size of the bertkit model at `like` (vocabulary, layers,
    hidden, heads, FFN, positions, types, pad id); every other field transformers' default."""
    from transformers import BertConfig

    ours = json.loads((like / "config.json").read_text())
    keys = ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size",
            "max_position_embeddings", "type_vocab_size", "pad_token_id")
    return BertConfig(**{k: ours[k] for k in keys if k in ours})


def cmd_hf_pretrain(args: argparse.Namespace) -> None:
    import torch
    from transformers import (AutoTokenizer, BertForMaskedLM, DataCollatorForLanguageModeling, Trainer,
                              TrainerCallback, TrainingArguments, set_seed)

    from bertkit import Tokenizer

    torch.set_num_threads(args.threads)
    out = args.output
    shutil.rmtree(out, ignore_errors=True)  # an interrupted run starts again
    out.mkdir(parents=True)
    ours = Tokenizer.from_pretrained(args.tokenizer)
    tokenizer = AutoTokenizer.from_pretrained(str(args.tokenizer))
    lines = training_lines(args.corpus_file, args.data, args.output.parent / "hf_training_lines.txt")
    sample = lines[:200]
    if ours.config.pretokenize_morphemes:  # bertkit splits morphemes before tokenizer.json; transformers cannot
        from bertkit.tokenization.morphemes import morpheme_splitter

        split = morpheme_splitter()
        lines = [split(line) for line in lines]
    if tokenizer(lines[:200])["input_ids"] != ours(sample)["input_ids"]:
        raise SystemExit(f"hf-pretrain: transformers' {type(tokenizer).__name__} and bertkit encode "
                         f"{args.tokenizer}'s texts differently")
    blocks = hf_blocks(tokenizer, lines, BLOCK)
    config = hf_config(args.like)
    collator = DataCollatorForLanguageModeling(tokenizer, mlm_probability=0.15)

    def trainer(max_steps: int, callbacks: list) -> Trainer:
        set_seed(args.seed)
        training_args = TrainingArguments(output_dir=str(out / "trainer"), max_steps=max_steps, seed=args.seed,
                                          save_strategy="no", report_to="none", disable_tqdm=True, use_cpu=True)
        return Trainer(model=BertForMaskedLM(config), args=training_args, train_dataset=blocks,
                       data_collator=collator, callbacks=callbacks)

    class StepClock(TrainerCallback):
        def __init__(self):
            self.ends: list[float] = []

        def on_step_end(self, args, state, control, **kwargs):
            self.ends.append(time.perf_counter())

    timer = StepClock()
    trainer(args.calibration_steps, [timer]).train()
    skip = min(5, args.calibration_steps // 4)
    per_step = seconds_per_step(timer.ends, skip)
    max_steps = steps_for_budget(args.budget_seconds, per_step)
    snapshots = []

    def snapshot(model, elapsed: float, step: int) -> None:
        folder = f"snapshot-{len(snapshots) + 1:02d}"
        model.save_pretrained(out / folder)
        snapshots.append({"folder": folder, "seconds": elapsed, "step": step})

    budget = make_wall_clock_callback(args.budget_seconds, 10, snapshot)
    run = trainer(max_steps, [budget])
    run.train()
    final = out / "final"
    run.model.save_pretrained(final)
    for name in ("tokenizer.json", "tokenizer_config.json", "vocab.txt"):  # bertkit's own files: the same encoding
        if (args.tokenizer / name).is_file():
            shutil.copy(args.tokenizer / name, final / name)
    shutil.rmtree(out / "trainer", ignore_errors=True)
    batch = run.args.train_batch_size * run.args.gradient_accumulation_steps
    result = {"steps": run.state.global_step, "batch_size": batch, "planned_max_steps": max_steps,
              "calibration_steps": args.calibration_steps, "calibrated_seconds_per_step": round(per_step, 4),
              "training_seconds": round(budget.elapsed, 1),
              "ended_by": "budget" if budget.stopped_by_budget else "max_steps", "blocks": len(blocks),
              "training_lines": len(lines), "transformers_tokenizer": type(tokenizer).__name__,
              "snapshots": snapshots}
    (out / "hf_run.json").write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps({k: v for k, v in result.items() if k != "snapshots"}))


# ---------------------------------------------------------------------------- fine-tuning


def task_cuts(args: argparse.Namespace, folder: Path) -> dict[str, dict]:
    """{task: {"train", "dev", "train_subset", "eval_set"}} of --corpus (the subsets seeded)."""
    (folder / "data").mkdir(parents=True, exist_ok=True)
    if args.corpus == "en":
        cuts = cut_tasks(folder, argparse.Namespace(sst2_train=args.sst2_train, mrpc_train=args.mrpc_train,
                                                    qnli_train=4000, qnli_dev=1463))
        return {task: cuts[task] for task in CORPORA["en"]["tasks"]}
    return {"nsmc": cut_nsmc(folder, args.nsmc_train, args.nsmc_held_out),
            "klue_nli": cut_klue(folder, "nli", args.klue_nli_held_out, args.klue_nli_fraction),
            "klue_sts": cut_klue(folder, "sts", args.klue_sts_held_out)}


def run_finetuning(args: argparse.Namespace, folder: Path) -> None:
    work, spec = args.work_dir, CORPORA[args.corpus]
    cuts = task_cuts(args, folder)
    lr = args.ft_lr or spec["ft_lr"]
    for seed in args.seeds:  # seed by seed, so a cut-short run has whole seeds
        for task, settings in spec["tasks"].items():
            for arm in args.arms:
                name = f"ft-{arm}-{task}-s{seed}"
                if name in read_results(work):
                    print(f"{name}: recorded, skipped")
                    continue
                print(f"{name}: running (log {folder / 'logs' / (name + '.log')})", flush=True)
                result = finetune(folder, name, settings["head"], cuts[task], folder / "runs" / arm / "final",
                                  epochs=settings["epochs"], lr=lr, seed=seed, max_seq_length=BLOCK,
                                  metrics=settings["metrics"], log=folder / "logs" / f"{name}.log",
                                  sets=tuple(args.ft_sets))
                record(work, {"step": name, "arm": arm, "corpus": args.corpus, "task": task, "seed": seed,
                              "epochs": settings["epochs"], "lr": lr, "ft_sets": args.ft_sets,
                              "train_subset": cuts[task]["train_subset"],
                              "eval_set": cuts[task]["eval_set"], **result})
                print(f"{name}: {result['metrics']}", flush=True)


# ---------------------------------------------------------------------------- table and curves


def write_table(work: Path) -> Path:
    results = list(read_results(work).values())
    lines = []
    for corpus, spec in CORPORA.items():
        rows = [r for r in results if r.get("corpus") == corpus]
        pretraining = {r["arm"]: r for r in rows if r["step"].startswith("pt-")}
        if not pretraining:
            continue
        scores = arm_means(rows)
        columns = [(t, m) for t, s in spec["tasks"].items() for m in s["metrics"]]
        any_row = next(iter(pretraining.values()))
        ft_sets = sorted({value for r in rows for value in r.get("ft_sets") or ()})
        lines += [f"### {corpus}: budget {any_row['budget']}, preset {any_row['preset']}"
                  + (f", {any_row['sets']}" if any_row.get("sets") else "")
                  + (f", fine-tuning {' '.join(ft_sets)}" if ft_sets else "")
                  + (f", (a)'s data {any_row['data']}" if any_row.get("data", RECIPE_NAME) != RECIPE_NAME else ""), "",
                  "| arm | pre-training steps x batch | held-out MLM loss (128 / 64 tokens) | "
                  "held-out MLM acc % (128 / 64) | "
                  + " | ".join(f"{spec['tasks'][t]['name']} {m}" for t, m in columns) + " |",
                  "|---|---:|---:|---:|" + "---|" * len(columns)]
        for arm, label in ARMS.items():
            pt = pretraining.get(arm)
            if pt is None:
                continue
            cells = [summary(scores.get((arm, t, m), [])) for t, m in columns]
            steps = f"{pt['steps']} x {pt['batch_size']}" if pt.get("batch_size") else str(pt["steps"])
            lines.append(f"| {label} | {steps} | {pt['common_mlm_loss']:.3f} / {pt.get('common64_mlm_loss', math.nan):.3f} | "
                         f"{pt['common_mlm_accuracy']:.2f} / {pt.get('common64_mlm_accuracy', math.nan):.2f} | "
                         + " | ".join(cells) + " |")
        for first, second in (("bertkit", "random"), ("bertkit", "hf")):
            if first in pretraining and second in pretraining:
                diffs = [difference(scores.get((first, t, m)), scores.get((second, t, m))) for t, m in columns]
                loss, acc = ([pretraining[first].get(f"{s}_mlm_{k}", math.nan) - pretraining[second].get(f"{s}_mlm_{k}", math.nan)
                              for s in ("common", "common64")] for k in ("loss", "accuracy"))
                lines.append(f"| {ARMS[first][:3]} - {ARMS[second][:3]} | | {'{:+.3f} / {:+.3f}'.format(*loss)} | "
                             f"{'{:+.2f} / {:+.2f}'.format(*acc)} | " + " | ".join(diffs) + " |")
        losses = {arm: r["common_mlm_loss"] for arm, r in pretraining.items()}
        short = {arm: r["common64_mlm_loss"] for arm, r in pretraining.items() if "common64_mlm_loss" in r}
        lines += ["", *(f"- {line}" for line in verdicts(scores, spec["tasks"], losses, short)), ""]
    target = work / "results.md"
    target.write_text("\n".join(lines) + "\n", encoding="utf-8")
    print(target.read_text(), end="")
    return target


def difference(first: list[float] | None, second: list[float] | None) -> str:
    return "-" if not first or not second else f"{np.mean(first) - np.mean(second):+.1f}"


def plot_curves(work: Path) -> list[Path]:
    """curves-<corpus>.png: held-out MLM loss of (a) and (b) over wall time, (c)'s as a line."""
    from bertkit.plots import new_figure, save_png

    written = []
    results = read_results(work)
    for corpus in CORPORA:
        runs = [results.get(f"pt-{arm}-{corpus}") for arm in ("bertkit", "hf")]
        if not any(runs):
            continue
        figure = new_figure(7, 4)
        axes = figure.add_subplot(1, 1, 1)
        for run in filter(None, runs):
            axes.plot([p["seconds"] / 60 for p in run["curve"]], [p["mlm_loss"] for p in run["curve"]], "o-",
                      label=f"{ARMS[run['arm']]} ({run['curve_masks']})")
        control = results.get(f"pt-random-{corpus}")
        if control is not None:  # where both started: an untrained model of the same size
            axes.axhline(control.get("common64_mlm_loss", control["common_mlm_loss"]), color="grey", linestyle="--", label=ARMS["random"])
        axes.set_xlabel("wall time (minutes)")
        axes.set_ylabel("held-out MLM loss (64-token set, 15% fixed masks)")
        axes.set_title(f"{corpus}: equal wall time ({runs[0]['budget'] if runs[0] else runs[1]['budget']})", fontsize=10)
        axes.legend(fontsize=7)
        figure.tight_layout()
        written.append(save_png(figure, work / f"curves-{corpus}.png"))
    for path in written:
        print(path)
    return written


# ---------------------------------------------------------------------------- command line


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work-dir", type=Path, default=REPO / "runs" / "budget-downstream")
    parser.add_argument("--corpus", choices=list(CORPORA), default="en", help="the corpus and its pair of tasks")
    parser.add_argument("--threads", type=int, default=2, help="OMP_NUM_THREADS of every arm and fine-tuning run")
    sub = parser.add_subparsers(dest="command", required=True)
    r = sub.add_parser("run", help="pre-train, score and fine-tune what is not recorded yet")
    r.add_argument("--budget", default="60m", help="wall-clock budget of each pre-training arm (default: 60m)")
    r.add_argument("--preset", default="tiny", help="(a)'s preset; (b) and (c) take its size")
    r.add_argument("--set", dest="set_args", action="append", default=[], type=lambda v: f"--set={v}",
                   help="a pretrain field for (a), e.g. --set model.hidden_size=32 (passed through)")
    r.add_argument("--data-format", choices=["packed", "sop", "nsp"], default=None,
                   help="(a)'s data format at the recipe's length (default: the recipe's, packed); sop gives "
                        "MLM two real segments (token types 0/1, an inner [SEP]) as the pair tasks have")
    r.add_argument("--seed", type=int, default=1, help="pre-training seed (every arm)")
    r.add_argument("--seeds", nargs="+", type=int, default=[1, 2, 3], help="fine-tuning seeds")
    r.add_argument("--corpus-file", default=None, help="pre-training text (default: the corpus's)")
    r.add_argument("--vocab-size", type=int, default=None, help="default: 8192 (en), 16000 (ko)")
    r.add_argument("--ko-tokenizer", choices=["syllable", "morphemes"], default="syllable",
                   help="Korean WordPiece over syllables (quality_table's) or over kiwi morphemes")
    r.add_argument("--calibration-steps", type=int, default=40, help="(b)'s timed run that sets its max_steps")
    r.add_argument("--ft-lr", type=float, default=None, help="fine-tuning lr (default: 3e-4 en, 1e-4 ko)")
    r.add_argument("--ft-set", dest="ft_sets", action="append", default=[], metavar="KEY=VALUE",
                   help="a field of every fine-tuning run (e.g. model.classifier_pooling=mean); use a new "
                        "--work-dir holding the runs/ to fine-tune, as recorded steps are skipped")
    r.add_argument("--sst2-train", type=int, default=8000)
    r.add_argument("--mrpc-train", type=int, default=None, help="MRPC train subset (default: all)")
    r.add_argument("--nsmc-train", type=int, default=8000)
    r.add_argument("--nsmc-held-out", type=int, default=1000)
    r.add_argument("--klue-nli-held-out", type=int, default=600)
    r.add_argument("--klue-sts-held-out", type=int, default=119)
    r.add_argument("--klue-nli-fraction", type=float, default=1.0, help="KLUE-NLI training part: this fraction of the rest")
    r.add_argument("--arms", nargs="+", choices=list(ARMS), default=list(ARMS),
                   help="the arms to run (default: all; (b) and (c) take (a)'s size, so (a) comes first)")
    r.add_argument("--like", type=Path, default=None,
                   help="the bertkit model whose size (b) takes (default: (a)'s final; another run of (a)'s preset "
                        "and tokenizer lets (b) run beside (a))")
    r.add_argument("--pretrain-only", action="store_true", help="stop after the pre-training arms")
    h = sub.add_parser("hf-pretrain", help="(b) alone, in its own process (run calls it)")
    h.add_argument("--corpus-file", type=Path, required=True)
    h.add_argument("--tokenizer", type=Path, required=True)
    h.add_argument("--data", type=Path, required=True, help="(a)'s data: its held-out documents are left out")
    h.add_argument("--like", type=Path, required=True, help="the bertkit model whose size to take")
    h.add_argument("--output", type=Path, required=True)
    h.add_argument("--budget-seconds", type=float, required=True)
    h.add_argument("--seed", type=int, default=1)
    h.add_argument("--calibration-steps", type=int, default=40)
    sub.add_parser("table", help="results.md and the curves from results.jsonl")
    args = parser.parse_args(argv)
    threads = {"OMP_NUM_THREADS": str(args.threads), "MKL_NUM_THREADS": str(args.threads)}
    os.environ.update(threads)  # budget_recipes' commands
    ENV.update(threads)  # ablations' fine-tuning commands
    if args.command == "hf-pretrain":
        cmd_hf_pretrain(args)
        return 0
    args.work_dir.mkdir(parents=True, exist_ok=True)
    if args.command == "run":
        folder, tok, common = prepare(args)
        run_pretraining(args, folder, tok, common)
        if not args.pretrain_only:
            run_finetuning(args, folder)
    write_table(args.work_dir)
    plot_curves(args.work_dir)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
