"""Inference: a checkpoint loaded once answers predict, embed, fill-mask and evaluate.

  loading.py           LoadedModel and its loaders (fine-tuned model, bare encoder, masked LM)
  prediction.py        Predictor / predict: labels, entities, choices, answer spans
  evaluation.py        evaluate: a fine-tuned model's official metrics on a labelled file
  embedding.py         embed: contextual vectors (layer choice, pooling, sentence-transformers)
  masked_lm.py         fill_mask: top-k tokens for each mask
  attention.py         attention_map: every head's weights; position_candidates: MLM top-k per position
  sentence_modules.py  a sentence-transformers folder's modules.json, as embed settings
  generation.py        load_generator / generate: text from a text-to-text model (T5)
  outputs.py           InferenceOutputs: logits per feature, generated sequences (None for encoders), precision
  precision.py         precision="fp32" | "int8" | "bf16" for every loader (`place`); quantization.py: int8 linears
  onnx_export.py       export_onnx: a checkpoint with its task head as a checked ONNX model + sidecar folder

The CLI commands (bertkit.commands) and the public API (`bertkit.predict`, `bertkit.embed`, `bertkit.generate`,
...) both come here. This package sits beside training and imports nothing from it
(tests/inference/test_layering.py). Names are imported lazily: `import bertkit.inference`
does not import torch.
"""

from __future__ import annotations

import importlib

_EXPORTS = {
    "LoadedModel": "bertkit.inference.loading",
    "load_finetuned": "bertkit.inference.loading",
    "load_encoder": "bertkit.inference.loading",
    "load_masked_lm": "bertkit.inference.loading",
    "InferenceOutputs": "bertkit.inference.outputs",
    "Predictor": "bertkit.inference.prediction",
    "predict": "bertkit.inference.prediction",
    "evaluate": "bertkit.inference.evaluation",
    "embed": "bertkit.inference.embedding",
    "fill_mask": "bertkit.inference.masked_lm",
    "load_generator": "bertkit.inference.generation",
    "generate": "bertkit.inference.generation",
    "export_onnx": "bertkit.inference.onnx_export",
    "AttentionMap": "bertkit.inference.attention",
    "attention_map": "bertkit.inference.attention",
    "position_candidates": "bertkit.inference.attention",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'bertkit.inference' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
