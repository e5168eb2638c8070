"""ModernBERT's pre-training recipes (objective mlm on a modernbert-* preset). bertkit.model.recipes says
what a recipe is.

The paper's settings (Warner et al. 2024): 30% of the tokens masked, peak lr 8e-4 for base and 5e-4 for
large, StableAdamW and a warm-up-stable-decay schedule. bertkit's loop has AdamW (or LAMB) and linear warm-up
then linear decay, so the recipe keeps the masking rate and the peak lrs; the optimizer and schedule are the
loop's (said in docs/successors.md).
default: measured on WikiText-2 (modernbert-tiny, batch 32, 64-token sequences, 300 steps, 10% warm-up, 30%
masking; experiments/results/modernbert_recipes.jsonl, docs/successors.md): held-out MLM loss 5.86 at the
paper's 8e-4, 5.63 at 2e-3, 6.10 at 4e-3 (unigram baseline 6.40); mini halves it (not measured), base and
large take the paper's.
budget: the tiny preset at the measured lr on the shared budget schedule (not measured at equal wall time).
"""

from bertkit.model.recipes import PretrainingRecipe, budget_recipe

TINY_LR = 2e-3  # the lowest held-out MLM loss of 8e-4, 2e-3, 4e-3 at modernbert-tiny
MASKING = {"mlm_probability": 0.3}  # the paper's 30%

PRETRAINING = {
    "default": PretrainingRecipe(common={**MASKING, "warmup_ratio": 0.1},
                                 sizes={"modernbert-tiny": {"lr": TINY_LR}, "modernbert-mini": {"lr": TINY_LR / 2},
                                        "modernbert-base": {"lr": 8e-4}, "modernbert-large": {"lr": 5e-4}},
                                 why=f"lr {TINY_LR:g} at modernbert-tiny (measured), halved at mini; the paper's "
                                     "8e-4 / 5e-4 at base / large; 30% masking"),
    "budget": budget_recipe("modernbert-tiny", TINY_LR, 32, {}, f"lr {TINY_LR:g} at batch 32, 30% masking",
                            **MASKING),
}
