"""The CLI end to end: embed / fill-mask / demo, and one-line errors on bad input."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from bertkit.cli import main


def test_embed_texts_to_jsonl(minilm_dir, capsys):
    assert main(["embed", "--model", str(minilm_dir), "The bank raised rates.", "We sat on the river bank."]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [r["text"] for r in rows] == ["The bank raised rates.", "We sat on the river bank."]
    assert len(rows[0]["embedding"]) == 384


def test_embed_file_to_npy_with_layers(minilm_dir, tmp_path):
    src = tmp_path / "texts.txt"
    src.write_text("first line\nsecond, longer line of text\nthird\n", encoding="utf-8")
    out = tmp_path / "vectors.npy"
    assert main(["embed", "--model", str(minilm_dir), "--file", str(src), "--layers", "concat_last_four",
                 "--output", str(out)]) == 0
    assert np.load(out).shape == (3, 4 * 384)


def test_embed_reads_stdin(minilm_dir):
    proc = subprocess.run([sys.executable, "-m", "bertkit.cli", "embed", "--model", str(minilm_dir), "--pooling", "cls"],
                          input=b"one\ntwo\n", capture_output=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert len(proc.stdout.decode().splitlines()) == 2


@pytest.mark.parametrize("content,message", [
    (b"", "empty file"),
    (b"fine\n\xff\xfe broken\n", r"texts.txt:2: not valid UTF-8"),
])
def test_embed_bad_files(minilm_dir, tmp_path, capsys, content, message):
    src = tmp_path / "texts.txt"
    src.write_bytes(content)
    assert main(["embed", "--model", str(minilm_dir), "--file", str(src)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("bertkit: error: ") and len(err.strip().splitlines()) == 1
    assert __import__("re").search(message, err)


def test_embed_skips_bad_lines_on_request(minilm_dir, tmp_path, capsys):
    src = tmp_path / "texts.txt"
    src.write_bytes(b"fine\n\xff\xfe broken\nalso fine\n")
    assert main(["embed", "--model", str(minilm_dir), "--file", str(src), "--skip-bad-lines"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [r["text"] for r in rows] == ["fine", "also fine"]


def test_embed_rejects_an_unknown_output_type_before_any_work(tmp_path, capsys):
    # the model directory does not exist: the output name is checked first
    assert main(["embed", "--model", str(tmp_path / "missing"), "-o", str(tmp_path / "v.txt"), "hi"]) == 1
    assert "expected a .npy or .jsonl file name" in capsys.readouterr().err


def test_errors_are_one_line_without_traceback(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "bertkit.cli", "embed", "--model", str(tmp_path / "missing"), "hi"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1
    (line,) = proc.stderr.strip().splitlines()  # one line: the folder, then where models come from
    assert line.startswith(f"bertkit: error: {tmp_path / 'missing'}: no such model directory")
    debug = subprocess.run([sys.executable, "-m", "bertkit.cli", "--debug", "embed", "--model", str(tmp_path / "missing"), "hi"],
                           capture_output=True, text=True, timeout=120)
    assert debug.returncode != 0 and "Traceback" in debug.stderr


def test_fill_mask_cli_errors(minilm_dir, capsys):
    assert main(["fill-mask", "--model", str(minilm_dir), "Paris is a beautiful [MASK]."]) == 1
    assert "checkpoint has no MLM head" in capsys.readouterr().err


def test_demo_shows_contextual_vectors(minilm_dir, tmp_path, capsys):
    assert main(["demo", "embeddings", "--output-dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "mean similarity, same sense" in out and "separates the two senses" in out
    assert (tmp_path / "bank_similarity.png").stat().st_size > 1000
