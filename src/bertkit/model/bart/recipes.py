"""BART's pre-training recipes (denoising). bertkit.model.recipes says what a recipe is.

default: measured on WikiText-2 (bart-tiny, 300 steps; experiments/results/family_recipes.jsonl):
held-out reconstruction loss 7.05 at BERT's lr 1e-4 (the unigram plateau: one token predicted
everywhere), 5.65 at 1e-3, 5.28 at 2e-3, 5.48 at 3e-3 (batch 32, 10% warm-up); at 2e-3 without
dropout 5.39 at batch 32 and 4.89 at batch 64 (BART trains with large batches: 8,000 sequences).
budget (2 minutes, one core): 1.56 at batch 16 and 1.53 at batch 32 (the decoder has learnt to copy the
visible tokens), against 5.38 under BERT's recipe.
"""

from bertkit.model.recipes import PretrainingRecipe, budget_recipe

NO_DROPOUT = {"dropout": 0.0, "attention_dropout": 0.0, "activation_dropout": 0.0}

PRETRAINING = {
    "default": PretrainingRecipe(common={"warmup_ratio": 0.1, "batch_size": 64, "model": NO_DROPOUT},
                                 sizes={"bart-tiny": {"lr": 2e-3}, "bart-mini": {"lr": 1e-3}, "bart-base": {"lr": 4e-4},
                                        "kobart-base": {"lr": 4e-4}},
                                 why="lr 2e-3 at bart-tiny, batch 64, no dropout (measured); BART-base's 4e-4"),
    "budget": budget_recipe("bart-tiny", 1e-3, 16, NO_DROPOUT, "lr 1e-3 at batch 16"),
}
