"""Queueing a request's inputs as one batching job and answering its problems (shared by
the routes of every protocol: bertkit.serving.tei, .openai, .tgi, .routes)."""

from __future__ import annotations

import re
from typing import Any

from bertkit.errors import BertkitError
from bertkit.serving.batching import Job, QueueFull
from bertkit.serving.requests import HTTPProblem, refused_input, too_large


def overloaded(exc: QueueFull) -> HTTPProblem:
    return HTTPProblem(429, "overloaded", str(exc))


async def run_batched(state, route: str, task: str, items: list, sizes: list[tuple[int, bool]], limit: int,
                      truncate: bool, options: dict | None = None) -> tuple[Any, list[int], int]:
    """Queue `items` as one job of `task`; (its result, indices of truncated inputs, tokens).

    sizes: per input (real tokens after truncation, whether truncation cuts it)."""
    truncated = [i for i, (_, cut) in enumerate(sizes) if cut]
    if truncated and not truncate:
        raise too_large(f"inputs[{truncated[0]}]: longer than the model's limit of {limit} tokens "
                        "(truncation is off: send shorter inputs or \"truncate\": true)")
    cost = sum(tokens for tokens, _ in sizes)
    if cost > state.config.max_batch_tokens:
        raise too_large(f"inputs: {cost} tokens, more than max_batch_tokens={state.config.max_batch_tokens}; "
                        "send fewer or shorter inputs per request")
    try:
        result = await state.batcher.run(Job(task, items, cost, options or {}))
    except QueueFull as exc:
        raise overloaded(exc) from None
    except BertkitError as exc:  # the inference layer refused an input
        raise refused_input(_input_indices(str(exc))) from None
    state.metrics.truncated(route, len(truncated))
    return result, truncated, cost


def _input_indices(message: str) -> str:
    """`<input>:3` (a predict hook's 1-based source) and `texts[2]` (fill_mask's) -> `inputs[2]`,
    as the request names it (a failing request runs alone, so the indices are its own)."""
    from bertkit.tasks.hooks import INPUT_SOURCE

    message = re.sub(re.escape(INPUT_SOURCE) + r":(\d+)", lambda m: f"inputs[{int(m.group(1)) - 1}]", message)
    return re.sub(r"\btexts\[", "inputs[", message)


def text_sizes(state, texts: list[str], limit: int) -> list[tuple[int, bool]]:
    return [(min(n, limit), n > limit) for n in state.served.text_lengths(texts)]


async def embeddings(state, route: str, texts: list[str], normalize: bool, truncate: bool):
    served = state.served
    sizes = text_sizes(state, texts, served.embed_limit)
    return await run_batched(state, route, "embed", texts, sizes, served.embed_limit, truncate,
                             {"normalize": normalize})


def extras_headers(truncated: list[int], tokens: int) -> dict[str, str]:
    """bertkit's figures beside a TEI answer: TEI's x-compute-tokens, and which inputs were cut."""
    return {"x-compute-tokens": str(tokens), "x-bertkit-truncated": ",".join(map(str, truncated))}
