"""`bertkit inspect` without a browser: the page's data per model kind (fill-mask with an
MLM head, a prediction with a task head, notes otherwise), that the file is self-contained
(no network reference), GET /inspect on the server and its errors, the command serving
its URL, and one-line errors on bad input."""

from __future__ import annotations

import base64
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import httpx
import numpy as np
import pytest

from bertkit.cli import main
from bertkit.inference import attention_map, load_encoder
from bertkit.serving.models import ServedModel
from bertkit.serving.inspect import inspect_data

SERVING = Path(__file__).resolve().parents[1] / "serving"


def page_data(page: str) -> dict:
    start = page.index('id="inspect-data">') + len('id="inspect-data">')
    return json.loads(page[start : page.index("</script>", start)])


def test_mlm_model_page_has_candidates_per_position(mlm_dir):
    data = inspect_data(ServedModel.load(mlm_dir), "the cat sat.", "a cat was sitting.", top_k=3)
    assert data["tokens"] == ["[CLS]", "the", "cat", "sat", ".", "[SEP]", "a", "cat", "was", "sitting", ".", "[SEP]"]
    assert data["token_type_ids"] == [0] * 6 + [1] * 6
    assert (data["layers"], data["heads"]) == (2, 2)
    assert [c is None for c in data["fill_mask"]] == [t in ("[CLS]", "[SEP]") for t in data["tokens"]]
    assert all(len(c) == 3 for c in data["fill_mask"] if c is not None)
    assert data["prediction"] is None and "not a fine-tuned model" in data["prediction_note"]
    # the page's bytes are the weights to 1/255
    weights = np.frombuffer(base64.b64decode(data["attention"]), np.uint8).reshape(2, 2, 12, 12) / 255
    exact = attention_map("the cat sat.", load_encoder(mlm_dir), pair="a cat was sitting.").attentions
    np.testing.assert_allclose(weights, exact, atol=0.5 / 255 + 1e-6)


def test_classifier_page_has_its_prediction(classifier_dir):
    data = inspect_data(ServedModel.load(classifier_dir), "the cat sat.", "a cat was sitting.")
    assert data["prediction"]["label"] in ("different", "same")
    assert set(data["prediction"]["scores"]) == {"different", "same"}
    assert data["fill_mask"] is None and "no MLM head" in data["fill_mask_note"]


def test_written_page_is_self_contained(classifier_dir, tmp_path, capsys):
    out = tmp_path / "attention.html"
    assert main(["inspect", "--model", str(classifier_dir), "--output", str(out), "the cat sat."]) == 0
    assert capsys.readouterr().out.strip() == str(out)
    page = out.read_text(encoding="utf-8")
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", page), "a network reference"
    assert "<script src" not in page and 'rel="stylesheet"' not in page
    assert "function drawHeadView" in page and "#headview" in page  # the packaged JS and CSS, inlined
    data = page_data(page)
    assert data["text"] == "the cat sat." and data["pair"] is None and not data["live"]


def test_long_input_is_capped_with_a_note(mlm_dir, tmp_path):
    out = tmp_path / "long.html"
    assert main(["inspect", "--model", str(mlm_dir), "-o", str(out), "--max-tokens", "10", " ".join(["word"] * 30)]) == 0
    page = out.read_text(encoding="utf-8")
    assert len(page_data(page)["tokens"]) == 10
    assert 'id="truncated"' in page and "first 10 of 32 tokens" in page


def test_inspect_route_serves_the_page(mlm_dir):
    sys.path.insert(0, str(SERVING))
    from _serving import running_server

    with running_server(mlm_dir) as (base, _):
        response = httpx.get(f"{base}/inspect", params={"text": "the cat sat.", "pair": "a cat was sitting.",
                                                       "max_tokens": 8, "top_k": 2}, timeout=60)
        assert response.status_code == 200 and response.headers["content-type"].startswith("text/html")
        data = page_data(response.text)
        assert data["live"] and len(data["tokens"]) == 8 and data["total_tokens"] == 12
        assert all(len(c) == 2 for c in data["fill_mask"] if c)
        assert '<form class="again"' in response.text
        for params, message in [({}, "text: required"), ({"text": "a", "colour": "red"}, "colour: unknown query"),
                                ({"text": "a", "max_tokens": "many"}, "max_tokens: expected an integer"),
                                ({"text": "a", "max_tokens": 1}, "max_tokens: must be in 2..64"),
                                ({"text": "a", "top_k": 0}, "top_k: must be in 1..100")]:
            bad = httpx.get(f"{base}/inspect", params=params, timeout=30)
            assert bad.status_code == 422 and bad.json()["error"].startswith(message), (params, bad.text)
        default = page_data(httpx.get(f"{base}/inspect", params={"text": " ".join(["word"] * 80)}, timeout=60).text)
        assert len(default["tokens"]) == default["max_tokens"] == 64  # the model's 64 positions, not 128
        assert "GET /inspect" in httpx.get(f"{base}/info", timeout=30).json()["routes"]


def test_inspect_command_prints_a_url_and_serves_it(mlm_dir):
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "bertkit", "inspect", "--model", str(mlm_dir), "the cat sat."],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        url = proc.stdout.readline().strip()
        assert re.fullmatch(r"http://127\.0\.0\.1:\d+/inspect\?text=the\+cat\+sat\.&top_k=5", url), url
        deadline = time.monotonic() + 120
        while True:
            assert proc.poll() is None, proc.stderr.read()
            try:
                response = httpx.get(url, timeout=30)
                break
            except httpx.TransportError:
                assert time.monotonic() < deadline, "bertkit inspect did not come up"
                time.sleep(0.2)
        assert response.status_code == 200 and page_data(response.text)["tokens"][1:4] == ["the", "cat", "sat"]
    finally:
        proc.terminate()
        proc.wait(timeout=30)


@pytest.mark.parametrize("args, message", [
    (["--model", "{missing}", "a"], "no config.json"),
    (["--model", "{mlm}", "  "], "text: must be a non-empty string"),
    (["--model", "{mlm}", "--max-tokens", "1", "a"], "--max-tokens: must be >= 2"),
    (["--model", "{mlm}", "--output", "{missing}/x.html", "a"], "does not exist"),
])
def test_bad_input_is_one_line(mlm_dir, tmp_path, capsys, args, message):
    args = [a.format(missing=tmp_path / "nope", mlm=mlm_dir) for a in args]
    if "--output" not in args:
        args = ["--output", str(tmp_path / "page.html"), *args]
    assert main(["inspect", *args]) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith("bertkit: error:") and message in err and "\n" not in err
