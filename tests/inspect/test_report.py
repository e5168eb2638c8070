"""`bertkit report`: a pre-training, a fine-tuning and a task distillation run, each tiny
(a 4-step pre-training whose model is fine-tuned for an epoch on the MRPC fixture, and
that model distilled), rendered as one self-contained page; the Markdown subset the
reports use; a folder that is not a run is one line."""

from __future__ import annotations

import base64
import re
from pathlib import Path

import pytest

from bertkit.cli import main
from bertkit.pages.markdown import render

TESTS = Path(__file__).resolve().parents[1]
CORPUS = TESTS / "fixtures" / "austen_small.txt"
MRPC = TESTS / "fixtures" / "tasks" / "glue" / "MRPC"
TINY = ["--set", "model.hidden_size=32", "--set", "model.num_hidden_layers=2", "--set", "model.num_attention_heads=2",
        "--set", "model.intermediate_size=64", "--set", "model.max_position_embeddings=64"]
QUIET = ["--set", "progress=false", "--set", "tensorboard=false"]
STEPS = ["--batch-size", "8", "--max-seq-length", "32", "--seed", "3", "--lr", "1e-3", "--no-progress",
         "--set", "tensorboard=false", "--epochs", "1"]


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("report-runs")
    tok, data = root / "tok", root / "data"
    assert main(["tokenizer", "train", "--algorithm", "wordpiece", "--vocab-size", "400", "--output", str(tok),
                 "--no-progress", str(CORPUS)]) == 0
    assert main(["data", "build", "--tokenizer", str(tok), "--max-seq-length", "64", "--output", str(data),
                 "--eval-fraction", "0.2", str(CORPUS)]) == 0
    pretrain = root / "pretrain"
    assert main(["pretrain", "--preset", "tiny", "--data", str(data), "--output-dir", str(pretrain), *TINY, *QUIET,
                 "--set", "batch_size=8", "--set", "warmup_steps=1", "--set", "max_steps=4", "--set", "eval_steps=2",
                 "--set", "log_steps=2"]) == 0
    finetune = root / "mrpc"
    assert main(["finetune", "glue", "--task", "mrpc", "--model", str(pretrain / "final"), "--train",
                 str(MRPC / "dev.tsv"), "--dev", str(MRPC / "dev.tsv"), "--output-dir", str(finetune), *STEPS]) == 0
    distill = root / "small"
    assert main(["distill", "--teacher", str(finetune / "best"), "--task", "glue", "--glue-task", "mrpc", "--data",
                 str(MRPC), "--train", str(MRPC / "dev.tsv"), "--output-dir", str(distill), "--student-layers", "1",
                 *STEPS]) == 0
    return {"pretrain": pretrain, "finetune": finetune, "distill": distill}


@pytest.mark.parametrize("kind", ["pretrain", "finetune", "distill"])
def test_run_becomes_one_self_contained_page(runs, kind, tmp_path, capsys):
    run = runs[kind]
    out = tmp_path / f"{kind}.html"
    assert main(["report", str(run), "--output", str(out)]) == 0
    assert capsys.readouterr().out.strip() == str(out)
    page = out.read_text(encoding="utf-8")
    title = run.joinpath("report.md").read_text(encoding="utf-8").splitlines()[0].lstrip("# ").strip()
    assert f"<h1>{title}</h1>" in page.replace("&#x27;", "'")
    pngs = sorted(p.name for p in run.glob("*.png"))
    assert pngs and "loss.png" in pngs
    images = re.findall(r'<img alt="([^"]*)" src="data:image/png;base64,([^"]+)"', page)
    assert len(images) == len(pngs)  # each plot once: report.md's inline, the others under "Other plots"
    for _, payload in images:
        assert base64.b64decode(payload).startswith(b"\x89PNG")
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", page)
    assert "<table>" in page and "<h2>Metrics (metrics.jsonl)</h2>" in page
    assert re.search(r"<td>loss</td><td>[0-9.e+-]+</td><td>\d+</td>", page)


def test_default_output_is_in_the_run_folder(runs, capsys):
    assert main(["report", str(runs["finetune"])]) == 0
    assert capsys.readouterr().out.strip() == str(runs["finetune"] / "report.html")
    assert "confusion_matrix" in (runs["finetune"] / "report.html").read_text(encoding="utf-8")


@pytest.mark.parametrize("case, message", [("empty", "not a run folder (no report.md or metrics.jsonl)"),
                                           ("missing", "no such folder")])
def test_not_a_run_is_one_line(case, message, tmp_path, capsys):
    folder = tmp_path / "empty"
    if case == "empty":
        folder.mkdir()
    else:
        folder = tmp_path / "nope"
    assert main(["report", str(folder)]) == 1
    err = capsys.readouterr().err.strip()
    assert err == f"bertkit: error: {folder}: {message}" or (err.startswith(f"bertkit: error: {folder}: {message}")
                                                              and "\n" not in err)


def test_markdown_subset():
    html = render("# Run `x`\n\nSome **bold** and *it* text,\nwrapped.\n\n| a | b |\n|---|---:|\n| 1 | `c\\|d` |\n\n"
                  "- one\n- [two](grid/r/report.md)\n\n1. first\n2. second\n\n```\n<raw> & code\n```\n"
                  "![loss](loss.png)\n<script>alert(1)</script>", image_src=lambda t: f"data:{t}")
    assert "<h1>Run <code>x</code></h1>" in html
    assert "<p>Some <strong>bold</strong> and <em>it</em> text, wrapped.</p>" in html
    assert "<thead><tr><th>a</th><th>b</th></tr></thead>" in html and "<td>1</td><td><code>c|d</code></td>" in html
    assert '<ul><li>one</li><li><a href="grid/r/report.md">two</a></li></ul>' in html
    assert "<ol><li>first</li><li>second</li></ol>" in html
    assert "<pre><code>&lt;raw&gt; &amp; code</code></pre>" in html
    assert '<img alt="loss" src="data:loss.png">' in html
    assert render("| | |\n|---|---|\n| k | v |") == "<table><tbody><tr><td>k</td><td>v</td></tr></tbody></table>"
    assert "<script>" not in html and "&lt;script&gt;" in html
