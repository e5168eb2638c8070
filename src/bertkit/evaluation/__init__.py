"""Official evaluation metrics: GLUE (`metrics`), SQuAD v1.1/v2.0 (`squad`), entity-level NER (`seqeval`)."""

from bertkit.evaluation.metrics import glue_metrics
from bertkit.evaluation.squad import evaluate_squad

__all__ = ["glue_metrics", "evaluate_squad"]
