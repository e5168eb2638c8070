"""`fill_mask`: masked-token prediction with a checkpoint that has an MLM head (BERT,
RoBERTa, ALBERT, or an ELECTRA generator); bertkit.inference.loading.load_masked_lm
finds the family's masked-LM class in the registry (bertkit.model.families)."""

from __future__ import annotations

import os
from collections.abc import Sequence

import torch

from bertkit.errors import BertkitError
from bertkit.inference.loading import LoadedModel, load_masked_lm, max_tokens
from bertkit.model.families import model_inputs


def fill_mask(texts: str | Sequence[str], model, tokenizer=None, top_k: int = 5,
              batch_size: int = 32, precision: str = "fp32") -> list[list[dict]] | list[list[list[dict]]]:
    """Top-k predictions for every mask token (the tokenizer's: [MASK], <mask> for RoBERTa).

    `texts` is one text — then the result is one list per mask position (left to right)
    — or a list of texts, then one such result per text, in order (run `batch_size` at a
    time). `model` is a checkpoint directory (model and tokenizer are loaded from it), a
    `LoadedModel` (bertkit.inference.loading.load_masked_lm) or a masked-LM model object
    (then `tokenizer` is required). Each prediction is a
    `{"token", "token_str", "token_id", "score", "sequence"}` dict, best first: `token` is
    the vocabulary entry ("Ġcity" in byte-level BPE, "##ly" in WordPiece), `token_str` its
    text, `sequence` the text with that mask filled in as the tokenizer's decoder writes
    the token after its left neighbour (`filled_text`); other masks are left as they are.
    precision ("fp32", "int8", "bf16") applies when `model` is a directory.
    """
    single = isinstance(texts, str)
    batch = [texts] if single else list(texts)
    if isinstance(model, (str, os.PathLike)):
        model = load_masked_lm(model, tokenizer=tokenizer, precision=precision)
    if isinstance(model, LoadedModel):
        model, tokenizer = model.model, model.tokenizer
    elif tokenizer is None:
        raise BertkitError("tokenizer: required when `model` is a model object rather than a directory")
    if top_k < 1:
        raise BertkitError(f"top_k: must be >= 1, got {top_k}")
    if batch_size < 1:
        raise BertkitError(f"batch_size: must be >= 1, got {batch_size}")
    mask_token = tokenizer.mask_token
    if mask_token is None:
        raise BertkitError("tokenizer: has no mask token (set mask_token in tokenizer_config.json)")
    for index, text in enumerate(batch):
        if not isinstance(text, str) or mask_token not in text:
            where = "text" if single else f"texts[{index}]"
            raise BertkitError(f"{where} has no {mask_token} token: {text!r}")
    results = []
    was_training = model.training
    model.eval()
    try:
        for start in range(0, len(batch), batch_size):
            chunk = batch[start : start + batch_size]
            results.extend(_predict_chunk(chunk, start, single, model, tokenizer, top_k))
    finally:
        model.train(was_training)
    return results[0] if single else results


def _predict_chunk(texts: list[str], offset: int, single: bool, model, tokenizer, top_k: int) -> list[list[list[dict]]]:
    """Predictions for each text of one padded batch (`offset` = index of its first text)."""
    encoded = tokenizer(texts, truncation=True, max_length=max_tokens(model), padding=True, return_tensors="pt")
    input_ids = encoded["input_ids"]  # (B, T)
    is_mask = input_ids == tokenizer.mask_token_id
    for row, text in enumerate(texts):
        if not is_mask[row].any():
            where = "text" if single else f"texts[{offset + row}]"
            raise BertkitError(f"{where} has no {tokenizer.mask_token} token within the first "
                               f"{int(encoded['attention_mask'][row].sum())} tokens")
    with torch.inference_mode():
        out = model(**model_inputs(model, encoded))
        # (B, T, V); BERT's and ALBERT's pre-training models name it prediction_logits
        logits = out.prediction_logits if hasattr(out, "prediction_logits") else out.logits
        probs = logits[is_mask].float().softmax(-1)  # (masks in the batch, V), row-major
    top = probs.topk(min(top_k, probs.shape[-1]), dim=-1)
    scores, token_ids = top.values.tolist(), top.indices.tolist()
    text_starts = set(tokenizer.all_special_ids) - {tokenizer.mask_token_id}  # [CLS], <s>: nothing to join to
    results, flat = [], 0
    for row, text in enumerate(texts):
        ids = input_ids[row].tolist()
        per_mask = []
        for mask_index, position in enumerate(is_mask[row].nonzero().flatten().tolist()):
            left = ids[position - 1] if position > 0 and ids[position - 1] not in text_starts else None
            per_mask.append([_prediction(tokenizer, text, mask_index, left, token_id, score)
                             for score, token_id in zip(scores[flat], token_ids[flat])])
            flat += 1
        results.append(per_mask)
    return results


def _prediction(tokenizer, text: str, mask_index: int, left_id: int | None, token_id: int, score: float) -> dict:
    token = tokenizer.convert_ids_to_tokens(token_id)
    token_str = tokenizer.decode([token_id], skip_special_tokens=False).strip() or token
    word = written_after(tokenizer, left_id, token_id)
    return {"token": token, "token_str": token_str, "token_id": token_id, "score": score,
            "sequence": filled_text(text, tokenizer.mask_token, mask_index, word)}


def written_after(tokenizer, left_id: int | None, token_id: int) -> str:
    """The text the decoder writes for `token_id` right after `left_id` (the token before the mask).

    " city" for a word start; "ly" for WordPiece "##ly" and "ity" for a byte-level BPE
    continuation (joined to the word before); "," where the decoder attaches punctuation
    (WordPiece cleanup). `left_id=None` (the text's first token): the token as the decoder
    writes a first token ("##ly" keeps its prefix, as transformers decodes it). A decoder
    that rewrites the left token's text as well (a character split across byte-level
    tokens) gets the token as a word of its own.
    """
    alone = tokenizer.decode([token_id], skip_special_tokens=False)
    if left_id is None:
        return alone
    head = tokenizer.decode([left_id], skip_special_tokens=False)
    both = tokenizer.decode([left_id, token_id], skip_special_tokens=False)
    return both[len(head):] if both.startswith(head) else " " + alone.lstrip()


def filled_text(text: str, mask_token: str, mask_index: int, word: str) -> str:
    """`text` with its `mask_index`-th mask token replaced by `word` (`written_after`'s form).

    A word starting with a space starts a new word: it keeps the text's own whitespace
    before the mask, or brings a space where there is none (RoBERTa's <mask> absorbs the
    space before it); at the start of the text it brings none. Any other word is joined
    to the text before the mask, whitespace dropped: WordPiece "정말 [MASK]" + "##깔" ->
    "정말깔", "beautiful [MASK]." + "," -> "beautiful,." — as transformers' fill-mask
    pipeline decodes the filled ids (which keeps byte-level BPE's leading space on a
    text's first word: " with is ..." where this gives "with is ...").
    """
    pieces = text.split(mask_token)
    before, after = mask_token.join(pieces[: mask_index + 1]), mask_token.join(pieces[mask_index + 1 :])
    if word.startswith(" "):  # the decoder's word separator (a byte-level "\t" or "\x1f" token is not one)
        word = word[1:]
        if before and not before[-1].isspace():
            before += " "
    else:
        before = before.rstrip()
    return before + word + after
