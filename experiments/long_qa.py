"""SQuAD-style QA over whole long documents (issue 43): a tiny BigBird reading each (question, document)
as one 4,096-token sequence, block-sparse, against a tiny BERT reading it in 384-token doc-stride windows
(stride 128), on the same contexts. A long context is one SQuAD article's paragraphs joined (cut at
`CONTEXT_CHARS` characters, ~3,400 tokens), its questions' answer offsets moved with them. Both arms:
bigbird-tiny's / BERT tiny's size (2 x 128), random initialisation (no pre-training), the same WordPiece
trained on the training contexts, fine-tuned the same way (epochs, lr, warm-up) on the same training
questions. Measured on the dev questions: exact match / F1, evaluation seconds per question (one thread,
in one process: encode + forward + span decoding) and the process's peak resident memory.
Rows go to experiments/results/long_qa.jsonl; `table` prints the markdown table (docs/successors.md).

    python experiments/long_qa.py WORK_DIR
    python experiments/long_qa.py table
"""

from __future__ import annotations

import gzip
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SQUAD = REPO.parent / "shared" / "data" / "squad"
RESULTS = REPO / "experiments" / "results" / "long_qa.jsonl"
CONTEXT_CHARS = 11_500
TRAIN_ARTICLES, DEV_ARTICLES = int(os.environ.get("LONG_QA_TRAIN_ARTICLES", "6")), 2
QUESTIONS_PER_ARTICLE = int(os.environ.get("LONG_QA_QUESTIONS", "60"))
EPOCHS, LR = int(os.environ.get("LONG_QA_EPOCHS", "3")), "1e-3"
ARMS = {  # arm: (preset, max_seq_length, batch size); the batches hold a similar number of tokens
    "bigbird-4096-whole": ("bigbird-tiny", 4096, 2),
    "bert-384-windows": ("tiny", 384, 16),
}
BERTKIT = [sys.executable, "-m", "bertkit"]


def long_articles(source: dict, articles: int) -> dict:
    """SQuAD JSON of `articles` articles, each one paragraph: its paragraphs joined by a space up to
    CONTEXT_CHARS characters, the questions whose answers fall inside (at most QUESTIONS_PER_ARTICLE)."""
    data = []
    for article in source["data"][:articles]:
        context, questions = "", []
        for paragraph in article["paragraphs"]:
            if len(context) + len(paragraph["context"]) > CONTEXT_CHARS:
                break
            offset = len(context) + (1 if context else 0)
            context = f"{context} {paragraph['context']}" if context else paragraph["context"]
            for qa in paragraph["qas"]:
                answers = [{"text": a["text"], "answer_start": a["answer_start"] + offset} for a in qa["answers"]]
                questions.append({"id": qa["id"], "question": qa["question"], "answers": answers})
        for qa in questions:
            assert all(context[a["answer_start"]:a["answer_start"] + len(a["text"])] == a["text"] for a in qa["answers"])
        data.append({"title": article["title"], "paragraphs": [{"context": context,
                                                                  "qas": questions[:QUESTIONS_PER_ARTICLE]}]})
    return {"version": "1.1", "data": data}


def prepare(work: Path) -> tuple[Path, Path, Path]:
    import torch

    work.mkdir(parents=True, exist_ok=True)
    if all((work / name).exists() for name in ("train.json", "dev.json", "tok", *(f"init-{arm}" for arm in ARMS))):
        return work / "train.json", work / "dev.json", work / "tok"  # prepared (arms may run side by side)
    with gzip.open(SQUAD / "train-v1.1.explorer.json.gz", "rt") as handle:
        train = long_articles(json.load(handle), TRAIN_ARTICLES)
    dev = long_articles(json.load(open(SQUAD / "dev-v1.1.json")), DEV_ARTICLES)
    (work / "train.json").write_text(json.dumps(train))
    (work / "dev.json").write_text(json.dumps(dev))
    text = work / "contexts.txt"
    with gzip.open(SQUAD / "train-v1.1.explorer.json.gz", "rt") as handle:
        text.write_text("\n\n".join(p["context"] for a in json.load(handle)["data"][:40] for p in a["paragraphs"]))
    if not (work / "tok").exists():
        subprocess.run([*BERTKIT, "tokenizer", "train", "--vocab-size", "8000", "--output", str(work / "tok"),
                        "--no-progress", "--threads", "1", str(text)], check=True, stdout=subprocess.DEVNULL)
    from bertkit import BertConfig, BertForPreTraining, BigBirdConfig, BigBirdForMaskedLM, Tokenizer

    tokenizer = Tokenizer.from_pretrained(work / "tok")
    for arm, (preset, _, _) in ARMS.items():
        torch.manual_seed(0)
        if preset.startswith("bigbird"):
            model = BigBirdForMaskedLM(BigBirdConfig.from_preset(preset, vocab_size=tokenizer.vocab_size, pad_token_id=0))
        else:
            model = BertForPreTraining(BertConfig.from_preset(preset, vocab_size=tokenizer.vocab_size))
        model.save_pretrained(work / f"init-{arm}")
        tokenizer.save_pretrained(work / f"init-{arm}")
    return work / "train.json", work / "dev.json", work / "tok"


