"""BigBird's recipes: pre-training at its CPU sizes, and the fine-tuning step that gives the QA head the
tokenizer's [SEP].

default: measured with objective mlm on WikiText-2 (bigbird-tiny, 256-token sequences so that the
block-sparse path trains, batch 16, 200 steps, 10% warm-up; experiments/results/bigbird_recipes.jsonl):
held-out MLM loss 6.363 at lr 2e-3, 6.386 at 1e-3 (unigram 6.435). mini takes half the tiny lr (BERT's
rule per doubling of the width, not measured).
budget: the shared budget line at bigbird-tiny, its measured lr, no dropout.
"""

from __future__ import annotations

import dataclasses

from bertkit.model.recipes import FinetuningRecipe, PretrainingRecipe, budget_recipe

TINY_LR = 2e-3
NO_DROPOUT = {"hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0}

PRETRAINING = {
    "default": PretrainingRecipe(
        sizes={"bigbird-tiny": {"lr": TINY_LR, "warmup_ratio": 0.1}, "bigbird-mini": {"lr": TINY_LR / 2, "warmup_ratio": 0.1},
               "kobigbird-tiny": {"lr": TINY_LR, "warmup_ratio": 0.1}},  # bigbird-tiny's size in KoBigBird's layout
        why="lr 2e-3 at bigbird-tiny (measured against 1e-3), halved per doubling of width"),
    "budget": budget_recipe("bigbird-tiny", TINY_LR, 16, NO_DROPOUT, why="the shared budget schedule at the measured lr"),
}


class BigBirdFinetuning(FinetuningRecipe):
    """transformers' BigBird QA head takes the question (up to the first `sep_token_id`) out of the answers:
    the config's id is set to the tokenizer's [SEP] (a bertkit pre-training keeps transformers' default, 66,
    which is an ordinary piece of a trained vocabulary)."""

    name = "bigbird"

    def prepare(self, tokenizer, config, source):
        sep = tokenizer.sep_token_id
        if sep is not None and sep != config.sep_token_id:
            config = dataclasses.replace(config, sep_token_id=sep, extra=dict(config.extra))
        return tokenizer, config


FINETUNING = BigBirdFinetuning()
