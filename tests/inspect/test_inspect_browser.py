"""The attention page in a real browser: headless Chromium (Debian's `chromium`, which
`make test` installs where it can) loads the self-contained file, a test clicks a head
thumbnail and a token with real mouse events, and checks what is drawn, the console and
a screenshot. Skipped, saying why, where no Chromium is installed."""

from __future__ import annotations

import base64
import io
import json

import numpy as np
import pytest

from bertkit.cli import main

from _browser import Browser, find_chromium  # tests/inspect/_browser.py (pytest puts this folder on sys.path)

CHROMIUM = find_chromium()
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="no Chromium installed (Debian: apt-get install -y chromium; "
                                                          "`make test` tries it when run as root)")


@pytest.fixture(scope="module")
def page_file(mlm_dir, tmp_path_factory):
    out = tmp_path_factory.mktemp("inspect-page") / "attention.html"
    assert main(["inspect", "--model", str(mlm_dir), "--output", str(out),
                 "the animal didn't cross the street because it was too tired.", "the cat sat."]) == 0
    return out


@pytest.fixture()
def browser():
    b = Browser(CHROMIUM)
    yield b
    b.close()


def expected_lines(page: str, layer: int, heads: list[int], row: int | None) -> int:
    """Lines the head view should draw, counted from the page's own data."""
    start = page.index('id="inspect-data">') + len('id="inspect-data">')
    data = json.loads(page[start : page.index("</script>", start)])
    t = len(data["tokens"])
    weights = np.frombuffer(base64.b64decode(data["attention"]), np.uint8).reshape(data["layers"], data["heads"], t, t)
    picked = weights[layer, heads] / 255  # (heads, T, T)
    if row is not None:
        picked = picked[:, row]
    return int((picked >= data["min_weight"]).sum())


def test_page_draws_and_reacts_to_clicks(page_file, browser, tmp_path):
    from PIL import Image

    page = page_file.read_text(encoding="utf-8")
    browser.open(page_file.as_uri())
    assert browser.evaluate("document.body.dataset.ready") == "true"
    count = "document.querySelectorAll('#headview line.attn').length"
    assert browser.evaluate("document.querySelectorAll('#tokens .token').length") == 21
    assert browser.evaluate("document.querySelectorAll('#overview canvas.thumb').length") == 2 * 2
    assert browser.evaluate(count) == expected_lines(page, 0, [0, 1], None) > 0  # layer 0, every head

    browser.click('#overview canvas.thumb[data-layer="1"][data-head="1"]')  # a head: layer 1, head 1 alone
    assert browser.evaluate("document.getElementById('layer').value") == "1"
    assert browser.evaluate("[...document.querySelectorAll('canvas.thumb.selected')].map(c => c.dataset.layer + '/' + c.dataset.head)") == ["1/1"]
    assert browser.evaluate("[...document.querySelectorAll('.head-toggle.on')].map(b => b.dataset.head)") == ["1"]
    assert browser.evaluate(count) == expected_lines(page, 1, [1], None)
    assert browser.evaluate("new Set([...document.querySelectorAll('#headview line.attn')].map(l => l.dataset.head)).size") == 1

    browser.click('#tokens .token[data-index="2"]')  # a token: "animal"
    assert browser.evaluate("document.querySelector('#tokens .token.selected').textContent") == "animal"
    assert browser.evaluate(count) == expected_lines(page, 1, [1], 2) > 0
    assert browser.evaluate("[...document.querySelectorAll('#headview line.attn')].every(l => l.dataset.from === '2')")
    assert browser.evaluate("document.querySelectorAll('#fill-mask .candidates li').length") == 5

    browser.click('.head-toggle[data-head="0"]')  # toggle head 0 on as well
    assert browser.evaluate(count) == expected_lines(page, 1, [0, 1], 2)
    assert browser.evaluate("document.querySelector('#headview').outerHTML").startswith("<svg")

    assert browser.errors == []
    png = browser.screenshot()
    (tmp_path / "inspect.png").write_bytes(png)
    image = np.asarray(Image.open(io.BytesIO(png)).convert("RGB"))
    assert image.shape[0] >= 600 and image.shape[1] >= 1000
    colours = np.unique(image.reshape(-1, 3), axis=0)
    assert len(colours) > 50, f"screenshot looks blank: {len(colours)} colours"


def test_long_input_shows_the_cap_note(mlm_dir, browser, tmp_path):
    out = tmp_path / "long.html"
    assert main(["inspect", "--model", str(mlm_dir), "--output", str(out), "--max-tokens", "12",
                 " ".join(["word"] * 40)]) == 0
    browser.open(out.as_uri())
    assert browser.evaluate("document.querySelectorAll('#tokens .token').length") == 12
    assert "first 12 of 42 tokens" in browser.evaluate("document.getElementById('truncated').innerText")
    assert browser.errors == []


def test_export_buttons_download_svg_and_png(page_file, browser, tmp_path):
    import time
    import xml.etree.ElementTree as ET

    from PIL import Image

    downloads = tmp_path / "downloads"
    downloads.mkdir()
    browser.send("Browser.setDownloadBehavior", {"behavior": "allow", "downloadPath": str(downloads)}, session=False)
    browser.open(page_file.as_uri())
    browser.click('#overview canvas.thumb[data-layer="1"][data-head="0"]')
    browser.click("#export-svg")
    browser.click("#export-png")
    deadline = time.monotonic() + 10
    names = {"attention-layer1.svg", "attention-layer1.png"}
    while {p.name for p in downloads.iterdir()} != names:
        assert time.monotonic() < deadline, sorted(p.name for p in downloads.iterdir())
        time.sleep(0.1)
    svg = ET.parse(downloads / "attention-layer1.svg").getroot()
    lines = svg.findall(".//{http://www.w3.org/2000/svg}line")
    assert len(lines) == browser.evaluate("document.querySelectorAll('#headview line.attn').length") > 0
    width, height = (int(float(svg.get(k))) for k in ("width", "height"))
    with Image.open(downloads / "attention-layer1.png") as png:
        assert png.size == (2 * width, 2 * height)  # drawn at twice the page's scale
        assert len(np.unique(np.asarray(png.convert("RGB")).reshape(-1, 3), axis=0)) > 10
    assert browser.errors == []


def test_served_page_works_in_the_browser(mlm_dir, browser):
    """The live page (GET /inspect on a running server) draws the same and its form re-inspects."""
    import sys
    from pathlib import Path
    from urllib.parse import urlencode

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "serving"))
    from _serving import running_server

    with running_server(mlm_dir) as (base, _):
        browser.open(f"{base}/inspect?{urlencode({'text': 'the cat sat.'})}")
        assert browser.evaluate("document.body.dataset.ready") == "true"
        assert browser.evaluate("[...document.querySelectorAll('#tokens .token')].map(t => t.textContent)") == \
            ["[CLS]", "the", "cat", "sat", ".", "[SEP]"]
        browser.evaluate("document.querySelector('form.again input[name=text]').value = 'a cat was sitting.'")
        browser.events.clear()
        browser.evaluate("document.querySelector('form.again').submit()")
        browser.wait_for("Page.loadEventFired")
        assert browser.evaluate("document.querySelectorAll('#tokens .token').length") == 7
        browser.click('#tokens .token[data-index="2"]')
        assert browser.evaluate("document.querySelectorAll('#fill-mask .candidates li').length") == 5
        assert browser.errors == []
