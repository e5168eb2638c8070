"""Attention weights of one text or pair, and masked-token candidates at every position:
what `bertkit inspect` draws.

`attention_map` runs the encoder once on the padded (eager) path with
`output_attentions=True`: the unpadded and SDPA paths never form the probabilities, so
they return none (bertkit.model.unpad). The weights are the softmax probabilities each
layer's heads put on each key, exactly as transformers' `output_attentions` gives them.

`position_candidates` masks each real position in turn (one batch, the input ids
themselves rather than re-tokenized text, so every word piece gets its own answer) and
returns the masked-LM's top-k there.
"""

from __future__ import annotations

import inspect
import os
from dataclasses import dataclass

import numpy as np
import torch

from bertkit.errors import BertkitError
from bertkit.inference.loading import LoadedModel, load_encoder, max_tokens
from bertkit.model.families import model_inputs
from bertkit.pages.inspect import DEFAULT_MAX_TOKENS



@dataclass
class AttentionMap:
    """tokens: the vocabulary entries ([CLS] ... [SEP] ... [SEP]); input_ids and
    token_type_ids: (T,) lists; attentions: (layers, heads, T, T) float32, row i = where
    token i looks (each row sums to 1); total_tokens: the input's length before the cap;
    kept: T (== total_tokens unless the input was cut at `max_tokens`)."""

    tokens: list[str]
    input_ids: list[int]
    token_type_ids: list[int]
    attentions: np.ndarray
    total_tokens: int

    @property
    def kept(self) -> int:
        return len(self.tokens)

    @property
    def truncated(self) -> bool:
        return self.total_tokens > self.kept


def _encoded(tokenizer, text: str, pair: str | None, limit: int):
    if not isinstance(text, str) or not text.strip():
        raise BertkitError("text: must be a non-empty string")
    if pair is not None and (not isinstance(pair, str) or not pair.strip()):
        raise BertkitError("pair: must be a non-empty string when given")
    total = len(tokenizer(text, pair)["input_ids"])
    encoded = tokenizer(text, pair, truncation=True, max_length=limit, return_tensors="pt")
    return encoded, total


def attention_refusal(encoder, source: str | os.PathLike = "the model") -> str | None:
    """Why `encoder` cannot be drawn (its forward takes no `output_attentions`: T5, BART and ELMo
    return no attention weights in bertkit), in one line naming `source`; None when it can."""
    if "output_attentions" in inspect.signature(encoder.forward).parameters:
        return None
    model_type = getattr(getattr(encoder, "config", None), "model_type", type(encoder).__name__)
    return (f"{source}: {model_type} models return no attention weights in bertkit, so inspect cannot draw them "
            "(it draws the encoders' and GPT's)")


def attention_map(text: str, model: str | os.PathLike | LoadedModel, pair: str | None = None,
                  max_length: int = DEFAULT_MAX_TOKENS) -> AttentionMap:
    """Every layer's and head's attention probabilities for `text` (and `pair`), cut to
    `max_length` tokens (and to the model's position table). `model`: a checkpoint
    directory (its bare encoder is loaded) or a `LoadedModel` (its encoder is used)."""
    if max_length < 2:
        raise BertkitError(f"max_length: must be >= 2, got {max_length}")
    loaded = model if isinstance(model, LoadedModel) else load_encoder(model)
    encoder, tokenizer = loaded.backbone, loaded.tokenizer
    refusal = attention_refusal(encoder, loaded.directory)
    if refusal is not None:
        raise BertkitError(refusal)
    encoded, total = _encoded(tokenizer, text, pair, min(max_length, max_tokens(encoder)))
    was_training = encoder.training
    encoder.eval()
    try:
        with torch.inference_mode():
            out = encoder(**model_inputs(encoder, encoded), output_attentions=True)
    finally:
        encoder.train(was_training)
    if not out.attentions:
        raise BertkitError(f"{type(encoder).__name__}: returned no attention weights")
    weights = torch.stack([a[0].float() for a in out.attentions]).numpy()  # (L, heads, T, T)
    ids = encoded["input_ids"][0].tolist()
    types = encoded["token_type_ids"][0].tolist() if "token_type_ids" in encoded else [0] * len(ids)
    return AttentionMap(tokenizer.convert_ids_to_tokens(ids), ids, types, weights, total)


def position_candidates(attention: AttentionMap, model: LoadedModel, top_k: int = 5,
                        batch_size: int = 32) -> list[list[dict] | None]:
    """For each position of `attention`'s input: the masked-LM's top-k tokens there when
    that one token is replaced by the mask token ({"token", "token_str", "token_id",
    "score"}, best first); None at special tokens ([CLS], [SEP]). `model`: a masked-LM
    `LoadedModel` (bertkit.inference.loading.load_masked_lm)."""
    if top_k < 1:
        raise BertkitError(f"top_k: must be >= 1, got {top_k}")
    tokenizer, mlm = model.tokenizer, model.model
    if tokenizer.mask_token_id is None:
        raise BertkitError("tokenizer: has no mask token (set mask_token in tokenizer_config.json)")
    ids = torch.tensor(attention.input_ids)
    special = set(tokenizer.all_special_ids)
    positions = [i for i, token_id in enumerate(attention.input_ids) if token_id not in special]
    results: list[list[dict] | None] = [None] * len(ids)
    was_training = mlm.training
    mlm.eval()
    try:
        for start in range(0, len(positions), batch_size):
            chunk = positions[start : start + batch_size]
            input_ids = ids.repeat(len(chunk), 1)  # (B, T): row b masks position chunk[b]
            rows = torch.arange(len(chunk))
            input_ids[rows, torch.tensor(chunk)] = tokenizer.mask_token_id
            batch = {"input_ids": input_ids, "attention_mask": torch.ones_like(input_ids),
                     "token_type_ids": torch.tensor(attention.token_type_ids).repeat(len(chunk), 1)}
            with torch.inference_mode():
                out = mlm(**model_inputs(mlm, batch))
                logits = out.prediction_logits if hasattr(out, "prediction_logits") else out.logits  # (B, T, V)
                probs = logits[rows, torch.tensor(chunk)].float().softmax(-1)  # (B, V)
            top = probs.topk(min(top_k, probs.shape[-1]), dim=-1)
            for position, scores, token_ids in zip(chunk, top.values.tolist(), top.indices.tolist()):
                results[position] = [
                    {"token": tokenizer.convert_ids_to_tokens(t), "token_str": tokenizer.decode([t]).strip(),
                     "token_id": t, "score": s} for s, t in zip(scores, token_ids)]
    finally:
        mlm.train(was_training)
    return results
