"""Albert's pre-training recipes: BERT's (bertkit.model.bert.recipes), the family being built on BERT
with the same sizes (not measured apart)."""

from bertkit.model.bert.recipes import PRETRAINING  # noqa: F401  (the registry reads it from here)
