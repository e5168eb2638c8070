"""ELMo's pre-training recipes (bilm). bertkit.model.recipes says what a recipe is.

ELMo trained with Adagrad at lr 0.2; with AdamW, measured on WikiText-2 (elmo-tiny, batch 32, 300 steps;
experiments/results/family_recipes.jsonl): held-out forward loss 7.71 at BERT's lr 1e-4 (perplexity 2,220:
it learns nothing), 4.96 at 2e-3 (the unigram level), 4.82 at 1e-2, 4.69 at 2e-2, and without dropout 4.58
at 2e-2 (perplexity 236 at step 25, 97 at step 300). The larger sizes take lower peaks (not measured).
budget (2 minutes, one core): 4.32 at batch 32 against 4.40 at batch 16.
"""

from bertkit.model.recipes import PretrainingRecipe, budget_recipe

NO_DROPOUT = {"dropout": 0.0}

PRETRAINING = {
    "default": PretrainingRecipe(common={"warmup_ratio": 0.1, "model": NO_DROPOUT},
                                 sizes={"elmo-tiny": {"lr": 2e-2}, "elmo-small": {"lr": 5e-3}, "elmo-original": {"lr": 2e-3}},
                                 why="lr 2e-2 at elmo-tiny without dropout (measured), lower at the larger sizes"),
    # ELMo keeps AdamW's beta2 0.999 (the default recipe's, measured)
    "budget": budget_recipe("elmo-tiny", 2e-2, 32, NO_DROPOUT, "the default's lr and batch, no dropout, clipped at 0.5",
                            adam_beta2=0.999),
}
