"""DeBERTa's pre-training recipes (objective deberta-v3, and mlm on a deberta-* preset). bertkit.model.recipes
says what a recipe is.

default: ELECTRA's measured small-size settings (lr 2e-3 at tiny, 1e-3 at mini, 10% warm-up), checked for the
deberta-v3 objective at tiny (experiments/results/deberta_v3_vs_electra.jsonl, docs/ablations.md); the published
v3 sizes halve the peak lr per doubling of width from ELECTRA-Small's 5e-4 (not measured here).
budget: BERT's budget settings at DeBERTa's tiny size and the tiny lr, dropout off.
"""

from bertkit.model.bert.recipes import BUDGET
from bertkit.model.recipes import PretrainingRecipe

PRETRAINING = {
    "default": PretrainingRecipe(sizes={"deberta-tiny": {"lr": 2e-3, "warmup_ratio": 0.1},
                                        "deberta-mini": {"lr": 1e-3, "warmup_ratio": 0.1},
                                        "deberta-v3-xsmall": {"lr": 5e-4, "warmup_ratio": 0.1},
                                        "deberta-v3-small": {"lr": 2.5e-4, "warmup_ratio": 0.1},
                                        "deberta-v3-base": {"lr": 2.5e-4, "warmup_ratio": 0.1}},
                                 why="lr 2e-3 at tiny (ELECTRA's, checked for deberta-v3), halved per doubling of width"),
    "budget": PretrainingRecipe(common={**{k: v for k, v in BUDGET.items() if k != "model"}, "lr": 2e-3, "batch_size": 32,
                                        "model": {"hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0}},
                                preset="deberta-tiny", why="BERT's budget settings, the tiny lr, batch 32"),
}
