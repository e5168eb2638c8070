"""Dynamic batching: budgets and waiting (the Batcher alone, with recording runners), many
concurrent clients each getting its own answer from a real server, a full queue answering
429, one request's bad input failing only that request, and /metrics in Prometheus text."""

from __future__ import annotations

import asyncio
import re
import threading
import time

import httpx
import numpy as np
import pytest
from _serving import running_server

import bertkit
from bertkit.errors import BertkitError
from bertkit.inference.loading import load_encoder
from bertkit.serving.batching import Batcher, Job, QueueFull


def recording_batcher(**limits):
    batches = []

    def run(jobs):
        batches.append([(job.task, job.items[0]) for job in jobs])
        return [job.items[0] for job in jobs]

    settings = {"max_batch_tokens": 100, "max_batch_requests": 8, "max_wait_ms": 0, "max_queue": 100, **limits}
    return Batcher({"embed": run, "predict": run}, **settings), batches


def drain(batcher, jobs):
    """Queue `jobs` before the worker starts, run them all, stop."""
    for job in jobs:
        batcher.submit(job)
    batcher.start()
    deadline = time.monotonic() + 10
    while batcher.depth and time.monotonic() < deadline:
        time.sleep(0.01)
    batcher.stop()


def test_batches_keep_the_token_budget_the_request_cap_and_one_task():
    batcher, batches = recording_batcher(max_batch_tokens=25, max_batch_requests=8)
    drain(batcher, [Job("embed", [i], cost=10) for i in range(5)])
    assert batches == [[("embed", 0), ("embed", 1)], [("embed", 2), ("embed", 3)], [("embed", 4)]]

    batcher, batches = recording_batcher(max_batch_requests=3)
    drain(batcher, [Job("embed" if i % 2 == 0 else "predict", [i], cost=1) for i in range(8)])
    assert batches == [[("embed", 0), ("embed", 2), ("embed", 4)], [("predict", 1), ("predict", 3), ("predict", 5)],
                       [("embed", 6)], [("predict", 7)]]


def test_the_first_request_waits_at_most_max_wait_ms_for_company():
    batcher, batches = recording_batcher(max_wait_ms=300)
    batcher.start()
    try:
        start = time.monotonic()
        batcher.submit(Job("embed", [0], cost=1))
        time.sleep(0.05)
        batcher.submit(Job("embed", [1], cost=1))  # joins the waiting batch
        while not batches:
            time.sleep(0.005)
        waited = time.monotonic() - start
    finally:
        batcher.stop()
    assert batches == [[("embed", 0), ("embed", 1)]]
    assert 0.25 <= waited < 2.0


def test_a_bad_input_fails_only_its_own_request():
    def run(jobs):
        if any(job.items == ["bad"] for job in jobs):
            raise BertkitError("<input>:1: bad input")
        return [job.items[0].upper() for job in jobs]

    batcher = Batcher({"embed": run}, max_batch_tokens=100, max_batch_requests=8, max_wait_ms=50, max_queue=10)

    async def main():
        batcher.start()
        try:
            return await asyncio.gather(*(batcher.run(Job("embed", [text], cost=1)) for text in ["a", "bad", "c"]),
                                        return_exceptions=True)
        finally:
            batcher.stop()

    good_a, bad, good_c = asyncio.run(main())
    assert (good_a, good_c) == ("A", "C")
    assert isinstance(bad, BertkitError) and "bad input" in str(bad)


def test_the_queue_is_bounded():
    batcher, _ = recording_batcher(max_queue=2)
    batcher.submit(Job("embed", [0], cost=1))
    batcher.submit(Job("embed", [1], cost=1))
    with pytest.raises(QueueFull, match="max_queue"):
        batcher.submit(Job("embed", [2], cost=1))


# ---------------------------------------------------------------------------- a real server


def test_many_concurrent_clients_each_get_their_own_answer(model_dirs):
    texts = [f"client {i} says {' '.join(['hello'] * (i % 7))} number {i}." for i in range(48)]
    pairs = [(f"Sentence {i}.", f"Another {'long ' * (i % 5)}sentence {i}.") for i in range(16)]
    direct_vectors = bertkit.embed(texts, model=load_encoder(model_dirs["mlm"]), batch_size=1)  # unbatched
    direct_labels = bertkit.predict(model_dirs["pair"], pairs, device="cpu", batch_size=1)

    async def clients(base, path, bodies):
        async with httpx.AsyncClient(base_url=base, timeout=120) as client:
            return await asyncio.gather(*(client.post(path, json=body) for body in bodies))

    with running_server(model_dirs["mlm"], max_wait_ms=20) as (base, state):
        bodies = [{"inputs": [text], "normalize": False} if i % 3
                  else {"inputs": [text, texts[(i + 1) % len(texts)]], "normalize": False}
                  for i, text in enumerate(texts)]
        answers = asyncio.run(clients(base, "/embed", bodies))
        batch_sizes = state.metrics.render()
    for i, answer in enumerate(answers):
        assert answer.status_code == 200
        expected = direct_vectors[[i]] if i % 3 else direct_vectors[[i, (i + 1) % len(texts)]]
        np.testing.assert_allclose(np.array(answer.json()), expected, atol=1e-5)
    histogram = {int(le): int(count) for le, count in re.findall(
        r'bertkit_batch_requests_bucket\{task="embed",le="(\d+)"\} (\d+)', batch_sizes)}
    assert histogram[1] < 48  # some batches held several requests

    with running_server(model_dirs["pair"], max_wait_ms=20) as (base, _):
        answers = asyncio.run(clients(base, "/predict", [{"inputs": [list(pair)]} for pair in pairs]))
    for answer, expected in zip(answers, direct_labels):
        served = answer.json()[0][0]  # TEI: per input, every label best first
        assert served["label"] == expected["label"] and served["score"] == pytest.approx(expected["score"], abs=1e-5)


