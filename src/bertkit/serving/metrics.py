"""The server's Prometheus metrics, written in the text exposition format (version 0.0.4).

- bertkit_requests_total{route, status}: requests answered (route: the route's path,
  "unmatched" for paths the server does not have).
- bertkit_request_duration_seconds{route}: a histogram of the time to answer.
- bertkit_batch_requests{task}, bertkit_batch_tokens{task}: histograms of what each
  batch run held (requests, real tokens).
- bertkit_inputs_truncated_total{route}: inputs cut to the model's limit.
- bertkit_queue_depth: requests waiting now (a gauge read at scrape time).
"""

from __future__ import annotations

import threading
from collections import defaultdict
from collections.abc import Callable

LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
BATCH_REQUEST_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256)
BATCH_TOKEN_BUCKETS = (64, 256, 1024, 4096, 16384, 65536)
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


class Histogram:
    def __init__(self, buckets: tuple[float, ...]):
        self.buckets = buckets
        self.counts = [0] * len(buckets)  # per bucket, not cumulative
        self.total = 0
        self.sum = 0.0

    def observe(self, value: float) -> None:
        for i, bound in enumerate(self.buckets):
            if value <= bound:
                self.counts[i] += 1
                break
        self.total += 1
        self.sum += value

    def lines(self, name: str, labels: str) -> list[str]:
        sep = "," if labels else ""
        out, running = [], 0
        for bound, count in zip(self.buckets, self.counts):
            running += count
            out.append(f'{name}_bucket{{{labels}{sep}le="{_number(bound)}"}} {running}')
        out.append(f'{name}_bucket{{{labels}{sep}le="+Inf"}} {self.total}')
        braces = f"{{{labels}}}" if labels else ""
        out += [f"{name}_sum{braces} {_number(self.sum)}", f"{name}_count{braces} {self.total}"]
        return out


class Metrics:
    """Thread-safe: the event loop records requests, the worker thread records batches."""

    def __init__(self, queue_depth: Callable[[], int] = lambda: 0):
        self.queue_depth = queue_depth
        self._lock = threading.Lock()
        self._requests: dict[tuple[str, int], int] = defaultdict(int)
        self._latency: dict[str, Histogram] = {}
        self._batch_requests: dict[str, Histogram] = {}
        self._batch_tokens: dict[str, Histogram] = {}
        self._truncated: dict[str, int] = defaultdict(int)

    def request(self, route: str, status: int, seconds: float) -> None:
        with self._lock:
            self._requests[(route, status)] += 1
            self._latency.setdefault(route, Histogram(LATENCY_BUCKETS)).observe(seconds)

    def batch(self, task: str, requests: int, tokens: int) -> None:
        with self._lock:
            self._batch_requests.setdefault(task, Histogram(BATCH_REQUEST_BUCKETS)).observe(requests)
            self._batch_tokens.setdefault(task, Histogram(BATCH_TOKEN_BUCKETS)).observe(tokens)

    def truncated(self, route: str, count: int) -> None:
        if count:
            with self._lock:
                self._truncated[route] += count

    def render(self) -> str:
        with self._lock:
            lines = ["# HELP bertkit_requests_total Requests answered, by route and HTTP status.",
                     "# TYPE bertkit_requests_total counter"]
            lines += [f'bertkit_requests_total{{route="{_label(route)}",status="{status}"}} {count}'
                      for (route, status), count in sorted(self._requests.items())]
            lines += ["# HELP bertkit_request_duration_seconds Time to answer a request.",
                      "# TYPE bertkit_request_duration_seconds histogram"]
            for route, histogram in sorted(self._latency.items()):
                lines += histogram.lines("bertkit_request_duration_seconds", f'route="{_label(route)}"')
            for name, table, what in (("bertkit_batch_requests", self._batch_requests, "Requests per batch run."),
                                      ("bertkit_batch_tokens", self._batch_tokens, "Real tokens per batch run.")):
                lines += [f"# HELP {name} {what}", f"# TYPE {name} histogram"]
                for task, histogram in sorted(table.items()):
                    lines += histogram.lines(name, f'task="{_label(task)}"')
            lines += ["# HELP bertkit_inputs_truncated_total Inputs cut to the model's length limit.",
                      "# TYPE bertkit_inputs_truncated_total counter"]
            lines += [f'bertkit_inputs_truncated_total{{route="{_label(route)}"}} {count}'
                      for route, count in sorted(self._truncated.items())]
        lines += ["# HELP bertkit_queue_depth Requests waiting for the model.", "# TYPE bertkit_queue_depth gauge",
                  f"bertkit_queue_depth {self.queue_depth()}"]
        return "\n".join(lines) + "\n"


def _number(value: float) -> str:
    return repr(float(value)) if isinstance(value, float) else str(value)


def _label(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
