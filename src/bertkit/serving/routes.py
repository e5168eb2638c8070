"""The HTTP routes, one `Route` entry each (modelled on text-embeddings-inference).

A route names the capability of the served model it needs (bertkit.serving.models:
"encoder", "task", "masked_lm"); a model without it answers 404 with the loader's reason.
Adding a route (e.g. /generate for a text-to-text model) is one handler and one entry in
`ROUTES`; a batched one also gives `ServedModel.runners` its runner.

Handlers take the server state (`state.served`, `state.config`, `state.batcher`,
`state.metrics`) and the request, and return a JSON-able dict or a Response; problems
are raised as `HTTPProblem` (bertkit.serving.requests).
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from starlette.requests import Request
from starlette.responses import HTMLResponse, PlainTextResponse

from bertkit.errors import BertkitError
from bertkit.serving import requests as body_fields
from bertkit.serving.batching import Job, QueueFull
from bertkit.serving.metrics import CONTENT_TYPE
from bertkit.serving.requests import HTTPProblem, check_fields, invalid, read_json, too_large

MAX_TOP_K = 100


@dataclass(frozen=True)
class Route:
    method: str
    path: str
    handler: Callable[[Any, Request], Awaitable[Any]]
    needs: str | None = None  # the ServedModel capability it needs; None: every model serves it
    summary: str = ""


# ---------------------------------------------------------------------------- batched runs


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
        raise HTTPProblem(429, "overloaded", str(exc)) from None
    except BertkitError as exc:  # the inference layer refused an input
        raise invalid(_input_indices(str(exc))) from None
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


# ---------------------------------------------------------------------------- handlers


async def health(state, request: Request):
    if not state.batcher.alive:
        raise HTTPProblem(503, "unhealthy", "the inference worker is not running")
    return {"status": "ok"}


async def info(state, request: Request):
    served = state.served
    return {**served.info(), "limits": state.config.limits(),
            "routes": [f"{r.method} {r.path}" for r in ROUTES if r.needs is None or served.has(r.needs)]}


async def metrics(state, request: Request):
    return PlainTextResponse(state.metrics.render(), media_type=CONTENT_TYPE)


async def embed(state, request: Request):
    body = await read_json(request, state.config.max_body_bytes)
    check_fields(body, ("inputs",), ("normalize", "truncate"))
    texts = body_fields.texts(body, "inputs", state.config.max_client_batch_size)
    normalize = body_fields.flag(body, "normalize", state.served.default_normalize)
    truncate = body_fields.flag(body, "truncate", state.config.truncate)
    vectors, truncated, _ = await embeddings(state, "/embed", texts, normalize, truncate)
    return {"embeddings": vectors.tolist(), "truncated": truncated}


async def openai_embeddings(state, request: Request):
    """OpenAI's POST /v1/embeddings: {"input", "model", "encoding_format", "dimensions", "user"}."""
    body = await read_json(request, state.config.max_body_bytes)
    check_fields(body, ("input",), ("model", "encoding_format", "dimensions", "user"))
    value = body["input"]
    if isinstance(value, list) and value and all(isinstance(v, (int, list)) and not isinstance(v, bool)
                                                  for v in value):
        raise invalid("input: token-id arrays are not supported; send text")
    texts = body_fields.texts(body, "input", state.config.max_client_batch_size)
    encoding = body_fields.choice(body, "encoding_format", "float", ("float", "base64"))
    hidden = state.served.encoder.config.hidden_size
    if "dimensions" in body and body["dimensions"] != hidden:
        raise invalid(f"dimensions: this model's embeddings have {hidden} dimensions, got {json.dumps(body['dimensions'])}")
    vectors, truncated, tokens = await embeddings(state, "/v1/embeddings", texts, state.served.default_normalize,
                                                  state.config.truncate)
    data = [{"object": "embedding", "index": i,
             "embedding": vector.tolist() if encoding == "float"
             else base64.b64encode(np.asarray(vector, dtype="<f4").tobytes()).decode("ascii")}
            for i, vector in enumerate(vectors)]
    return {"object": "list", "data": data, "model": state.served.directory.name,
            "usage": {"prompt_tokens": tokens, "total_tokens": tokens}, "truncated": truncated}


async def predict(state, request: Request):
    body = await read_json(request, state.config.max_body_bytes)
    check_fields(body, ("inputs",), ("truncate",))
    items = body_fields.predict_inputs(body, "inputs", state.config.max_client_batch_size)
    truncate = body_fields.flag(body, "truncate", state.config.truncate)
    served = state.served
    sizes = [served.predict_size(item) for item in items]
    predictions, truncated, _ = await run_batched(state, "/predict", "predict", items, sizes, served.predict_limit,
                                                  truncate)
    return {"predictions": predictions, "truncated": truncated}


