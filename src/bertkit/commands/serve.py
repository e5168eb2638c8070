"""`bertkit serve`: a checkpoint behind an HTTP API (docs/serving.md).

  bertkit serve --model runs/mrpc/best --host 127.0.0.1 --port 8080
  bertkit serve --model DIR --max-batch-tokens 8192 --max-wait-ms 2 --no-truncate --precision int8
  BERTKIT_API_KEY=secret bertkit serve --model DIR      # or --api-key secret

Needs the `serve` extra (pip install 'bertkit[serve]': FastAPI, uvicorn).
"""

from __future__ import annotations

import argparse
import os

from bertkit.commands import add_runtime_options
from bertkit.errors import BertkitError


def add_parser(subparsers) -> None:
    from bertkit.serving.config import PRECISIONS, ServeConfig

    defaults = ServeConfig()
    p = subparsers.add_parser("serve", help="serve a model over HTTP (TEI, TGI and OpenAI protocols)",
                              description="Serve a checkpoint over HTTP with dynamic batching: TEI's /embed, /predict, "
                                          "/rerank, ...; TGI's /generate; OpenAI's /v1/...; /health, /info, /metrics "
                                          "(docs/serving.md).")
    p.add_argument("--model", required=True, help="checkpoint directory (fine-tuned, pre-trained or an encoder)")
    p.add_argument("--host", default=defaults.host, help=f"address to listen on (default: {defaults.host})")
    p.add_argument("--port", type=int, default=defaults.port, help=f"port (default: {defaults.port})")
    p.add_argument("--max-batch-tokens", type=int, default=defaults.max_batch_tokens,
                   help="real tokens one batch may hold, summed over its inputs (default: %(default)s)")
    p.add_argument("--max-batch-requests", type=int, default=defaults.max_batch_requests,
                   help="requests one batch may hold (default: %(default)s)")
    p.add_argument("--max-wait-ms", type=float, default=defaults.max_wait_ms,
                   help="longest a request waits for others to join its batch (default: %(default)s)")
    p.add_argument("--max-queue", type=int, default=defaults.max_queue,
                   help="requests waiting at most; more are answered 429 (default: %(default)s)")
    p.add_argument("--max-client-batch-size", type=int, default=defaults.max_client_batch_size,
                   help="inputs one request may hold (default: %(default)s)")
    p.add_argument("--max-body-bytes", type=int, default=defaults.max_body_bytes,
                   help="request body size limit (default: %(default)s)")
    p.add_argument("--truncate", action=argparse.BooleanOptionalAction, default=defaults.truncate,
                   help="cut inputs longer than the model's limit (default), or refuse them (--no-truncate); "
                        "a request's \"truncate\" field overrides it")
    p.add_argument("--precision", choices=PRECISIONS, default=defaults.precision,
                   help="inference precision of the loaded model (default: fp32)")
    p.add_argument("--api-key", default=os.environ.get("BERTKIT_API_KEY") or None,
                   help="every route but /health asks for 'Authorization: Bearer KEY' (401 otherwise); "
                        "default: the BERTKIT_API_KEY environment variable, else no key")
    p.add_argument("--log-level", default="info", choices=("critical", "error", "warning", "info", "debug"),
                   help="uvicorn's log level (default: info)")
    add_runtime_options(p, progress=False)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from bertkit.serving.config import ServeConfig

    try:
        import fastapi  # noqa: F401
        import uvicorn  # noqa: F401
    except ImportError as exc:
        raise BertkitError(f"bertkit serve needs FastAPI and uvicorn ({exc.name} is missing): "
                           "pip install 'bertkit[serve]'") from None
    from bertkit.serving.server import serve

    config = ServeConfig(host=args.host, port=args.port, max_batch_tokens=args.max_batch_tokens,
                         max_batch_requests=args.max_batch_requests, max_wait_ms=args.max_wait_ms,
                         max_queue=args.max_queue, max_client_batch_size=args.max_client_batch_size,
                         max_body_bytes=args.max_body_bytes, truncate=args.truncate, precision=args.precision,
                         api_key=args.api_key)
    serve(args.model, config, log_level=args.log_level)
    return 0
