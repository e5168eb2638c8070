"""What an instance format is: a name, a line of help, and `make` (documents -> instances).

Formats are pure Python over token ids (a data build never imports torch); every random
choice comes from the `random.Random` passed in, so a build is a function of its recipe.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

from bertkit.data.instances import Document, Instance


class InstanceFormat:
    name = ""
    help = ""  # one line for `data build --help`
    min_documents = 1  # training documents a slice needs
    why_min_documents = ""  # completes "{name} needs at least {min_documents} documents (...)"
    needs_tokens: tuple[str, ...] = ("cls", "sep")  # the tokenizer roles `make` inserts; others may come as None

    def make(self, documents: Sequence[Document], recipe: dict[str, Any], rng: random.Random, cls_id: int,
             sep_id: int, random_documents: Sequence[Document] | None = None) -> list[Instance]:
        """One copy's instances of `documents` (sentences of token ids, no special tokens).
        `recipe`: the build's resolved options (max_seq_length, short_seq_prob, ...);
        `random_documents`: where a pair's random other segment comes from when not `documents`
        (the held-out split of a slice with one held-out document borrows the training ones).
        `cls_id` / `sep_id`: the tokenizer's, None for a role not in `needs_tokens` it lacks."""
        raise NotImplementedError
