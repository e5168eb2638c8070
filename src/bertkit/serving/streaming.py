"""Generation plumbing the generating protocols share (TGI's bertkit.serving.tgi, OpenAI's
bertkit.serving.openai): a request's seed and stop strings, its prompt queued as a
`GenerationJob` for the batching worker (`submit`), its events read on the event loop
until the end (`events`), and server-sent events (`sse`).

A client that leaves marks its job cancelled, and its row leaves the running batch at the
next step. A prompt longer than the model keeps is cut as `generate` cuts it (an
encoder-decoder keeps its first 512 tokens, a decoder-only model the last ones that fit its
context with max_new_tokens); `Submitted.truncated` says so, for the protocol to tell its
client; with truncation off the request is refused instead (422).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from bertkit.errors import BertkitError
from bertkit.serving.batching import Job, QueueFull
from bertkit.serving.generation import GenerationJob
from bertkit.serving.jobs import overloaded
from bertkit.serving.requests import HTTPProblem, invalid, too_large

MAX_STOP = 4  # TGI's default max_stop_sequences; OpenAI's limit too
SSE_HEADERS = {"cache-control": "no-cache", "x-accel-buffering": "no"}


def seed_of(body: dict, name: str = "seed") -> int | None:
    seed = body.get(name)
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int) or seed < 0):
        raise invalid(f"{name}: expected an integer >= 0, got {json.dumps(seed)}")
    return seed


def stop_of(body: dict, name: str = "stop") -> tuple[str, ...]:
    """A string or a list of at most MAX_STOP non-empty strings (TGI's and OpenAI's `stop`)."""
    stop = body.get(name) or []
    stop = [stop] if isinstance(stop, str) else stop
    if not isinstance(stop, list) or not all(isinstance(s, str) and s for s in stop):
        raise invalid(f"{name}: expected a string or a list of non-empty strings")
    if len(stop) > MAX_STOP:
        raise invalid(f"{name}: at most {MAX_STOP} stop sequences, got {len(stop)}")
    return tuple(stop)


@dataclass
class Submitted:
    """A queued generation: its job, the queue its events arrive on, and its prompt's tokens
    before and after the cut (`truncated`: fewer kept than the text has)."""

    job: GenerationJob
    queue: asyncio.Queue
    prompt_tokens: int
    text_tokens: int

    @property
    def truncated(self) -> bool:
        return self.prompt_tokens < self.text_tokens


async def submit(state, text: str, options: dict, seed: int | None, stop: tuple[str, ...], *,
                 field: str = "inputs", truncate: bool | None = None) -> Submitted:
    """Queue one generation of `text`. field: the request's name for it (in errors);
    truncate: cut a prompt too long for the model (None: the server's --truncate) or refuse it."""
    from bertkit.inference.generation import encode_prompts
    from bertkit.model.generation import is_encoder_decoder

    generator = state.served.generator
    if not isinstance(text, str) or not text.strip():
        raise invalid(f"{field}: expected a non-empty text")
    try:  # the prompt and settings `generate` would use for this text alone
        encoded = encode_prompts(generator, [text])[0]
        input_ids, settings = generator.model.resolve_decoding(encoded, **options)
    except BertkitError as exc:
        raise invalid(f"{field}: {exc}") from None
    # a decoder-only prompt is encoded whole and cut by resolve_decoding; an encoder-decoder's
    # is cut by encode_prompts, so its whole length is the tokenizer's (with the same specials)
    text_tokens = len(encoded) if not is_encoder_decoder(generator.model) else state.served.text_lengths([text])[0]
    if len(input_ids) < text_tokens and not (state.config.truncate if truncate is None else truncate):
        raise invalid(f"{field}: {text_tokens} prompt tokens, more than the {len(input_ids)} this model keeps "
                      f"with max_new_tokens={settings.max_new_tokens} (truncation is off: send a shorter prompt, "
                      "fewer new tokens, or truncate: true)")
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue = asyncio.Queue()

    def emit(event: dict) -> None:  # worker thread -> this event loop
        try:
            loop.call_soon_threadsafe(queue.put_nowait, event)
        except RuntimeError:  # the loop has closed (shutdown)
            pass

    job = GenerationJob(input_ids, settings, emit, seed, stop)
    limit = state.config.max_batch_tokens
    if job.cost > limit:
        raise too_large(f"{field}: {len(input_ids)} prompt tokens + max_new_tokens={settings.max_new_tokens}, "
                        f"more than max_batch_tokens={limit}")
    try:
        state.batcher.submit(Job("generate", [job], job.cost))
    except QueueFull as exc:
        raise overloaded(exc) from None
    return Submitted(job, queue, len(input_ids), text_tokens)


async def events(submitted: Submitted) -> AsyncIterator[dict]:
    """The job's events up to its end; a consumer that stops early cancels the job."""
    try:
        while True:
            event = await submitted.queue.get()
            if event["type"] == "error":
                raise HTTPProblem(424, "backend", f"generation failed: {event['error']}")
            yield event
            if event["type"] == "end":
                return
    finally:
        submitted.job.cancelled = True  # a no-op once it ended; else its row leaves at the next step


def truncated_header(submitted: list[Submitted]) -> dict[str, str]:
    """TEI's x-bertkit-truncated beside a generation: the indices of the prompts that were cut."""
    return {"x-bertkit-truncated": ",".join(str(i) for i, s in enumerate(submitted) if s.truncated)}


def sse(data: Any) -> bytes:
    return f"data: {json.dumps(data, ensure_ascii=False)}\n\n".encode()
