"""`ServeConfig`: the server's address and limits, checked with field-named errors.

Defaults follow text-embeddings-inference where it has the same knob (a 16384-token
batch budget, 32 inputs per request, 512 queued requests).
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields

from bertkit.errors import ConfigError

PRECISIONS = ("fp32", "int8", "bf16")


@dataclass(frozen=True)
class ServeConfig:
    """host/port: where uvicorn listens. Batching: a batch holds at most `max_batch_tokens`
    real tokens (the sum over its inputs: the unpadded forward's cost) and
    `max_batch_requests` requests; the first request of a batch waits at most
    `max_wait_ms` for others to join (default 0: no wait — requests arriving while a
    batch runs form the next one, so a lone request pays no wait and a loaded server
    still runs full batches). Admission: `max_queue` requests waiting (more get
    429), `max_client_batch_size` inputs per request, `max_body_bytes` per request body.
    `truncate`: inputs longer than the model's limit are cut (True) or refused (False).
    `precision`: what the inference loaders are asked for (fp32, int8, bf16).
    `api_key`: when set, every route but /health asks for `Authorization: Bearer <api_key>`
    (401 otherwise); kept out of repr so that it is not logged."""

    host: str = "127.0.0.1"
    port: int = 8080
    max_batch_tokens: int = 16384
    max_batch_requests: int = 64
    max_wait_ms: float = 0.0
    max_queue: int = 512
    max_client_batch_size: int = 32
    max_body_bytes: int = 2 * 1024 * 1024
    truncate: bool = True
    precision: str = "fp32"
    api_key: str | None = field(default=None, repr=False)

    def __post_init__(self):
        for spec in fields(self):
            value = getattr(self, spec.name)
            if spec.type in ("int", "float") and (isinstance(value, bool) or not isinstance(value, (int, float))):
                raise ConfigError(f"{spec.name}: expected a number, got {value!r}")
        for name in ("max_batch_tokens", "max_batch_requests", "max_queue", "max_client_batch_size", "max_body_bytes"):
            if getattr(self, name) < 1:
                raise ConfigError(f"{name}: must be >= 1, got {getattr(self, name)}")
        if self.max_wait_ms < 0:
            raise ConfigError(f"max_wait_ms: must be >= 0, got {self.max_wait_ms}")
        if not 0 <= self.port <= 65535:
            raise ConfigError(f"port: must be in 0..65535, got {self.port}")
        if self.api_key is not None and (not isinstance(self.api_key, str) or not self.api_key
                                         or any(c.isspace() for c in self.api_key)):
            raise ConfigError("api_key: expected a non-empty key without spaces")
        if self.precision not in PRECISIONS:
            raise ConfigError(f"precision: unknown choice {self.precision!r}; choose one of {', '.join(PRECISIONS)}")

    def limits(self) -> dict:
        """The limits as /info reports them."""
        return {name: getattr(self, name) for name in ("max_batch_tokens", "max_batch_requests", "max_wait_ms",
                                                       "max_queue", "max_client_batch_size", "max_body_bytes",
                                                       "truncate")}
