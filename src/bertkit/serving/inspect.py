"""What the attention page shows for one input (`bertkit inspect`, GET /inspect): the
served model's attention weights, masked-LM candidates at every position and the task
head's prediction, each through the inference layer (bertkit.inference.attention,
bertkit.inference.prediction). The page itself is bertkit.pages.inspect.

A part the model lacks (no MLM head, no task head) or refuses for this input (a QA
model given one sentence) becomes a one-line note on the page instead of an error.
"""

from __future__ import annotations

from typing import Any

from bertkit.errors import BertkitError
from bertkit.inference.attention import attention_map, position_candidates
from bertkit.pages.inspect import DEFAULT_MAX_TOKENS, DEFAULT_TOP_K

MIN_WEIGHT = 0.02  # lines fainter than this are not drawn: they would be invisible anyway


def inspect_data(served, text: str, pair: str | None = None, max_tokens: int = DEFAULT_MAX_TOKENS,
                 top_k: int = DEFAULT_TOP_K, live: bool = False) -> dict[str, Any]:
    """The page data (bertkit.pages.inspect) of `text` (and `pair`) on a `ServedModel`;
    `max_tokens` above the model's position table is the table's size."""
    from bertkit.pages.inspect import quantize

    max_tokens = min(max_tokens, page_limit(served))
    attention = attention_map(text, served.encoder, pair=pair, max_length=max_tokens)
    data: dict[str, Any] = {
        "model": "/".join(served.directory.parts[-2:]), "text": text, "pair": pair, "tokens": attention.tokens,
        "token_type_ids": attention.token_type_ids, "layers": int(attention.attentions.shape[0]),
        "heads": int(attention.attentions.shape[1]), "attention": quantize(attention.attentions),
        "min_weight": MIN_WEIGHT, "total_tokens": attention.total_tokens, "max_tokens": max_tokens, "live": live,
        "fill_mask": None, "fill_mask_note": "", "prediction": None, "prediction_note": "",
    }
    if served.masked_lm is not None:
        data["fill_mask"] = position_candidates(attention, served.masked_lm, top_k)
    else:
        data["fill_mask_note"] = f"No fill-mask: {served.missing.get('masked_lm', 'no MLM head')}"
    if served.task is not None:
        data["prediction"], data["prediction_note"] = _prediction(served, text, pair)
    else:
        data["prediction_note"] = f"No prediction: {served.missing.get('task', 'no task head')}"
    return data


def page_limit(served) -> int:
    """The most tokens a page can show: the encoder's position table."""
    from bertkit.inference.loading import max_tokens

    return max_tokens(served.encoder.backbone)


def _prediction(served, text: str, pair: str | None) -> tuple[dict | None, str]:
    from bertkit.inference.prediction import Predictor

    item = text if pair is None else (text, pair)
    try:
        return Predictor(served.task, batch_size=1)([item])[0], ""
    except BertkitError as exc:
        return None, f"No prediction for this input ({served.task.spec.family}): {exc}"
