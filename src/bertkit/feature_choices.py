"""The names `bertkit.embed` accepts for layers and pooling.

Kept apart from features.py, which imports torch, so the CLI can offer them as
choices without paying the torch import on every command (`bertkit --help` included).
"""

LAYER_CHOICES = ("last", "second_to_last", "sum_last_four", "concat_last_four", "weighted_sum", "embeddings")
POOLING_CHOICES = ("mean", "cls", "pooler", "none")
