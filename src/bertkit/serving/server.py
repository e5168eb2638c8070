"""`serve`: load a checkpoint once and answer HTTP requests with uvicorn until stopped.

The batching loop, which runs the model, owns the main thread; uvicorn's event loop runs
on a second thread. Torch ran the same batch 2-4 ms slower on a second thread than on
the main one here (one request of ~30 tokens through MiniLM: ~15 ms), so the model gets
the main thread. Ctrl-C or SIGTERM stops the loop, then the HTTP server, then exits.

The port is bound before the model loads, and that socket handed to uvicorn: a port in use
is one line at once, not a traceback after the load.
"""

from __future__ import annotations

import errno
import os
import signal
import socket
import sys
import threading

from bertkit.errors import BertkitError
from bertkit.serving.config import ServeConfig


def serve(model: str | os.PathLike, config: ServeConfig, log_level: str = "info") -> None:
    """Serve `model` (a checkpoint directory) at config.host:config.port (blocks)."""
    import uvicorn

    from bertkit.serving.app import create_app
    from bertkit.serving.models import ServedModel

    sock = listening_socket(config.host, config.port)
    try:
        served = ServedModel.load(model, config.precision)
    except BaseException:
        sock.close()
        raise
    app = create_app(served, config, worker_thread=False)
    batcher = app.state.bertkit.batcher
    server = uvicorn.Server(uvicorn.Config(app, host=config.host, port=config.port, log_level=log_level,
                                           access_log=False))
    http = threading.Thread(target=_run_http, args=(server, batcher, sock), name="bertkit-serve-http", daemon=True)
    routes = ", ".join(route.split(" ", 1)[1] for route in _served_routes(served))
    what = ", ".join(filter(None, (model_kind(served), served.info()["task"], config.precision)))
    print(f"bertkit: serving {served.directory} ({what}) "
          f"at http://{config.host}:{sock.getsockname()[1]} — {routes}", file=sys.stderr)
    previous = {signum: signal.signal(signum, _interrupt) for signum in (signal.SIGINT, signal.SIGTERM)}
    http.start()
    try:
        batcher.work()  # until the HTTP server stops it (it could not start, or it ended)
    except KeyboardInterrupt:
        pass
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        batcher.stop()
        server.should_exit = True
        http.join(timeout=30)
    if getattr(server, "startup_failed", False):
        sys.exit(1)


def listening_socket(host: str, port: int) -> socket.socket:
    """A socket bound to host:port (uvicorn listens on it); a one-line BertkitError if it cannot be."""
    sock = None
    try:
        family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
        sock = socket.socket(family, kind, proto)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn: a restart reuses the port at once
        sock.bind(address)
    except OSError as exc:
        if sock is not None:
            sock.close()
        if exc.errno == errno.EADDRINUSE:
            raise BertkitError(f"port {port} is in use; pick another with --port") from None
        raise BertkitError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    return sock


def model_kind(served) -> str:
    """The architecture the start-up line names before the task: encoder, decoder or encoder-decoder."""
    from bertkit.model.generation import is_encoder_decoder

    if served.generator is None:
        return "encoder"
    return "encoder-decoder" if is_encoder_decoder(served.generator.model) else "decoder"


def _run_http(server, batcher, sock) -> None:
    """uvicorn on this thread (it installs no signal handlers off the main thread); when it
    ends, for whatever reason, the batching loop on the main thread ends too."""
    try:
        server.run(sockets=[sock])
    except SystemExit:  # uvicorn exits when it cannot bind its port; it has logged why
        server.startup_failed = True
    finally:
        batcher.stop()
        sock.close()


def _interrupt(signum, frame) -> None:
    raise KeyboardInterrupt


def _served_routes(served) -> list[str]:
    from bertkit.serving.routes import ROUTES

    return [f"{r.method} {r.path}" for r in ROUTES if r.needs is None or served.has(r.needs)]
