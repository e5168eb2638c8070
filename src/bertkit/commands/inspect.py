"""`bertkit inspect`: a model's attention for a sentence or a pair, as a page (docs/serving.md).

  bertkit inspect --model DIR "The animal didn't cross the street because it was too tired."
  bertkit inspect --model DIR --output attention.html "The cat sat." "A cat was sitting."

Without --output it serves the page (`bertkit serve`'s app, GET /inspect) on a free
loopback port and prints its URL; --open also opens it in a browser. With --output it
writes the same page as one self-contained HTML file and exits.
"""

from __future__ import annotations

import argparse
import socket
import sys
from pathlib import Path
from urllib.parse import urlencode

from bertkit.commands import add_runtime_options
from bertkit.errors import BertkitError


def add_parser(subparsers) -> None:
    from bertkit.pages.inspect import DEFAULT_MAX_TOKENS, DEFAULT_TOP_K
    from bertkit.serving.config import PRECISIONS

    p = subparsers.add_parser("inspect", help="see a model's attention for a sentence (page served or written)",
                              description="Attention of every layer and head (head view, layers x heads overview), "
                                          "fill-mask candidates per token and the task head's prediction, as a "
                                          "page that works offline.")
    p.add_argument("--model", required=True, help="checkpoint directory")
    p.add_argument("text", help="the sentence")
    p.add_argument("pair", nargs="?", help="a second sentence (a pair)")
    p.add_argument("--output", "-o", help="write the page to this HTML file instead of serving it")
    p.add_argument("--max-tokens", type=int, default=None,
                   help=f"longest input shown; longer ones are cut with a note on the page (default: {DEFAULT_MAX_TOKENS}, "
                        "or the model's position table when smaller)")
    p.add_argument("--top-k", type=int, default=DEFAULT_TOP_K, help="fill-mask candidates per token (default: %(default)s)")
    p.add_argument("--host", default="127.0.0.1", help="address to serve on (default: 127.0.0.1)")
    p.add_argument("--port", type=int, default=0, help="port to serve on (default: a free one)")
    p.add_argument("--open", action="store_true", help="open the page in the default browser")
    p.add_argument("--precision", choices=PRECISIONS, default="fp32", help="inference precision (default: fp32)")
    add_runtime_options(p, progress=False)
    p.set_defaults(func=run)


def free_port(host: str) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


def run(args: argparse.Namespace) -> int:
    from bertkit.serving.models import ServedModel

    if args.max_tokens is not None and args.max_tokens < 2:
        raise BertkitError(f"--max-tokens: must be >= 2, got {args.max_tokens}")
    if args.top_k < 1:
        raise BertkitError(f"--top-k: must be >= 1, got {args.top_k}")
    if args.output:
        return write_page(args, ServedModel.load(args.model, args.precision))
    return serve_page(args)


def write_page(args: argparse.Namespace, served) -> int:
    from bertkit.atomic import write_text_atomic
    from bertkit.pages.inspect import DEFAULT_MAX_TOKENS, inspect_page
    from bertkit.serving.inspect import inspect_data

    data = inspect_data(served, args.text, args.pair, args.max_tokens or DEFAULT_MAX_TOKENS, args.top_k)
    output = Path(args.output)
    if output.parent and not output.parent.is_dir():
        raise BertkitError(f"--output {output}: folder {output.parent} does not exist")
    write_text_atomic(output, inspect_page(data))
    print(output)
    return 0


def serve_page(args: argparse.Namespace) -> int:
    try:
        import uvicorn
    except ImportError as exc:
        raise BertkitError(f"bertkit inspect needs FastAPI and uvicorn to serve the page ({exc.name} is missing): "
                           "pip install 'bertkit[serve]', or write a file with --output") from None
    from bertkit.serving.app import create_app
    from bertkit.serving.config import ServeConfig
    from bertkit.serving.models import ServedModel

    port = args.port or free_port(args.host)
    config = ServeConfig(host=args.host, port=port, precision=args.precision)
    served = ServedModel.load(args.model, args.precision)
    query = {"text": args.text, **({"pair": args.pair} if args.pair else {}),
             **({"max_tokens": args.max_tokens} if args.max_tokens else {}), "top_k": args.top_k}
    url = f"http://{args.host}:{port}/inspect?{urlencode(query)}"
    print(url, flush=True)
    print("bertkit: serving the attention page (Ctrl-C to stop)", file=sys.stderr)
    if args.open:
        import threading
        import webbrowser

        threading.Timer(1.0, webbrowser.open, (url,)).start()
    uvicorn.run(create_app(served, config), host=args.host, port=port, log_level="warning", access_log=False)
    return 0
