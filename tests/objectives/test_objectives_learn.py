"""Every objective learns at its family's default recipe, and its held-out metrics show it (issue 45, deliverable 2).

A learnable toy corpus: each line walks a fixed cycle of 24 words from a random start, so every
word is fixed by its neighbours. A model that learned only the words' frequencies predicts the
most frequent target everywhere (`eval_majority_accuracy`) and scores the targets' own entropy
(`eval_unigram_loss`); each objective, trained `bertkit pretrain` with no recipe settings (the
family's default: bertkit.model.<family>.recipes), must end below the unigram loss and above the
majority rate, with its held-out loss falling and its accuracy rising between evaluations. The
models are the tiny presets cut to a width of 64 so the suite stays fast.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from bertkit.cli import main

WORDS = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet", "kilo", "lima",
         "mike", "november", "oscar", "papa", "quebec", "romeo", "sierra", "tango", "uniform", "victor", "whiskey",
         "xray"]
# objective -> tokenizer arguments, preset, the width overrides and steps, the held-out loss and accuracy fields
# (an MLM scores 15% of the tokens a step: it leaves the unigram plateau later than the others)
CASES = {
    "mlm": (["--algorithm", "wordpiece"], "tiny", ["model.hidden_size=64", "model.intermediate_size=128",
            "max_steps=200"], "eval_mlm_loss", "eval_mlm_accuracy"),
    "clm": (["--algorithm", "bbpe", "--layout", "gpt2"], "gpt-tiny", ["model.n_embd=64", "max_steps=40"],
            "eval_lm_loss", "eval_lm_accuracy"),
    "bart": (["--algorithm", "bbpe", "--layout", "bart"], "bart-tiny", ["model.d_model=64",
             "model.encoder_ffn_dim=128", "model.decoder_ffn_dim=128", "max_steps=60"], "eval_loss",
             "eval_token_accuracy"),
    "t5": (["--algorithm", "unigram", "--layout", "t5", "--sentinels", "20"], "t5-tiny",
           ["model.d_model=64", "model.d_ff=128", "max_steps=80"], "eval_loss", "eval_token_accuracy"),
    "bilm": (["--algorithm", "wordpiece"], "elmo-tiny", ["max_steps=100"], "eval_forward_loss",
             "eval_forward_accuracy"),
}


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    rng = random.Random(0)
    documents = []
    for _ in range(150):  # three sentences a document: BART permutes them
        sentences = []
        for _ in range(3):
            start = rng.randrange(len(WORDS))
            sentences.append(" ".join(WORDS[(start + i) % len(WORDS)] for i in range(rng.randrange(6, 14))) + " .")
        documents.append("\n".join(sentences))
    path = tmp_path_factory.mktemp("toy") / "cycle.txt"
    path.write_text("\n\n".join(documents) + "\n")  # the held-out split takes whole documents
    return path


@pytest.mark.parametrize("objective", list(CASES))
def test_each_objective_learns_past_word_frequencies_at_its_default_recipe(objective, corpus, tmp_path):
    tokenizer_args, preset, width, loss_field, accuracy_field = CASES[objective]
    tok, data, run = tmp_path / "tok", tmp_path / "data", tmp_path / "run"
    assert main(["tokenizer", "train", *tokenizer_args, "--vocab-size", "300", "--output", str(tok), "--no-progress",
                 str(corpus)]) == 0
    assert main(["data", "build", "--tokenizer", str(tok), "--format", "packed", "--max-seq-length", "32",
                 "--eval-fraction", "0.1", "--output", str(data), "--no-progress", str(corpus)]) == 0
    steps = int(next(v for v in width if v.startswith("max_steps=")).split("=")[1])
    sets = [arg for value in [*width, f"eval_steps={steps // 2}", "eval_batches=4", "save_checkpoints=false",
                              "tensorboard=false"] for arg in ("--set", value)]
    assert main(["pretrain", "--objective", objective, "--preset", preset, "--data", str(data), "--output-dir", str(run),
                 "--no-progress", *sets]) == 0
    evals = [r for r in map(json.loads, (run / "metrics.jsonl").read_text().splitlines()) if loss_field in r]
    first, last = evals[0], evals[-1]
    assert last[loss_field] < first[loss_field]
    assert last[accuracy_field] > first[accuracy_field]
    assert last[loss_field] < last["eval_unigram_loss"], (objective, last)
    assert last[accuracy_field] > last["eval_majority_accuracy"] + 5, (objective, last)
    report = (run / "report.md").read_text()
    assert "eval_unigram_loss" in report and "recipe" in report
