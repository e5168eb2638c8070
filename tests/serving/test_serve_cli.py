"""`bertkit serve` as a user runs it: a subprocess on a free loopback port answering until
stopped; bad flags and a bad model directory are one line and exit 1."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time

import httpx
import pytest

from bertkit.cli import main
from bertkit.serving import ServeConfig


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_serve_command_answers_until_stopped(model_dirs):
    port = free_port()
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "bertkit", "serve", "--model", str(model_dirs["pair"]),
                             "--host", "127.0.0.1", "--port", str(port), "--max-wait-ms", "1", "--log-level", "warning"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        deadline = time.monotonic() + 120
        while True:
            assert proc.poll() is None, proc.stderr.read()
            try:
                if httpx.get(f"http://127.0.0.1:{port}/health", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, "bertkit serve did not come up"
            time.sleep(0.2)
        answer = httpx.post(f"http://127.0.0.1:{port}/predict", json={"inputs": [["The cat sat.", "A cat sat."]]})
        assert answer.status_code == 200 and answer.json()[0][0]["label"] in ("equivalent", "not_equivalent")
        assert httpx.get(f"http://127.0.0.1:{port}/info").json()["limits"]["max_wait_ms"] == 1
    finally:
        proc.terminate()
        _, stderr = proc.communicate(timeout=60)
    assert f"serving {model_dirs['pair']} (encoder, classification, fp32) at http://127.0.0.1:{port}" in stderr
    assert proc.returncode == 0, stderr  # SIGTERM stops the model loop (main thread) and the HTTP thread


def test_a_port_in_use_is_one_line_before_the_model_loads(model_dirs, capsys):
    """The port is bound before the model loads: one line, exit 1, no traceback (a bad model
    directory behind it is not even read)."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert main(["serve", "--model", "/nonexistent/model", "--port", str(port)]) == 1
        err = capsys.readouterr().err
        assert err == f"bertkit: error: port {port} is in use; pick another with --port\n"
        proc = subprocess.run([sys.executable, "-m", "bertkit", "serve", "--model", str(model_dirs["pair"]),
                               "--port", str(port), "--log-level", "warning"],
                              capture_output=True, text=True, timeout=120, env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert proc.returncode == 1
    assert proc.stderr.strip() == f"bertkit: error: port {port} is in use; pick another with --port"


def test_the_start_up_line_names_a_decoder_and_an_encoder_decoder(tmp_path, monkeypatch, capsys):
    """A pre-trained GPT is a decoder, BART an encoder-decoder (the line used to say `encoder`)."""
    from _bart_checkpoint import build_bart_checkpoint
    from _gpt_checkpoint import build_gpt_checkpoint

    import bertkit.serving.server as server

    monkeypatch.setattr(server, "_run_http", lambda server, batcher, sock: batcher.stop())  # no HTTP: return at once
    server.serve(build_gpt_checkpoint(tmp_path / "gpt"), ServeConfig(port=0))
    assert "(decoder, fp32)" in capsys.readouterr().err
    server.serve(build_bart_checkpoint(tmp_path / "bart"), ServeConfig(port=0))
    assert "(encoder-decoder, text2text, fp32)" in capsys.readouterr().err


@pytest.mark.parametrize("argv, message", [
    (["--model", "/nonexistent/model"], "--model /nonexistent/model: no config.json"),
    (["--max-batch-tokens", "0"], "max_batch_tokens: must be >= 1, got 0"),
    (["--max-wait-ms", "-1"], "max_wait_ms: must be >= 0"),
])
def test_bad_flags_are_one_line(model_dirs, capsys, argv, message):
    argv = ["serve", *(["--model", str(model_dirs["mlm"])] if "--model" not in argv else []), *argv]
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert err.startswith("bertkit: error: ") and message in err and len(err.strip().splitlines()) == 1
