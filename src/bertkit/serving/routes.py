"""The HTTP routes, one `Route` entry each: text-embeddings-inference's (bertkit.serving.tei),
text-generation-inference's (bertkit.serving.tgi), OpenAI's (bertkit.serving.openai), and
bertkit's own (/health, /info, /metrics, /fill-mask, /inspect: here).

A route names the capability of the served model it needs (bertkit.serving.models:
"encoder", "task", "masked_lm", "generator"); a model without it answers 424 "backend" with
the loader's reason (TEI's answer to a route the model type does not serve). `POST /`
answers what the model serves, as TEI and TGI do: a generator generates ("stream": true
streams), a fine-tuned model predicts, an encoder embeds. Adding a route is one handler and
one entry in `ROUTES`; a batched one also gives `ServedModel.runners` its runner.

Handlers take the server state (`state.served`, `state.config`, `state.batcher`,
`state.metrics`) and the request, and return a JSON-able value or a Response; problems
are raised as `HTTPProblem` (bertkit.serving.requests).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, PlainTextResponse

from bertkit.serving import openai, tei, tgi
from bertkit.serving import requests as body_fields
from bertkit.serving.jobs import extras_headers, run_batched, text_sizes
from bertkit.serving.metrics import CONTENT_TYPE
from bertkit.serving.requests import HTTPProblem, check_fields, invalid, read_json

MAX_TOP_K = 100


@dataclass(frozen=True)
class Route:
    method: str
    path: str
    handler: Callable[[Any, Request], Awaitable[Any]]
    needs: str | None = None  # the ServedModel capability it needs; None: every model serves it
    summary: str = ""


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
    predictions, truncated, tokens = await run_batched(state, "/fill-mask", "fill-mask", texts, sizes,
                                                       served.fill_mask_limit, truncate, {"top_k": top_k})
    return JSONResponse(predictions, headers=extras_headers(truncated, tokens))


async def root(state, request: Request):
    """POST /: what the model serves (ServedModel.serves), as TEI and TGI answer their root. A generator
    that also embeds (GPT, BART: /info lists /embed) takes TEI's root requests a prompt cannot be: a list
    of texts embeds (huggingface_hub's feature_extraction), {"source_sentence", "sentences"} scores
    similarity (its sentence_similarity); a text generates (TGI's)."""
    body = await read_json(request, state.config.max_body_bytes)
    serves = state.served.serves
    if serves == "generate" and not (state.served.has("encoder") and isinstance(body.get("inputs"), (list, dict))):
        return await (tgi.generate_stream_body if body.get("stream") is True else tgi.generate_body)(state, body)
    if serves == "predict":
        return await tei.predict_body(state, body)
    if isinstance(body.get("inputs"), dict):  # {"source_sentence", "sentences"}: sentence similarity
        return await tei.similarity_body(state, body)
    return await tei.embed_body(state, body)


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
    Route("GET", "/health", health, summary="200 when the inference worker runs (TEI, TGI)"),
    Route("GET", "/info", info, summary="model, task, labels, precision, limits, routes"),
    Route("GET", "/metrics", metrics, summary="Prometheus text"),
    Route("POST", "/", root, summary="what the model serves: generate, predict or embed (TEI, TGI)"),
    Route("POST", "/embed", tei.embed, "encoder", "vectors for texts (TEI)"),
    Route("POST", "/embed_all", tei.embed_all, "encoder", "every token's vector (TEI)"),
    Route("POST", "/similarity", tei.similarity, "encoder", "cosine of sentences to a source sentence (TEI)"),
    Route("POST", "/predict", tei.predict, "task", "the task head's predictions (TEI)"),
    Route("POST", "/rerank", tei.rerank, "reranker", "texts ranked against a query by a pair classifier (TEI)"),
    Route("POST", "/tokenize", tei.tokenize, summary="tokens with offsets (TEI)"),
    Route("POST", "/decode", tei.decode, summary="token ids back to text (TEI)"),
    Route("POST", "/fill-mask", fill_mask, "masked_lm", "top-k tokens for each mask"),
    Route("POST", "/generate", tgi.generate, "generator", "generated text (TGI)"),
    Route("POST", "/generate_stream", tgi.generate_stream, "generator", "generated text, one event per token (TGI)"),
    Route("POST", "/v1/embeddings", openai.embeddings_route, "encoder", "OpenAI-compatible embeddings"),
    Route("GET", "/v1/models", openai.models, summary="the served model (OpenAI-compatible)"),
    Route("GET", "/v1/models/{model}", openai.model, summary="the served model by its id (OpenAI-compatible)"),
    Route("POST", "/v1/completions", openai.completions, "generator", "OpenAI-compatible completions"),
    Route("POST", "/v1/chat/completions", openai.chat_completions, "generator",
          "OpenAI-compatible chat completions (the checkpoint's chat template)"),
    Route("GET", "/inspect", inspect, "attention", "the attention page of ?text=...&pair=..."),
)
