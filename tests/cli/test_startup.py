"""A fast command line: every `--help` and the commands that need no model run with torch
and transformers blocked (an import of either fails), in one fresh interpreter.

The timing of `bertkit --help` is a benchmark (bench/bench_cli_startup.py), not a test.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

SRC = str(Path(__file__).resolve().parents[2] / "src")

# `pretrain --help` lists every objective's setting flags and presets, which live beside the
# objectives' torch code: it still imports torch (docs/commands.md says so)
NEEDS_TORCH_FOR_HELP = {("pretrain",)}

BLOCKED_RUN = textwrap.dedent("""
    import contextlib, io, json, sys, argparse
    class Blocker:
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in ("torch", "transformers"):
                raise ImportError("blocked in this test: " + name)
    sys.meta_path.insert(0, Blocker())
    from bertkit.cli import build_parser, main

    def commands(parser, prefix=()):
        yield prefix
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    yield from commands(sub, prefix + (name,))

    skipped = {tuple(c) for c in json.loads(sys.argv[1])}
    results = {}
    for command in commands(build_parser()):
        if command in skipped:
            continue
        out = io.StringIO()
        try:
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
                main([*command, "--help"])
        except SystemExit as exit:
            results[" ".join([*command, "--help"])] = exit.code
        except Exception as exc:
            results[" ".join([*command, "--help"])] = repr(exc)
    for argv in json.loads(sys.argv[2]):
        out = io.StringIO()
        try:
            with contextlib.redirect_stdout(out):
                code = main(argv)
        except SystemExit as exit:
            code = "exit " + str(exit.code)
        except Exception as exc:
            code = repr(exc)
        results[" ".join(argv)] = code
    print(json.dumps(results))
""")


def test_help_and_model_free_commands_import_neither_torch_nor_transformers(tmp_path):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("".join(f"The cat number {i} sat on the mat.\nA dog ran after it.\n\n" for i in range(60)),
                      encoding="utf-8")
    squad = tmp_path / "dev.json"
    squad.write_text(json.dumps({"version": "1.1", "data": [{"title": "t", "paragraphs": [{"context": "a b c", "qas": [
        {"id": "q1", "question": "x", "answers": [{"text": "b", "answer_start": 2}]}]}]}]}), encoding="utf-8")
    predictions = tmp_path / "preds.json"
    predictions.write_text(json.dumps({"q1": "b"}), encoding="utf-8")
    tok, data = tmp_path / "tok", tmp_path / "data"
    runs = [
        ["tokenizer", "train", "--vocab-size", "120", "--output", str(tok), str(corpus)],
        ["tokenizer", "encode", "--tokenizer", str(tok), "the cat sat"],
        ["tokenizer", "stats", "--tokenizer", str(tok), str(corpus)],
        ["data", "build", "--tokenizer", str(tok), "--max-seq-length", "32", "--output", str(data), str(corpus)],
        ["data", "info", str(data)],
        ["evaluate", "squad", "--data", str(squad), "--predictions", str(predictions)],
    ]
    proc = subprocess.run([sys.executable, "-c", BLOCKED_RUN, json.dumps(sorted(NEEDS_TORCH_FOR_HELP)), json.dumps(runs)],
                          capture_output=True, text=True, timeout=300, env={"PYTHONPATH": SRC, "PATH": "/usr/bin:/bin"},
                          cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = json.loads(proc.stdout.splitlines()[-1])
    failed = {command: code for command, code in results.items() if code not in (0, None)}
    assert not failed, failed
    assert "--help" in results and "finetune classify --help" in results and len(results) > 30
