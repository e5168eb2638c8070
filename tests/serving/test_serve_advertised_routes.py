"""/info lists only routes the checkpoint answers (issue 42's journey re-run): a pre-trained BART's
/info listed GET /inspect (a TypeError inside: BART returns no attention weights) and POST /rerank
(424: a text-to-text model is no pair classifier). Every route /info lists now answers 200 for a
BART, and `bertkit inspect` on one says why in one line."""

from __future__ import annotations

import httpx
import pytest

from bertkit import cli


@pytest.fixture(scope="module")
def bart_dir(tmp_path_factory):
    from _bart_checkpoint import build_bart_checkpoint

    return build_bart_checkpoint(tmp_path_factory.mktemp("bart"))


def test_a_bart_servers_info_lists_no_route_it_cannot_answer(bart_dir):
    from _serving import running_server

    with running_server(bart_dir) as (base, _):
        routes = httpx.get(base + "/info").json()["routes"]
        assert "GET /inspect" not in routes and "POST /rerank" not in routes
        assert "POST /generate" in routes and "POST /embed" in routes
        inspect = httpx.get(base + "/inspect", params={"text": "A cat sat."})
        assert inspect.status_code == 424 and "bart models return no attention weights" in inspect.json()["error"]
        rerank = httpx.post(base + "/rerank", json={"query": "a", "texts": ["b"]})
        assert rerank.status_code == 424 and "re-ranker" in rerank.json()["error"]


def test_inspect_on_a_bart_is_one_line(bart_dir, tmp_path, capsys):
    assert cli.main(["inspect", "--model", str(bart_dir), "--output", str(tmp_path / "a.html"), "A cat sat."]) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "bart models return no attention weights" in err, err
