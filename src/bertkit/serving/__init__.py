"""`bertkit serve`: a checkpoint behind an HTTP API (FastAPI + uvicorn, the `serve` extra).

  config.py    ServeConfig: address, batching budgets, admission limits, truncation, precision
  models.py    ServedModel: the checkpoint's models loaded once through bertkit.inference,
               what it serves, and how one batch of requests runs on it
  batching.py  Batcher: the request queue and the one worker thread that owns the model
  routes.py    the route table (/health, /info, /embed, /predict, /fill-mask, /tokenize,
               /v1/embeddings, /metrics) and its handlers
  requests.py  size-capped JSON bodies, checked field by field; HTTPProblem
  metrics.py   Prometheus text exposition
  app.py       create_app: the FastAPI application
  server.py    serve: load, build, run uvicorn

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
