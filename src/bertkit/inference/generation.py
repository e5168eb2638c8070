"""Text from a generating model (every family with a `generator`: T5, BART, GPT-2, GPT-1): `load_generator`, `run_generation`, `generate`.

    import bertkit
    bertkit.generate("runs/t5/final", ["The <extra_id_0> walks in <extra_id_1> park."], num_beams=4)
    bertkit.generate("runs/gpt/final", "It is a truth universally acknowledged", max_new_tokens=40,
                     do_sample=True, top_p=0.9, repetition_penalty=1.2, seed=0)
    loaded = load_generator("runs/t5/final")       # load once (a server), then many calls
    generate(texts, loaded, do_sample=True, top_p=0.9, seed=0)

`bertkit generate`, `bertkit predict` on a model without a task file, and the server
come here. Options are `model.generate`'s (bertkit.model.generation: transformers'
names and defaults), plus `stop_strings` (matched in the decoded text with the
checkpoint's tokenizer). Texts are tokenized with the checkpoint's tokenizer, run in
batches sorted by length, and the results come back in input order:
- an encoder-decoder (T5): the text with the tokenizer's specials (T5's EOS), cut to
  `max_source_length` tokens; the result is the decoded output;
- a decoder-only model (GPT): the prompt's tokens without specials (kept whole, or its
  last `max_source_length`; a prompt too long for the context is cut from the left by
  `model.generate`, with a warning); the result is the continuation, after the prompt
  itself when `return_full_text` (the default, as transformers' text-generation pipeline).
Decoding drops the special tokens (pad, EOS, ...) but keeps T5's sentinels
(<extra_id_N>) visible: a span-corruption model answers with them
("<extra_id_0> dog <extra_id_1> the <extra_id_2>").
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import numpy as np

from bertkit.errors import BertkitError
from bertkit.inference.loading import LoadedModel, default_device, inputs_and_model, place
from bertkit.inference.precision import DEFAULT_PRECISION
from bertkit.inference.outputs import InferenceOutputs

DEFAULT_MAX_SOURCE_LENGTH = 512  # T5's model_max_length; relative positions set no hard limit
SENTINEL = re.compile(r"<extra_id_\d+>")


def load_generator(directory: str | os.PathLike, device: str | None = None,
                   precision: str = DEFAULT_PRECISION) -> LoadedModel:
    """The family's generating model (T5ForConditionalGeneration) and tokenizer in `precision`;
    a one-line error naming the directory when the family cannot generate (an encoder)."""
    from bertkit.model.families import family_of
    from bertkit.tokenization import Tokenizer

    model_class = family_of(directory).generator_class(directory)
    device = device or (None if precision == "int8" else default_device())  # int8 runs on the CPU
    model = place(model_class.from_pretrained(directory), device, precision)
    return LoadedModel(Path(directory), model, Tokenizer.from_pretrained(directory), precision=precision)


def run_generation(loaded: LoadedModel, texts: list[str], batch_size: int = 32,
                   max_source_length: int | None = None, seed: int | None = None,
                   **options: Any) -> InferenceOutputs:
    """Generated token ids for each text -> InferenceOutputs(logits=[], sequences=...): per
    text, `num_return_sequences` consecutive rows, pad after EOS cut; an encoder-decoder's
    rows start with the decoder start token, a decoder-only model's hold the new tokens
    only (not the prompt). `seed` seeds one generator for the whole call."""
    import torch

    from bertkit.model.decoding import batch_pad_id, right_padded
    from bertkit.model.generation import is_encoder_decoder

    if batch_size < 1:
        raise BertkitError(f"batch_size: must be >= 1, got {batch_size}")
    for number, text in enumerate(texts, start=1):
        if not isinstance(text, str) or not text.strip():
            raise BertkitError(f"text {number}: empty text, nothing to generate from")
    model = loaded.model
    decoder_only = not is_encoder_decoder(model)
    encoded = encode_prompts(loaded, texts, max_source_length)
    if options.get("stop_strings") is not None:
        options = {**options, "tokenizer": loaded.tokenizer}
    device = next(model.parameters()).device
    generator = None if seed is None else torch.Generator(device).manual_seed(seed)
    pad_id = batch_pad_id(loaded.config)
    per_text = options.get("num_return_sequences", 1)
    sequences: list[list[list[int]] | None] = [None] * len(texts)
    order = np.argsort([len(ids) for ids in encoded], kind="stable")[::-1]  # longest first: less padding
    model.eval()
    with torch.inference_mode():
        for start in range(0, len(order), batch_size):
            rows = order[start:start + batch_size]
            input_ids, attention_mask = right_padded([encoded[i] for i in rows], pad_id, device)
            out = model.generate(input_ids=input_ids, attention_mask=attention_mask, generator=generator,
                                 return_dict_in_generate=True, **options)
            result = out.new_tokens if decoder_only else out.sequences
            for k, i in enumerate(rows):
                sequences[i] = [_trim(row, pad_id, keep_first=not decoder_only)
                                for row in result[k * per_text:(k + 1) * per_text].tolist()]
    return InferenceOutputs(logits=[], sequences=[row for rows in sequences for row in rows])


def encode_prompts(loaded: LoadedModel, texts: list[str], max_source_length: int | None = None) -> list[list[int]]:
    """Each text's input ids as `generate` feeds them (the module docstring): a decoder-only
    model's prompt without specials (its last `max_source_length` tokens when given), an
    encoder-decoder's input with the tokenizer's specials, cut to `max_source_length` (512).
    A text without tokens is a one-line error naming it."""
    from bertkit.model.generation import is_encoder_decoder

    if not is_encoder_decoder(loaded.model):  # the prompt as written: no BOS / EOS of the tokenizer's template
        encoded = loaded.tokenizer(texts, add_special_tokens=False)["input_ids"]
        if max_source_length:
            encoded = [ids[-max_source_length:] for ids in encoded]
    else:
        encoded = loaded.tokenizer(texts, truncation=True, max_length=max_source_length or DEFAULT_MAX_SOURCE_LENGTH
                                   )["input_ids"]
    for number, ids in enumerate(encoded, start=1):
        if not ids:
            raise BertkitError(f"text {number}: no tokens after tokenization, nothing to generate from")
    return encoded


def generate(texts: str | list[str], model: str | os.PathLike | LoadedModel | None = None, *,
             device: str | None = None,
             batch_size: int = 32, max_source_length: int | None = None, seed: int | None = None,
             return_full_text: bool | None = None, **options: Any) -> list[str]:
    """Generated text for each text (`num_return_sequences` consecutive strings per text).

    return_full_text (decoder-only models; default True, as transformers' text-generation
    pipeline): the prompt, then its continuation; False: the continuation alone."""
    from bertkit.model.generation import is_encoder_decoder

    texts, model = inputs_and_model(texts, model, "generate")
    loaded = model if isinstance(model, LoadedModel) else load_generator(model, device)
    decoder_only = not is_encoder_decoder(loaded.model)
    if return_full_text and not decoder_only:
        raise BertkitError("return_full_text: only for decoder-only models (GPT); a text-to-text model's output "
                           "does not continue its input")
    batch = [texts] if isinstance(texts, str) else list(texts)
    outputs = run_generation(loaded, batch, batch_size, max_source_length, seed, **options)
    if not decoder_only:
        return [generated_text(loaded, ids[1:]) for ids in outputs.sequences]  # after the decoder start token
    per_text = options.get("num_return_sequences", 1)
    echo = return_full_text is None or return_full_text
    return [(batch[i // per_text] if echo else "") + generated_text(loaded, ids)
            for i, ids in enumerate(outputs.sequences)]


def generated_text(loaded: LoadedModel, new_tokens: list[int]) -> str:
    """A row's new tokens as `generate` returns their text: an encoder-decoder's output
    stripped; a decoder-only model's continuation as it follows the prompt (its leading
    space kept)."""
    from bertkit.model.generation import is_encoder_decoder

    return visible_text(loaded, new_tokens, strip=is_encoder_decoder(loaded.model))


def visible_text(loaded: LoadedModel, ids: list[int], strip: bool = True) -> str:
    """Generated ids as text: special tokens (start, pad, EOS, ...) dropped, sentinels kept;
    `strip=False` keeps the leading space a continuation of a prompt begins with."""
    tokenizer, config = loaded.tokenizer, loaded.config
    hidden = set(tokenizer.all_special_ids) | {t for t in (config.pad_token_id, config.eos_token_id,
                                                          getattr(config, "decoder_start_token_id", None))
                                              if isinstance(t, int)}
    kept = [t for t in ids if t not in hidden or SENTINEL.fullmatch(tokenizer.convert_ids_to_tokens(t) or "")]
    text = tokenizer.decode(kept, skip_special_tokens=False)
    return text.strip() if strip else text


def _trim(row: list[int], pad_id: int, keep_first: bool = True) -> list[int]:
    """A generated row without its trailing padding (the first token, an encoder-decoder's
    start token that may equal pad, kept when `keep_first`)."""
    end = len(row)
    while end > (1 if keep_first else 0) and row[end - 1] == pad_id:
        end -= 1
    return row[:end]
