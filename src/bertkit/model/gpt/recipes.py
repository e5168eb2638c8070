"""GPT's pre-training recipes (clm; GPT-2's and GPT-1's shapes) and its fine-tuning recipe (GPT-1's:
bertkit.model.gpt.finetuning). bertkit.model.recipes says what a recipe is.

default: measured on WikiText-2 (gpt-tiny, batch 32, 300 steps; experiments/results/family_recipes.jsonl):
held-out next-token loss 7.01 at BERT's lr 1e-4, 6.02 at 6e-4, 5.77 at 1e-3, 5.62 at 2e-3, 5.53 at 3e-3
(10% warm-up), 5.48 at 3e-3 without dropout. nanoGPT trains its small models at 1e-3 and GPT-2 124M at
6e-4; GPT-1 used 2.5e-4.
budget (2 minutes, one core): 4.17 at batch 16 against 4.21 at batch 32 and 5.58 under BERT's recipe.
"""

from bertkit.model.gpt.finetuning import FINETUNING  # noqa: F401  (the registry reads it from here)
from bertkit.model.recipes import PretrainingRecipe, budget_recipe

NO_DROPOUT = {"resid_pdrop": 0.0, "embd_pdrop": 0.0, "attn_pdrop": 0.0}

PRETRAINING = {
    "default": PretrainingRecipe(common={"warmup_ratio": 0.1, "model": NO_DROPOUT},
                                 sizes={"gpt-tiny": {"lr": 3e-3}, "gpt-mini": {"lr": 1e-3}, "gpt1-mini": {"lr": 1e-3},
                                        "gpt2": {"lr": 6e-4}, "gpt1": {"lr": 2.5e-4}},
                                 why="lr 3e-3 at gpt-tiny without dropout (measured); nanoGPT's 1e-3 at mini, "
                                     "6e-4 at 124M; GPT-1's 2.5e-4"),
    "budget": budget_recipe("gpt-tiny", 2e-3, 16, NO_DROPOUT, "lr 2e-3 at batch 16"),
}