def test_a_full_queue_answers_429_and_the_server_recovers(model_dirs):
    with running_server(model_dirs["mlm"], max_queue=2, max_batch_requests=1) as (base, state):
        release, running = threading.Event(), threading.Event()
        embed = state.batcher.runners["embed"]

        def held(jobs):  # the worker holds its first batch until released
            running.set()
            release.wait(30)
            return embed(jobs)

        state.batcher.runners["embed"] = held

        async def flood():
            async with httpx.AsyncClient(base_url=base, timeout=60) as client:
                first = asyncio.ensure_future(client.post("/embed", json={"inputs": ["first"]}))
                while not running.is_set():
                    await asyncio.sleep(0.01)
                queued = [asyncio.ensure_future(client.post("/embed", json={"inputs": [f"q{i}"]})) for i in range(2)]
                while state.batcher.depth < 2:
                    await asyncio.sleep(0.01)
                refused = await client.post("/embed", json={"inputs": ["one too many"]})
                release.set()
                return refused, await first, await asyncio.gather(*queued)

        refused, first, queued = asyncio.run(flood())
        assert refused.status_code == 429 and refused.json() == {
            "error": "the queue holds 2 requests (max_queue); retry later", "error_type": "overloaded"}
        assert first.status_code == 200 and all(r.status_code == 200 for r in queued)
        assert httpx.post(base + "/embed", json={"inputs": ["after"]}).status_code == 200
        assert 'bertkit_requests_total{route="/embed",status="429"} 1' in httpx.get(base + "/metrics").text


def test_metrics_are_prometheus_text(mlm_server):
    base, _ = mlm_server
    httpx.post(base + "/embed", json={"inputs": ["metrics please"]})
    httpx.post(base + "/embed", json={"inputs": []})
    response = httpx.get(base + "/metrics")
    assert response.headers["content-type"].startswith("text/plain; version=0.0.4")
    samples, types = parse_exposition(response.text)
    assert types == {"bertkit_requests_total": "counter", "bertkit_request_duration_seconds": "histogram",
                     "bertkit_batch_requests": "histogram", "bertkit_batch_tokens": "histogram",
                     "bertkit_inputs_truncated_total": "counter", "bertkit_queue_depth": "gauge"}
    assert samples[("bertkit_requests_total", (("route", "/embed"), ("status", "200")))] >= 1
    assert samples[("bertkit_requests_total", (("route", "/embed"), ("status", "400")))] >= 1
    assert samples[("bertkit_queue_depth", ())] == 0
    for name in ("bertkit_request_duration_seconds", "bertkit_batch_requests", "bertkit_batch_tokens"):
        series = {}
        for (sample, labels), value in samples.items():
            if sample == f"{name}_bucket":
                rest = tuple(kv for kv in labels if kv[0] != "le")
                series.setdefault(rest, []).append((float(dict(labels)["le"]), value))
        assert series, name
        for rest, buckets in series.items():
            counts = [count for _, count in sorted(buckets)]
            assert counts == sorted(counts)  # cumulative
            assert counts[-1] == samples[(f"{name}_count", rest)]


def parse_exposition(text: str):
    """(sample name, sorted labels) -> value, and metric name -> type; fails on any line that
    is not a comment, a TYPE/HELP line or a sample in the text format."""
    sample = re.compile(r'([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{((?:[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\]|\\.)*",?)*)\})? '
                        r'([-+0-9.eE]+|\+Inf|NaN)$')
    samples, types = {}, {}
    for line in text.strip().splitlines():
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split(" ", 3)
            types[name] = kind
            continue
        if line.startswith("# HELP "):
            continue
        match = sample.match(line)
        assert match, f"not a sample line: {line!r}"
        labels = tuple(sorted(re.findall(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"', match.group(2) or "")))
        samples[(match.group(1), labels)] = float(match.group(3))
    return samples, types
