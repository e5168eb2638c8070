"""ELMo features vs BERT features vs BERT fine-tuned on CoNLL-2003 NER, each pre-trained here
(issue 33, deliverable 4; docs/ablations.md section (i)).

    .venv/bin/python experiments/elmo_vs_bert.py run              # everything not done yet (resumable)
    .venv/bin/python experiments/elmo_vs_bert.py run pt-bert      # one step (and what it needs)
    .venv/bin/python experiments/elmo_vs_bert.py list             # the steps, done or not
    .venv/bin/python experiments/elmo_vs_bert.py table            # the markdown table from results.jsonl

Pre-training (one subprocess each, one thread): one uncased WordPiece of --vocab-size on the
English corpus of experiments/ablations.py, one `packed` data directory of it that both
objectives read (ELMo reads the same instances back as words), then
- pt-bert: `--objective mlm --preset tiny` (2 layers x 128) for --bert-steps: its FLOPs are the budget B;
- pt-elmo_flops: `--objective bilm`, ELMO_SIZES, for the steps whose FLOPs (`bilm_step_flops`,
  the mean of --flops-batches sampled batches) equal B;
- pt-elmo_wall: the same biLM for pt-bert's measured wall time (`--budget`, run after it);
- random-bert, random-elmo: the same configs and files with fresh weights (the controls).
The same batch, lr, 10% warm-up then linear decay, and seed for every run.

NER (in this process, through table7_ner.run_choice: `bertkit finetune ner [--features X]`):
the same seeded subset of eng.train and the dev set for every arm; each arm once per
fine-tuning seed; the score is the best epoch's entity F1 (seqeval rules), as table7_ner.py.
Results: one JSON object a line in <work-dir>/results.jsonl; a recorded step is skipped.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "experiments"))
from ablations import (  # noqa: E402
    CORPUS, bilm_step_flops, data_info, mean_and_spread, read_metrics, record, shown, step_flops)
from quality_table import BERTKIT, DATA, ENV, read_results, run_command, write_random_model  # noqa: E402
from table7_ner import FINETUNE, run_choice, write_subset  # noqa: E402

CONLL = DATA / "conll2003"
# elmo-small cut to the BERT arm's size: projection 128 (= BERT's hidden; features 2 x 128),
# 256 cells per LSTM, 256 character filters of widths 1-5, one highway layer
ELMO_SIZES = {"cell_size": 256, "filters": [[1, 16], [2, 16], [3, 32], [4, 64], [5, 128]], "n_highway": 1,
              "projection_dim": 128}
# NER arm -> (pre-training run, table7 choice)
ARMS = {
    "bert_finetune": ("pt-bert", FINETUNE),
    "bert_weighted_sum": ("pt-bert", "weighted_sum"),
    "elmo_flops": ("pt-elmo_flops", "scalar_mix"),
    "elmo_wall": ("pt-elmo_wall", "scalar_mix"),
    "random_bert_finetune": ("random-bert", FINETUNE),
    "random_bert_weighted_sum": ("random-bert", "weighted_sum"),
    "random_elmo": ("random-elmo", "scalar_mix"),
}
ARM_NAMES = {
    "bert_finetune": "BERT (MLM), fine-tuned", "bert_weighted_sum": "BERT (MLM) features: `weighted_sum` of all 3 states",
    "elmo_flops": "ELMo (biLM) features, equal FLOPs: `scalar_mix`",
    "elmo_wall": "ELMo (biLM) features, equal wall time: `scalar_mix`",
    "random_bert_finetune": "BERT, random init, fine-tuned", "random_bert_weighted_sum": "BERT, random init, features",
    "random_elmo": "ELMo, random init, features",
}


# ---------------------------------------------------------------------------- steps


def step_names(seeds: list[int]) -> list[str]:
    """In running order: the data, the pre-training runs, then every arm per seed (a cut-short run
    has whole seeds)."""
    names = ["tokenizer", "data", "pt-bert", "pt-elmo_flops", "pt-elmo_wall", "random-bert", "random-elmo"]
    return names + [f"ner-{arm}-s{seed}" for seed in seeds for arm in ARMS]


def dependencies(name: str) -> list[str]:
    if name.startswith("ner-"):
        arm = name.removeprefix("ner-").rsplit("-s", 1)[0]
        return [ARMS[arm][0]]
    return {"data": ["tokenizer"], "pt-bert": ["data"], "pt-elmo_flops": ["pt-bert"], "pt-elmo_wall": ["pt-bert"],
            "random-bert": ["pt-bert"], "random-elmo": ["pt-elmo_flops"]}.get(name, [])


def needed(requested: list[str], seeds: list[int]) -> list[str]:
    """The requested steps (all when none) and what they need, in running order."""
    names = step_names(seeds)
    wanted = set(requested or names)
    unknown = wanted - set(names)
    if unknown:
        raise SystemExit(f"elmo_vs_bert: unknown step {sorted(unknown)[0]!r}; see `elmo_vs_bert.py list`")
    stack = list(wanted)
    while stack:
        for dep in dependencies(stack.pop()):
            if dep not in wanted:
                wanted.add(dep)
                stack.append(dep)
    return [n for n in names if n in wanted]


# ---------------------------------------------------------------------------- FLOPs


def bert_step_flops(config: dict, batch_size: int, seq_len: int, mean_len: float) -> float:
    """An MLM step on packed data: sequences padded to seq_len, 15% of the mean_len - 2 text tokens masked."""
    return step_flops("mlm", config, batch_size, seq_len, batch_size * 0.15 * (mean_len - 2))


def sample_batches(size: int, batch_size: int, batches: int, seed: int) -> list[np.ndarray]:
    """`batches` random batches of instance indices (each without repeats), seeded."""
    rng = np.random.default_rng(seed)
    return [rng.choice(size, size=batch_size, replace=False) for _ in range(batches)]


def bilm_batch_shapes(data: Path, config: dict, batches: list[np.ndarray]) -> list[tuple[int, int, int]]:
    """(padded words, character columns after the CNN's crop, targets of both directions) of
    each batch of training instances as the bilm objective builds it (<S> words </S>)."""
    import torch

    from bertkit import Tokenizer
    from bertkit.data.dataset import PretrainingDataset
    from bertkit.data.words import TokenWords
    from bertkit.model.elmo import ElmoConfig
    from bertkit.model.elmo.characters import BOS, EOS, CharacterMapper, batch_character_ids
    from bertkit.model.elmo.layers import CharacterEncoder

    dataset = PretrainingDataset.open(data)
    words = TokenWords(Tokenizer.from_pretrained(data / "tokenizer"))
    fields = {k: v for k, v in config.items() if k in ElmoConfig.__dataclass_fields__}
    encoder = CharacterEncoder(ElmoConfig(**fields))
    mapper = CharacterMapper(fields.get("max_characters_per_token", 50))
    shapes = []
    for batch in batches:
        rows = [mapper.sentence_ids([BOS, *words.words(dataset[int(i)]["input_ids"]), EOS]) for i in batch]
        chars = encoder.crop(torch.from_numpy(batch_character_ids(rows))).shape[-1]
        shapes.append((max(len(r) for r in rows), chars, sum(2 * (len(r) - 1) for r in rows)))
    return shapes


def elmo_step_flops(config: dict, shapes: list[tuple[int, int, int]], batch_size: int) -> float:
    """The mean of bilm_step_flops over sampled batch shapes."""
    return float(np.mean([bilm_step_flops(config, batch_size, words, chars, predicted)
                          for words, chars, predicted in shapes]))


def elmo_config(data: Path, preset: str) -> dict:
    """The config fields a fresh `pretrain --objective bilm --preset preset` run with ELMO_SIZES gets
    on `data` (its softmax as wide as the data's word vocabulary): to plan its steps before it runs."""
    from bertkit.data.dataset import PretrainingDataset
    from bertkit.objectives.bilm import BilmObjective

    return BilmObjective.model_config(preset, PretrainingDataset.open(data), dict(ELMO_SIZES)).to_dict()


# ---------------------------------------------------------------------------- running


def pretrain_command(args, objective: str, preset: str, output: Path, steps: int | None, budget: float | None) -> list[str]:
    command = [BERTKIT, "pretrain", "--recipe", "bert", "--objective", objective, "--preset", preset, "--data", str(args.work_dir / "data"),
               "--output-dir", str(output), "--set", f"batch_size={args.batch_size}", "--set", f"lr={args.pretrain_lr}",
               "--set", f"seed={args.seed}", "--set", "progress=false"]
    if budget is None:  # a step count: warm-up 10% of it, checkpoints to resume from, evaluation at the end
        command += ["--set", f"max_steps={steps}", "--set", f"warmup_steps={max(1, steps // 10)}",
                    "--set", f"save_steps={max(1, steps // 4)}", "--set", f"eval_steps={steps}",
                    "--set", f"log_steps={max(1, steps // 20)}"]
    else:  # the wall time: warm-up 10% of it, one evaluation at the end
        command += ["--budget", f"{budget:.0f}s", "--set", "warmup_ratio=0.1", "--set", "budget_evals=1",
                    "--set", "log_steps=5"]
    if objective == "bilm":
        command += [f"--set=model.{name}={json.dumps(value, separators=(',', ':'))}" for name, value in ELMO_SIZES.items()]
    if budget is None and any(output.glob("checkpoint-*")):
        command.append("--resume")
    elif output.exists():
        command.append("--overwrite")
    return command


def run_pretrain(name: str, args: argparse.Namespace) -> dict:
    work = args.work_dir
    output = work / "runs" / name
    info = data_info(work / "data")
    mean_len = info["tokens"] / info["instances"]
    results = read_results(work)
    entry: dict = {"step": name, "mean_len": round(mean_len, 1)}
    if name == "pt-bert":
        objective, preset, steps, budget = "mlm", args.bert_preset, args.bert_steps, None
    else:
        objective, preset = "bilm", args.elmo_preset
        planned = elmo_config(work / "data", preset)
        batches = sample_batches(info["instances"], args.batch_size, args.flops_batches, args.seed)
        shapes = bilm_batch_shapes(work / "data", planned, batches)
        per_step = elmo_step_flops(planned, shapes, args.batch_size)
        entry["sampled_batches"] = {"batches": len(shapes), "mean_words": float(np.mean([s[0] for s in shapes])),
                                    "mean_chars": float(np.mean([s[1] for s in shapes]))}
        if name == "pt-elmo_flops":  # equal FLOPs with pt-bert
            steps, budget = max(1, round(results["pt-bert"]["flops_total"] / per_step)), None
            entry["flops_matched_to"] = "pt-bert"
        else:  # equal wall time with pt-bert
            steps, budget = None, results["pt-bert"]["seconds"]
            entry["wall_matched_to"] = "pt-bert"
    command = pretrain_command(args, objective, preset, output, steps, budget)
    load_before = os.getloadavg()[0]
    seconds = run_command(command, work / "logs" / f"{name}.log")
    config = json.loads((output / "final" / "config.json").read_text())
    lines = read_metrics(output)
    trained = max(r["step"] for r in lines if "step" in r)
    if objective == "mlm":
        per_step = bert_step_flops(config, args.batch_size, args.max_seq_length, mean_len)
    evals = [r for r in lines if any(k.startswith("eval_") for k in r)]
    train = [r for r in lines if "loss" in r]
    entry.update(objective=objective, preset=preset, steps=trained, batch_size=args.batch_size,
                 tokens_seen=round(trained * args.batch_size * mean_len), flops_per_step=per_step,
                 flops_total=per_step * trained, seconds=round(seconds, 1), budget_seconds=budget,
                 load_before=round(load_before, 2), load_after=round(os.getloadavg()[0], 2),
                 params=parameter_count(output / "final"), final_eval=evals[-1] if evals else None,
                 final_train=train[-1] if train else None, command=shown(command, work))
    return entry


def parameter_count(model_dir: Path) -> int:
    from safetensors import safe_open

    with safe_open(str(model_dir / "model.safetensors"), "pt") as handle:
        return int(sum(np.prod(handle.get_slice(k).get_shape()) for k in handle.keys()))


def run_ner(name: str, args: argparse.Namespace) -> dict:
    arm, seed = name.removeprefix("ner-").rsplit("-s", 1)
    source, choice = ARMS[arm]
    feature_based = choice != FINETUNE
    ner_args = argparse.Namespace(
        model=str(args.work_dir / "runs" / source / "final"), work_dir=args.work_dir / "ner" / f"{arm}-s{seed}",
        batch_size=args.batch_size, max_seq_length=args.max_seq_length, seed=int(seed), no_progress=True,
        epochs=args.ft_epochs, lr=args.ft_lr, feature_epochs=args.feature_epochs, feature_lr=args.feature_lr,
        lstm_hidden_size=args.lstm_hidden_size)
    load_before = os.getloadavg()[0]
    row = run_choice(choice, ner_args, args.work_dir / "train_subset.txt", args.work_dir / "dev_subset.txt")
    return {"step": name, "arm": arm, "seed": int(seed), "pretrained": source, "features": choice if feature_based else None,
            **row, "load_before": round(load_before, 2), "load_after": round(os.getloadavg()[0], 2)}


def run_step(name: str, args: argparse.Namespace) -> dict:
    work = args.work_dir
    if name == "tokenizer":
        command = [BERTKIT, "tokenizer", "train", "--vocab-size", str(args.vocab_size), "--output", str(work / "tok"),
                   "--no-progress", str(CORPUS)]
    elif name == "data":
        command = [BERTKIT, "data", "build", "--tokenizer", str(work / "tok"), "--max-seq-length",
                   str(args.max_seq_length), "--format", "packed", "--output", str(work / "data"), "--overwrite",
                   "--no-progress", "--workers", "1", str(CORPUS)]
    elif name.startswith("random-"):
        source = {"random-bert": "pt-bert", "random-elmo": "pt-elmo_flops"}[name]
        write_random_model(work / "runs" / source / "final", work / "runs" / name / "final", args.seed)
        return {"step": name, "command": f"write_random_model({source}/final, {name}/final)", "seconds": 0}
    elif name.startswith("pt-"):
        return run_pretrain(name, args)
    else:
        return run_ner(name, args)
    entry = {"step": name, "seconds": round(run_command(command, work / "logs" / f"{name}.log"), 1),
             "command": shown(command, work)}
    return {**entry, **data_info(work / "data")} if name == "data" else entry


def cmd_run(args: argparse.Namespace) -> None:
    work = args.work_dir
    (work / "logs").mkdir(parents=True, exist_ok=True)
    counts = {"train": write_subset(args.train, args.train_sentences, args.subset_seed, work / "train_subset.txt"),
              "dev": write_subset(args.dev, args.dev_sentences, args.subset_seed, work / "dev_subset.txt")}
    print(f"elmo_vs_bert: NER train {counts['train']:,} sentences, dev {counts['dev']:,}", file=sys.stderr)
    done = set(read_results(work))
    for name in needed(args.steps, args.seeds):
        if name in done:
            continue
        print(f"elmo_vs_bert: {name}: running ({time.strftime('%H:%M:%S')}, load {os.getloadavg()[0]:.2f})",
              file=sys.stderr, flush=True)
        entry = run_step(name, args)
        entry.update(machine=f"{platform.machine()}, {os.cpu_count()} CPUs", threads=os.environ.get("OMP_NUM_THREADS"),
                     finished=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), ner_train=counts["train"],
                     ner_dev=counts["dev"])
        record(work, entry)
        print(f"elmo_vs_bert: {name}: done in {entry.get('seconds')} s", file=sys.stderr, flush=True)


def cmd_list(args: argparse.Namespace) -> None:
    done = read_results(args.work_dir)
    for name in step_names(args.seeds):
        print(f"{name:34s} {'done' if name in done else '-'}")


# ---------------------------------------------------------------------------- table


def held_out(entry: dict) -> str:
    """A pre-training run's held-out score on its own objective (eval split, last evaluation)."""
    ev = entry.get("final_eval") or {}
    if "eval_mlm_accuracy" in ev:
        return f"MLM acc {ev['eval_mlm_accuracy']:.1f}%, ppl {ev['eval_mlm_perplexity']:.0f}"
    if "eval_forward_perplexity" in ev:
        return (f"next word acc {ev['eval_forward_accuracy']:.1f}%, ppl fwd {ev['eval_forward_perplexity']:.0f} / "
                f"bwd {ev['eval_backward_perplexity']:.0f}")
    return "-"


def f1_summary(values: list[float]) -> str:
    """'mean ± std (seeds' values)'."""
    if not values:
        return "-"
    return f"{mean_and_spread(values)} ({', '.join(f'{x:.1f}' for x in values)})"


def table_rows(results: dict[str, dict]) -> list[str]:
    """The markdown table: one row per arm with its pre-training run and its seeds' dev F1."""
    lines = ["| arm | pre-training | steps | tokens seen | train FLOPs | wall | held-out (own objective) | "
             "dev entity F1, mean ± std (seeds) |", "|---|---|---:|---:|---:|---:|---|---|"]
    for arm, (source, _) in ARMS.items():
        f1 = [r["f1"] for r in sorted((r for r in results.values() if r.get("arm") == arm and r["step"].startswith("ner-")),
                                      key=lambda r: r["seed"]) if r.get("f1") is not None]
        pt = results.get(source, {})
        if not f1 and not pt:
            continue
        if source.startswith("random-"):
            cells = [f"none (`{source}`)", "0", "-", "-", "-", "-"]
        else:
            cells = [f"`{source}`", str(pt.get("steps", "-")), f"{pt['tokens_seen'] / 1e6:.2f} M" if pt else "-",
                     f"{pt['flops_total'] / 1e12:.2f} T" if pt else "-", f"{pt['seconds'] / 60:.1f} min" if pt else "-",
                     held_out(pt)]
        lines.append("| " + " | ".join([ARM_NAMES[arm], *cells, f1_summary(f1)]) + " |")
    return lines


def cmd_table(args: argparse.Namespace) -> None:
    print("\n".join(table_rows(read_results(args.work_dir))))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--work-dir", type=Path, default=Path("/tmp/bertkit_elmo_vs_bert"))
    parser.add_argument("--seeds", type=lambda s: [int(x) for x in s.split(",")], default=[1, 2],
                        help="NER fine-tuning seeds, comma-separated")
    budget = parser.add_argument_group("pre-training")
    budget.add_argument("--vocab-size", type=int, default=8192)
    budget.add_argument("--max-seq-length", type=int, default=128)
    budget.add_argument("--batch-size", type=int, default=32, help="pre-training and NER batch")
    budget.add_argument("--bert-preset", default="tiny")
    budget.add_argument("--elmo-preset", default="elmo-small", help="cut to ELMO_SIZES")
    budget.add_argument("--bert-steps", type=int, default=1000, help="pt-bert's steps: their FLOPs are the budget B")
    budget.add_argument("--pretrain-lr", type=float, default=1e-3)
    budget.add_argument("--seed", type=int, default=42, help="pre-training seed")
    budget.add_argument("--flops-batches", type=int, default=20, help="batches sampled for the biLM's mean step FLOPs")
    ner = parser.add_argument_group("NER")
    ner.add_argument("--train", type=Path, default=CONLL / "eng.train")
    ner.add_argument("--dev", type=Path, default=CONLL / "eng.testa")
    ner.add_argument("--train-sentences", type=int, default=2000)
    ner.add_argument("--dev-sentences", type=int, default=0, help="0: the whole dev file")
    ner.add_argument("--subset-seed", type=int, default=42)
    ner.add_argument("--ft-epochs", type=int, default=4)
    ner.add_argument("--ft-lr", type=float, default=3e-4, help="fine-tuning lr (the ablations' for these tiny models)")
    ner.add_argument("--feature-epochs", type=int, default=4)
    ner.add_argument("--feature-lr", type=float, default=1e-3)
    ner.add_argument("--lstm-hidden-size", type=int, default=256)
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("run", help="run the steps not recorded yet")
    run.add_argument("steps", nargs="*", help="step names (default: all)")
    run.set_defaults(func=cmd_run)
    commands.add_parser("list", help="the steps and which are done").set_defaults(func=cmd_list)
    commands.add_parser("table", help="the markdown table of the recorded results").set_defaults(func=cmd_table)
    args = parser.parse_args(argv)
    args.work_dir.mkdir(parents=True, exist_ok=True)
    args.func(args)


if __name__ == "__main__":
    main()
