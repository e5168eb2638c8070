"""Masked-token prediction with a checkpoint that has an MLM head."""

from __future__ import annotations

import os

import torch

from bertkit.errors import BertkitError

MLM_HEAD_KEY = "cls.predictions.transform.dense.weight"


def load_mlm_model(directory: str | os.PathLike):
    """BertForPreTraining from `directory`; a clear error when the MLM head is absent."""
    from bertkit.model import BertForPreTraining

    model = BertForPreTraining.from_pretrained(directory)
    if MLM_HEAD_KEY in model.loading_info["missing_keys"]:
        raise BertkitError(
            f"{directory}: checkpoint has no MLM head (cls.predictions.* weights missing); fill-mask needs "
            "a BertForPreTraining or BertForMaskedLM checkpoint"
        )
    return model


def fill_mask(text: str, model, tokenizer=None, top_k: int = 5) -> list[list[dict]]:
    """Top-k predictions for every mask token in `text`.

    Returns one list per mask position (left to right) of
    `{"token", "token_id", "score", "sequence"}` dicts, best first; `sequence` is the
    text with that mask filled in (other masks left as they are).
    """
    from bertkit.tokenization import Tokenizer

    if isinstance(model, (str, os.PathLike)):
        directory = model
        model = load_mlm_model(directory)
        tokenizer = tokenizer or Tokenizer.from_pretrained(directory)
    elif tokenizer is None:
        raise BertkitError("tokenizer: required when `model` is a model object rather than a directory")
    if top_k < 1:
        raise BertkitError(f"top_k: must be >= 1, got {top_k}")
    mask_token = tokenizer.mask_token
    if mask_token not in text:
        raise BertkitError(f"text has no {mask_token} token: {text!r}")
    encoded = tokenizer([text], truncation=True, max_length=model.config.max_position_embeddings, return_tensors="pt")
    input_ids = encoded["input_ids"]
    positions = (input_ids[0] == tokenizer.mask_token_id).nonzero().flatten()
    if positions.numel() == 0:
        raise BertkitError(f"text has no {mask_token} token within the first {input_ids.shape[1]} tokens")
    model.eval()
    with torch.inference_mode():
        hidden = model.bert(input_ids, encoded["token_type_ids"], encoded["attention_mask"]).last_hidden_state
        probs = model.mlm_logits(hidden[0, positions]).softmax(-1)  # (masks, V)
    top = probs.topk(min(top_k, probs.shape[-1]), dim=-1)
    pieces = text.split(mask_token)
    results = []
    for mask_index, (scores, ids) in enumerate(zip(top.values.tolist(), top.indices.tolist())):
        predictions = []
        for score, token_id in zip(scores, ids):
            token = tokenizer.convert_ids_to_tokens(token_id)
            filled = _fill(pieces, mask_index, tokenizer.decode([token_id]), mask_token)
            predictions.append({"token": token, "token_id": token_id, "score": score, "sequence": filled})
        results.append(predictions)
    return results


def _fill(pieces: list[str], mask_index: int, word: str, mask_token: str) -> str:
    """Rejoin `text.split(mask_token)` with the `mask_index`-th mask replaced by `word`."""
    out = pieces[0]
    for index, piece in enumerate(pieces[1:]):
        out += (word if index == mask_index else mask_token) + piece
    return out
