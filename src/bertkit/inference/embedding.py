"""`embed`: fixed contextual vectors from a pre-trained encoder (the feature-based approach).

`embed(texts, model=...)` returns one vector per text (or per token) built from a
choice of layers — the BERT paper's Table 7 variants — and a pooling over tokens
(bertkit.features).
Texts are tokenized once, sorted by length and padded per batch, so short texts do
not pay for long ones; results come back in input order. A sentence-transformers folder
(modules.json) gets its own pooling, normalization and truncation by default, so the
vectors are what `SentenceTransformer.encode` returns (bertkit.inference.sentence_modules).
A decoder (GPT) is embedded like an encoder: the mean over the real tokens by default (each
state has seen the text up to it; "cls" is not meaningful there). A tokenizer without a pad
token (GPT-2's) pads with EOS, as transformers does; the mask keeps the padding out, so a
text's vector is the one it gets alone.
"""

from __future__ import annotations

import os
from typing import Sequence

import numpy as np
import torch
from tqdm.auto import tqdm

from bertkit.errors import BertkitError
from bertkit.feature_choices import LAYER_CHOICES, POOLING_CHOICES
from bertkit.features import classification_positions, pool_tokens, select_layers
from bertkit.inference.loading import LoadedModel, load_encoder, max_tokens
from bertkit.inference.precision import check_precision
from bertkit.model.families import family_of_model, model_inputs


def _load(model, tokenizer, precision: str | None) -> LoadedModel:
    """A directory (loaded in `precision`), a LoadedModel or a model object (+ its
    tokenizer) as a LoadedModel; a loaded model keeps the precision it was loaded in."""
    if isinstance(model, (str, os.PathLike)):
        return load_encoder(model, tokenizer=tokenizer, precision=check_precision(precision))
    if isinstance(model, LoadedModel):
        loaded = model
    elif tokenizer is None:
        raise BertkitError("tokenizer: required when `model` is a model object rather than a directory")
    else:
        loaded = LoadedModel(None, model, tokenizer)
    if precision is not None and check_precision(precision) != loaded.precision:
        raise BertkitError(f"precision {precision!r}: the model given is already loaded in {loaded.precision}; "
                           "pass its directory, or load it with load_encoder(..., precision=...)")
    return loaded


def embed(
    texts: Sequence[str],
    model,
    tokenizer=None,
    pooling: str | None = None,
    layers: str = "last",
    layer_weights: Sequence[float] | None = None,
    batch_size: int = 64,
    max_length: int | None = None,
    normalize: bool | None = None,
    progress: bool | None = None,
    precision: str | None = None,
) -> np.ndarray | list[np.ndarray]:
    """Contextual feature vectors for `texts`, in input order.

    model: a checkpoint directory of any family (its bare encoder: BertModel, RobertaModel,
    ElectraModel, AlbertModel), a `LoadedModel` (bertkit.inference.loading) or a loaded
    encoder (then pass `tokenizer`); a model with heads gives its encoder's vectors.
    Returns a float32 array (N, D) — or, with pooling="none", a list of N arrays
    (T_i, D) holding every token's vector ([CLS] and [SEP] included).
    Defaults (None) follow a sentence-transformers folder's modules.json — its Pooling,
    L2 normalization when it has a Normalize module, its max_seq_length — and are
    pooling="mean", no normalization, the model's position limit otherwise (514
    positions hold 512 tokens in RoBERTa).
    `normalize=False` gives raw vectors from a Normalize pipeline; token vectors
    (pooling="none") are normalized only when asked, as sentence-transformers leaves them.
    `progress=None` shows a bar only for long inputs on a terminal.
    precision: "fp32" (default), "int8" or "bf16" (bertkit.inference.precision) for a
    directory; the vectors are float32 whichever.
    """
    if isinstance(texts, str):
        raise BertkitError("texts: expected a list of strings, got a single string (wrap it in a list)")
    if pooling is not None and pooling not in POOLING_CHOICES:
        raise BertkitError(f"pooling: unknown choice {pooling!r}; choose one of {', '.join(POOLING_CHOICES)}")
    if layers not in LAYER_CHOICES:
        raise BertkitError(f"layers: unknown choice {layers!r}; choose one of {', '.join(LAYER_CHOICES)}")
    if pooling == "pooler" and layers != "last":
        raise BertkitError("pooling='pooler' uses the pooled [CLS] output and only goes with layers='last'")
    if batch_size < 1:
        raise BertkitError(f"batch_size: must be >= 1, got {batch_size}")
    loaded = _load(model, tokenizer, precision)
    if family_of_model(loaded.backbone).reads_words:  # ELMo: one vector per word, pooled over words
        if pooling == "pooler":
            raise BertkitError("pooling='pooler': this model has no pooler layer")
        return embed_words(texts, loaded, pooling or "mean", layers, layer_weights, batch_size, normalize, progress)
    model, tokenizer, modules = loaded.backbone, _padding(loaded), loaded.sentence_modules
    pooling = pooling or (modules.pooling if modules else "mean")
    if normalize is None:
        normalize = bool(modules and modules.normalize and pooling != "none")
    if pooling == "pooler" and getattr(model, "pooler", None) is None:  # ELECTRA has none
        raise BertkitError("pooling='pooler': this model has no pooler layer")
    texts = list(texts)
    if not texts:
        return [] if pooling == "none" else np.zeros((0, _feature_dim(model, layers)), dtype=np.float32)
    if modules and modules.do_lower_case:
        texts = [text.lower() for text in texts]  # sentence-transformers lowercases before its tokenizer
    max_length = max_length or (modules and modules.max_seq_length) or max_tokens(model)
    encoded = tokenizer(texts, truncation=True, max_length=max_length)
    ids_list, types_list = encoded["input_ids"], encoded.get("token_type_ids")  # none for GPT, RoBERTa, ...
    order = np.argsort([len(ids) for ids in ids_list], kind="stable")[::-1]  # longest first: memory peak up front
    results: list = [None] * len(texts)
    need_all_layers = layers != "last"
    show = progress if progress is not None else len(texts) >= 2048
    was_training = model.training
    model.eval()
    try:
        with torch.inference_mode():
            for start in tqdm(range(0, len(order), batch_size), desc="embed", unit="batch", disable=not show or None):
                rows = order[start : start + batch_size]
                rows_in = {"input_ids": [ids_list[i] for i in rows]}
                if types_list is not None:
                    rows_in["token_type_ids"] = [types_list[i] for i in rows]
                batch = tokenizer.pad(rows_in, return_tensors="pt")
                attention_mask = batch["attention_mask"]
                out = model(**model_inputs(model, batch), output_hidden_states=need_all_layers)
                if pooling == "pooler":
                    vectors = out.pooler_output
                else:
                    features = select_layers(out.hidden_states, layers, layer_weights) if need_all_layers else out.last_hidden_state
                    features = features.float()  # pooled in fp32 whatever the precision (a bf16 sum drifts)
                    if pooling == "none":  # the real tokens, wherever the tokenizer put the padding
                        for row, real, feats in zip(rows, attention_mask.bool(), features):
                            results[row] = _finish(feats[real], normalize)
                        continue
                    cls_positions = classification_positions(batch["input_ids"], tokenizer.cls_token_id)
                    vectors = pool_tokens(features, attention_mask, pooling, cls_positions)
                for row, vector in zip(rows, _finish(vectors, normalize)):
                    results[row] = vector
    finally:
        model.train(was_training)
    return results if pooling == "none" else np.stack(results)


