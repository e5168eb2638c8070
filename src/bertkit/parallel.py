"""`parallel_map`: an ordered, bounded-memory `map` over worker processes.

Shared by the corpus passes that split their input into independent chunks (tokenizer
training counts words, the pre-training data build turns slices into shards).
"""

from __future__ import annotations

import itertools
import multiprocessing
import os
from typing import Callable, Iterable, Iterator, TypeVar

T = TypeVar("T")
R = TypeVar("R")


def parallel_map(func: Callable[[T], R], items: Iterable[T], *, workers: int | None = None) -> Iterator[R]:
    """`map(func, items)` on `workers` processes (None: all cores), results in input order.

    At most two items per worker are in flight, so a long input is never read ahead into
    memory. One worker, or a single item, runs in this process.
    """
    workers = workers or os.cpu_count() or 1
    iterator = iter(items)
    head = list(itertools.islice(iterator, 2))
    items = itertools.chain(head, iterator)
    if workers == 1 or len(head) < 2:
        yield from map(func, items)
        return
    context = multiprocessing.get_context("fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn")
    with context.Pool(workers, initializer=_worker_init, initargs=(func,)) as pool:
        pending = []
        for item in items:
            pending.append(pool.apply_async(_worker_call, (item,)))
            if len(pending) >= 2 * workers:
                yield pending.pop(0).get()
        for result in pending:
            yield result.get()


_worker_func: Callable | None = None  # the function each pool process applies (set once per process)


def _worker_init(func: Callable) -> None:
    global _worker_func
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    _worker_func = func


def _worker_call(item):
    return _worker_func(item)
