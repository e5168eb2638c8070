"""The `input_tokens` task hook: what one /predict input costs and whether encoding cuts it,
as each family's `encode` builds it (the server's batch budget and --truncate check)."""

from __future__ import annotations

import pytest

from bertkit.tasks.programs import TaskSpec
from bertkit.tasks.registry import get_task_family


@pytest.fixture(scope="module")
def tokenizer(minilm_dir):
    from bertkit import Tokenizer

    return Tokenizer.from_pretrained(minilm_dir)


def tokens(family: str, tokenizer, item, limit: int):
    return get_task_family(family).hook("input_tokens")(tokenizer, TaskSpec(family=family), item, limit)


def test_classification_counts_the_encoded_pair(tokenizer):
    pair = ("The cat sat on the mat.", "A cat was sitting.")
    length = len(tokenizer(*pair)["input_ids"])
    assert tokens("classification", tokenizer, pair, 64) == (length, False)
    assert tokens("classification", tokenizer, pair, length - 1) == (length - 1, True)
    assert tokens("classification", tokenizer, "one text", 64) == (4, False)  # [CLS] one text [SEP]


def test_multiple_choice_counts_every_choice(tokenizer):
    item = ("She was hungry.", ["She ate.", "She slept a lot."])
    lengths = [len(tokenizer(item[0], choice)["input_ids"]) for choice in item[1]]
    assert tokens("multiple_choice", tokenizer, item, 64) == (sum(lengths), False)
    assert tokens("multiple_choice", tokenizer, {"context": item[0], "choices": item[1]}, min(lengths)) == \
           (2 * min(lengths), True)


def test_windowing_families_are_never_cut(tokenizer):
    long_text = " ".join(["word"] * 100)
    assert tokens("tagging", tokenizer, long_text, 16) == (102, False)
    assert tokens("qa", tokenizer, {"question": "Why?", "context": long_text}, 16) == (104, False)
    assert tokens("classification", tokenizer, 42, 16)[1] is False  # not an input of the family: predict says so