def embed_words(texts: Sequence[str], loaded: LoadedModel, pooling: str, layers: str,
                layer_weights: Sequence[float] | None, batch_size: int, normalize: bool | None,
                progress: bool | None) -> np.ndarray | list[np.ndarray]:
    """`embed` for a model that reads words (ELMo): each text's words (bertkit.data.words: the
    tokenizer's pre-tokenization), the model's layers per word, the layer choice, then the
    mean over words ("mean"; "cls" takes the first word) or every word ("none": (W_i, D))."""
    from bertkit.data.words import TokenWords

    texts = list(texts)
    model = loaded.backbone
    sentences = TokenWords(loaded.tokenizer).text_words(texts)
    for index, words in enumerate(sentences):
        if not words:
            raise BertkitError(f"texts[{index}]: an empty sentence (no words to represent): {texts[index]!r}")
    order = np.argsort([len(words) for words in sentences], kind="stable")[::-1]
    results: list = [None] * len(texts)
    show = progress if progress is not None else len(texts) >= 2048
    was_training = model.training
    model.eval()
    try:
        with torch.inference_mode():
            for start in tqdm(range(0, len(order), batch_size), desc="embed", unit="batch", disable=not show or None):
                rows = order[start : start + batch_size]
                hidden, mask = model.embed_words([sentences[i] for i in rows], "texts")  # (B, L+1, W, H), (B, W)
                features = select_layers(hidden.unbind(1), layers, layer_weights).float()  # (B, W, D) or (B, W, L+1, H)
                if pooling == "none":
                    for row, real, feats in zip(rows, mask.bool(), features):
                        results[row] = _finish(feats[real], bool(normalize))
                    continue
                vectors = pool_tokens(features, mask, pooling)
                for row, vector in zip(rows, _finish(vectors, bool(normalize))):
                    results[row] = vector
    finally:
        model.train(was_training)
    return results if pooling == "none" else np.stack(results)


def _padding(loaded: LoadedModel):
    """The tokenizer, padding with EOS if it has no pad token (a decoder: GPT-2); padding is on the
    right for GPT, and the attention mask keeps it out of every real token's state and the pooling."""
    return loaded.tokenizer.with_eos_padding(getattr(loaded.backbone.config, "eos_token_id", None))


def _finish(vectors: torch.Tensor, normalize: bool) -> np.ndarray:
    if normalize:
        vectors = torch.nn.functional.normalize(vectors, dim=-1)
    return vectors.float().numpy()


def _feature_dim(model, layers: str) -> int:
    return model.config.hidden_size * (4 if layers == "concat_last_four" else 1)
