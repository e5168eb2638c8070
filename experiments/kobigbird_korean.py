"""A Korean long-document run (issue 43): a kobigbird-tiny (KoBigBird's layout: WordPiece, [PAD] [UNK]
[CLS] [SEP]=3 [MASK], <s>=5, </s>=6; bigbird-tiny's size) pre-trained with objective mlm on NSMC
reviews packed into 4,096-token documents (the corpus has no long documents: one review a line, packed
back to back), block-sparse attention throughout. Its held-out MLM loss against the unigram baseline
(the loss of predicting every masked piece by its training frequency) goes to
experiments/results/kobigbird_korean.jsonl.

    python experiments/kobigbird_korean.py WORK_DIR            # tokenizer, data, run (~10 min on 1 thread)
    python experiments/kobigbird_korean.py record RUN_DIR      # only append the result of a finished run
"""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CORPUS = REPO.parent / "shared" / "data" / "korean-corpus" / "nsmc_neutral_reviews.txt.gz"
RESULTS = REPO / "experiments" / "results" / "kobigbird_korean.jsonl"
REVIEWS, VOCAB, LENGTH, STEPS, BATCH = 40_000, 8000, 4096, 200, 2
BERTKIT = [sys.executable, "-m", "bertkit"]


def prepare(work: Path) -> Path:
    text, tok, data = work / "ko.txt", work / "tok", work / "data4k"
    if not text.exists():
        with gzip.open(CORPUS, "rt", encoding="utf-8") as source:
            text.write_text("".join(line for _, line in zip(range(REVIEWS), source)), encoding="utf-8")
    if not tok.exists():  # WordPiece's specials in KoBigBird's order, then <s> and </s>
        subprocess.run([*BERTKIT, "tokenizer", "train", "--vocab-size", str(VOCAB), "--extra-special-tokens",
                        "<s>,</s>", "--output", str(tok), "--no-progress", "--threads", "1", str(text)], check=True)
    if not data.exists():
        subprocess.run([*BERTKIT, "data", "build", "--tokenizer", str(tok), "--output", str(data), "--max-seq-length",
                        str(LENGTH), "--format", "packed", "--eval-fraction", "0.05", "--no-progress", "--threads", "1",
                        str(text)], check=True)
    return data


def record(run: Path, seconds: float | None = None, load: float | None = None) -> dict:
    records = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines() if line.strip()]
    final = [r for r in records if "eval_mlm_loss" in r][-1]
    config = json.loads((run / "final" / "config.json").read_text())
    row = {"preset": "kobigbird-tiny", "corpus": f"NSMC reviews (first {REVIEWS:,}) packed into {LENGTH}-token documents",
           "vocab_size": config["vocab_size"], "sep_token_id": config["sep_token_id"],
           "max_position_embeddings": config["max_position_embeddings"], "steps": final["step"], "batch_size": BATCH,
           "seq_len": LENGTH, "eval_mlm_loss": round(final["eval_mlm_loss"], 4),
           "eval_unigram_loss": round(final["eval_unigram_loss"], 4),
           "eval_mlm_accuracy": round(final["eval_mlm_accuracy"], 2), "seconds": seconds, "load_average": load}
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    with RESULTS.open("a") as out:
        out.write(json.dumps(row) + "\n")
    return row


def main() -> None:
    if sys.argv[1] == "record":
        print(json.dumps(record(Path(sys.argv[2]), *(float(v) for v in sys.argv[3:5]))))
        return
    work = Path(sys.argv[1])
    data = prepare(work)
    run = work / "run"
    started = time.perf_counter()
    subprocess.run([*BERTKIT, "pretrain", "--objective", "mlm", "--preset", "kobigbird-tiny", "--max-seq-length",
                    str(LENGTH), "--data", str(data), "--output-dir", str(run), "--overwrite", "--max-steps", str(STEPS),
                    "--batch-size", str(BATCH), "--no-progress", "--threads", "1"], check=True)
    print(json.dumps(record(run, round(time.perf_counter() - started, 1), os.getloadavg()[0])))


if __name__ == "__main__":
    main()
