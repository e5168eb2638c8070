"""Dynamic batching: requests queue, and one worker thread runs them together.

Each request becomes a `Job` (its task — "embed", "predict", "fill-mask" — its inputs,
their real-token cost and its options). The worker thread owns the model: it takes the
oldest job, gathers the queued jobs of the same task behind it, in arrival order, while
their token sum stays within `max_batch_tokens` and their count within
`max_batch_requests`, waiting at most `max_wait_ms` from the oldest job's arrival for the
batch to fill (under load the wait has long passed: whatever queued meanwhile runs at
once, as text-embeddings-inference does), and runs them in one call of the task's runner
(bertkit.serving.models), which returns one result per job.

The loop (`work`) runs on a thread of its own (`start`) or on the caller's: `bertkit serve`
runs it on the main thread and the HTTP server beside it, because torch ran the same batch
2-4 ms slower on a second thread than on the main one here (docs/serving.md).

Generation (task "generate") is a running batch rather than one call: its runner (the
`stepper`, bertkit.serving.generation.DecodeLoop) starts the gathered requests, and
between batches the loop runs one decoding step of every running request while any
runs — so new requests, and other tasks' batches, join between steps (continuous
batching). Its budgets are what the running batch leaves (`stepper.room()`).

Admission: `submit` refuses a job when `max_queue` jobs wait (`QueueFull`, HTTP 429), so
the queue never grows without bound. Failures stay with their request: when a batch
fails on one request's bad input (a `BertkitError`), each of its jobs runs again alone and
only the bad one gets the error; anything else fails that batch's jobs and the worker
goes on. Results reach the waiting coroutine through its event loop, thread-safely.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from bertkit.errors import BertkitError


class QueueFull(Exception):
    """The queue holds max_queue jobs already."""


@dataclass
class Job:
    task: str
    items: list
    cost: int  # real tokens of the items
    options: dict[str, Any] = field(default_factory=dict)
    future: asyncio.Future | None = None
    arrived: float = field(default_factory=time.monotonic)


class Batcher:
    """runners: task name -> function(list of jobs) -> one result per job, run on the
    worker thread. on_batch(task, requests, tokens): called for each batch run (metrics)."""

    def __init__(self, runners: dict[str, Callable[[list[Job]], list[Any]]], max_batch_tokens: int,
                 max_batch_requests: int, max_wait_ms: float, max_queue: int,
                 on_batch: Callable[[str, int, int], None] | None = None, stepper: Any = None):
        self.runners = runners
        self.max_batch_tokens = max_batch_tokens
        self.max_batch_requests = max_batch_requests
        self.max_wait = max_wait_ms / 1000
        self.max_queue = max_queue
        self.on_batch = on_batch
        self.stepper = stepper  # generation's running batch: .active, .room(), .step(), .fail(exc)
        self._queue: deque[Job] = deque()
        self._changed = threading.Condition()
        self._stopped = False
        self._working = False
        self._thread: threading.Thread | None = None

    # ------------------------------------------------------------------ event loop side

    @property
    def depth(self) -> int:
        return len(self._queue)

    @property
    def alive(self) -> bool:
        """The loop is running (on whichever thread)."""
        return self._working

    def start(self) -> None:
        """Run the loop on a thread of its own (see `work` for the caller's thread)."""
        self._stopped = False
        self._working = True  # alive from now on, before the thread gets to run
        self._thread = threading.Thread(target=self.work, name="bertkit-serve-worker", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        with self._changed:
            self._stopped = True
            self._changed.notify_all()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=30)

    async def run(self, job: Job) -> Any:
        """Queue `job` and wait for its result (raises what its run raised; QueueFull at once)."""
        job.future = asyncio.get_running_loop().create_future()
        self.submit(job)
        return await job.future

    def submit(self, job: Job) -> None:
        if job.task not in self.runners:
            raise KeyError(job.task)
        with self._changed:
            if len(self._queue) >= self.max_queue:
                raise QueueFull(f"the queue holds {self.max_queue} requests (max_queue); retry later")
            self._queue.append(job)
            self._changed.notify_all()

    # ------------------------------------------------------------------ worker thread

    def work(self) -> None:
        """Run batches until `stop` (blocks the calling thread)."""
        self._working = True
        try:
            while True:
                batch = self._next_batch()
                if batch is None:
                    return
                if batch:
                    self._run(batch)
                if self._stepping:
                    try:
                        self.stepper.step()
                    except Exception as exc:  # noqa: BLE001 - a bug fails the running requests, never the worker
                        self.stepper.fail(exc)
        finally:
            self._working = False

    @property
    def _stepping(self) -> bool:
        return self.stepper is not None and self.stepper.active

    def _next_batch(self) -> list[Job] | None:
        """The next batch, taken off the queue (None: stopped; empty: none now, a generation step is due)."""
        with self._changed:
            while not self._queue:
                if self._stopped:
                    return None
                if self._stepping:
                    return []
                self._changed.wait()
            if self._stopped:
                return None
            first = self._queue[0]
            while True:
                batch, full = self._gather(first.task)
                remaining = first.arrived + self.max_wait - time.monotonic()
                if full or remaining <= 0 or self._stopped or self._stepping:
                    break
                self._changed.wait(remaining)
            for job in batch:
                self._queue.remove(job)
            return batch

    def _gather(self, task: str) -> tuple[list[Job], bool]:
        """Queued jobs of `task` in arrival order within the budgets; full: no more can join."""
        max_tokens, max_requests = self.max_batch_tokens, self.max_batch_requests
        joining = task == "generate" and self.stepper is not None
        if joining:  # what the running batch leaves; even the first request must fit
            max_tokens, max_requests = self.stepper.room()
            if max_requests <= 0:
                return [], True
        batch, tokens = [], 0
        for job in self._queue:
            if job.task != task:
                continue
            if (batch or joining) and tokens + job.cost > max_tokens:
                return batch, True
            batch.append(job)
            tokens += job.cost
            if len(batch) >= max_requests or tokens >= max_tokens:
                return batch, True
        return batch, False

    def _run(self, batch: list[Job]) -> None:
        runner = self.runners[batch[0].task]
        if self.on_batch is not None:
            self.on_batch(batch[0].task, len(batch), sum(job.cost for job in batch))
        try:
            results = runner(batch)
        except BertkitError as exc:
            if len(batch) == 1:
                return _finish(batch[0], error=exc)
            for job in batch:  # one request's bad input: only that request fails
                self._run([job])
            return
        except Exception as exc:  # noqa: BLE001 - a bug must fail the request, never the worker
            for job in batch:
                _finish(job, error=exc)
            return
        for job, result in zip(batch, results, strict=True):
            _finish(job, result=result)


def _finish(job: Job, result: Any = None, error: BaseException | None = None) -> None:
    future = job.future
    if future is None:
        return

    def settle():
        if future.done():  # the client went away
            return
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(result)

    try:
        future.get_loop().call_soon_threadsafe(settle)
    except RuntimeError:  # the event loop has closed (shutdown)
        pass
