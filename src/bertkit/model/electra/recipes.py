"""ELECTRA's pre-training recipes (replaced-token detection). bertkit.model.recipes says what a recipe is.

default: measured on WikiText-2 (tiny, batch 32, 300 steps; experiments/results/family_recipes.jsonl):
the generator's held-out MLM loss 7.07 at BERT's lr 1e-4, 6.01 at 1e-3, 5.91 at 2e-3 (10% warm-up).
ELECTRA-Small's published lr is 5e-4 at batch 128, the small size here.
budget: BERT's budget settings at ELECTRA's tiny size and its measured lr, at batch 32: 5.60 after 2 minutes
on one core against 5.72 at BERT's budget batch of 16.
"""

from bertkit.model.bert.recipes import BUDGET
from bertkit.model.recipes import PretrainingRecipe

PRETRAINING = {
    "default": PretrainingRecipe(sizes={"tiny": {"lr": 2e-3, "warmup_ratio": 0.1}, "mini": {"lr": 1e-3, "warmup_ratio": 0.1},
                                        "small": {"lr": 5e-4, "warmup_ratio": 0.1}},
                                 why="lr 2e-3 at tiny (measured); ELECTRA-Small's 5e-4 at small"),
    "budget": PretrainingRecipe(common={**BUDGET, "lr": 2e-3, "batch_size": 32, "model": {"hidden_dropout_prob": 0.0,
                                                                        "attention_probs_dropout_prob": 0.0}},
                                preset="tiny", why="BERT's budget settings, ELECTRA's measured lr, batch 32"),
}
