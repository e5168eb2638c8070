"""BERT's pre-training recipes (mlm, mlm_nsp, spanbert, ltr; RoBERTa, ELECTRA and ALBERT, built on
BERT, start from these). bertkit.model.recipes says what a recipe is.

default: the paper's settings (peak lr 1e-4, 1% warm-up) suit BERT-base at batch 256; at the small
sizes a user pre-trains on one machine they stay on the unigram plateau for hundreds of steps. Measured
on WikiText-2 (tiny, batch 32, 300 steps; experiments/results/family_recipes.jsonl): held-out MLM loss
6.88 at lr 1e-4, 6.29 at 5e-4, 6.20 at 1e-3, 6.15 at 2e-3 (10% warm-up). The larger sizes halve the
peak lr per doubling of the width (not measured; the paper's 1e-4 from medium up).
budget: the cramming line measured at equal wall time (experiments/budget_recipes.py): MLM only, pre-LN,
no dropout, a triangular schedule with RoBERTa's beta2, batches of 16 sequences of 64 tokens.
"""

from bertkit.model.recipes import PretrainingRecipe

SMALL_SIZES = {"tiny": {"lr": 2e-3, "warmup_ratio": 0.1}, "mini": {"lr": 1e-3, "warmup_ratio": 0.1},
               "small": {"lr": 5e-4, "warmup_ratio": 0.05}}
BUDGET = {"batch_size": 16, "lr": 1e-3, "warmup_ratio": 0.1, "adam_beta2": 0.98, "weight_decay": 0.01,
          "max_grad_norm": 0.5, "mlm_probability": 0.15,
          "model": {"pre_layer_norm": True, "hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0}}

PRETRAINING = {
    "default": PretrainingRecipe(sizes=SMALL_SIZES, why="lr 2e-3 at tiny (measured), halved per doubling of width"),
    # the size that wins at equal time: tiny reached 28.8% held-out MLM accuracy, mini 14.6%, small made 97 steps
    "budget": PretrainingRecipe(common=BUDGET, preset="tiny", why="measured at equal wall time (docs/pretraining.md)"),
}
