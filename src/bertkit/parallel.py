"""`parallel_map`: an ordered, bounded-memory `map` over worker processes.

Shared by the corpus passes that split their input into independent chunks (tokenizer
training counts words, the pre-training data build turns slices into shards).
"""

from __future__ import annotations

import itertools
import multiprocessing
import os
import sys
from typing import Callable, Iterable, Iterator, TypeVar

T = TypeVar("T")
R = TypeVar("R")


def parallel_map(func: Callable[[T], R], items: Iterable[T], *, workers: int | None = None) -> Iterator[R]:
    """`map(func, items)` on `workers` processes (None: `default_threads()`), results in input order.

    At most two items per worker are in flight, so a long input is never read ahead into
    memory. One worker, or a single item, runs in this process.
    """
    workers = workers or default_threads()
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


# --- CPU threads: one policy for every long-running command (`--threads`) ---------------

def available_cores() -> int:
    """The cores this process may run on (its CPU affinity, e.g. a container's or taskset's
    share), not the machine's count."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except AttributeError:  # platforms without sched_getaffinity (macOS)
        return os.cpu_count() or 1


def default_threads() -> int:
    """`--threads`' default: OMP_NUM_THREADS when the user set it to a positive whole
    number, else the cores this process may use."""
    value = os.environ.get("OMP_NUM_THREADS", "").strip()
    return int(value) if value.isdigit() and int(value) > 0 else available_cores()


# Commands whose OpenMP threads keep OpenMP's own policy (spin a little, then sleep): a
# server answering one small request at a time, where a passive wait (a futex wake-up for
# every parallel region) made a one-request MiniLM /embed ~5 ms slower (~19 ms, not ~14).
# A server of a generator waits passively all the same: its decoding loop and its HTTP thread
# take turns at every token, and spinning threads kept the HTTP thread off the cores (one
# streaming client on a busy 2-core machine: 15.8 tokens/s spinning, 62.5 passive).
LATENCY_BOUND_COMMANDS = frozenset({"serve"})
GENERATOR_ARCHITECTURES = ("LMHeadModel", "ForConditionalGeneration", "ForCausalLM", "DoubleHeadsModel")


def prefer_passive_waiting(command: str | None = None, model_dir: str | None = None) -> None:
    """OpenMP threads that wait passively (OMP_WAIT_POLICY=PASSIVE, unless the user set a
    policy or `command` is latency-bound and does not serve a generator from `model_dir`): a
    waiting thread that spins takes a core from the other jobs of a busy machine and from this
    run's own threads (docs/benchmarks.md, "busy machine"). OpenMP reads the variable when
    torch loads, so this runs in `bertkit` (cli.main) before anything loads torch."""
    if command not in LATENCY_BOUND_COMMANDS or model_generates_text(model_dir):
        os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")


def model_generates_text(model_dir: str | None) -> bool:
    """Whether the checkpoint folder's config.json names a text generator (an encoder-decoder,
    or a class with a language-model head), read without torch; False where it cannot tell."""
    import json
    from pathlib import Path

    try:
        config = json.loads((Path(model_dir) / "config.json").read_text(encoding="utf-8"))
    except (TypeError, OSError, ValueError):
        return False
    if not isinstance(config, dict):
        return False
    architectures = config.get("architectures") or []
    return bool(config.get("is_encoder_decoder")) or any(
        isinstance(name, str) and name.endswith(GENERATOR_ARCHITECTURES) for name in architectures)


def apply_thread_policy(threads: int | None) -> int:
    """Give torch's intra-op pool, the tokenizers library's Rust pool (rayon) and OpenMP
    `threads` threads (None: `default_threads()`); returns the count.

    Called once, before a command runs: rayon and OpenMP read their environment when their
    pool starts (the first parallel call, or loading torch), so the variables are set first;
    torch, if a parser already loaded it, is sized directly.
    """
    from bertkit.errors import BertkitError

    if threads is not None and threads < 1:
        raise BertkitError(f"--threads must be a positive whole number, got {threads}")
    threads = threads or default_threads()
    for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "RAYON_NUM_THREADS"):
        os.environ[name] = str(threads)
    if "torch" in sys.modules:  # already loaded (a library caller, a test): its pool is sized directly
        sys.modules["torch"].set_num_threads(threads)
    return threads
