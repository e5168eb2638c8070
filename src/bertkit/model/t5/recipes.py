"""T5's pre-training recipes (span corruption). bertkit.model.recipes says what a recipe is.

T5 trains with Adafactor at lr 1e-2 (inverse square root); with AdamW the same lr diverged here
(a non-finite step at 106 of 300). The untied v1.1 head starts with logits of standard deviation
~sqrt(d_model) (transformers' initialisation), so the first loss is ~30 nats, far above a uniform
guess: BERT's lr 1e-4 left it at 13.1 after 300 steps. Measured on WikiText-2 (t5-tiny, batch 32,
300 steps; experiments/results/family_recipes.jsonl): 7.35 at 1e-3, 4.86 at 3e-3, 4.54 at 5e-3
(10% warm-up). Dropout off in pre-training, as T5 v1.1.
budget (2 minutes, one core): at lr 3e-3 the run went non-finite after ~650 steps at batch 16 and 32;
1e-3 reached 5.27, 2e-3 4.63.
"""

from bertkit.model.recipes import PretrainingRecipe, budget_recipe

NO_DROPOUT = {"dropout_rate": 0.0}

PRETRAINING = {
    "default": PretrainingRecipe(common={"warmup_ratio": 0.1, "model": NO_DROPOUT},
                                 sizes={"t5-tiny": {"lr": 5e-3}, "t5-mini": {"lr": 3e-3}, "t5-small": {"lr": 1e-3},
                                        "t5-base": {"lr": 5e-4}},
                                 why="lr 5e-3 at t5-tiny (measured; 1e-2 diverged under AdamW), dropout off as v1.1"),
    "budget": budget_recipe("t5-tiny", 2e-3, 16, NO_DROPOUT, "lr 2e-3 at batch 16 (3e-3 went non-finite after ~650 steps)"),
}
