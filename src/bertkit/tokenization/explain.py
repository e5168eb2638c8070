"""What a tokenizer does to texts, as plain records (the `bertkit tokenizer encode` output)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from bertkit.tokenization.tokenizer import Tokenizer


def encode_records(
    tokenizer: Tokenizer,
    texts: Sequence[str],
    pairs: Sequence[str | None] | None = None,
    *,
    add_special_tokens: bool = True,
    max_length: int | None = None,
) -> list[dict[str, Any]]:
    """One record per text: text (and pair), tokens, ids, offsets, and token_type_ids where the
    tokenizer gives them (its model_input_names: BERT-style, not GPT/RoBERTa/BART/T5).

    offsets: per token [start, end) into its own text (the pair's tokens into the pair),
    [0, 0] for special tokens, as Hugging Face fast tokenizers give them. Texts with and
    without a pair are encoded in two batches; the records keep the input order.
    """
    pairs = list(pairs) if pairs is not None else [None] * len(texts)
    records: list[dict[str, Any] | None] = [None] * len(texts)
    for with_pair in (False, True):
        rows = [i for i, pair in enumerate(pairs) if (pair is not None) == with_pair]
        if not rows:
            continue
        encoded = tokenizer(
            [texts[i] for i in rows],
            [pairs[i] for i in rows] if with_pair else None,
            return_offsets_mapping=True,
            add_special_tokens=add_special_tokens,
            max_length=max_length,
        )
        for row, i in enumerate(rows):
            record: dict[str, Any] = {"text": texts[i]}
            if with_pair:
                record["pair"] = pairs[i]
            record.update(
                tokens=encoded.tokens(row),
                ids=encoded["input_ids"][row],
                offsets=[list(span) for span in encoded["offset_mapping"][row]],
            )
            if "token_type_ids" in encoded:
                record["token_type_ids"] = encoded["token_type_ids"][row]
            records[i] = record
    return records  # type: ignore[return-value]
