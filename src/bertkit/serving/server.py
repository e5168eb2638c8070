"""`serve`: load a checkpoint once and answer HTTP requests with uvicorn until stopped."""

from __future__ import annotations

import os
import sys

from bertkit.serving.config import ServeConfig


def serve(model: str | os.PathLike, config: ServeConfig, log_level: str = "info") -> None:
    """Serve `model` (a checkpoint directory) at config.host:config.port (blocks)."""
    import uvicorn

    from bertkit.serving.app import create_app
    from bertkit.serving.models import ServedModel

    served = ServedModel.load(model, config.precision)
    app = create_app(served, config)
    routes = ", ".join(route.split(" ", 1)[1] for route in _served_routes(served))
    print(f"bertkit: serving {served.directory} ({served.info()['task'] or 'encoder'}, {config.precision}) "
          f"at http://{config.host}:{config.port} — {routes}", file=sys.stderr)
    uvicorn.run(app, host=config.host, port=config.port, log_level=log_level, access_log=False)


def _served_routes(served) -> list[str]:
    from bertkit.serving.routes import ROUTES

    return [f"{r.method} {r.path}" for r in ROUTES if r.needs is None or served.has(r.needs)]
