"""OpenAI's routes: `GET /v1/models`, `POST /v1/embeddings` (an encoder), `POST /v1/completions`
and `POST /v1/chat/completions` (a generator).

  /v1/models            -> {"object": "list", "data": [{"id", "object": "model", "created", "owned_by"}]}
  /v1/embeddings        {"input", "model", "encoding_format" (float | base64), "dimensions", "user"}
                        -> {"object": "list", "data": [{"object": "embedding", "index", "embedding"}], "model", "usage"}
  /v1/completions       {"prompt", "model", "max_tokens" (16), "temperature" (1.0; 0: greedy), "top_p", "seed",
                        "stop", "stream", "echo", "n" (1), "user", ...} -> {"id", "object": "text_completion",
                        "created", "model", "choices": [{"index", "text", "logprobs": null, "finish_reason"}], "usage"};
                        with "stream": server-sent chunks of the same object, then `data: [DONE]`.
  /v1/chat/completions  {"messages", "model", "max_tokens" / "max_completion_tokens", the same sampling fields}
                        -> {"object": "chat.completion", "choices": [{"index", "message": {"role": "assistant",
                        "content"}, "finish_reason"}], ...}; the prompt is the checkpoint's chat template
                        (bertkit.serving.chat) rendered; a model without one is refused (422).

OpenAI samples by default: temperature > 0 means do_sample with that temperature, top_k 0
(no top-k filter: OpenAI has none) and top_p; temperature 0 is greedy decoding. A stop
string ends the text and is cut from it (OpenAI's rule; TGI keeps it). finish_reason is
"stop" (EOS or a stop string) or "length". usage.prompt_tokens counts the prompt as the
model read it (after a cut); a cut prompt is also named in the header x-bertkit-truncated,
and `"truncate": false` (bertkit's field, the openai client's extra_body) refuses it (422).
Errors are OpenAI's `{"error": {"message", "type", "param", "code"}}` (`error_body`), which
the openai client reads into its exception.
"""

from __future__ import annotations

import base64
import json
import re
import time
import uuid

import numpy as np
from starlette.requests import Request
from starlette.responses import JSONResponse, StreamingResponse

from bertkit.serving import requests as body_fields
from bertkit.serving.chat import messages_of, render_chat
from bertkit.serving.jobs import embeddings
from bertkit.serving.requests import HTTPProblem, check_fields, invalid, read_json
from bertkit.serving.streaming import SSE_HEADERS, events, seed_of, sse, stop_of, submit, truncated_header

SAMPLING_FIELDS = ("model", "temperature", "top_p", "seed", "stop", "stream", "n", "user", "logprobs",
                   "presence_penalty", "frequency_penalty", "logit_bias", "stream_options", "truncate")
COMPLETION_FIELDS = SAMPLING_FIELDS + ("max_tokens", "echo", "best_of", "suffix")
CHAT_FIELDS = SAMPLING_FIELDS + ("max_tokens", "max_completion_tokens", "top_logprobs", "response_format", "tools",
                                 "tool_choice", "parallel_tool_calls")
NO_OPS = {"n": 1, "best_of": 1, "presence_penalty": 0, "frequency_penalty": 0, "logprobs": None, "suffix": None,
          "logit_bias": None, "stream_options": None, "top_logprobs": None, "response_format": None, "tools": None,
          "tool_choice": None, "parallel_tool_calls": None}
_FIELD = re.compile(r"^([A-Za-z_][\w.]*)(?:\[\d+\])*[.:]")


def error_body(status: int, error_type: str, message: str) -> dict:
    """OpenAI's error object: `param` is the field the one-line message names first, `code`
    bertkit's (TEI's) error type."""
    field = _FIELD.match(message)
    kind = "invalid_request_error" if status < 500 and status != 424 else "server_error"
    return {"error": {"message": message, "type": kind, "param": field.group(1) if field else None,
                      "code": error_type}}


async def models(state, request: Request):
    return {"object": "list", "data": [_card(state)]}


async def model(state, request: Request):
    card = _card(state)
    if request.path_params["model"] != card["id"]:
        raise HTTPProblem(404, "model_not_found", f"model: {request.path_params['model']!r} is not served; "
                                                  f"this server serves {card['id']!r}")
    return card


def _card(state) -> dict:
    directory = state.served.directory
    return {"id": directory.name, "object": "model", "created": int(directory.stat().st_mtime), "owned_by": "bertkit"}


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


def _options(body: dict, max_tokens_field: str) -> tuple[dict, int | None, tuple[str, ...], bool | None]:
    """OpenAI's sampling fields -> (generate's options, seed, stop strings, truncate)."""
    body_fields.optional_null(body, tuple(NO_OPS), NO_OPS)
    options = {"max_new_tokens": body_fields.integer(body, max_tokens_field, 16, 1, 1_000_000)}
    temperature = body_fields.number(body, "temperature", 1.0, 0, 2)
    top_p = body_fields.number(body, "top_p", 1.0, 0, 1, low_open=True)
    if temperature > 0:
        options.update(do_sample=True, temperature=temperature, top_k=0, top_p=top_p)
    truncate = body_fields.flag(body, "truncate", True) if body.get("truncate") is not None else None
    return options, seed_of(body), stop_of(body), truncate


def _cut(text: str, stop: tuple[str, ...]) -> str:
    """The text before the first stop string (OpenAI leaves it out)."""
    ends = [text.find(s) for s in stop if s in text]
    return text[:min(ends)] if ends else text


