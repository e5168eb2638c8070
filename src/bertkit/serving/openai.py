"""OpenAI's routes: `POST /v1/embeddings` (an encoder) and `POST /v1/completions` (a generator).

  /v1/embeddings   {"input", "model", "encoding_format" (float | base64), "dimensions", "user"}
                   -> {"object": "list", "data": [{"object": "embedding", "index", "embedding"}], "model", "usage"}
  /v1/completions  {"prompt", "model", "max_tokens" (16), "temperature" (1.0; 0: greedy), "top_p", "seed",
                   "stop", "stream", "echo", "n" (1), "user", ...} -> {"id", "object": "text_completion",
                   "created", "model", "choices": [{"index", "text", "logprobs": null, "finish_reason"}], "usage"};
                   with "stream": server-sent chunks of the same object, then `data: [DONE]`.

OpenAI samples by default: temperature > 0 means do_sample with that temperature, top_k 0
(no top-k filter: OpenAI has none) and top_p; temperature 0 is greedy decoding. A stop
string ends the text and is cut from it (OpenAI's rule; TGI keeps it). finish_reason is
"stop" (EOS or a stop string) or "length".
"""

from __future__ import annotations

import base64
import json
import time
import uuid

import numpy as np
from starlette.requests import Request
from starlette.responses import StreamingResponse

from bertkit.serving import requests as body_fields
from bertkit.serving.jobs import embeddings
from bertkit.serving.requests import HTTPProblem, check_fields, invalid, read_json
from bertkit.serving.tgi import MAX_STOP, SSE_HEADERS, events, sse, submit

COMPLETION_FIELDS = ("model", "max_tokens", "temperature", "top_p", "seed", "stop", "stream", "echo", "n", "user",
                     "logprobs", "presence_penalty", "frequency_penalty", "best_of", "suffix", "logit_bias",
                     "stream_options")
NO_OPS = {"n": 1, "best_of": 1, "presence_penalty": 0, "frequency_penalty": 0, "logprobs": None, "suffix": None,
          "logit_bias": None, "stream_options": None}


async def embeddings_route(state, request: Request):
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


def _completion_options(body: dict) -> tuple[dict, int | None, tuple[str, ...]]:
    options = {"max_new_tokens": body_fields.integer(body, "max_tokens", 16, 1, 1_000_000)}
    temperature = body_fields.number(body, "temperature", 1.0, 0, 2)
    top_p = body_fields.number(body, "top_p", 1.0, 0, 1, low_open=True)
    if temperature > 0:
        options.update(do_sample=True, temperature=temperature, top_k=0, top_p=top_p)
    seed = body.get("seed")
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int) or seed < 0):
        raise invalid(f"seed: expected an integer >= 0, got {json.dumps(seed)}")
    stop = body.get("stop") or []
    stop = [stop] if isinstance(stop, str) else stop
    if not isinstance(stop, list) or not all(isinstance(s, str) and s for s in stop) or len(stop) > MAX_STOP:
        raise invalid(f"stop: expected a string or a list of at most {MAX_STOP} non-empty strings")
    return options, seed, tuple(stop)


def _cut(text: str, stop: tuple[str, ...]) -> str:
    """The text before the first stop string (OpenAI leaves it out)."""
    ends = [text.find(s) for s in stop if s in text]
    return text[:min(ends)] if ends else text


async def completions(state, request: Request):
    body = await read_json(request, state.config.max_body_bytes)
    check_fields(body, ("prompt",), COMPLETION_FIELDS)
    body_fields.optional_null(body, tuple(NO_OPS), NO_OPS)
    prompt = body["prompt"]
    prompts = [prompt] if isinstance(prompt, str) else prompt
    if not isinstance(prompts, list) or not prompts or not all(isinstance(p, str) for p in prompts):
        raise invalid("prompt: expected a text or a list of texts (token-id prompts are not supported)")
    body_fields.check_count("prompt", prompts, state.config.max_client_batch_size)
    options, seed, stop = _completion_options(body)
    stream = body_fields.flag(body, "stream", False)
    echo = body_fields.flag(body, "echo", False)
    head = {"id": f"cmpl-{uuid.uuid4().hex}", "object": "text_completion", "created": int(time.time()),
            "model": body.get("model") or state.served.directory.name}
    if stream and len(prompts) > 1:
        raise invalid("prompt: stream one prompt at a time")
    jobs = [await submit(state, p, options, seed, stop) for p in prompts]
    if stream:
        return StreamingResponse(_stream(head, prompts[0], *jobs[0], stop, echo), media_type="text/event-stream",
                                 headers=SSE_HEADERS)
    choices, prompt_tokens, completion_tokens = [], 0, 0
    for index, (prompt_text, (job, queue)) in enumerate(zip(prompts, jobs)):
        async for event in events(job, queue):
            if event["type"] == "end":
                text = _cut(event["generated_text"], stop)
                choices.append({"index": index, "text": prompt_text + text if echo else text, "logprobs": None,
                                "finish_reason": "length" if event["finish_reason"] == "length" else "stop"})
                prompt_tokens += event["input_length"]
                completion_tokens += event["generated_tokens"]
    return {**head, "choices": choices, "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                                                  "total_tokens": prompt_tokens + completion_tokens}}


async def _stream(head: dict, prompt: str, job, queue, stop: tuple[str, ...], echo: bool):
    """One chunk per token (its text), a last one with the finish reason, then [DONE]. Text that
    could begin a stop string is held back until it cannot (a stop string is never sent)."""
    def chunk(text: str, finish_reason: str | None = None) -> bytes:
        return sse({**head, "choices": [{"index": 0, "text": text, "logprobs": None, "finish_reason": finish_reason}]})

    running, sent = "", ""
    try:
        if echo:
            yield chunk(prompt)
        async for event in events(job, queue):
            if event["type"] == "token":
                running += event["token"]["text"]
                safe = _cut(running, stop)
                if safe == running:
                    safe = running[:len(running) - _partial_stop(running, stop)]
            else:
                safe = _cut(event["generated_text"], stop)
            if len(safe) > len(sent) and safe.startswith(sent):
                yield chunk(safe[len(sent):])
                sent = safe
            if event["type"] == "end":
                yield chunk("", "length" if event["finish_reason"] == "length" else "stop")
    except HTTPProblem as problem:
        yield sse({"error": {"message": problem.message, "type": problem.error_type}})
    yield b"data: [DONE]\n\n"


def _partial_stop(text: str, stop: tuple[str, ...]) -> int:
    """Length of the longest end of `text` that begins some stop string."""
    return max((k for s in stop for k in range(1, len(s)) if text.endswith(s[:k])), default=0)
