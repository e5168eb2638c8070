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
(the prompt before the text), details; truncate as TEI's (true / false: cut a prompt too
long for the model, or refuse it; null: the server's --truncate; TGI's integer form is
refused). A cut prompt is named in the header x-bertkit-truncated ("0"). TGI parameters
bertkit does not implement (best_of, typical_p, watermark, grammar, top_n_tokens,
frequency_penalty, adapter_id, decoder_input_details) are refused with 422 unless null or
their no-op value. The plumbing shared with OpenAI's routes is bertkit.serving.streaming.
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, StreamingResponse

from bertkit.serving import requests as body_fields
from bertkit.serving.requests import HTTPProblem, check_fields, invalid, read_json
from bertkit.serving.streaming import SSE_HEADERS, events, seed_of, sse, stop_of, submit, truncated_header

PARAMETERS = ("max_new_tokens", "do_sample", "temperature", "top_k", "top_p", "repetition_penalty", "seed", "stop",
              "return_full_text", "details", "truncate")
UNSUPPORTED = {"best_of": 1, "typical_p": None, "watermark": False, "grammar": None,
               "top_n_tokens": None, "frequency_penalty": None, "adapter_id": None, "decoder_input_details": False}


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
    return options, seed_of(parameters), stop_of(parameters)


def truncate_of(parameters: dict) -> bool | None:
    """TEI's boolean `truncate` (None: the server's setting); TGI's integer form is not served."""
    value = parameters.get("truncate")
    if value is not None and not isinstance(value, bool):
        raise invalid(f"parameters.truncate: expected true, false or null (bertkit does not cut to a given length), "
                      f"got {body_fields.type_name(value)}")
    return value


# ---------------------------------------------------------------------------- routes


async def _submit(state, body: dict):
    """The request's prompt queued: (prompt, parameters, Submitted)."""
    check_fields(body, ("inputs",), ("parameters", "stream"))
    parameters = body.get("parameters") or {}
    if not isinstance(parameters, dict):
        raise invalid(f"parameters: expected an object, got {body_fields.type_name(parameters)}")
    unknown = sorted(set(parameters) - set(PARAMETERS) - set(UNSUPPORTED))
    if unknown:
        raise invalid(f"parameters.{unknown[0]}: unknown parameter; expected {', '.join(PARAMETERS)}")
    body_fields.optional_null(parameters, tuple(UNSUPPORTED), UNSUPPORTED)
    options, seed, stop = generate_options(parameters)
    text = body["inputs"]
    return text, parameters, await submit(state, text, options, seed, stop, truncate=truncate_of(parameters))


async def generate(state, request: Request):
    body = await read_json(request, state.config.max_body_bytes)
    return await generate_body(state, body)


async def generate_stream(state, request: Request):
    body = await read_json(request, state.config.max_body_bytes)
    return await generate_stream_body(state, body)


async def generate_body(state, body: dict):
    text, parameters, submitted = await _submit(state, body)
    async for event in events(submitted):
        if event["type"] == "end":
            answer = {"generated_text": _full(text, event["generated_text"], parameters)}
            if parameters.get("details"):
                answer["details"] = {"finish_reason": event["finish_reason"],
                                     "generated_tokens": event["generated_tokens"], "seed": event["seed"],
                                     "prefill": [], "tokens": event["tokens"], "top_tokens": None,
                                     "best_of_sequences": None}
            return JSONResponse(answer, headers=truncated_header([submitted]))
    raise HTTPProblem(424, "backend", "generation ended without an answer")


async def generate_stream_body(state, body: dict):
    text, parameters, submitted = await _submit(state, body)

    async def stream():
        index, held = 0, None  # a token is sent when the next event says whether it was the last
        try:
            async for event in events(submitted):
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

    return StreamingResponse(stream(), media_type="text/event-stream",
                             headers={**SSE_HEADERS, **truncated_header([submitted])})


def _token_event(index: int, token: dict | None, generated_text: str | None = None, details: dict | None = None):
    token = token or {"id": 0, "text": "", "logprob": 0.0, "special": True}
    return {"index": index, "token": token, "top_tokens": None, "generated_text": generated_text, "details": details}


def _full(prompt: str, text: str, parameters: dict) -> str:
    return prompt + text if parameters.get("return_full_text") else text
