"""`bertkit demo --family gpt` (issue 45, deliverable 6): tokenizer, data, clm pre-training with the budget recipe,
perplexity beside the unigram baseline and the first evaluation, and three sampled continuations of the prompts."""

from __future__ import annotations

import re
from pathlib import Path

from bertkit.cli import main
from bertkit.demos.gpt import PROMPTS

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "austen_small.txt"


def test_the_gpt_demo_prints_perplexity_against_the_baseline_and_continuations(tmp_path, capsys):
    assert main(["demo", "--family", "gpt", "--corpus", str(FIXTURE), "--output-dir", str(tmp_path), "--max-steps", "12",
                 "--no-progress", "--set", "model.n_embd=32", "--set", "model.n_layer=1"]) == 0
    out = capsys.readouterr().out
    assert "clm pre-training of gpt-tiny (budget recipe: lr 0.002, batches of 16), 12 steps" in out
    line = next(line for line in out.splitlines() if line.startswith("held-out perplexity"))
    assert re.fullmatch(r"held-out perplexity [\d,]+ \(step \d+\) -> [\d,]+ \(step 12\); unigram baseline [\d,]+ .*", line)
    continuations = [line.strip() for line in out.split("[4/4]")[1].splitlines() if line.startswith("  ")]
    assert len(continuations) == 3
    assert all(text.startswith(prompt) and len(text) > len(prompt) for text, prompt in zip(continuations, PROMPTS))
    assert (tmp_path / "run" / "final" / "config.json").is_file()


def test_bert_only_options_are_refused_with_the_gpt_demo(tmp_path, capsys):
    assert main(["demo", "--family", "gpt", "--no-task-text", "--output-dir", str(tmp_path)]) != 0
    assert "--no-task-text: options of the BERT demo, not of --family gpt" in capsys.readouterr().err


def test_a_bad_corpus_line_is_named_and_the_hint_works_as_written(tmp_path, capsys):
    bad = tmp_path / "bad.txt"
    bad.write_bytes(FIXTURE.read_bytes() + b"\xff\xfe not UTF-8\n")
    common = ["demo", "--family", "gpt", "--corpus", str(bad), "--max-steps", "2", "--no-progress",
              "--set", "model.n_embd=32", "--set", "model.n_layer=1"]
    assert main([*common, "--output-dir", str(tmp_path / "a")]) != 0
    error = capsys.readouterr().err.strip().splitlines()[-1]
    assert error.startswith(f"bertkit: error: {bad}:") and "not valid UTF-8" in error and "--skip-bad-lines" in error
    assert main([*common, "--output-dir", str(tmp_path / "b"), "--skip-bad-lines"]) == 0
    assert "skipped 1 undecodable or malformed line" in capsys.readouterr().err