async def fill_mask(state, request: Request):
    body = await read_json(request, state.config.max_body_bytes)
    check_fields(body, ("inputs",), ("top_k", "truncate"))
    texts = body_fields.texts(body, "inputs", state.config.max_client_batch_size)
    top_k = body_fields.integer(body, "top_k", 5, 1, MAX_TOP_K)
    truncate = body_fields.flag(body, "truncate", state.config.truncate)
    served = state.served
    mask = served.tokenizer.mask_token
    for i, text in enumerate(texts):
        if mask is None or mask not in text:
            raise invalid(f"inputs[{i}]: no {mask} token to fill")
    sizes = text_sizes(state, texts, served.fill_mask_limit)
    predictions, truncated, _ = await run_batched(state, "/fill-mask", "fill-mask", texts, sizes,
                                                  served.fill_mask_limit, truncate, {"top_k": top_k})
    return {"predictions": predictions, "truncated": truncated}


async def tokenize(state, request: Request):
    """Each text's tokens: id, text, character span [start, stop) and whether it is special."""
    body = await read_json(request, state.config.max_body_bytes)
    check_fields(body, ("inputs",), ("add_special_tokens",))
    texts = body_fields.texts(body, "inputs", state.config.max_client_batch_size)
    specials = body_fields.flag(body, "add_special_tokens", True)
    tokenizer = state.served.tokenizer
    encoded = tokenizer(texts, add_special_tokens=specials, return_offsets_mapping=True,
                        return_special_tokens_mask=True)
    tokens = []
    for ids, offsets, special in zip(encoded["input_ids"], encoded["offset_mapping"],
                                     encoded["special_tokens_mask"]):
        tokens.append([{"id": token_id, "text": tokenizer.convert_ids_to_tokens(token_id), "start": start,
                        "stop": stop, "special": bool(is_special)}
                       for token_id, (start, stop), is_special in zip(ids, offsets, special)])
    return {"tokens": tokens}


def _query_integer(query, name: str, default: int, low: int, high: int) -> int:
    try:
        value = int(query.get(name, default))
    except ValueError:
        raise invalid(f"{name}: expected an integer, got {query[name]!r}") from None
    if not low <= value <= high:
        raise invalid(f"{name}: must be in {low}..{high}, got {value}")
    return value


async def inspect(state, request: Request):
    """The attention page (bertkit.pages.inspect) of ?text=...[&pair=...][&max_tokens=N][&top_k=K]."""
    from bertkit.pages.inspect import DEFAULT_MAX_TOKENS, DEFAULT_TOP_K, inspect_page
    from bertkit.serving.inspect import page_limit

    query = request.query_params
    unknown = sorted(set(query) - {"text", "pair", "max_tokens", "top_k"})
    if unknown:
        raise invalid(f"{unknown[0]}: unknown query parameter; expected text, pair, max_tokens, top_k")
    text, pair = query.get("text", ""), query.get("pair") or None
    if not text.strip():
        raise invalid("text: required, a non-empty query parameter (GET /inspect?text=...&pair=...)")
    limit = page_limit(state.served)
    max_tokens = _query_integer(query, "max_tokens", min(DEFAULT_MAX_TOKENS, limit), 2, limit)
    top_k = _query_integer(query, "top_k", DEFAULT_TOP_K, 1, MAX_TOP_K)
    sizes = text_sizes(state, [text if pair is None else f"{text} {pair}"], max_tokens)
    data, _, _ = await run_batched(state, "/inspect", "inspect", [(text, pair)], sizes, max_tokens, True,
                                   {"max_tokens": max_tokens, "top_k": top_k, "live": True})
    return HTMLResponse(inspect_page(data))


ROUTES: tuple[Route, ...] = (
    Route("GET", "/health", health, summary="200 when the inference worker runs"),
    Route("GET", "/info", info, summary="model, task, labels, precision, limits, routes"),
    Route("GET", "/metrics", metrics, summary="Prometheus text"),
    Route("POST", "/embed", embed, "encoder", "vectors for texts"),
    Route("POST", "/predict", predict, "task", "the task head's predictions"),
    Route("POST", "/fill-mask", fill_mask, "masked_lm", "top-k tokens for each mask"),
    Route("POST", "/tokenize", tokenize, summary="tokens with offsets"),
    Route("POST", "/v1/embeddings", openai_embeddings, "encoder", "OpenAI-compatible embeddings"),
    Route("GET", "/inspect", inspect, "encoder", "the attention page of ?text=...&pair=..."),
)
