"""Issue 42's journeys on decoders and encoder-decoders: every command of the README's and
docs/commands.md's journeys, and every route a served checkpoint's /info lists (with the real
huggingface_hub and openai clients), on the checkpoints experiments/decoder_journeys.sh builds.
Prints one line per step: ok / TRIP with the first line of what went wrong. What to read the
lines against is experiments/results/journeys_decoders.md.

Run: python experiments/decoder_journeys.py W [--only gpt,bart] [--no-serve] [--no-cli]
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

TEXTS = ["It is a truth universally acknowledged.", "She walked to the village."]
PAIR = ["A man is playing.", "Someone plays music."]
CHECKPOINTS = {  # name -> (run folder's model, what it is)
    "gpt": "runs/gpt/final", "bart": "runs/bart/final", "t5": "runs/t5/final", "elmo": "runs/elmo/final",
    "gpt-sst2": "runs/gpt-sst2/best", "bart-sst2": "runs/bart-sst2/best", "t5-sst2": "runs/t5-sst2/best",
    "t5-t2t": "runs/t5-t2t/best", "elmo-sst2": "runs/elmo-sst2/best",
}
RUNS = {"gpt": "runs/gpt", "bart": "runs/bart", "t5": "runs/t5", "elmo": "runs/elmo", "gpt-sst2": "runs/gpt-sst2",
        "bart-sst2": "runs/bart-sst2", "t5-sst2": "runs/t5-sst2", "t5-t2t": "runs/t5-t2t", "elmo-sst2": "runs/elmo-sst2"}


def say(name: str, step: str, ok: bool, detail: str = "") -> None:
    line = " ".join(detail.split())[:400]
    print(f"{'ok  ' if ok else 'TRIP'} {name:10s} {step:40s} {line}", flush=True)


def cli(work: Path, name: str, step: str, args: list[str], expect_ok: bool = True) -> str:
    proc = subprocess.run([sys.executable, "-m", "bertkit", *args], cwd=work, capture_output=True, text=True,
                          timeout=600)
    out = (proc.stdout + proc.stderr).strip()
    error = proc.returncode != 0
    traceback = "Traceback" in out
    ok = (not error if expect_ok else (error and not traceback)) and not traceback
    tail = out.splitlines()[-1] if out else ""
    say(name, step, ok, f"rc={proc.returncode} {tail if (error or traceback) else out[:200]}")
    return out


def cli_journeys(work: Path, name: str, model: str) -> None:
    config = work / model / "config.json"  # a classifier on frozen features holds feature_tagger.json instead
    model_type = json.loads(config.read_text())["model_type"] if config.exists() else "features"
    task = (work / model / "bertkit_task.json").exists()
    cli(work, name, "embed", ["embed", "--model", model, *TEXTS])
    cli(work, name, "embed -o npy", ["embed", "--model", model, *TEXTS, "-o", f"out/{name}.npy"])
    cli(work, name, "export onnx", ["export", "onnx", "--model", model, "--output", f"onnx/{name}/model.onnx"])
    cli(work, name, "predict", ["predict", "--model", model, *TEXTS])
    cli(work, name, "predict pair", ["predict", "--model", model, *PAIR])
    if model_type in ("gpt2", "openai-gpt", "bart", "t5"):
        cli(work, name, "generate", ["generate", "--model", model, TEXTS[0], "--max-new-tokens", "8"])
        cli(work, name, "generate sample", ["generate", "--model", model, TEXTS[0], "--max-new-tokens", "8",
                                            "--do-sample", "--top-p", "0.9", "--repetition-penalty", "1.2", "--seed", "1"])
        cli(work, name, "generate beams", ["generate", "--model", model, TEXTS[0], "--max-new-tokens", "8",
                                           "--num-beams", "4"])
    else:
        cli(work, name, "generate (refused)", ["generate", "--model", model, TEXTS[0]], expect_ok=False)
    mask = {"bart": "<mask>"}.get(model_type, "[MASK]")
    cli(work, name, "fill-mask", ["fill-mask", "--model", model, f"It is a {mask} acknowledged."],
        expect_ok=model_type == "bart" and not task)
    cli(work, name, "inspect -o", ["inspect", "--model", model, "--output", f"out/{name}.html", *PAIR])
    cli(work, name, "report", ["report", RUNS[name]])
    if task:
        glue = "out/dev.tsv"  # the first 40 lines of SST-2's dev file
        if name.startswith("t5-t2t"):
            cli(work, name, "evaluate text2text", ["evaluate", "text2text", "--model", model, "--task", "glue",
                                                   "--glue-task", "sst2", "--data", glue])
        elif name.startswith("elmo"):
            cli(work, name, "evaluate classify", ["evaluate", "classify", "--model", model, "--data", glue,
                                                  "--text-column", "sentence"])
        else:
            cli(work, name, "evaluate glue", ["evaluate", "glue", "--model", model, "--task", "sst2", "--data", glue])


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def serve_journeys(work: Path, name: str, model: str) -> None:
    import httpx

    port = free_port()
    base = f"http://127.0.0.1:{port}"
    log = open(work / f"out/serve-{name}.log", "w")
    server = subprocess.Popen([sys.executable, "-m", "bertkit", "serve", "--model", model, "--port", str(port),
                               "--threads", "1"], cwd=work, stdout=log, stderr=subprocess.STDOUT)
    try:
        for _ in range(120):
            try:
                if httpx.get(base + "/health", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if server.poll() is not None:
                break
            time.sleep(0.5)
        else:
            say(name, "serve start", False, "no /health in 60 s")
            return
        if server.poll() is not None:
            say(name, "serve start", False, (work / f"out/serve-{name}.log").read_text()[-300:])
            return
        start = (work / f"out/serve-{name}.log").read_text().strip().splitlines()
        say(name, "serve start line", True, start[-1] if start else "")
        info = httpx.get(base + "/info").json()
        routes = info.get("routes", [])
        say(name, "GET /info", True, f"task={info.get('task')} serves={info.get('serves')} routes={routes}")
        for route in routes:
            try:
                ok, detail = exercise(base, route, info)
            except Exception as exc:  # a client's exception is a trip
                ok, detail = False, f"{type(exc).__name__}: {exc}"
            say(name, route, ok, detail)
    finally:
        server.terminate()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            say(name, "serve stop", False, "still running 30 s after SIGTERM; killed")
            server.kill()
            server.wait()


def exercise(base: str, route: str, info: dict) -> tuple[bool, str]:
    import httpx
    import huggingface_hub
    import openai

    method, path = route.split(" ", 1)
    # huggingface_hub posts to the URL it is given: the root, or the route itself (TEI's and TGI's paths)
    hf = huggingface_hub.InferenceClient(model=base if path == "/" else base + path)
    oa = openai.OpenAI(base_url=base + "/v1", api_key="none")
    model_id = info.get("model_id") or "model"

    def post(body):
        response = httpx.post(base + path, json=body, timeout=120)
        return response.status_code == 200, f"{response.status_code} {response.text[:200]}"

    if method == "GET" and path in ("/health", "/info", "/metrics"):
        response = httpx.get(base + path)
        return response.status_code == 200, f"{response.status_code} {response.text[:80]}"
    if path == "/v1/models":
        models = oa.models.list()
        return bool(models.data), f"{[m.id for m in models.data]}"
    if path == "/v1/models/{model}":
        models = oa.models.list()
        one = oa.models.retrieve(models.data[0].id)
        return one.id == models.data[0].id, one.id
    if path == "/":
        if info.get("serves") == "generate":
            text = hf.text_generation(TEXTS[0], max_new_tokens=5)
            return isinstance(text, str), f"text_generation -> {text!r}"
        if info.get("serves") == "predict":
            top = hf.text_classification(TEXTS[0])
            return bool(top), f"text_classification -> {top}"
        vectors = hf.feature_extraction(TEXTS)
        return len(vectors) == 2, f"feature_extraction -> shape {getattr(vectors, 'shape', None)}"
    if path == "/embed":
        vectors = hf.feature_extraction(TEXTS)
        ok, detail = post({"inputs": TEXTS[0]})
        return ok and len(vectors) == 2, f"feature_extraction shape {vectors.shape}; one text: {detail[:80]}"
    if path == "/embed_all":
        return post({"inputs": TEXTS})
    if path == "/similarity":
        scores = hf.sentence_similarity(TEXTS[0], other_sentences=[TEXTS[1], TEXTS[0]])
        return len(scores) == 2 and abs(scores[1] - 1) < 1e-4, f"sentence_similarity -> {scores}"
    if path == "/predict":
        ok1, d1 = post({"inputs": TEXTS[0]})
        ok2, d2 = post({"inputs": PAIR})
        ok3, d3 = post({"inputs": [TEXTS[0], TEXTS[1]]})
        return ok1 and ok3, f"one: {d1[:100]} | pair: {d2[:100]} | batch: {d3[:60]}"
    if path == "/rerank":
        return post({"query": PAIR[0], "texts": [PAIR[1], TEXTS[0]]})
    if path == "/tokenize":
        ok, detail = post({"inputs": TEXTS[0]})
        return ok, detail
    if path == "/decode":
        tokens = httpx.post(base + "/tokenize", json={"inputs": TEXTS[0], "add_special_tokens": False}).json()
        ids = [t["id"] for t in tokens[0]]
        response = httpx.post(base + "/decode", json={"ids": ids})
        text = response.json()
        return response.status_code == 200 and text[0].strip() == TEXTS[0], f"{response.status_code} {text}"
    if path == "/fill-mask":
        return post({"inputs": ["It is a <mask> acknowledged."]})
    if path == "/generate":
        answer = hf.text_generation(TEXTS[0], max_new_tokens=5, details=True)
        return True, f"text_generation(details) -> {answer.generated_text!r} {answer.details.finish_reason} " \
                     f"{answer.details.generated_tokens} tokens"
    if path == "/generate_stream":
        events = list(hf.text_generation(TEXTS[0], max_new_tokens=5, stream=True, details=True))
        first = events[0].token if events else None
        return bool(events), f"{len(events)} events; first token {first}; last {events[-1].details if events else None}"
    if path == "/v1/embeddings":
        answer = oa.embeddings.create(input=TEXTS, model=model_id)
        return len(answer.data) == 2, f"{len(answer.data)} vectors of {len(answer.data[0].embedding)}"
    if path == "/v1/completions":
        answer = oa.completions.create(model=model_id, prompt=TEXTS[0], max_tokens=5)
        stream = list(oa.completions.create(model=model_id, prompt=TEXTS[0], max_tokens=5, stream=True))
        try:
            oa.completions.create(model=model_id, prompt="", max_tokens=5)
            empty = "accepted"
        except openai.APIStatusError as exc:
            empty = f"{exc.status_code} {exc.message[:120]}"
        return True, f"{answer.choices[0].text!r} usage={answer.usage}; stream {len(stream)} chunks; empty -> {empty}"
    if path == "/v1/chat/completions":
        try:
            answer = oa.chat.completions.create(model=model_id, messages=[{"role": "user", "content": TEXTS[0]}],
                                                max_tokens=5)
            return True, f"{answer.choices[0].message.content!r}"
        except openai.APIStatusError as exc:  # a base model without a chat template: refused in one line
            return exc.status_code in (400, 422) and "template" in exc.message, f"{exc.status_code} {exc.message[:200]}"
    if path == "/inspect":
        response = httpx.get(base + "/inspect", params={"text": PAIR[0], "pair": PAIR[1]})
        return response.status_code == 200 and "<html" in response.text.lower(), f"{response.status_code}"
    return False, "not exercised by this script"


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("work", type=Path)
    parser.add_argument("--only")
    parser.add_argument("--no-serve", action="store_true")
    parser.add_argument("--no-cli", action="store_true")
    args = parser.parse_args()
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    (args.work / "out").mkdir(exist_ok=True)
    dev = (args.work / "glue/SST-2/dev.tsv").read_text(encoding="utf-8").splitlines(keepends=True)
    (args.work / "out/dev.tsv").write_text("".join(dev[:41]), encoding="utf-8")
    names = args.only.split(",") if args.only else list(CHECKPOINTS)
    for name in names:
        model = CHECKPOINTS[name]
        if not (args.work / model).is_dir():
            say(name, "checkpoint", False, f"{model}: not built")
            continue
        if not args.no_cli:
            cli_journeys(args.work, name, model)
        if not args.no_serve:
            serve_journeys(args.work, name, model)
    return 0


if __name__ == "__main__":
    sys.exit(main())
