"""XLNet's pre-training recipes (permutation LM). bertkit.model.recipes says what a recipe is.

budget (2 minutes, one core): 4.18 at batch 32 against 4.34 at batch 16.

default: measured on WikiText-2 (tiny, batch 32, 300 steps; experiments/results/family_recipes.jsonl):
held-out permutation-LM loss 6.64 at BERT's lr 1e-4, 5.98 at 1e-3, 6.02 at 2e-3 (10% warm-up).
"""

from bertkit.model.recipes import PretrainingRecipe, budget_recipe

PRETRAINING = {
    "default": PretrainingRecipe(sizes={"tiny": {"lr": 1e-3, "warmup_ratio": 0.1}, "mini": {"lr": 5e-4, "warmup_ratio": 0.1},
                                        "small": {"lr": 3e-4, "warmup_ratio": 0.05}},
                                 why="lr 1e-3 at tiny (measured), lower at the larger sizes"),
    "budget": budget_recipe("tiny", 1e-3, 32, {"dropout": 0.0}, "the default's lr, batch 32, no dropout"),
}
