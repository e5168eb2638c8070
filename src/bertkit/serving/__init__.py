"""`bertkit serve`: a checkpoint behind an HTTP API (FastAPI + uvicorn, the `serve` extra),
speaking text-embeddings-inference's, text-generation-inference's and OpenAI's protocols.

  config.py      ServeConfig: address, batching budgets, admission limits, truncation, precision
  models.py      ServedModel: the checkpoint's models loaded once through bertkit.inference,
                 what it serves, and how one batch of requests runs on it
  batching.py    Batcher: the request queue and the one worker thread that owns the model
  generation.py  DecodeLoop: generation's running batch (continuous batching), on that worker
  routes.py      the route table (/health, /info, /metrics, POST /, /fill-mask, /inspect + the protocols')
  tei.py         TEI's /embed, /embed_all, /predict, /rerank, /tokenize, /decode
  tgi.py         TGI's /generate, /generate_stream (server-sent events)
  openai.py      OpenAI's /v1/models, /v1/embeddings, /v1/completions, /v1/chat/completions
  streaming.py   what the generating protocols share: a prompt queued, its events, server-sent events
  chat.py        chat messages -> a prompt with the checkpoint's chat template (transformers' convention)
  jobs.py        a request's inputs queued as one batching job; its problems as HTTP answers
  requests.py    size-capped JSON bodies, checked field by field; HTTPProblem (TEI's error types)
  metrics.py     Prometheus text exposition
  app.py         create_app: the FastAPI application
  server.py      serve: load, build, run uvicorn

A command-level consumer of the inference layer (docs/architecture.md): it imports
no training code and no run (tests/serving/test_layering.py). docs/serving.md is the API
reference.
"""

from __future__ import annotations

import importlib

_EXPORTS = {
    "ServeConfig": "bertkit.serving.config",
    "ServedModel": "bertkit.serving.models",
    "create_app": "bertkit.serving.app",
    "serve": "bertkit.serving.server",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'bertkit.serving' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
