"""`serve`: load a checkpoint once and answer HTTP requests with uvicorn until stopped.

The batching loop, which runs the model, owns the main thread; uvicorn's event loop runs
on a second thread. Torch ran the same batch 2-4 ms slower on a second thread than on
the main one here (one request of ~30 tokens through MiniLM: ~15 ms), so the model gets
the main thread. Ctrl-C or SIGTERM stops the loop, then the HTTP server, then exits.
"""

from __future__ import annotations

import os
import signal
import sys
import threading

from bertkit.serving.config import ServeConfig


def serve(model: str | os.PathLike, config: ServeConfig, log_level: str = "info") -> None:
    """Serve `model` (a checkpoint directory) at config.host:config.port (blocks)."""
    import uvicorn

    from bertkit.serving.app import create_app
    from bertkit.serving.models import ServedModel

    served = ServedModel.load(model, config.precision)
    app = create_app(served, config, worker_thread=False)
    batcher = app.state.bertkit.batcher
    server = uvicorn.Server(uvicorn.Config(app, host=config.host, port=config.port, log_level=log_level,
                                           access_log=False))
    http = threading.Thread(target=_run_http, args=(server, batcher), name="bertkit-serve-http", daemon=True)
    routes = ", ".join(route.split(" ", 1)[1] for route in _served_routes(served))
    print(f"bertkit: serving {served.directory} ({served.info()['task'] or 'encoder'}, {config.precision}) "
          f"at http://{config.host}:{config.port} — {routes}", file=sys.stderr)
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


def _run_http(server, batcher) -> None:
    """uvicorn on this thread (it installs no signal handlers off the main thread); when it
    ends, for whatever reason, the batching loop on the main thread ends too."""
    try:
        server.run()
    except SystemExit:  # uvicorn exits when it cannot bind its port; it has logged why
        server.startup_failed = True
    finally:
        batcher.stop()


def _interrupt(signum, frame) -> None:
    raise KeyboardInterrupt


def _served_routes(served) -> list[str]:
    from bertkit.serving.routes import ROUTES

    return [f"{r.method} {r.path}" for r in ROUTES if r.needs is None or served.has(r.needs)]
