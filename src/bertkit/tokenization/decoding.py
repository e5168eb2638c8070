"""Ids back to text: the decoder a tokenizer.json forgot to say.

The `tokenizers` library decodes with the pipeline's own decoder: WordPiece joins "##"
pieces (and, with `cleanup`, attaches punctuation as BERT's tokenizer does), ByteLevel
turns "Ġ" back into a space and bytes into characters (RoBERTa), Metaspace turns "▁"
into a space (SentencePiece Unigram/BPE: ALBERT, XLNet, T5). A tokenizer.json with no
decoder would join raw token strings ("Ġcity", "▁city", "##ly"); `default_decoder`
picks the one its model and pre-tokenizer imply.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from tokenizers import Tokenizer as RustTokenizer
from tokenizers import decoders


def pipeline_components(node: Any) -> Iterator[dict]:
    """Every component dict of a serialized pre-tokenizer/decoder, Sequences flattened."""
    if isinstance(node, dict):
        yield node
        for key in ("pretokenizers", "decoders"):
            for child in node.get(key) or []:
                yield from pipeline_components(child)


def default_decoder(backend: RustTokenizer) -> decoders.Decoder | None:
    """The decoder `backend`'s model and pre-tokenizer imply; None where plain joining is right."""
    spec = json.loads(backend.to_str())
    model = spec.get("model") or {}
    pre_tokenizers = {c.get("type"): c for c in pipeline_components(spec.get("pre_tokenizer"))}
    if "ByteLevel" in pre_tokenizers:
        return decoders.ByteLevel()
    if "Metaspace" in pre_tokenizers:
        metaspace = pre_tokenizers["Metaspace"]
        return decoders.Metaspace(replacement=metaspace.get("replacement") or "\u2581",
                                  prepend_scheme=metaspace.get("prepend_scheme") or "always")
    kind = model.get("type")
    if kind == "WordPiece":
        return decoders.WordPiece(prefix=model.get("continuing_subword_prefix") or "##")
    if kind == "BPE" and model.get("end_of_word_suffix"):
        return decoders.BPEDecoder(suffix=model["end_of_word_suffix"])
    if kind == "BPE" and model.get("continuing_subword_prefix"):
        return decoders.WordPiece(prefix=model["continuing_subword_prefix"], cleanup=False)
    return None
