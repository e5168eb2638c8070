"""Masked-token prediction with a checkpoint that has an MLM head (BERT, RoBERTa, ALBERT,
or an ELECTRA generator): the masked-LM class comes from the family registry
(bertkit.model.families, by config.json's `model_type`)."""

from __future__ import annotations

import os
from pathlib import Path

import torch

from bertkit.errors import BertkitError


def load_mlm_model(directory: str | os.PathLike):
    """The family's masked-LM model from `directory` (BertForPreTraining, RobertaForMaskedLM,
    AlbertForMaskedLM, ElectraForMaskedLM); a one-line error when the MLM head is absent."""
    from bertkit.model.families import family_of

    mlm = family_of(directory).masked_lm(directory)
    model = mlm.model_class().from_pretrained(directory)
    if any(key.startswith(mlm.head_prefixes) for key in model.loading_info["missing_keys"]):
        heads = ", ".join(f"{prefix}*" for prefix in mlm.head_prefixes)
        raise BertkitError(f"{directory}: checkpoint has no MLM head ({heads} weights missing); fill-mask needs "
                           f"{mlm.checkpoints}{_generator_hint(directory)}")
    return model


def _generator_hint(directory: str | os.PathLike) -> str:
    """An ELECTRA pre-training run keeps its generator (which has the MLM head) in generator/."""
    from bertkit.objectives.electra import GENERATOR_DIR

    generator = Path(directory) / GENERATOR_DIR
    return f" (this run's generator: {generator})" if (generator / "config.json").is_file() else ""


def fill_mask(text: str, model, tokenizer=None, top_k: int = 5) -> list[list[dict]]:
    """Top-k predictions for every mask token (the tokenizer's: [MASK], <mask> for RoBERTa) in `text`.

    `model` is a checkpoint directory (model and tokenizer are loaded from it) or a
    masked-LM model object (then `tokenizer` is required). Returns one list per mask
    position (left to right) of `{"token", "token_str", "token_id", "score", "sequence"}`
    dicts, best first: `token` is the vocabulary entry ("Ġcity" in byte-level BPE),
    `token_str` its text ("city"), `sequence` the text with that mask filled in (other
    masks left as they are).
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
    if mask_token is None:
        raise BertkitError("tokenizer: has no mask token (set mask_token in tokenizer_config.json)")
    if mask_token not in text:
        raise BertkitError(f"text has no {mask_token} token: {text!r}")
    encoded = tokenizer([text], truncation=True, max_length=_max_tokens(model), return_tensors="pt")
    input_ids = encoded["input_ids"]
    positions = (input_ids[0] == tokenizer.mask_token_id).nonzero().flatten()
    if positions.numel() == 0:
        raise BertkitError(f"text has no {mask_token} token within the first {input_ids.shape[1]} tokens")
    model.eval()
    with torch.inference_mode():
        out = model(input_ids, encoded["token_type_ids"], encoded["attention_mask"])
        # (1, T, V); BERT's and ALBERT's pre-training models name it prediction_logits
        logits = out.prediction_logits if hasattr(out, "prediction_logits") else out.logits
        probs = logits[0, positions].float().softmax(-1)  # (masks, V)
    top = probs.topk(min(top_k, probs.shape[-1]), dim=-1)
    pieces = text.split(mask_token)
    results = []
    for mask_index, (scores, ids) in enumerate(zip(top.values.tolist(), top.indices.tolist())):
        predictions = []
        for score, token_id in zip(scores, ids):
            token = tokenizer.convert_ids_to_tokens(token_id)
            token_str = tokenizer.decode([token_id], skip_special_tokens=False).strip() or token
            filled = _fill(pieces, mask_index, tokenizer.decode([token_id]), mask_token)
            predictions.append({"token": token, "token_str": token_str, "token_id": token_id, "score": score,
                                "sequence": filled})
        results.append(predictions)
    return results


def _max_tokens(model) -> int:
    """Tokens the model's position table holds: max_position_embeddings, less RoBERTa's
    offset (its positions start at padding_idx + 1: 512 tokens for 514 positions)."""
    limit = model.config.max_position_embeddings
    embeddings = getattr(getattr(model, "bert", model), "embeddings", None)  # every family's encoder is at `bert`
    padding_idx = getattr(embeddings, "padding_idx", None)
    return limit - (padding_idx + 1) if padding_idx is not None else limit


def _fill(pieces: list[str], mask_index: int, word: str, mask_token: str) -> str:
    """Rejoin `text.split(mask_token)` with the `mask_index`-th mask replaced by `word`.

    A word that brings its own leading space (a byte-level BPE word start: "Ġcity"
    decodes to " city") replaces the space before the mask too, as RoBERTa's <mask>
    absorbs it; WordPiece and SentencePiece words decode without one and go in as they are."""
    out = pieces[0]
    for index, piece in enumerate(pieces[1:]):
        if index != mask_index:
            out += mask_token + piece
            continue
        if word[:1].isspace():
            out = out.rstrip()
            word = word if out else word.lstrip()
        out += word + piece
    return out
