"""The FastAPI application: the route table, the batching worker's life, errors as JSON,
and a request metric for every answer.

`create_app(served, config)` starts the batching worker when the app starts (uvicorn's
lifespan) and stops it at shutdown; `bertkit serve` runs it on the main thread instead
(`worker_thread=False`, bertkit.serving.server). Every answer that is not a success is
`{"error": "<one line>", "error_type": "..."}` with text-embeddings-inference's statuses
and types (bertkit.serving.requests; a bug answers 424 "backend", TEI's failed inference),
and OpenAI's `{"error": {"message", "type", "param", "code"}}` under /v1/, so that each
protocol's clients show the message; no request can stop the server. With an API key
(ServeConfig.api_key) every route but /health asks for `Authorization: Bearer <key>`.
"""

from __future__ import annotations

import hmac
import logging
import time
from contextlib import asynccontextmanager
from dataclasses import dataclass

from fastapi import FastAPI
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from bertkit.serving import openai
from bertkit.serving.batching import Batcher
from bertkit.serving.config import ServeConfig
from bertkit.serving.generation import DecodeLoop
from bertkit.serving.metrics import Metrics
from bertkit.serving.models import ServedModel
from bertkit.serving.requests import HTTPProblem, not_served
from bertkit.serving.routes import ROUTES, Route

log = logging.getLogger("bertkit.serve")


@dataclass
class ServerState:
    served: ServedModel
    config: ServeConfig
    batcher: Batcher
    metrics: Metrics


def error_response(path: str, status: int, error_type: str, message: str, headers: dict | None = None
                   ) -> JSONResponse:
    """The error in the shape of the protocol `path` belongs to: OpenAI's under /v1/, TEI's and TGI's elsewhere."""
    body = (openai.error_body(status, error_type, message) if path.startswith("/v1/")
            else {"error": message, "error_type": error_type})
    return JSONResponse(body, status_code=status, headers=headers)


def authorized(request: Request, api_key: str | None) -> bool:
    """No key set, /health (a load balancer's probe), or `Authorization: Bearer <key>`."""
    if api_key is None or request.url.path == "/health":
        return True
    scheme, _, token = request.headers.get("authorization", "").partition(" ")
    return scheme.lower() == "bearer" and hmac.compare_digest(token.strip().encode(), api_key.encode())


def create_app(served: ServedModel, config: ServeConfig, worker_thread: bool = True) -> FastAPI:
    """The app; worker_thread: its lifespan runs the batching loop on a thread of its own
    (False: the caller runs `app.state.bertkit.batcher.work()` itself, as `serve` does on
    the main thread, and stops it)."""
    metrics = Metrics()
    runners, stepper = served.runners(), None
    if served.has("generator"):  # generation: a running batch that requests join between steps
        stepper = DecodeLoop(served.generator, config.max_batch_tokens, config.max_batch_requests)
        runners["generate"] = stepper.admit
    batcher = Batcher(runners, config.max_batch_tokens, config.max_batch_requests, config.max_wait_ms,
                      config.max_queue, on_batch=metrics.batch, stepper=stepper)
    metrics.queue_depth = lambda: batcher.depth
    state = ServerState(served, config, batcher, metrics)

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        if not worker_thread:
            yield
            return
        batcher.start()
        try:
            yield
        finally:
            batcher.stop()

    app = FastAPI(title="bertkit serve", lifespan=lifespan, docs_url=None, redoc_url=None, openapi_url=None)
    app.state.bertkit = state
    for route in ROUTES:
        app.add_api_route(route.path, _endpoint(state, route), methods=[route.method], name=route.path,
                          summary=route.summary)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException):  # unknown path, wrong method
        kind = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code, "validation")
        message = f"{request.method} {request.url.path}: {exc.detail}"
        if exc.status_code == 404:
            message += f"; routes: {', '.join(r.path for r in ROUTES)}"
        return error_response(request.url.path, exc.status_code, kind, message)

    @app.middleware("http")
    async def record(request: Request, call_next):
        start = time.perf_counter()
        if authorized(request, config.api_key):
            response = await call_next(request)
        else:
            problem = "wrong API key" if "authorization" in request.headers else "missing"
            response = error_response(request.url.path, 401, "unauthorized",
                                      f"authorization: {problem}; this server needs Authorization: Bearer <its API key>",
                                      headers={"www-authenticate": "Bearer"})
        route = request.scope.get("route")
        metrics.request(route.path if route is not None else "unmatched", response.status_code,
                        time.perf_counter() - start)
        return response

    return app


def _endpoint(state: ServerState, route: Route):
    async def endpoint(request: Request) -> Response:
        try:
            if route.needs is not None and not state.served.has(route.needs):
                raise not_served(f"{route.path}: not served for this model: "
                                 f"{state.served.missing.get(route.needs, route.needs)}")
            result = await route.handler(state, request)
        except HTTPProblem as problem:
            return error_response(route.path, problem.status, problem.error_type, problem.message)
        except Exception as exc:  # noqa: BLE001 - a bug answers 500; the server goes on
            log.exception("%s %s failed", route.method, route.path)
            return error_response(route.path, 424, "backend",
                                  f"{route.path}: inference failed ({type(exc).__name__}: {exc})")
        return result if isinstance(result, Response) else JSONResponse(result)

    endpoint.__name__ = "route_" + route.path.strip("/").replace("/", "_").replace("-", "_")
    return endpoint
