"""The seeds' ablations at small scale (issue 9, deliverable 7 (a)-(d); issues 16 and 17: (f); 31: (g); 32: (h)) for docs/ablations.md.

    .venv/bin/python experiments/ablations.py list                 # the steps, done or not
    .venv/bin/python experiments/ablations.py run all --jobs 2     # run what is not done (resumable)
    .venv/bin/python experiments/ablations.py run a                # one ablation (and what it needs)
    .venv/bin/python experiments/ablations.py table                # markdown tables from results.jsonl
    .venv/bin/python experiments/ablations.py plots --out docs/ablations   # bar charts + pre-training curves

Every step is one bertkit command line (`tokenizer train`, `data build`, `pretrain`,
`finetune glue`) run as a subprocess; its output goes to <work-dir>/logs/<step>.log, its
result to <work-dir>/results.jsonl (one JSON object a line, appended). A step with a
recorded result is skipped; a pre-training step stopped midway resumes from its latest
checkpoint. `--jobs N` runs up to N independent steps at once (one thread each).

Setup (all knobs are flags; the defaults are the budget of docs/ablations.md):
- tokenizer: one uncased likelihood WordPiece (--vocab-size, 8,192) trained by bertkit on
  the pre-training corpus, ../shared/data/corpus-en/austen_novels.txt.gz;
- data: NSP instances of max_seq_length 128 from the whole corpus, dynamic masking (the
  shared data of every arm but (c)); (c) uses the first --slice-chars characters (whole
  documents) so that --pretrain-steps make several epochs: dynamic masking vs
  `--masking static --dupe-factor N`;
- pre-training: --preset tiny, the same steps, batch, lr schedule and seed for every arm;
  ELECTRA's steps are chosen so that its training FLOPs (generator + discriminator,
  `step_flops`) equal the MLM arm's;
- fine-tuning (the same settings for every arm): MRPC full train / full dev, SST-2 a
  random train subset / full dev, QNLI (only dev.tsv exists here) split at random into a
  training part and a disjoint scored part; --seeds fine-tuning seeds each; the score is
  the dev score after the last epoch (one evaluation, no checkpoint picking).
- (f) T5 span corruption (`--preset t5-tiny`, packed data) and XLNet's permutation LM
  (`--preset`, `--format xlnet` data), each with its own Unigram tokenizer of --vocab-size
  in its model's layout (T5: 100 sentinels), for the steps whose training FLOPs
  (`step_flops`) equal --pretrain-steps of the MLM arm's; the same lr schedule, batch and
  seed. Fine-tuned as the other arms: XLNet and T5's encoder with a classification head
  through `finetune glue`, T5 also through `finetune text2text --task glue`. It needs
  pt-mlm's result line (its FLOPs); a work folder seeded with docs/ablations/results.jsonl
  has it without rerunning the MLM arm.
- (g) BERT vs GPT-1 (issue 31): a GPT-1-shaped decoder (`--preset gpt1-mini` cut to the BERT
  arm's 2 layers x 128, post-LN, learned positions) pre-trained with `--objective clm` on
  packed data of the same corpus, with its own byte-level BPE (`--layout gpt2`, --vocab-size)
  for the steps whose FLOPs (`step_flops("clm")`) equal pt-mlm's; fine-tuned by GPT-1's
  recipe (<start>/<delim>/<extract>, auxiliary LM loss 0.5, classifier dropout 0.1) with the
  other arms' lr, epochs, batch, warm-up and seeds; its control is the same decoder with
  random weights.
- (h) BART's denoising (issue 32): `--preset bart-tiny` (d_model 128, 2 + 2 layers, 2 heads, FFN
  512) pre-trained with `--objective bart` on packed data of the same corpus with its own
  byte-level BPE (`--layout bart`, --vocab-size): the published recipe (infilling + sentence
  permutation) for the steps whose FLOPs (`step_flops("bart")`, at the padded batch shapes the
  objective's noising gives) equal pt-mlm's, and the noising comparison (the recipe, infilling
  only, token masking only) at --bart-noising-share of them; fine-tuned through `finetune glue`
  (BartForSequenceClassification) with the other arms' settings and seeds; its control is the
  same model with random weights.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import platform
import sys
import threading
import time
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "experiments"))
from quality_table import BERTKIT, DATA, ENV, read_results, run_command, split_indices  # noqa: E402

CORPUS = DATA / "corpus-en" / "austen_novels.txt.gz"
GLUE = DATA / "glue"
SEED = 20261124
TASKS = {"mrpc": ("f1", "accuracy"), "sst2": ("accuracy",), "qnli": ("accuracy",)}
_RECORD_LOCK = threading.Lock()


# ---------------------------------------------------------------------------- FLOPs (pure)


def encoder_flops(tokens: float, seq_len: int, layers: int, hidden: int, intermediate: int) -> float:
    """Matmul FLOPs of a BERT encoder's training step (forward + backward = 3 x forward, a
    multiply-add = 2 FLOPs) on `tokens` positions in sequences padded to `seq_len`:
    projections and FFN 6 * tokens * L * (4 H^2 + 2 H I), attention 12 * tokens * T * L * H."""
    return 6.0 * tokens * layers * (4 * hidden * hidden + 2 * hidden * intermediate) + 12.0 * tokens * seq_len * layers * hidden


def step_flops(objective: str, config: dict, batch_size: int, seq_len: int, masked: float,
               predicted: float | None = None, generator: dict | None = None, target_len: int | None = None) -> float:
    """Matmul FLOPs of one training step (forward + backward) of `objective` on a batch of
    `batch_size` sequences padded to `seq_len`.

    config: the (discriminator's) config fields hidden_size, intermediate_size,
    num_hidden_layers, vocab_size (and embedding_size for electra); masked: positions with an
    MLM label in the batch; predicted: ltr's labelled positions (default B x (T - 1)), xlnet's
    targets; generator: electra's generator config fields; t5 / bart: config holds T5Config's /
    BartConfig's fields, seq_len is the (corrupted / noised) input length and target_len the
    decoder's. Embedding lookups, norms, softmax and the optimizer are not counted.
    """
    if objective == "t5":
        return t5_step_flops(config, batch_size, seq_len, target_len)
    if objective == "bart":
        return bart_step_flops(config, batch_size, seq_len, target_len)
    if objective == "xlnet":
        return xlnet_step_flops(config, batch_size, seq_len, predicted)
    if objective == "clm":  # a GPT: FFN 4H, the tied LM head on every position
        h, layers, v = config["n_embd"], config["n_layer"], config["vocab_size"]
        tokens = float(batch_size * seq_len)
        return encoder_flops(tokens, seq_len, layers, h, 4 * h) + 6.0 * tokens * h * v
    h, i, layers, v = config["hidden_size"], config["intermediate_size"], config["num_hidden_layers"], config["vocab_size"]
    tokens = float(batch_size * seq_len)
    if objective in ("mlm", "mlm_nsp"):
        flops = encoder_flops(tokens, seq_len, layers, h, i) + 6.0 * masked * (h * h + v * h)  # + transform, decoder
        return flops + (6.0 * batch_size * (h * h + 2 * h) if objective == "mlm_nsp" else 0.0)  # pooler + NSP
    if objective == "ltr":
        predicted = batch_size * (seq_len - 1) if predicted is None else predicted
        return encoder_flops(tokens, seq_len, layers, h, i) + 6.0 * predicted * (h * h + v * h)
    if objective == "electra":
        e = config.get("embedding_size", h)
        g, gi = generator["hidden_size"], generator["intermediate_size"]
        disc = encoder_flops(tokens, seq_len, layers, h, i) + 6.0 * tokens * (h * h + h)  # + dense, dense_prediction
        disc += 6.0 * tokens * e * h if e != h else 0.0  # embeddings_project
        gen = encoder_flops(tokens, seq_len, generator["num_hidden_layers"], g, gi) + 6.0 * masked * (g * e + e * v)
        gen += 6.0 * tokens * e * g if e != g else 0.0
        return disc + gen
    raise ValueError(f"no FLOPs formula for objective {objective!r}")


def t5_step_flops(config: dict, batch_size: int, input_len: int, target_len: int) -> float:
    """Matmul FLOPs of a T5 span-corruption step: `encoder_decoder_flops` with T5's sizes
    (heads x d_kv may differ from d_model; FFN 3 d f when gated)."""
    enc_layers = config["num_layers"]
    dec_layers = enc_layers if config.get("num_decoder_layers") is None else config["num_decoder_layers"]
    ffn = (3 if config.get("feed_forward_proj", "relu").startswith("gated") else 2) * config["d_model"] * config["d_ff"]
    return encoder_decoder_flops(config["d_model"], config["num_heads"] * config["d_kv"], (enc_layers, dec_layers),
                                 (ffn, ffn), config["vocab_size"], batch_size, input_len, target_len)


def bart_step_flops(config: dict, batch_size: int, input_len: int, target_len: int) -> float:
    """Matmul FLOPs of a BART denoising step: `encoder_decoder_flops` with BartConfig's sizes
    (heads x head size = d_model; FFN 2 d f, its own width in encoder and decoder), the tied LM
    head on every target position (bertkit's BART scores the padded ones too)."""
    d = config["d_model"]
    return encoder_decoder_flops(d, d, (config["encoder_layers"], config["decoder_layers"]),
                                 (2 * d * config["encoder_ffn_dim"], 2 * d * config["decoder_ffn_dim"]),
                                 config["vocab_size"], batch_size, input_len, target_len)


def encoder_decoder_flops(d: int, a: int, layers: tuple[int, int], ffn: tuple[int, int], vocab_size: int,
                          batch_size: int, input_len: int, target_len: int) -> float:
    """Matmul FLOPs of an encoder-decoder training step: the encoder on `input_len` tokens, the
    decoder on `target_len` tokens (self-attention, cross-attention to the encoder's outputs:
    queries and output at the targets, keys and values at the inputs) and the LM head at every
    target. Multiply-adds per token and layer: projections 4 d a (a = heads x head size), FFN
    `ffn` (encoder's, decoder's), attention 2 a per key; x 6 for a training step."""
    enc_layers, dec_layers = layers
    inputs, targets = float(batch_size * input_len), float(batch_size * target_len)
    encoder = inputs * enc_layers * (4 * d * a + ffn[0] + 2 * input_len * a)
    decoder = targets * dec_layers * (4 * d * a + 2 * target_len * a  # self-attention
                                      + 2 * d * a + 2 * input_len * a  # cross-attention: q, o, scores, values
                                      + ffn[1])
    decoder += inputs * dec_layers * 2 * d * a  # cross-attention keys and values of the encoder's outputs
    return 6.0 * (encoder + decoder + targets * d * vocab_size)


def xlnet_step_flops(config: dict, batch_size: int, seq_len: int, predicted: float) -> float:
    """Matmul FLOPs of an XLNet permutation-LM step on sequences padded to `seq_len` with
    `predicted` targets in the batch: the content stream at every position (q, k, v, o,
    FFN; scores against the T keys and the R = 2T relative positions of "bi" attention,
    values), the query stream at the targets only (q, o, FFN; the same attention), the
    relative positions' projection per sequence (in training dropout makes the position
    encodings differ per sequence, as transformers'), the LM head at the targets. In the last
    layer the content stream gives only the keys and values: its own output is not the
    model's (the query stream is), so bertkit does not form it (transformers does; before
    2026-11-25 neither did bertkit skip it, which is the count (f)'s recorded arm ran at)."""
    d, f, layers, v = config["d_model"], config["d_inner"], config["n_layer"], config["vocab_size"]
    a = config["n_head"] * (config.get("d_head") or d // config["n_head"])
    tokens, relative = float(batch_size * seq_len), 2 * seq_len
    attention = (2 * seq_len + relative) * a  # content scores + position scores + values, per query
    content = tokens * (4 * d * a + 2 * d * f + attention)
    last_content = tokens * 2 * d * a  # keys and values only
    query = predicted * (2 * d * a + 2 * d * f + attention)
    positions = float(batch_size * relative) * d * a
    return 6.0 * ((layers - 1) * content + last_content + layers * (query + positions) + predicted * d * v)


def bilm_step_flops(config: dict, batch_size: int, words: int, chars: int, predicted: float) -> float:
    """Matmul FLOPs of an ELMo biLM step (forward + backward) on a batch of `batch_size`
    sentences padded to `words` words (markers included) of `chars` character columns (after
    the character CNN's crop), with `predicted` softmax targets over both directions. Per word
    (padding words too: the CNN and the LSTMs run over them): each (width k, count n) filter
    (chars - k + 1) n k E, each highway layer 2 F^2 (F filters), the projection F P; per
    direction and layer an LSTMP step 4 c P (input) + 4 c P (state) + c P (projection); the
    shared softmax P V at each target. x 6 for a training step. (ELMo is no Transformer, so
    not one of step_flops' objectives: its cost depends on words and characters, not tokens.)"""
    e, p, c, v = config["char_embedding_dim"], config["projection_dim"], config["cell_size"], config["n_tokens_vocab"]
    filters = sum(count for _, count in config["filters"])
    convolution = sum((chars - width + 1) * count * width * e for width, count in config["filters"])
    token_layer = convolution + config["n_highway"] * 2 * filters * filters + filters * p
    lstms = 2 * config["num_layers"] * 9 * c * p
    return 6.0 * (float(batch_size * words) * (token_layer + lstms) + predicted * p * v)


# ---------------------------------------------------------------------------- subsets (pure)


def write_corpus_slice(source: Path, chars: int, target: Path) -> int:
    """The first documents of `source` (blank-line separated) up to `chars` characters; returns
    the characters written."""
    from bertkit.atomic import write_text_atomic

    with gzip.open(source, "rt", encoding="utf-8") as handle:
        text = handle.read()
    documents, size = [], 0
    for document in text.split("\n\n"):
        if size and size + len(document) > chars:
            break
        documents.append(document)
        size += len(document) + 2
    write_text_atomic(target, "\n\n".join(documents) + "\n")
    return size


def write_tsv_subset(source: Path, target: Path, rows: np.ndarray) -> None:
    """Header + the given data rows (0-based, header excluded) of a GLUE TSV."""
    from bertkit.atomic import write_text_atomic

    header, *lines = source.read_text(encoding="utf-8").splitlines()
    write_text_atomic(target, "\n".join([header, *(lines[r] for r in rows)]) + "\n")


def cut_tasks(work: Path, args: argparse.Namespace) -> dict[str, dict]:
    """{task: {"train", "dev", "train_subset", "eval_set"}}; subsets seeded, the same on a rerun."""
    out = work / "data"
    sst2_rows = len((GLUE / "SST-2" / "train.tsv").read_text(encoding="utf-8").splitlines()) - 1
    sst2_train, _ = split_indices(sst2_rows, 0, SEED, args.sst2_train)
    write_tsv_subset(GLUE / "SST-2" / "train.tsv", out / f"sst2_train_{args.sst2_train}.tsv", sst2_train)
    qnli_rows = len((GLUE / "QNLI" / "dev.tsv").read_text(encoding="utf-8").splitlines()) - 1
    qnli_train, qnli_dev = split_indices(qnli_rows, args.qnli_dev, SEED, args.qnli_train)
    write_tsv_subset(GLUE / "QNLI" / "dev.tsv", out / f"qnli_train_{args.qnli_train}.tsv", qnli_train)
    write_tsv_subset(GLUE / "QNLI" / "dev.tsv", out / f"qnli_dev_{args.qnli_dev}.tsv", qnli_dev)
    mrpc = {"train": GLUE / "MRPC" / "train.tsv", "dev": GLUE / "MRPC" / "dev.tsv",
            "train_subset": "MRPC train, all 3,668", "eval_set": "MRPC dev, all 408"}
    if args.mrpc_train:  # a dry run's subset
        write_tsv_subset(mrpc["train"], out / f"mrpc_train_{args.mrpc_train}.tsv",
                         split_indices(3668, 0, SEED, args.mrpc_train)[0])
        mrpc.update(train=out / f"mrpc_train_{args.mrpc_train}.tsv", train_subset=f"MRPC train, {args.mrpc_train:,} random")
    return {
        "mrpc": mrpc,
        "sst2": {"train": out / f"sst2_train_{args.sst2_train}.tsv", "dev": GLUE / "SST-2" / "dev.tsv",
                 "train_subset": f"SST-2 train, {len(sst2_train):,} random of {sst2_rows:,}",
                 "eval_set": "SST-2 dev, all 872"},
        "qnli": {"train": out / f"qnli_train_{args.qnli_train}.tsv", "dev": out / f"qnli_dev_{args.qnli_dev}.tsv",
                 "train_subset": f"QNLI dev, {len(qnli_train):,} random of {qnli_rows:,} (no train.tsv here)",
                 "eval_set": f"QNLI dev, {len(qnli_dev):,} others"},
    }


# ---------------------------------------------------------------------------- steps


@dataclass
class Step:
    name: str
    kind: str  # tokenizer | data | pretrain | finetune | random
    deps: tuple = ()
    options: dict = field(default_factory=dict)


# pre-training arms: name -> (objective, data step, masking, ablations that use it)
ARMS = {
    "mlm_nsp": ("mlm_nsp", "data", "token", "a"),
    "mlm": ("mlm", "data", "token", "abd"),
    "ltr": ("ltr", "data", "token", "a"),
    "electra": ("electra", "data", "token", "b"),
    "wwm": ("mlm", "data", "whole_word", "d"),
    "dynamic": ("mlm", "data-slice", "token", "c"),
    "static": ("mlm", "data-static", "token", "c"),
    "random": ("", "", "", "abcd"),  # the no-pre-training control (mlm's config, fresh weights)
    "t5": ("t5", "data-t5", "", "f"),
    "xlnet": ("xlnet", "data-xlnet", "", "f"),
    "ltr_flops": ("ltr", "data", "token", "f"),  # (a)'s left-to-right LM, here at (f)'s equal FLOPs
    "gpt1": ("clm", "data-gpt1", "", "g"),  # (g): a GPT-1-shaped decoder, causal LM, equal FLOPs
    # (h): BART's denoising at equal FLOPs, and its noising functions (BART["noising"]) side by side
    "bart": ("bart", "data-bart", "", "h"),
    "bart_infill_perm": ("bart", "data-bart", "", "h"),
    "bart_infill": ("bart", "data-bart", "", "h"),
    "bart_mask": ("bart", "data-bart", "", "h"),
}
# arms whose step count is set so that their FLOPs equal pt-mlm's
FLOPS_MATCHED = ("electra", "t5", "xlnet", "ltr_flops", "gpt1", "bart", "bart_infill_perm", "bart_infill", "bart_mask")
ARM_TASKS = {"mlm_nsp": "mrpc sst2 qnli", "mlm": "mrpc sst2 qnli", "ltr": "mrpc sst2 qnli",
             "electra": "mrpc sst2", "wwm": "sst2", "dynamic": "sst2", "static": "sst2", "random": "mrpc sst2 qnli"}
# (f)'s arms: each its own Unigram tokenizer (`--layout`) and data format; the preset None = --preset
SUCCESSORS = {"t5": {"layout": "t5", "sentinels": 100, "format": "packed", "preset": "t5-tiny"},
              "xlnet": {"layout": "xlnet", "format": "xlnet", "preset": None}}
# fine-tuning variants of a pre-trained arm: name -> (pre-training arm, `finetune` command); the
# *_random arms are the no-pre-training controls of (f): the arm's config and tokenizer, fresh weights
FINETUNE = {"t5_cls": ("t5", "glue"), "t5_t2t": ("t5", "text2text"), "xlnet": ("xlnet", "glue")}
FINETUNE.update({f"{name}_random": (f"{arm}_random", command) for name, (arm, command) in list(FINETUNE.items())})
FINETUNE["ltr_flops"] = ("ltr_flops", "glue")  # its control is (a)'s random init: the same BERT and tokenizer
# (g): GPT-1's shape at the BERT arm's size (2 x 128, 2 heads, FFN 512), its byte-level BPE, and its control
GPT1 = {"preset": "gpt1-mini", "sizes": {"n_embd": 128, "n_layer": 2, "n_head": 2}, "tasks": ("mrpc", "sst2")}
GPT1_FINETUNE = {"gpt1": "pt-gpt1", "gpt1_random": "pt-gpt1_random"}
# (h): `--preset bart-tiny` as it is (d_model 128, 2 + 2 layers, 2 heads, FFN 512: the other arms'
# size), its byte-level BPE in BART's layout; the noising arms' `--set objective.NAME=VALUE`.
# The published recipe (the objective's defaults: infilling with Poisson(3) spans over 30% of the
# tokens, every sentence permuted) is `bart`, at pt-mlm's FLOPs; the noising comparison
# (bart_infill_perm = the recipe, bart_infill, bart_mask) runs at --bart-noising-share of them
# (at 1.0, `bart` is its recipe arm and bart_infill_perm is not run).
BART = {"preset": "bart-tiny", "tasks": ("mrpc", "sst2"),
        "noising": {"bart": {}, "bart_infill_perm": {}, "bart_infill": {"permute_sentences": 0.0},
                    "bart_mask": {"permute_sentences": 0.0, "mask_length": "token"}}}


def build_steps(args: argparse.Namespace) -> dict[str, Step]:
    """In running order, one block per ablation so that a cut-short run has whole ablations:
    (a) with the no-pre-training control, then (b), (d), (c)."""
    table = [Step("tokenizer", "tokenizer"), Step("data", "data", ("tokenizer",))]
    blocks = (("mlm_nsp", "mlm", "ltr", "random"), ("electra",), ("wwm",), ("dynamic", "static"))
    for arms in blocks:
        if "dynamic" in arms:
            table += [Step("data-slice", "data", ("tokenizer",), {"slice": True}),
                      Step("data-static", "data", ("tokenizer",), {"slice": True, "static": True})]
        for arm in arms:
            objective, data, masking, _ = ARMS[arm]
            if arm == "random":
                table.append(Step("pt-random", "random", ("pt-mlm",), {"arm": arm}))
                continue
            deps = (data, "pt-mlm") if arm == "electra" else (data,)  # electra's steps come from mlm's FLOPs
            table.append(Step(f"pt-{arm}", "pretrain", deps, {"arm": arm, "objective": objective, "data": data,
                                                            "masking": masking}))
        for seed in args.seeds:
            for arm in arms:
                for task in ARM_TASKS[arm].split():
                    table.append(Step(f"ft-{arm}-{task}-s{seed}", "finetune", (f"pt-{arm}",),
                                      {"arm": arm, "task": task, "seed": seed}))
    return {s.name: s for s in table + successor_steps(args) + gpt1_steps(args) + bart_steps(args)}


def gpt1_steps(args: argparse.Namespace) -> list[Step]:
    """(g): a byte-level BPE in GPT-2's layout, packed data, the decoder at pt-mlm's FLOPs, its
    random control, then MRPC and SST-2 with every seed (the pre-trained arm's runs first)."""
    table = [Step("tok-gpt1", "tokenizer", (), {"layout": "gpt2", "algorithm": "bbpe"}),
             Step("data-gpt1", "data", ("tok-gpt1",), {"tokenizer": "tok-gpt1", "format": "packed"}),
             Step("pt-gpt1", "pretrain", ("data-gpt1", "pt-mlm"),
                  {"arm": "gpt1", "objective": "clm", "data": "data-gpt1", "masking": ""}),
             Step("pt-gpt1_random", "random", ("pt-gpt1",), {"arm": "gpt1_random", "source": "pt-gpt1"})]
    for variant, model in GPT1_FINETUNE.items():
        for seed in args.seeds:
            for task in GPT1["tasks"]:
                table.append(Step(f"ft-{variant}-{task}-s{seed}", "finetune", (model,),
                                  {"arm": variant, "pretrained": "gpt1", "model": model, "task": task, "seed": seed}))
    return table


def bart_noising_arms(args: argparse.Namespace) -> tuple[str, ...]:
    """(h)'s noising comparison: the recipe, infilling only, token masking, at one budget."""
    return ("bart" if bart_noising_share(args) == 1.0 else "bart_infill_perm", "bart_infill", "bart_mask")


def bart_noising_share(args: argparse.Namespace) -> float:
    """--bart-noising-share (1.0 for a namespace built without it)."""
    return getattr(args, "bart_noising_share", 1.0)


def bart_steps(args: argparse.Namespace) -> list[Step]:
    """(h): a byte-level BPE in BART's layout, packed data, `bart` at pt-mlm's FLOPs and its
    random control, the noising arms at --bart-noising-share of those FLOPs; fine-tuning in the
    order a cut-short run should lose last: the main arm and its control with every seed, then
    the noising arms (SST-2 with every seed before MRPC)."""
    table = [Step("tok-bart", "tokenizer", (), {"layout": "bart", "algorithm": "bbpe",
                                                 "lowercase": True}),  # as (h) was recorded
             Step("data-bart", "data", ("tok-bart",), {"tokenizer": "tok-bart", "format": "packed"})]
    noising = [arm for arm in bart_noising_arms(args) if arm != "bart"]
    pretrain = {arm: Step(f"pt-{arm}", "pretrain", ("data-bart", "pt-mlm"),
                          {"arm": arm, "objective": "bart", "data": "data-bart", "masking": "",
                           "settings": BART["noising"][arm],
                           "flops_share": 1.0 if arm == "bart" else bart_noising_share(args)})
                for arm in ("bart", *noising)}
    table += [pretrain["bart"], Step("pt-bart_random", "random", ("pt-bart",), {"arm": "bart_random", "source": "pt-bart"})]
    for seed in args.seeds:
        for variant in ("bart", "bart_random"):
            for task in BART["tasks"]:
                table.append(Step(f"ft-{variant}-{task}-s{seed}", "finetune", (f"pt-{variant}",),
                                  {"arm": variant, "pretrained": "bart", "model": f"pt-{variant}", "task": task,
                                   "seed": seed}))
    table += [pretrain[arm] for arm in noising]  # (a runner with --jobs 2 starts the first beside pt-bart)
    for task in reversed(BART["tasks"]):
        for seed in args.seeds:
            for arm in noising:
                table.append(Step(f"ft-{arm}-{task}-s{seed}", "finetune", (f"pt-{arm}",),
                                  {"arm": arm, "pretrained": arm, "model": f"pt-{arm}", "task": task, "seed": seed}))
    return table


def successor_steps(args: argparse.Namespace) -> list[Step]:
    """(f): per arm a Unigram tokenizer, its data and a pre-training run whose FLOPs match
    pt-mlm's; then the fine-tuning variants, ordered so that a cut-short run loses QNLI
    first, then the last seed."""
    table = []
    for arm, spec in SUCCESSORS.items():
        table += [Step(f"tok-{arm}", "tokenizer", (), {"layout": spec["layout"], "sentinels": spec.get("sentinels")}),
                  Step(f"data-{arm}", "data", (f"tok-{arm}",), {"tokenizer": f"tok-{arm}", "format": spec["format"]})]
    for arm in SUCCESSORS:
        objective, data, masking, _ = ARMS[arm]
        table.append(Step(f"pt-{arm}", "pretrain", (data, "pt-mlm"), {"arm": arm, "objective": objective, "data": data,
                                                                       "masking": masking}))
    table.append(Step("pt-ltr_flops", "pretrain", ("data", "pt-mlm"),
                      {"arm": "ltr_flops", "objective": "ltr", "data": "data", "masking": "token"}))
    table += [Step(f"pt-{arm}_random", "random", (f"pt-{arm}",), {"arm": f"{arm}_random", "source": f"pt-{arm}"})
              for arm in SUCCESSORS]
    rounds = ((("mrpc", "sst2"), args.seeds[:2]), (("mrpc", "sst2"), args.seeds[2:]), (("qnli",), args.seeds))
    for controls in (False, True):  # the pre-trained arms' runs first, then the controls'
        for tasks, seeds in rounds:
            for seed in seeds:
                for task in tasks:
                    for variant, (arm, command) in FINETUNE.items():
                        if variant.endswith("_random") == controls:
                            table.append(Step(f"ft-{variant}-{task}-s{seed}", "finetune", (f"pt-{arm}",),
                                              {"arm": variant, "pretrained": arm.removesuffix("_random"),
                                               "model": f"pt-{arm}", "command": command, "task": task,
                                               "seed": seed}))
    return table


def select(names: list[str], steps: dict[str, Step]) -> list[str]:
    """Step names for the request (names, `all`, or ablation letters a-d, f-h) plus their dependencies, in table order."""
    wanted: set[str] = set()
    for name in names:
        if name == "all":
            wanted |= set(steps)
        elif name in ("a", "b", "c", "d", "f", "g", "h"):
            arms = {arm for arm, spec in ARMS.items() if name in spec[3]}
            wanted |= {n for n, s in steps.items() if s.options.get("pretrained", s.options.get("arm")) in arms}
        elif name in steps:
            wanted.add(name)
        else:
            raise SystemExit(f"ablations: unknown step {name!r}; see `ablations.py list`")
    stack = list(wanted)
    while stack:
        for dep in steps[stack.pop()].deps:
            if dep not in wanted:
                wanted.add(dep)
                stack.append(dep)
    return [n for n in steps if n in wanted]


def record(work: Path, entry: dict) -> None:
    with _RECORD_LOCK, open(work / "results.jsonl", "a", encoding="utf-8") as handle:
        handle.write(json.dumps(entry, ensure_ascii=False) + "\n")


def read_metrics(run: Path) -> list[dict]:
    return [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines() if x.strip()]


def data_info(data: Path) -> dict:
    """Instances and tokens of a data directory's train split (its shards' shard.json)."""
    metas = [json.loads(p.read_text()) for p in sorted(data.glob("train-*/shard.json"))]
    return {"instances": sum(m["num_instances"] for m in metas), "tokens": sum(m["num_tokens"] for m in metas)}


def config_fields(run: Path) -> dict:
    return json.loads((run / "final" / "config.json").read_text())


def pretrain_flops(objective: str, config: dict, args: argparse.Namespace, mean_len: float,
                   bart_shapes: list[tuple[int, int]] | None = None) -> float:
    """FLOPs of one step of `objective` at this experiment's batch: sequences padded to
    max_seq_length, 15% of the non-special tokens (mean_len - 3 per NSP instance) masked;
    t5: inputs of max_seq_length, the targets T5's length helper gives (0.15 noise, spans of
    3); xlnet: num_predict targets per full-length sequence, in proportion for shorter ones;
    bart: the mean over `bart_shapes`, the (input, target) padded lengths of sampled batches
    (`bart_batch_shapes`)."""
    from bertkit.model.electra.config import generator_config
    from bertkit.model.electra import ElectraConfig
    from bertkit.objectives.t5 import T5Settings, input_and_target_lengths
    from bertkit.objectives.xlnet import XLNetSettings

    if objective == "t5":
        noise = T5Settings()
        _, target_len = input_and_target_lengths(args.max_seq_length, noise.noise_density, noise.mean_noise_span_length)
        return step_flops("t5", config, args.batch_size, args.max_seq_length, 0.0, target_len=target_len)
    if objective == "bart":
        return float(np.mean([step_flops("bart", config, args.batch_size, inputs, 0.0, target_len=targets)
                              for inputs, targets in bart_shapes]))
    if objective == "xlnet":
        share = min(1.0, mean_len / args.max_seq_length)
        predicted = args.batch_size * XLNetSettings().resolved_num_predict(args.max_seq_length) * share
        return step_flops("xlnet", config, args.batch_size, args.max_seq_length, 0.0, predicted)
    masked = args.batch_size * 0.15 * (mean_len - 3)
    generator = None
    if objective == "electra":
        known = {k: v for k, v in config.items() if k in ElectraConfig.__dataclass_fields__ and k != "model_type"}
        generator = generator_config(ElectraConfig(**known), args.generator_size).to_dict()
    predicted = args.batch_size * (mean_len - 1)
    return step_flops(objective, config, args.batch_size, args.max_seq_length, masked, predicted, generator)


def run_step(step: Step, args: argparse.Namespace) -> dict:
    work = args.work_dir
    log = work / "logs" / f"{step.name}.log"
    entry: dict = {"step": step.name}
    if step.kind == "tokenizer":
        command = [BERTKIT, "tokenizer", "train", "--vocab-size", str(args.vocab_size), "--output",
                   str(tokenizer_dir(work, step.name)), "--no-progress", str(CORPUS)]
        if step.options.get("layout"):  # (f): SentencePiece-style Unigram in the model's own layout; (g): bbpe
            command[-1:-1] = ["--algorithm", step.options.get("algorithm", "unigram"), "--layout",
                              step.options["layout"]]
            if step.options.get("sentinels"):
                command[-1:-1] = ["--sentinels", str(step.options["sentinels"])]
            if step.options.get("lowercase"):
                command[-1:-1] = ["--lowercase"]
    elif step.kind == "data":
        corpus = CORPUS
        if step.options.get("slice"):
            corpus = work / "data" / f"austen_first_{args.slice_chars}.txt"
            entry["corpus_chars"] = write_corpus_slice(CORPUS, args.slice_chars, corpus)
        command = [BERTKIT, "data", "build", "--tokenizer", str(tokenizer_dir(work, step.options.get("tokenizer"))),
                   "--max-seq-length",
                   str(args.max_seq_length), "--output", str(work / step.name), "--overwrite", "--no-progress",
                   "--workers", "1", str(corpus)]
        if step.options.get("static"):
            command[-1:-1] = ["--masking", "static", "--dupe-factor", str(args.dupe_factor)]
        if step.options.get("format"):
            command[-1:-1] = ["--format", step.options["format"]]
    elif step.kind == "random":
        from quality_table import write_random_model

        source = step.options.get("source", "pt-mlm")
        write_random_model(work / "runs" / source / "final", work / "runs" / step.name / "final", args.seed)
        return {**entry, "command": f"write_random_model({source}/final, {step.name}/final)", "seconds": 0}
    elif step.kind == "pretrain":
        return run_pretrain(step, args, log)
    else:
        return run_finetune(step, args, log)
    entry["seconds"] = round(run_command(command, log), 1)
    entry["command"] = shown(command, work)
    if step.kind == "data":
        entry.update(data_info(work / step.name))
    return entry


def tokenizer_dir(work: Path, step: str | None) -> Path:
    """A tokenizer step's output: the shared WordPiece's ("tokenizer") is tok/."""
    return work / ("tok" if step in (None, "tokenizer") else step)


def shown(command: list[str], work: Path) -> str:
    return " ".join(command).replace(BERTKIT, "bertkit").replace(str(DATA), "$DATA").replace(str(work), "$WORK")


def bart_batch_shapes(data: Path, settings: dict, batch_size: int, seed: int,
                      batches: int = 64) -> list[tuple[int, int]]:
    """(input, target) lengths, padded as bertkit's BART objective collates them, of `batches`
    random training batches of `data` noised with `settings` (`objective.NAME` values; the
    recipe's defaults otherwise), drawn from `seed`: the shapes its training steps run at
    (the noised input is shorter than the document with infilling: each span one <mask>)."""
    from bertkit.data.dataset import PretrainingDataset
    from bertkit.data.masking import MaskingConfig
    from bertkit.objectives.bart import BartObjective, BartSettings

    train = PretrainingDataset.open(data)
    objective = BartObjective(None, train, None, MaskingConfig(), seed, settings=BartSettings(**settings))
    rng = np.random.default_rng(seed)
    shapes = []
    for _ in range(batches):
        picks = rng.choice(len(train), size=min(batch_size, len(train)), replace=False)
        batch = objective.collate([objective.example(train, int(i), 0, seed) for i in picks])
        shapes.append((int(batch["input_ids"].shape[1]), int(batch["labels"].shape[1])))
    return shapes


def run_pretrain(step: Step, args: argparse.Namespace, log: Path) -> dict:
    work = args.work_dir
    arm, objective, data = step.options["arm"], step.options["objective"], step.options["data"]
    output = work / "runs" / step.name
    info = read_results(work)[data]
    mean_len = info["tokens"] / info["instances"]
    steps = args.pretrain_steps
    entry: dict = {"step": step.name, "arm": arm, "objective": objective, "data": data,
                   "masking": step.options["masking"], "mean_len": round(mean_len, 1)}
    preset = SUCCESSORS.get(arm, {}).get("preset") or {"clm": GPT1["preset"], "bart": BART["preset"]}.get(
        objective, args.preset)
    settings = step.options.get("settings", {})  # (h): the noising arm's objective settings
    shapes = None
    if objective == "bart":
        shapes = bart_batch_shapes(work / data, settings, args.batch_size, args.seed)
        entry.update(settings=settings, mean_padded_input=float(np.mean([s[0] for s in shapes])),
                     mean_padded_target=float(np.mean([s[1] for s in shapes])))
    if arm in FLOPS_MATCHED:  # equal FLOPs with the MLM arm
        mlm = read_results(work)["pt-mlm"]
        mlm_run = work / "runs" / "pt-mlm"
        if objective in ("t5", "xlnet", "clm", "bart") or not (mlm_run / "final").exists():  # (a work folder seeded with its line)
            planned = preset_config(objective, preset, work / data)
        else:  # the same sizes as pt-mlm
            planned = config_fields(mlm_run)
        if objective == "electra":  # electra adds embedding_size
            planned = {**planned, "embedding_size": planned.get("embedding_size") or planned["hidden_size"]}
        # electra: pt-mlm's total; the others: --pretrain-steps of pt-mlm's step (the same when pt-mlm ran them)
        budget = mlm["flops_total"] if objective == "electra" else mlm["flops_per_step"] * args.pretrain_steps
        budget *= step.options.get("flops_share", 1.0)  # (h): the noising comparison's smaller budget
        steps = max(1, round(budget / pretrain_flops(objective, planned, args, mean_len, shapes)))
        entry["flops_matched_to"] = "pt-mlm"
        if step.options.get("flops_share", 1.0) != 1.0:
            entry["flops_share"] = step.options["flops_share"]
    pinned = recorded_steps(args.pin_steps) if args.pin_steps is not None else {}
    if step.name in pinned:  # rebuild a recorded run's model
        steps, entry["steps_pinned_from"] = pinned[step.name], args.pin_steps.name
    command = [BERTKIT, "pretrain", "--recipe", "bert", "--objective", objective, "--preset", preset, "--data", str(work / data),
               "--output-dir", str(output), "--set", f"max_steps={steps}", "--set", f"batch_size={args.batch_size}",
               "--set", f"lr={args.pretrain_lr}", "--set", f"warmup_steps={max(1, steps // 10)}",
               "--set", f"seed={args.seed}",
               "--set", f"save_steps={args.save_steps}", "--set", f"eval_steps={max(1, steps // 4)}",
               "--set", f"log_steps={max(1, steps // 30)}", "--set", "progress=false"]
    if step.options["masking"]:  # t5 and xlnet choose their own targets
        command += ["--set", f"masking={step.options['masking']}"]
    if objective == "electra":
        command += ["--generator-size", str(args.generator_size)]
    if objective == "clm":
        command += [f"--set=model.{name}={value}" for name, value in GPT1["sizes"].items()]
    command += [f"--set=objective.{name}={value}" for name, value in settings.items()]
    if any(output.glob("checkpoint-*")):
        command.append("--resume")
    elif output.exists():
        command.append("--overwrite")
    seconds = run_command(command, log)
    config = config_fields(output)
    if objective == "electra":
        config.setdefault("embedding_size", config["hidden_size"])
    per_step = pretrain_flops(objective, config, args, mean_len, shapes)
    lines = read_metrics(output)
    evals = [r for r in lines if any(k.startswith("eval_") for k in r)]
    train = [r for r in lines if "loss" in r]
    if objective == "t5":  # a T5 input is a raw chunk of this many text tokens, corrupted to max_seq_length
        from bertkit.objectives.t5 import T5Settings, input_and_target_lengths

        noise = T5Settings()  # the run's (not overridden here)
        mean_len = input_and_target_lengths(args.max_seq_length, noise.noise_density, noise.mean_noise_span_length)[0]
    entry.update(steps=steps, batch_size=args.batch_size, max_seq_length=args.max_seq_length, preset=preset,
                 tokens_seen=round(steps * args.batch_size * mean_len), flops_per_step=per_step,
                 flops_total=per_step * steps, seconds=round(seconds, 1), final_eval=evals[-1] if evals else None,
                 scale="percent",
                 final_train=train[-1] if train else None, command=shown(command, work))
    return entry


def recorded_steps(results: Path) -> dict[str, int]:
    """{pre-training step: its recorded step count} of a results file."""
    lines = (json.loads(line) for line in results.read_text(encoding="utf-8").splitlines() if line.strip())
    return {r["step"]: r["steps"] for r in lines if r.get("step", "").startswith("pt-") and "steps" in r}


def preset_config(objective: str, preset: str, data: Path) -> dict:
    """The config fields a fresh `pretrain --objective objective --preset preset` run on `data`
    gets (its vocabulary from the data's tokenizer): to plan its steps before it runs."""
    from bertkit import Tokenizer
    from bertkit.model.bert.config import BertConfig
    from bertkit.model.t5.config import T5_PRESETS
    from bertkit.model.xlnet.config import XLNetConfig

    vocab_size = len(Tokenizer.from_pretrained(data / "tokenizer"))
    if objective == "clm":  # (g): the GPT-1 preset cut to the BERT arm's size
        from bertkit.model.gpt.config import OPENAI_GPT_PRESETS

        return {**OPENAI_GPT_PRESETS[preset], **GPT1["sizes"], "vocab_size": vocab_size}
    if objective == "bart":  # (h): the preset as it is
        from bertkit.model.bart.config import BART_PRESETS

        return {**BART_PRESETS[preset], "vocab_size": vocab_size}
    if objective not in ("t5", "xlnet"):  # a BERT-shaped arm: the preset's BertConfig
        return BertConfig.from_preset(preset, vocab_size=vocab_size).to_dict()
    sizes = T5_PRESETS[preset] if objective == "t5" else XLNetConfig.presets[preset]
    return {**sizes, "vocab_size": vocab_size}


def run_finetune(step: Step, args: argparse.Namespace, log: Path) -> dict:
    work = args.work_dir
    arm, task, seed = step.options["arm"], step.options["task"], step.options["seed"]
    cut = cut_tasks(work, args)[task]
    epochs = {"mrpc": args.mrpc_epochs, "sst2": args.sst2_epochs, "qnli": args.qnli_epochs}[task]
    model = work / "runs" / step.options.get("model", f"pt-{arm}") / "final"
    if step.options.get("command") == "text2text":  # the task as text: generated labels scored as the task's
        head = ["finetune", "text2text", "--task", "glue", "--glue-task", task]
    else:  # a classification head on the encoder (T5: T5EncoderForSequenceClassification)
        head = ["finetune", "glue", "--task", task]
    # (g): GPT-1's recipe, but the other arms' warm-up (its own is 0.2% of the steps)
    sets = ("warmup_ratio=0.1",) if step.options.get("pretrained") == "gpt1" else ()
    result = finetune(work, step.name, head, cut, model, epochs=epochs, lr=args.ft_lr, seed=seed,
                      max_seq_length=args.max_seq_length, metrics=TASKS[task], log=log, sets=sets)
    return {"step": step.name, "arm": arm, "task": task, "seed": seed, "metrics": result["metrics"], "epochs": epochs,
            "lr": args.ft_lr, "train_subset": cut["train_subset"], "eval_set": cut["eval_set"],
            "seconds": result["seconds"], "command": result["command"], "scale": "percent"}


def finetune(work: Path, name: str, head: list[str], cut: dict, model: Path, *, epochs: int, lr: float, seed: int,
             max_seq_length: int, metrics: tuple[str, ...], log: Path, sets: tuple[str, ...] = ()) -> dict:
    """`bertkit HEAD...` (e.g. finetune glue --task sst2) of `model` on cut's train/dev into
    work/ft/NAME, batch 32, one evaluation after the last epoch, `sets` as `--set` fields
    (e.g. model.classifier_pooling=mean); a run already finished there
    with these settings is picked up, not rerun. {"metrics" (the best_metrics.json values of
    `metrics`, eval_ prefix dropped), "seconds" (None when picked up), "command"}; only best/ is kept."""
    output = work / "ft" / name
    command = [BERTKIT, *head, "--train", str(cut["train"]), "--dev", str(cut["dev"]),
               "--model", str(model), "--output-dir", str(output),
               "--epochs", str(epochs), "--lr", str(lr), "--batch-size", "32",
               "--max-seq-length", str(max_seq_length), "--seed", str(seed), "--overwrite", "--no-progress",
               "--set", "eval_steps=1000000", *(f"--set={value}" for value in sets)]
    if finished_as(output, cut, epochs, seed, lr, model):
        seconds = None  # finished by an earlier runner that stopped before recording it: record, do not rerun
    else:
        seconds = round(run_command(command, log), 1)
    best = json.loads((output / "best" / "best_metrics.json").read_text())
    scores = {k: best.get(f"eval_{k}") for k in metrics}
    for folder in output.glob("checkpoint-*"):  # keep best/ only: ~50 runs
        import shutil

        shutil.rmtree(folder, ignore_errors=True)
    if "eval_invalid" in best:  # text-to-text: generated texts that are no label word (scored wrong)
        scores["invalid"] = best["eval_invalid"]
    return {"metrics": scores, "seconds": seconds, "command": shown(command, work)}


def finished_as(output: Path, cut: dict, epochs: int, seed: int, lr: float, model: Path) -> bool:
    """Whether `output` holds a finished fine-tuning run (best/ written after its last
    step) with exactly these settings."""
    try:
        config = json.loads((output / "run_config.json").read_text())
        best = json.loads((output / "best" / "best_metrics.json").read_text())
    except (OSError, ValueError):
        return False
    lines = read_metrics(output)
    same = (config.get("epochs"), config.get("seed"), config.get("lr"), config.get("init_from"), config.get("train")) == (
        epochs, seed, lr, str(model), str(cut["train"]))
    return same and bool(lines) and best.get("step") == max(r.get("step", 0) for r in lines)


def cmd_run(args: argparse.Namespace) -> None:
    steps = build_steps(args)
    names = select(args.steps, steps)
    if args.exclude:  # steps another runner is doing (name prefixes)
        names = [n for n in names if not n.startswith(tuple(args.exclude.split(",")))]
    (args.work_dir / "data").mkdir(parents=True, exist_ok=True)
    done = set(read_results(args.work_dir)) if not args.redo else set()
    pending = [n for n in names if n not in done]
    failed: set[str] = set()
    running: dict = {}
    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        while pending or running:
            for name in list(pending):
                if len(running) >= args.jobs:
                    break
                deps = steps[name].deps
                if any(d in failed for d in deps):
                    pending.remove(name)
                    failed.add(name)
                    print(f"ablations: {name}: skipped (a dependency failed)", file=sys.stderr)
                elif all(d in done for d in deps):
                    pending.remove(name)
                    print(f"ablations: {name}: running (log {args.work_dir / 'logs' / (name + '.log')})",
                          file=sys.stderr, flush=True)
                    running[pool.submit(run_step, steps[name], args)] = name
            if not running:
                if not (args.wait_for_others and pending):
                    break
                time.sleep(15)  # dependencies another runner is doing: pick up its results
                done |= set(read_results(args.work_dir))
                continue
            finished, _ = wait(running, return_when=FIRST_COMPLETED)
            for future in finished:
                name = running.pop(future)
                try:
                    entry = future.result()
                except (Exception, SystemExit) as exc:  # noqa: BLE001 - one failed step must not stop the others
                    failed.add(name)
                    print(f"ablations: {name}: FAILED: {exc}", file=sys.stderr, flush=True)
                    continue
                entry.update(machine=f"{platform.machine()}, {os.cpu_count()} CPUs", threads=args.threads,
                             finished=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
                record(args.work_dir, entry)
                done.add(name)
                print(f"ablations: {name}: done in {entry.get('seconds')} s", file=sys.stderr, flush=True)
    if failed:
        raise SystemExit(f"ablations: {len(failed)} step(s) failed or skipped: {', '.join(sorted(failed))}")


def cmd_list(args: argparse.Namespace) -> None:
    done = read_results(args.work_dir)
    for name, step in build_steps(args).items():
        print(f"{name:24s} {'done' if name in done else '-':5s} {step.kind} {step.options or ''}")


# ---------------------------------------------------------------------------- tables and plots


def scores(results: dict[str, dict]) -> dict[tuple[str, str, str], list[float]]:
    """(arm, task, metric) -> the fine-tuning seeds' scores (in %)."""
    out: dict = {}
    for entry in results.values():
        if entry["step"].startswith("ft-"):
            for metric, value in entry["metrics"].items():
                # entries recorded before bertkit's one percent scale hold fractions
                percent = value if entry.get("scale") == "percent" else 100.0 * value
                out.setdefault((entry["arm"], entry["task"], metric), []).append(percent)
    return out


def mean_and_spread(values: list[float]) -> str:
    """'mean ± std' of a few seeds' scores (std with ddof=1; no spread for one value)."""
    v = np.asarray(values)
    return f"{v.mean():.1f}" + (f" ± {v.std(ddof=1):.1f}" if len(v) > 1 else "")


def summary(values: list[float]) -> str:
    """'mean ± std (min-max, n)' of a few seeds' scores."""
    if not values:
        return "-"
    return f"{mean_and_spread(values)} ({min(values):.1f}-{max(values):.1f}, n={len(values)})"


ABLATIONS = {
    "a": ("(a) Table 5: MLM+NSP vs MLM only vs left-to-right", ("mlm_nsp", "mlm", "ltr", "random")),
    "b": ("(b) ELECTRA vs MLM at equal pre-training FLOPs", ("electra", "mlm", "random")),
    "c": ("(c) dynamic vs static masking", ("dynamic", "static", "random")),
    "d": ("(d) whole-word vs sub-token masking", ("wwm", "mlm", "random")),
    "g": ("(g) BERT (MLM encoder) vs GPT-1 (left-to-right decoder) at equal pre-training FLOPs",
          ("mlm", "mlm_nsp", "gpt1", "random", "gpt1_random")),
    "f": ("(f) T5 span corruption and XLNet's permutation LM vs MLM at equal pre-training FLOPs",
          ("t5_cls", "t5_t2t", "xlnet", "mlm", "mlm_nsp", "ltr_flops", "ltr", "t5_cls_random", "t5_t2t_random", "xlnet_random",
           "random")),
    # (h): its tasks only (the recorded MLM and T5 rows have QNLI too)
    "h": ("(h) BART denoising vs T5 span corruption vs BERT MLM, and BART's noising functions",
          ("bart", "t5_cls", "t5_t2t", "mlm", "mlm_nsp", "bart_infill_perm", "bart_infill", "bart_mask", "bart_random",
           "t5_cls_random", "random"), ("mrpc", "sst2")),
}
ARM_NAMES = {"mlm_nsp": "MLM + NSP", "mlm": "MLM only (sub-token, dynamic)", "ltr": "left-to-right LM",
             "electra": "ELECTRA (gen 0.25)", "wwm": "MLM, whole-word masking", "dynamic": "MLM, dynamic (slice)",
             "static": "MLM, static (slice)", "random": "no pre-training (random init)",
             "t5": "T5 span corruption", "t5_cls": "T5 span corruption: encoder + classification head",
             "t5_t2t": "T5 span corruption: text-to-text", "xlnet": "XLNet permutation LM",
             "ltr_flops": "left-to-right LM, equal FLOPs",
             "t5_cls_random": "no pre-training: T5 encoder + head", "t5_t2t_random": "no pre-training: T5 text-to-text",
             "xlnet_random": "no pre-training: XLNet",
             "gpt1": "GPT-1 decoder, causal LM (GPT-1's fine-tuning recipe)", "gpt1_random": "no pre-training: GPT-1 decoder",
             "bart": "BART: infilling + sentence permutation (the recipe)",
             "bart_infill_perm": "BART noising: infilling + permutation (the recipe)",
             "bart_infill": "BART noising: text infilling only", "bart_mask": "BART noising: token masking only",
             "bart_random": "no pre-training: BART"}
# the held-out accuracy of each objective's own prediction task (eval split, last evaluation)
HELD_OUT = ("eval_mlm_accuracy", "eval_lm_accuracy", "eval_token_accuracy", "eval_plm_accuracy", "eval_accuracy")


def cmd_table(args: argparse.Namespace) -> None:
    results = read_results(args.work_dir)
    table = scores(results)
    for key, (title, arms, *only) in ABLATIONS.items():
        tasks = [t for t in (only[0] if only else TASKS)
                 if any((arm, t, TASKS[t][0]) in table for arm in arms if arm != "random")]
        columns = [(t, m) for t in tasks for m in TASKS[t]]
        print(f"\n#### {title}\n")
        print("| arm | pre-training steps | tokens seen | train FLOPs | wall | held-out acc | " +
              " | ".join(f"{t.upper()} {m}" for t, m in columns) + " |")
        print("|---|---:|---:|---:|---:|---:|" + "---|" * len(columns))
        for arm in arms:
            pt = results.get(f"pt-{FINETUNE.get(arm, (arm,))[0]}", {})
            flops = f"{pt['flops_total'] / 1e12:.1f} T" if pt.get("flops_total") else "-"
            wall = f"{pt['seconds'] / 60:.1f} min" if pt.get("seconds") else "-"
            acc = held_out_accuracy(pt)
            if not pt and not any(table.get((arm, t, m)) for t, m in columns):
                continue  # an arm not run (yet)
            row = [ARM_NAMES[arm], str(pt.get("steps", 0)), f"{pt.get('tokens_seen', 0) / 1e6:.2f} M", flops, wall,
                   "-" if acc is None else f"{acc:.1f}"]
            row += [summary(table.get((arm, t, m), [])) for t, m in columns]
            print("| " + " | ".join(row) + " |")
    print("\n#### pre-training (held-out, last evaluation)\n")
    print("| run | objective | data | masking | steps | held-out acc (own objective) | eval loss | wall |")
    print("|---|---|---|---|---:|---:|---:|---:|")
    for name, entry in results.items():
        if name.startswith("pt-") and entry.get("final_eval"):
            ev = entry["final_eval"]
            acc = held_out_accuracy(entry)
            print(f"| {name} | {entry['objective']} | {entry['data']} | {entry['masking']} | {entry['steps']} | "
                  f"{'-' if acc is None else f'{acc:.1f}'} | "
                  f"{ev.get('eval_loss', float('nan')):.3f} | "
                  f"{entry['seconds'] / 60:.1f} min |")


def held_out_accuracy(entry: dict) -> float | None:
    """A pre-training result's held-out accuracy (%) on its own objective's targets, or None."""
    ev = entry.get("final_eval") or {}
    acc = next((ev[k] for k in HELD_OUT if k in ev), None)
    if acc is not None and entry.get("scale") != "percent":  # recorded before the percent scale: a fraction
        acc *= 100
    return acc


def cmd_plots(args: argparse.Namespace) -> None:
    from bertkit.plots import new_figure, save_png

    results = read_results(args.work_dir)
    table = scores(results)
    for key, (title, arms, *only) in ABLATIONS.items():
        columns = [(t, TASKS[t][0]) for t in (only[0] if only else TASKS)
                   if any((a, t, TASKS[t][0]) in table for a in arms if a != "random")]
        if not columns:
            continue
        figure = new_figure(8, 4.2)
        axes = figure.add_subplot(1, 1, 1)
        width = 0.8 / len(arms)
        for j, arm in enumerate(arms):
            values = [table.get((arm, t, m), []) for t, m in columns]
            means = [np.mean(v) if v else 0.0 for v in values]
            low = [max(0.0, np.mean(v) - min(v)) if v else 0.0 for v in values]  # (equal seeds: rounding below 0)
            high = [max(0.0, max(v) - np.mean(v)) if v else 0.0 for v in values]
            x = np.arange(len(columns)) + (j - (len(arms) - 1) / 2) * width
            axes.bar(x, means, width, yerr=[low, high], capsize=3, label=ARM_NAMES[arm])
            for xi, v in zip(x, values):
                axes.plot([xi] * len(v), v, "k.", markersize=3)
        axes.set_xticks(np.arange(len(columns)))
        axes.set_xticklabels([f"{t.upper()} {m}" for t, m in columns])
        lows = [min(v) for a in arms for c in columns for v in [table.get((a, *c), [])] if v]
        axes.set_ylim(max(0.0, min(lows) - 10) if lows else 0, 100)
        axes.set_ylabel("dev score (%), mean; bars min-max; dots seeds")
        axes.set_title(title, fontsize=10)
        axes.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.1), ncol=len(arms))
        figure.tight_layout()
        print(save_png(figure, args.out / f"ablation_{key}.png"))
    curves = [("pt-mlm_nsp", "pt-mlm", "pt-wwm"), ("pt-dynamic", "pt-static")]
    figure = new_figure(10, 3.6)
    for k, runs in enumerate(curves):
        axes = figure.add_subplot(1, 2, k + 1)
        for run in runs:
            path = args.work_dir / "runs" / run / "metrics.jsonl"
            if path.exists():
                lines = [r for r in read_metrics(path.parent) if "mlm_loss" in r]
                evals = [r for r in read_metrics(path.parent) if "eval_mlm_loss" in r]
                line, = axes.plot([r["step"] for r in lines], [r["mlm_loss"] for r in lines], label=f"{run} train")
                axes.plot([r["step"] for r in evals], [r["eval_mlm_loss"] for r in evals], "o--",
                          color=line.get_color(), label=f"{run} held-out")
        axes.set_xlabel("step")
        axes.set_ylabel("MLM loss")
        axes.legend(fontsize=7)
    figure.suptitle("pre-training MLM loss (train: dynamic masks of the step's batch; held-out: eval split)",
                    fontsize=9)
    figure.tight_layout()
    print(save_png(figure, args.out / "ablation_pretraining_curves.png"))
    # the arms of (a)/(b) on their own objectives' losses
    figure = new_figure(10, 3.6)
    for k, (run, key) in enumerate((("pt-ltr", "lm_loss"), ("pt-electra", "disc_loss"))):
        path = args.work_dir / "runs" / run / "metrics.jsonl"
        if not path.exists():
            continue
        lines = read_metrics(path.parent)
        keys = [k2 for k2 in lines[0] if k2.endswith("_loss") and not k2.startswith("eval_")] if lines else []
        axes = figure.add_subplot(1, 2, k + 1)
        for name in keys:
            rows = [r for r in lines if name in r]
            axes.plot([r["step"] for r in rows], [r[name] for r in rows], label=name)
        axes.set_xlabel("step")
        axes.set_title(run, fontsize=9)
        axes.legend(fontsize=7)
    figure.tight_layout()
    print(save_png(figure, args.out / "ablation_pretraining_other.png"))


def cls_spread(model_dir: Path, texts: list[str]) -> dict:
    """How much the encoder's [CLS] output varies with the input: the per-dimension std over
    `texts` (mean over dimensions), relative to the mean [CLS] norm; the same for the
    pooler and for the mean of the token vectors. Near 0: [CLS] is nearly a constant."""
    import torch

    tokenizer, model = load_encoder(model_dir)
    batch = tokenizer(texts, padding=True, return_tensors="pt")
    with torch.no_grad():
        out = model(input_ids=batch["input_ids"], token_type_ids=batch["token_type_ids"], attention_mask=batch["attention_mask"])
    mask = batch["attention_mask"][..., None].float()
    mean = (out.last_hidden_state * mask).sum(1) / mask.sum(1)  # (N, H)
    spread = {}
    for name, vectors in (("cls", out.last_hidden_state[:, 0]), ("pooler", getattr(out, "pooler_output", None)),
                          ("mean_tokens", mean)):
        if vectors is not None:
            spread[name] = float(vectors.std(0).mean() / vectors.norm(dim=-1).mean())
    return spread


def load_encoder(model_dir: Path):
    """(tokenizer, encoder in eval mode) of a pre-training run's final/ (BERT, LTR or ELECTRA)."""
    from bertkit import BertModel, Tokenizer
    from bertkit.model.electra import ElectraModel

    electra = json.loads((model_dir / "config.json").read_text()).get("model_type") == "electra"
    return Tokenizer.from_pretrained(model_dir), (ElectraModel if electra else BertModel).from_pretrained(model_dir).eval()


def mean_features(model_dir: Path, texts: list[str], batch_size: int = 64, max_length: int = 128) -> np.ndarray:
    """(N, H) float64: the mean of the last layer's token vectors (padding excluded), frozen encoder."""
    import torch

    tokenizer, model = load_encoder(model_dir)
    order = np.argsort([len(t) for t in texts])  # similar lengths per batch: less padding
    out = np.zeros((len(texts), model.config.hidden_size))
    with torch.inference_mode():
        for start in range(0, len(texts), batch_size):
            index = order[start:start + batch_size]
            batch = tokenizer([texts[i] for i in index], padding=True, truncation=True, max_length=max_length,
                              return_tensors="pt")
            hidden = model(input_ids=batch["input_ids"], token_type_ids=batch["token_type_ids"], attention_mask=batch["attention_mask"]).last_hidden_state
            mask = batch["attention_mask"][..., None].float()
            out[index] = ((hidden * mask).sum(1) / mask.sum(1)).double().numpy()
    return out


def probe_accuracy(train_x: np.ndarray, train_y: np.ndarray, dev_x: np.ndarray, dev_y: np.ndarray) -> float:
    """Dev accuracy of an L2-regularised logistic regression on standardised frozen features."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    classifier = make_pipeline(StandardScaler(), LogisticRegression(C=1.0, max_iter=2000))
    return float(classifier.fit(train_x, train_y).score(dev_x, dev_y))


def read_tsv(path: Path, columns: tuple[str, ...]) -> list[list[str]]:
    header, *lines = path.read_text(encoding="utf-8-sig").splitlines()
    names = header.split("\t")
    return [[row.split("\t")[names.index(c)] for c in columns] for row in lines if row.strip()]


def cmd_probe(args: argparse.Namespace) -> None:
    """Frozen-feature probes (no fine-tuning): SST-2 (2,000 train subset -> dev) on mean-pooled
    sentence vectors; with --mrpc also MRPC (train -> dev) on [u, v, |u - v|, u * v]."""
    cut = cut_tasks(args.work_dir, args)
    sst_train = read_tsv(cut["sst2"]["train"], ("sentence", "label"))
    sst_dev = read_tsv(cut["sst2"]["dev"], ("sentence", "label"))
    mrpc_columns = ("#1 String", "#2 String", "Quality")
    mrpc_train, mrpc_dev = read_tsv(cut["mrpc"]["train"], mrpc_columns), read_tsv(cut["mrpc"]["dev"], mrpc_columns)
    results = {}
    print("| run | SST-2 probe accuracy | MRPC probe accuracy |\n|---|---:|---:|")
    for run in sorted((args.work_dir / "runs").glob("pt-*/final")):
        f = lambda rows, k: mean_features(run, [r[k] for r in rows])  # noqa: E731
        labels = lambda rows, k: np.array([int(r[k]) for r in rows])  # noqa: E731
        sst = probe_accuracy(f(sst_train, 0), labels(sst_train, 1), f(sst_dev, 0), labels(sst_dev, 1))
        mrpc = float("nan")
        if args.mrpc:
            pair = lambda rows: (lambda u, v: np.hstack([u, v, np.abs(u - v), u * v]))(f(rows, 0), f(rows, 1))  # noqa: E731
            mrpc = probe_accuracy(pair(mrpc_train), labels(mrpc_train, 2), pair(mrpc_dev), labels(mrpc_dev, 2))
        results[run.parent.name] = {"sst2": sst, "mrpc": mrpc}
        print(f"| {run.parent.name} | {100 * sst:.1f} | {100 * mrpc:.1f} |", flush=True)
    (args.work_dir / "probe.json").write_text(json.dumps(results, indent=1) + "\n")


def cmd_spread(args: argparse.Namespace) -> None:
    """Print, per pre-trained arm, cls_spread over the first 256 SST-2 dev sentences."""
    texts = [line.split("\t")[0] for line in (GLUE / "SST-2" / "dev.tsv").read_text(encoding="utf-8").splitlines()[1:257]]
    print("| run | [CLS] spread | pooler spread | mean-of-tokens spread |\n|---|---:|---:|---:|")
    for run in sorted((args.work_dir / "runs").glob("pt-*/final")):
        s = cls_spread(run, texts)
        print(f"| {run.parent.name} | {s['cls']:.4f} | {s.get('pooler', float('nan')):.4f} | {s['mean_tokens']:.4f} |")


def corpus_tail_lines(count: int, min_words: int = 12) -> list[str]:
    """The corpus's last `count` lines of at least `min_words` words (Austen, as in training)."""
    with gzip.open(CORPUS, "rt", encoding="utf-8") as handle:
        lines = [line for line in handle.read().splitlines() if len(line.split()) >= min_words]
    return lines[-count:]


def detection_auroc(run: Path, texts: list[str], seed: int = 0, rate: float = 0.15) -> dict:
    """How well an ELECTRA discriminator separates replaced from original tokens: AUROC of
    its logits when `rate` of the real tokens are replaced (a) by uniformly random vocabulary
    ids, (b) by samples of the run's own generator at [MASK]-ed positions (as in training)."""
    import torch
    from sklearn.metrics import roc_auc_score

    from bertkit import Tokenizer
    from bertkit.model.electra import ElectraForMaskedLM, ElectraForPreTraining

    tokenizer = Tokenizer.from_pretrained(run)
    discriminator = ElectraForPreTraining.from_pretrained(run).eval()
    generator = ElectraForMaskedLM.from_pretrained(run / "generator").eval()
    batch = tokenizer(texts, truncation=True, max_length=64, padding=True, return_tensors="pt")
    ids, mask, types = batch["input_ids"], batch["attention_mask"], batch["token_type_ids"]
    special = torch.isin(ids, torch.tensor(sorted(tokenizer.all_special_ids)))
    real = mask.bool() & ~special
    rng = np.random.default_rng(seed)
    chosen = torch.from_numpy(rng.random(ids.shape) < rate) & real
    sampler = torch.Generator().manual_seed(seed)
    out = {}
    with torch.inference_mode():
        for kind in ("uniform", "generator"):
            corrupted = ids.clone()
            if kind == "uniform":
                corrupted[chosen] = torch.randint(len(tokenizer.all_special_ids), discriminator.config.vocab_size,
                                                  (int(chosen.sum()),), generator=sampler)
            else:
                masked = ids.masked_fill(chosen, tokenizer.mask_token_id)
                probs = generator(masked, types, mask).logits[chosen].softmax(-1)  # (N, V)
                corrupted[chosen] = torch.multinomial(probs, 1, generator=sampler).squeeze(-1)
            logits = discriminator(corrupted, types, mask).logits[real].numpy()
            replaced = (corrupted != ids)[real].numpy()
            out[kind] = {"replaced_fraction": float(replaced.mean()), "auroc": float(roc_auc_score(replaced, logits))}
    return out


def cmd_detect(args: argparse.Namespace) -> None:
    """Print detection_auroc of the ELECTRA arm on the corpus's last 300 long lines."""
    result = detection_auroc(args.work_dir / "runs" / "pt-electra" / "final", corpus_tail_lines(300))
    for kind, values in result.items():
        print(f"{kind}: replaced {values['replaced_fraction']:.3f}, AUROC {values['auroc']:.3f}")


def span_accuracy(run: Path, data: Path, count: int = 256, batch_size: int = 32) -> dict:
    """The T5 arm's held-out target accuracy (%) split into the structural targets (sentinels
    and EOS, predictable from the input's layout) and the corrupted spans' own tokens; the
    first `count` examples of the eval split, masks as the run's evaluation draws them."""
    import torch

    from bertkit.data.dataset import PretrainingDataset
    from bertkit.data.masking import MaskingConfig
    from bertkit.model.t5 import T5ForConditionalGeneration
    from bertkit.objectives.t5 import T5Objective

    model = T5ForConditionalGeneration.from_pretrained(run).eval()
    objective = T5Objective(model, PretrainingDataset.open(data), PretrainingDataset.open(data, "eval"),
                            MaskingConfig(), seed=0)
    structural_ids = torch.tensor([*objective.sentinel_ids.tolist(), objective.eos_id])
    right, total = {"structural": 0, "span": 0}, {"structural": 0, "span": 0}
    count = min(count, objective.num_eval_examples())
    with torch.inference_mode():
        for start in range(0, count, batch_size):
            batch = objective.collate([objective.eval_example(i) for i in range(start, min(count, start + batch_size))])
            labels = batch["labels"]
            logits = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"], labels=labels).logits
            correct = logits.argmax(-1) == labels
            structural = torch.isin(labels, structural_ids)
            for name, where in (("structural", structural), ("span", ~structural & (labels >= 0))):
                right[name] += int(correct[where].sum())
                total[name] += int(where.sum())
    return {name: {"accuracy": 100.0 * right[name] / max(total[name], 1), "targets": total[name]} for name in total}


def cmd_spans(args: argparse.Namespace) -> None:
    """Print span_accuracy of the T5 arm (and of its no-pre-training control when written)."""
    for run in ("pt-t5", "pt-t5_random"):
        if (args.work_dir / "runs" / run / "final").exists():
            result = span_accuracy(args.work_dir / "runs" / run / "final", args.work_dir / "data-t5")
            print(run + ": " + ", ".join(f"{k} {v['accuracy']:.1f}% of {v['targets']}" for k, v in result.items()))


def denoising_scores(run: Path, data: Path, settings: dict, batch_size: int = 32) -> dict:
    """A BART run's held-out target loss and token accuracy (%) on every eval document of
    `data` noised with `settings` (`objective.NAME` values) from the evaluation seed: one
    yardstick for models pre-trained with different noising."""
    import torch

    from bertkit.data.dataset import PretrainingDataset
    from bertkit.data.masking import MaskingConfig
    from bertkit.model.bart import BartForConditionalGeneration
    from bertkit.objectives.bart import BartObjective, BartSettings

    model = BartForConditionalGeneration.from_pretrained(run).eval()
    objective = BartObjective(model, PretrainingDataset.open(data), PretrainingDataset.open(data, "eval"),
                              MaskingConfig(), seed=0, settings=BartSettings(**settings))
    loss_sum, right, total = 0.0, 0, 0
    count = objective.num_eval_examples()
    with torch.inference_mode():
        for start in range(0, count, batch_size):
            batch = objective.collate([objective.eval_example(i) for i in range(start, min(count, start + batch_size))])
            out = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"], labels=batch["labels"])
            target = batch["labels"] != -100
            loss_sum += float(out.loss) * int(target.sum())
            right += int(((out.logits.argmax(-1) == batch["labels"]) & target).sum())
            total += int(target.sum())
    return {"loss": loss_sum / total, "token_accuracy": 100.0 * right / total, "targets": total, "documents": count}


def cmd_noising(args: argparse.Namespace) -> None:
    """(h): every BART arm's held-out loss / token accuracy under each of the noising arms' noising."""
    noisings = {arm: BART["noising"][arm] for arm in ("bart_infill_perm", "bart_infill", "bart_mask")}
    print("| run | " + " | ".join(f"held-out noised as {arm}: loss / acc" for arm in noisings) + " |")
    print("|---|" + "---:|" * len(noisings))
    for run in ("pt-bart", "pt-bart_infill_perm", "pt-bart_infill", "pt-bart_mask", "pt-bart_random"):
        if (args.work_dir / "runs" / run / "final").exists():
            cells = [denoising_scores(args.work_dir / "runs" / run / "final", args.work_dir / "data-bart", settings)
                     for settings in noisings.values()]
            print(f"| {run} | " + " | ".join(f"{c['loss']:.3f} / {c['token_accuracy']:.1f}" for c in cells) + " |",
                  flush=True)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--work-dir", type=Path, default=Path("/tmp/bertkit_ablations"))
    parser.add_argument("--threads", type=int, default=1, help="OMP_NUM_THREADS of every command")
    parser.add_argument("--seed", type=int, default=42, help="pre-training seed (every arm)")
    parser.add_argument("--seeds", type=lambda s: [int(x) for x in s.split(",")], default=[1, 2, 3],
                        help="fine-tuning seeds, comma-separated")
    budget = parser.add_argument_group("budget")
    budget.add_argument("--vocab-size", type=int, default=8192)
    budget.add_argument("--preset", default="tiny")
    budget.add_argument("--max-seq-length", type=int, default=128)
    budget.add_argument("--batch-size", type=int, default=32)
    budget.add_argument("--pretrain-steps", type=int, default=2000)
    budget.add_argument("--pretrain-lr", type=float, default=1e-3)
    budget.add_argument("--save-steps", type=int, default=500)
    budget.add_argument("--pin-steps", type=Path, default=None, metavar="RESULTS_JSONL",
                        help="pre-train the arms recorded in this results file for their recorded steps (to rebuild "
                             "those models when the FLOPs formula has changed since)")
    budget.add_argument("--generator-size", type=float, default=0.25)
    budget.add_argument("--bart-noising-share", type=float, default=1.0,
                        help="(h): the noising comparison's pre-training FLOPs as a share of pt-mlm's (below 1, the "
                             "recipe runs again at that budget as bart_infill_perm)")
    budget.add_argument("--slice-chars", type=int, default=350_000, help="(c): characters of the corpus slice")
    budget.add_argument("--dupe-factor", type=int, default=20, help="(c): static masking's copies")
    budget.add_argument("--ft-lr", type=float, default=3e-4, help="ELECTRA-Small's fine-tuning lr (1e-4 left every arm at the majority class)")
    budget.add_argument("--mrpc-epochs", type=int, default=3)
    budget.add_argument("--mrpc-train", type=int, default=None, help="MRPC train subset (default: all)")
    budget.add_argument("--sst2-train", type=int, default=8000)
    budget.add_argument("--sst2-epochs", type=int, default=3)
    budget.add_argument("--qnli-train", type=int, default=4000)
    budget.add_argument("--qnli-dev", type=int, default=1463)
    budget.add_argument("--qnli-epochs", type=int, default=3)
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("run", help="run steps (skipping those with a recorded result)")
    run.add_argument("steps", nargs="+", help="step names, ablation letters a b c d, or all")
    run.add_argument("--jobs", type=int, default=1, help="steps run at once")
    run.add_argument("--redo", action="store_true", help="run recorded steps again")
    run.add_argument("--wait-for-others", action="store_true",
                     help="wait for dependencies another runner is doing (polls results.jsonl)")
    run.add_argument("--exclude", default="", help="leave out steps whose names start with these (comma-separated)")
    run.set_defaults(func=cmd_run)
    commands.add_parser("list", help="the steps and which are done").set_defaults(func=cmd_list)
    commands.add_parser("table", help="markdown tables of the recorded results").set_defaults(func=cmd_table)
    probe = commands.add_parser("probe", help="frozen-feature logistic-regression probes of every pre-trained arm")
    probe.add_argument("--mrpc", action="store_true", help="MRPC too (4x the sentences of SST-2)")
    probe.set_defaults(func=cmd_probe)
    commands.add_parser("spread", help="how much each arm's [CLS] output varies over SST-2 dev sentences").set_defaults(
        func=cmd_spread)
    commands.add_parser("detect", help="ELECTRA discriminator: AUROC on random vs generator-sampled replacements"
                        ).set_defaults(func=cmd_detect)
    commands.add_parser("spans", help="T5 arm: held-out accuracy on sentinels/EOS vs the spans' own tokens"
                        ).set_defaults(func=cmd_spans)
    commands.add_parser("noising", help="(h) BART arms: held-out loss / accuracy under each arm's noising"
                        ).set_defaults(func=cmd_noising)
    plots = commands.add_parser("plots", help="PNG bar charts and pre-training curves")
    plots.add_argument("--out", type=Path, default=REPO / "docs" / "ablations")
    plots.set_defaults(func=cmd_plots)
    args = parser.parse_args(argv)
    if args.pin_steps is not None and not args.pin_steps.is_file():
        parser.error(f"--pin-steps: no such results file: {args.pin_steps}")
    ENV.update(OMP_NUM_THREADS=str(args.threads), MKL_NUM_THREADS=str(args.threads))
    args.work_dir.mkdir(parents=True, exist_ok=True)
    args.func(args)


if __name__ == "__main__":
    main()
