"""text-generation-inference's routes: `POST /generate` and `POST /generate_stream`.

  POST /generate         {"inputs": "...", "parameters": {...}} -> {"generated_text", "details"?}
  POST /generate_stream  the same -> server-sent events, one per token:
                         data: {"index", "token": {"id", "text", "logprob", "special"}, "top_tokens": null,
                                "generated_text": null (the whole text on the last), "details": null
                                (on the last when asked: finish_reason, generated_tokens, seed, input_length)}

Parameters map to `generate`'s (bertkit.model.generation, transformers' names and defaults,
so the text equals `bertkit generate`'s for the same settings): max_new_tokens (20),
do_sample (false), temperature, top_k, top_p (used when sampling), repetition_penalty,
seed; and TGI's own: stop (strings that end the text, kept in it), return_full_text
(the prompt before the text), details. TGI parameters bertkit does not implement
(best_of, typical_p, watermark, grammar, truncate, top_n_tokens, frequency_penalty,
adapter_id, decoder_input_details) are refused with 422 unless null or their no-op value.

`submit` and `events` are the generation plumbing the OpenAI route shares
(bertkit.serving.openai): a `GenerationJob` queued for the batching worker, and its
events read on the event loop until the end; a client that leaves marks the job
cancelled, and its row leaves the running batch at the next step.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

from starlette.requests import Request
from starlette.responses import StreamingResponse

from bertkit.errors import BertkitError
from bertkit.serving import requests as body_fields
from bertkit.serving.batching import Job, QueueFull
from bertkit.serving.generation import GenerationJob
from bertkit.serving.jobs import overloaded
from bertkit.serving.requests import HTTPProblem, check_fields, invalid, read_json, too_large

PARAMETERS = ("max_new_tokens", "do_sample", "temperature", "top_k", "top_p", "repetition_penalty", "seed", "stop",
              "return_full_text", "details")
UNSUPPORTED = {"best_of": 1, "typical_p": None, "watermark": False, "grammar": None, "truncate": None,
               "top_n_tokens": None, "frequency_penalty": None, "adapter_id": None, "decoder_input_details": False}
MAX_STOP = 4  # TGI's default max_stop_sequences
SSE_HEADERS = {"cache-control": "no-cache", "x-accel-buffering": "no"}


# ---------------------------------------------------------------------------- shared plumbing


def generate_options(parameters: dict) -> tuple[dict[str, Any], int | None, tuple[str, ...]]:
    """TGI's parameters -> (generate's options, seed, stop strings); one-line 422s naming the field."""
    options: dict[str, Any] = {}
    if parameters.get("max_new_tokens") is not None:
        options["max_new_tokens"] = body_fields.integer(parameters, "max_new_tokens", 20, 1, 1_000_000)
    for name in ("do_sample", "return_full_text", "details"):
        if parameters.get(name) is not None:
            body_fields.flag(parameters, name, False)
    if parameters.get("do_sample") is not None:
        options["do_sample"] = parameters["do_sample"]
    for name, low, high, low_open in (("temperature", 0, 1e6, True), ("top_p", 0, 1, True),
                                      ("repetition_penalty", 0, 1e6, True)):
        value = body_fields.number(parameters, name, None, low, high, low_open)
        if value is not None:
            options[name] = value
    if parameters.get("top_k") is not None:
        options["top_k"] = body_fields.integer(parameters, "top_k", 50, 0, 1_000_000)
    seed = parameters.get("seed")
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int) or seed < 0):
        raise invalid(f"seed: expected an integer >= 0, got {json.dumps(seed)}")
    stop = parameters.get("stop") or []
    if isinstance(stop, str):
        stop = [stop]
    if not isinstance(stop, list) or not all(isinstance(s, str) and s for s in stop):
        raise invalid("stop: expected a list of non-empty strings")
    if len(stop) > MAX_STOP:
        raise invalid(f"stop: at most {MAX_STOP} stop sequences, got {len(stop)}")
    return options, seed, tuple(stop)


async def submit(state, text: str, options: dict, seed: int | None, stop: tuple[str, ...]
                 ) -> tuple[GenerationJob, asyncio.Queue]:
    """Queue one generation of `text`: (its job, the queue its events arrive on)."""
    from bertkit.inference.generation import encode_prompts

    served = state.served
    if not isinstance(text, str) or not text.strip():
        raise invalid("inputs: expected a non-empty text")
    try:  # the prompt and settings `generate` would use for this text alone
        input_ids, settings = served.generator.model.resolve_decoding(
            encode_prompts(served.generator, [text])[0], **options)
    except BertkitError as exc:
        raise invalid(str(exc)) from None
    loop = asyncio.get_running_loop()
    events: asyncio.Queue = asyncio.Queue()

    def emit(event: dict) -> None:  # worker thread -> this event loop
        try:
            loop.call_soon_threadsafe(events.put_nowait, event)
        except RuntimeError:  # the loop has closed (shutdown)
            pass

    job = GenerationJob(input_ids, settings, emit, seed, stop)
    limit = state.config.max_batch_tokens
    if job.cost > limit:
        raise too_large(f"inputs: {len(input_ids)} prompt tokens + max_new_tokens={settings.max_new_tokens}, "
                        f"more than max_batch_tokens={limit}")
    try:
        state.batcher.submit(Job("generate", [job], job.cost))
    except QueueFull as exc:
        raise overloaded(exc) from None
    return job, events


async def events(job: GenerationJob, queue: asyncio.Queue) -> AsyncIterator[dict]:
    """The job's events up to its end; a consumer that stops early cancels the job."""
    try:
        while True:
            event = await queue.get()
            if event["type"] == "error":
                error = event["error"]
                raise HTTPProblem(424, "backend", f"generation failed: {error}")
            yield event
            if event["type"] == "end":
                return
    finally:
        job.cancelled = True  # a no-op once it ended; else its row leaves at the next step


