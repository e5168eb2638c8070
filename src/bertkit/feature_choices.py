"""The names `bertkit.embed` accepts for layers and pooling.

Kept apart from features.py, which imports torch, so the CLI can offer them as
choices without paying the torch import on every command (`bertkit --help` included).
"""

# scalar_mix: ELMo's name for weighted_sum (a task-trained ScalarMix in a tagger, uniform in `embed`);
# top / average / all: ELMo's choices (the last layer, the mean of every layer, every layer kept)
LAYER_CHOICES = ("last", "second_to_last", "sum_last_four", "concat_last_four", "weighted_sum", "embeddings",
                 "scalar_mix", "top", "average", "all")
MIXED_CHOICES = ("weighted_sum", "scalar_mix")  # every layer cached, mixed by a trained ScalarMix in a tagger
POOLING_CHOICES = ("mean", "cls", "pooler", "none")