def run_arm(work: Path, arm: str) -> dict:
    preset, length, batch = ARMS[arm]
    output = work / f"run-{arm}"
    started = time.perf_counter()
    subprocess.run([*BERTKIT, "finetune", "squad", "--train", str(work / "train.json"), "--model", str(work / f"init-{arm}"),
                    "--output-dir", str(output), "--max-seq-length", str(length), "--doc-stride", "128",
                    "--epochs", str(EPOCHS), "--lr", LR, "--batch-size", str(batch), "--overwrite", "--no-progress",
                    "--threads", "1"], check=True, stdout=subprocess.DEVNULL)
    train_seconds = time.perf_counter() - started
    done = subprocess.run([sys.executable, __file__, "evaluate", str(output / "final"), str(work / "dev.json")],
                          check=True, capture_output=True, text=True)
    measured = json.loads(done.stdout.strip().splitlines()[-1])
    return {"arm": arm, "preset": preset, "max_seq_length": length, "doc_stride": 128 if length < 4096 else None,
            "batch_size": batch, "epochs": EPOCHS, "lr": float(LR), "train_questions": count(work / "train.json"),
            "train_seconds": round(train_seconds, 1), **measured, "load_average": round(os.getloadavg()[0], 1)}


def count(path: Path) -> int:
    return sum(len(p["qas"]) for a in json.load(open(path))["data"] for p in a["paragraphs"])


def evaluate_here(model_dir: str, dev: str) -> dict:
    """In this process, one thread: the dev set's metrics, seconds per question, sequences read and the
    peak resident memory (ru_maxrss) after loading and evaluating."""
    import torch

    torch.set_num_threads(1)
    from bertkit.inference.evaluation import evaluate
    from bertkit.inference.loading import load_finetuned
    from bertkit.tasks.programs import metrics_for  # noqa: F401  (imported before the clock starts)

    loaded = load_finetuned(model_dir)
    loaded_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    started = time.perf_counter()
    metrics = evaluate(loaded, dev, batch_size=8)
    seconds = time.perf_counter() - started
    features = loaded.program_cls.encode(dev, loaded.program_cls.read(dev, loaded.spec, None), loaded.tokenizer,
                                         loaded.spec, None, False).features
    sequences = len(features if isinstance(features, list) else features["input_ids"])
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {"dev_questions": metrics["examples"], "dev_sequences": sequences,
            "exact_match": round(metrics.get("exact_match", metrics.get("exact", 0.0)), 2),
            "f1": round(metrics["f1"], 2), "eval_seconds": round(seconds, 2),
            "ms_per_question": round(1000 * seconds / metrics["examples"], 1),
            "peak_rss_mib": round(peak), "rss_after_load_mib": round(loaded_rss)}


def table() -> str:
    rows = [json.loads(line) for line in RESULTS.read_text().splitlines() if line.strip()]
    lines = ["| arm | sequences read (dev) | EM | F1 | ms / question | peak RSS MiB (after load) | train s | load |",
             "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['arm']} | {r['dev_sequences']} for {r['dev_questions']} questions | {r['exact_match']:.1f} | "
                     f"{r['f1']:.1f} | {r['ms_per_question']:.0f} | {r['peak_rss_mib']} ({r['rss_after_load_mib']}) | "
                     f"{r['train_seconds']:.0f} | {r['load_average']} |")
    return "\n".join(lines)


def main() -> None:
    if sys.argv[1] == "table":
        print(table())
        return
    if sys.argv[1] == "evaluate":
        print(json.dumps(evaluate_here(sys.argv[2], sys.argv[3])))
        return
    work = Path(sys.argv[1])
    prepare(work)
    arms = sys.argv[2:] or list(ARMS)
    for arm in arms:
        row = run_arm(work, arm)
        print(json.dumps(row), flush=True)
        RESULTS.parent.mkdir(parents=True, exist_ok=True)
        with RESULTS.open("a") as out:
            out.write(json.dumps(row) + "\n")


if __name__ == "__main__":
    main()