def sse(data: Any) -> bytes:
    return f"data: {json.dumps(data, ensure_ascii=False)}\n\n".encode()


# ---------------------------------------------------------------------------- routes


async def _parse(state, body: dict) -> tuple[str, dict, dict]:
    check_fields(body, ("inputs",), ("parameters", "stream"))
    parameters = body.get("parameters") or {}
    if not isinstance(parameters, dict):
        raise invalid(f"parameters: expected an object, got {body_fields.type_name(parameters)}")
    unknown = sorted(set(parameters) - set(PARAMETERS) - set(UNSUPPORTED))
    if unknown:
        raise invalid(f"parameters.{unknown[0]}: unknown parameter; expected {', '.join(PARAMETERS)}")
    body_fields.optional_null(parameters, tuple(UNSUPPORTED), UNSUPPORTED)
    return body["inputs"], parameters, body


async def generate(state, request: Request):
    body = await read_json(request, state.config.max_body_bytes)
    return await generate_body(state, body)


async def generate_stream(state, request: Request):
    body = await read_json(request, state.config.max_body_bytes)
    return await generate_stream_body(state, body)


async def generate_body(state, body: dict):
    text, parameters, _ = await _parse(state, body)
    options, seed, stop = generate_options(parameters)
    job, queue = await submit(state, text, options, seed, stop)
    async for event in events(job, queue):
        if event["type"] == "end":
            answer = {"generated_text": _full(text, event["generated_text"], parameters)}
            if parameters.get("details"):
                answer["details"] = {"finish_reason": event["finish_reason"],
                                     "generated_tokens": event["generated_tokens"], "seed": event["seed"],
                                     "prefill": [], "tokens": event["tokens"], "top_tokens": None,
                                     "best_of_sequences": None}
            return answer
    raise HTTPProblem(424, "backend", "generation ended without an answer")


async def generate_stream_body(state, body: dict):
    text, parameters, _ = await _parse(state, body)
    options, seed, stop = generate_options(parameters)
    job, queue = await submit(state, text, options, seed, stop)

    async def stream():
        index, held = 0, None  # a token is sent when the next event says whether it was the last
        try:
            async for event in events(job, queue):
                if event["type"] == "token":
                    if held is not None:
                        yield sse(_token_event(index, held))
                    index, held = index + 1, event["token"]
                    continue
                details = None
                if parameters.get("details"):
                    details = {"finish_reason": event["finish_reason"], "generated_tokens": event["generated_tokens"],
                               "seed": event["seed"], "input_length": event["input_length"]}
                yield sse(_token_event(index, held, _full(text, event["generated_text"], parameters), details))
        except HTTPProblem as problem:
            yield sse({"error": problem.message, "error_type": problem.error_type})

    return StreamingResponse(stream(), media_type="text/event-stream", headers=SSE_HEADERS)


def _token_event(index: int, token: dict | None, generated_text: str | None = None, details: dict | None = None):
    token = token or {"id": 0, "text": "", "logprob": 0.0, "special": True}
    return {"index": index, "token": token, "top_tokens": None, "generated_text": generated_text, "details": details}


def _full(prompt: str, text: str, parameters: dict) -> str:
    return prompt + text if parameters.get("return_full_text") else text