def _finish(event: dict) -> str:
    return "length" if event["finish_reason"] == "length" else "stop"


async def completions(state, request: Request):
    body = await read_json(request, state.config.max_body_bytes)
    check_fields(body, ("prompt",), COMPLETION_FIELDS)
    prompt = body["prompt"]
    prompts = [prompt] if isinstance(prompt, str) else prompt
    if not isinstance(prompts, list) or not prompts or not all(isinstance(p, str) for p in prompts):
        raise invalid("prompt: expected a text or a list of texts (token-id prompts are not supported)")
    body_fields.check_count("prompt", prompts, state.config.max_client_batch_size)
    options, seed, stop, truncate = _options(body, "max_tokens")
    stream = body_fields.flag(body, "stream", False)
    echo = body_fields.flag(body, "echo", False)
    if stream and len(prompts) > 1:
        raise invalid("prompt: stream one prompt at a time")
    field = "prompt" if isinstance(prompt, str) else "prompt[{}]"
    submitted = [await submit(state, p, options, seed, stop, field=field.format(i), truncate=truncate)
                 for i, p in enumerate(prompts)]
    head = _head(state, body, "cmpl", "text_completion")

    def choice(index: int, text: str, finish_reason: str | None) -> dict:
        return {"index": index, "text": text, "logprobs": None, "finish_reason": finish_reason}

    if stream:
        return _streaming(_stream(head, submitted[0], stop, choice, prompts[0] if echo else None), submitted)
    choices, usage = [], _usage()
    for index, (prompt_text, one) in enumerate(zip(prompts, submitted)):
        event = await _end(one, usage)
        text = _cut(event["generated_text"], stop)
        choices.append(choice(index, prompt_text + text if echo else text, _finish(event)))
    return JSONResponse({**head, "choices": choices, "usage": usage}, headers=truncated_header(submitted))


async def chat_completions(state, request: Request):
    body = await read_json(request, state.config.max_body_bytes)
    check_fields(body, ("messages",), CHAT_FIELDS)
    generator = state.served.generator
    prompt = render_chat(state.served.directory, generator.tokenizer, messages_of(body))
    max_tokens_field = "max_completion_tokens" if body.get("max_completion_tokens") is not None else "max_tokens"
    options, seed, stop, truncate = _options(body, max_tokens_field)
    stream = body_fields.flag(body, "stream", False)
    submitted = await submit(state, prompt, options, seed, stop, field="messages", truncate=truncate)
    head = _head(state, body, "chatcmpl", "chat.completion.chunk" if stream else "chat.completion")
    if stream:
        def delta(index: int, text: str | None, finish_reason: str | None) -> dict:
            content = {} if finish_reason else {"content": text}
            return {"index": index, "delta": content, "logprobs": None, "finish_reason": finish_reason}

        return _streaming(_stream(head, submitted, stop, delta, None, first={"role": "assistant", "content": ""}),
                          [submitted])
    usage = _usage()
    event = await _end(submitted, usage)
    message = {"role": "assistant", "content": _cut(event["generated_text"], stop)}
    return JSONResponse({**head, "choices": [{"index": 0, "message": message, "logprobs": None,
                                              "finish_reason": _finish(event)}], "usage": usage},
                        headers=truncated_header([submitted]))


def _head(state, body: dict, prefix: str, kind: str) -> dict:
    return {"id": f"{prefix}-{uuid.uuid4().hex}", "object": kind, "created": int(time.time()),
            "model": body.get("model") or state.served.directory.name}


def _usage() -> dict:
    return {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}


async def _end(submitted, usage: dict) -> dict:
    """The job's end event, its tokens added to `usage` (the prompt as the model read it)."""
    async for event in events(submitted):
        if event["type"] == "end":
            usage["prompt_tokens"] += event["input_length"]
            usage["completion_tokens"] += event["generated_tokens"]
            usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
            return event
    raise HTTPProblem(424, "backend", "generation ended without an answer")


def _streaming(chunks, submitted) -> StreamingResponse:
    return StreamingResponse(chunks, media_type="text/event-stream", headers={**SSE_HEADERS,
                                                                               **truncated_header(submitted)})


async def _stream(head: dict, submitted, stop: tuple[str, ...], choice, echo: str | None, first: dict | None = None):
    """One chunk per token (its text), a last one with the finish reason, then [DONE]. Text that
    could begin a stop string is held back until it cannot (a stop string is never sent).
    choice(index, text, finish_reason): the protocol's choice object (a completion's, a chat delta)."""
    def chunk(text: str | None, finish_reason: str | None = None) -> bytes:
        return sse({**head, "choices": [choice(0, text, finish_reason)]})

    running, sent = "", ""
    try:
        if first is not None:  # a chat stream opens with the assistant's role
            yield sse({**head, "choices": [{"index": 0, "delta": first, "logprobs": None, "finish_reason": None}]})
        if echo is not None:
            yield chunk(echo)
        async for event in events(submitted):
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
                yield chunk("", _finish(event))
    except HTTPProblem as problem:
        yield sse(error_body(problem.status, problem.error_type, problem.message))
    yield b"data: [DONE]\n\n"


def _partial_stop(text: str, stop: tuple[str, ...]) -> int:
    """Length of the longest end of `text` that begins some stop string."""
    return max((k for s in stop for k in range(1, len(s)) if text.endswith(s[:k])), default=0)
