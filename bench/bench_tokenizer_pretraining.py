"""Which WordPiece rule serves pre-training? Tiny BERTs pre-trained with each tokenizer.

For each tokenizer rule (likelihood `gain`, likelihood `pmi`, frequency), on the same
corpus (Jane Austen, the demo's) and vocabulary size: train the tokenizer, build NSP
data, pre-train a tiny BERT for the same number of steps and sequences, and report
held-out MLM accuracy, plus the tokenizer's fertility (tokens per word) on held-out text.
MLM accuracy is per masked *token*, so a tokenizer that cuts words finer gets easier
targets; read it beside fertility (the table in docs/tokenizers.md does).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, __import__("os").path.dirname(__file__))
from common import data_dir  # noqa: E402

RULES = {
    "wordpiece (gain)": dict(algorithm="wordpiece", score="gain"),
    "wordpiece (pmi, min-freq 2)": dict(algorithm="wordpiece", score="pmi"),
    "wordpiece-freq": dict(algorithm="wordpiece-freq"),
}


def fertility(tokenizer, texts: list[str]) -> float:
    words = sum(len(t.split()) for t in texts)
    tokens = sum(len(ids) for ids in tokenizer(texts, add_special_tokens=False)["input_ids"])
    return tokens / max(1, words)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--vocab-size", type=int, default=8000)
    parser.add_argument("--steps", type=int, default=400)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--max-seq-length", type=int, default=128)
    args = parser.parse_args()

    from bertkit.data.build import BuildOptions, build_dataset
    from bertkit.pretraining import build_config, pretrain
    from bertkit.tokenization import Tokenizer
    from bertkit.tokenization.train import TrainOptions, train_tokenizer

    corpus = data_dir() / "corpus-en" / "austen_novels.txt.gz"
    heldout = [line for line in (data_dir() / "wikitext-2-raw" / "wiki.valid.raw").read_text(encoding="utf-8").splitlines()
               if line.strip() and not line.startswith(" =")][:2000]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, options in RULES.items():
            root = Path(tmp) / name.split()[0].replace("(", "") / str(len(rows))
            train_tokenizer([corpus], root / "tok", TrainOptions(vocab_size=args.vocab_size, show_progress=False, **options))
            build_dataset([corpus], root / "tok", root / "data", BuildOptions(max_seq_length=args.max_seq_length, seed=1))
            config = build_config(dict(data=str(root / "data"), output_dir=str(root / "run"), preset="tiny",
                                       max_steps=args.steps, batch_size=args.batch_size, lr=1e-3,
                                       warmup_steps=args.steps // 10, eval_steps=args.steps, save_steps=args.steps,
                                       log_steps=max(1, args.steps // 10), progress=False, tensorboard=False), {})
            result = pretrain(config)
            final = [r for r in result.records if "eval_mlm_accuracy" in r][-1]
            rows.append({"tokenizer": name, "fertility (WikiText-2 valid)": round(fertility(Tokenizer.from_pretrained(root / "tok"), heldout), 3),
                         "MLM acc (tiny pretrain)": round(final["eval_mlm_accuracy"], 2),  # percent
                         "MLM perplexity": round(final["eval_mlm_perplexity"], 1)})
            print(json.dumps(rows[-1]), flush=True)
    print(f"\n{args.vocab_size} tokens, tiny BERT, {args.steps} steps x {args.batch_size} x {args.max_seq_length}, Austen")
    print("| tokenizer | fertility | MLM accuracy | MLM perplexity |\n|---|---:|---:|---:|")
    for row in rows:
        print(f"| {row['tokenizer']} | {row['fertility (WikiText-2 valid)']} | {row['MLM acc (tiny pretrain)']:.1f}% | {row['MLM perplexity']} |")


if __name__ == "__main__":
    main()
