"""`--threads` and `--no-progress`: every long-running command takes both, with one meaning;
`--threads` sizes torch's and the tokenizers library's pools before the command runs."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from bertkit import cli
from bertkit.commands import THREADS_HELP
from bertkit.parallel import available_cores, default_threads

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "austen_small.txt"
SHORT_COMMANDS = {"checkpoint verify", "data info", "demo embeddings", "report"}  # finish in seconds: no runtime flags
THREADS_ONLY = {"serve", "inspect", "export onnx"}  # no progress bar


def leaf_parsers(parser: argparse.ArgumentParser, prefix: str = "") -> dict[str, argparse.ArgumentParser]:
    """Every runnable (sub)command's parser, keyed by its command line ('finetune glue')."""
    runnable = getattr(parser.get_default("func"), "__name__", "<lambda>") != "<lambda>"  # not a group's help
    found = {prefix: parser} if prefix and runnable else {}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                found.update(leaf_parsers(sub, f"{prefix} {name}".strip()))
    return found


@pytest.fixture
def restore_threads(monkeypatch):
    """The policy writes the environment and torch's pool; put both back after the test."""
    for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "RAYON_NUM_THREADS", "OMP_WAIT_POLICY"):
        monkeypatch.setenv(name, os.environ.get(name, "")) if name in os.environ else monkeypatch.delenv(name, raising=False)
    threads = torch.get_num_threads()
    yield
    torch.set_num_threads(threads)


def test_every_long_running_command_takes_threads_and_no_progress():
    parsers = leaf_parsers(cli.build_parser())
    assert {"pretrain", "finetune glue", "finetune squad", "distill", "evaluate squad", "evaluate ner", "embed",
            "predict", "fill-mask", "generate", "demo", "serve", "tokenizer train", "data build"} <= set(parsers)
    for command, parser in parsers.items():
        if command in SHORT_COMMANDS:
            continue
        options = parser._option_string_actions
        assert "--threads" in options, command
        assert (options["--threads"].help, options["--threads"].type) == (THREADS_HELP, int), command
        if command not in THREADS_ONLY:
            assert "--no-progress" in options and options["--no-progress"].help == "no progress bars", command


@pytest.mark.parametrize("value", ["0", "-2"])
def test_threads_below_one_is_a_one_line_error(value, capsys, restore_threads):
    assert cli.main(["tokenizer", "encode", "--tokenizer", "missing", "--threads", value, "x"]) == 1
    err = capsys.readouterr().err
    assert err == f"bertkit: error: --threads must be a positive whole number, got {value}\n"


def test_threads_sizes_torch_and_rayon_inside_the_run(monkeypatch, restore_threads):
    seen = {}

    def record(args):
        seen.update(torch=torch.get_num_threads(), rayon=os.environ["RAYON_NUM_THREADS"], threads=args.threads)
        return 0

    monkeypatch.setattr("bertkit.commands.tokenizer.run_encode", record)
    assert cli.main(["tokenizer", "encode", "--tokenizer", "t", "--threads", "1", "x"]) == 0
    assert seen == {"torch": 1, "rayon": "1", "threads": 1}


def test_default_threads_follow_omp_num_threads_else_the_affinity(monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "5")
    assert default_threads() == 5
    monkeypatch.delenv("OMP_NUM_THREADS")
    assert default_threads() == available_cores() == len(os.sched_getaffinity(0))


def test_torch_loads_after_the_wait_policy_even_when_a_parser_loads_it():
    """`pretrain`'s parser loads torch (its objectives' flags): OpenMP reads OMP_WAIT_POLICY
    then, so bertkit sets it before parsing."""
    probe = ("import os, sys, importlib.abc\n"
             "seen = []\n"
             "class Watch(importlib.abc.MetaPathFinder):\n"
             "    def find_spec(self, name, path=None, target=None):\n"
             "        if name == 'torch' and not seen:\n"
             "            seen.append(os.environ.get('OMP_WAIT_POLICY'))\n"
             "sys.meta_path.insert(0, Watch())\n"
             "import bertkit.commands.pretrain as p\n"
             "p.run = lambda args: print(seen[0]) or 0\n"
             "from bertkit import cli\n"
             "sys.exit(cli.main(['pretrain', '--threads', '1']))\n")
    env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
    out = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, check=True).stdout
    assert out.split() == ["PASSIVE"]


def test_a_fresh_process_loads_torch_with_the_policy_in_place():
    """OpenMP and rayon read their variables when their pools start: the CLI sets them before
    the command imports torch, and keeps a wait policy the user chose."""
    probe = ("import os, sys, bertkit.commands.tokenizer as t\n"
             "def probe(args):\n"
             "    import torch\n"
             "    print(torch.get_num_threads(), os.environ['RAYON_NUM_THREADS'], os.environ['OMP_WAIT_POLICY'])\n"
             "t.run_encode = probe\n"
             "from bertkit import cli\n"
             "assert 'torch' not in sys.modules\n"
             "sys.exit(cli.main(sys.argv[1:]))\n")
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_NUM_THREADS", "OMP_WAIT_POLICY", "RAYON_NUM_THREADS")}
    args = [sys.executable, "-c", probe, "tokenizer", "encode", "--tokenizer", "t", "x"]
    out = subprocess.run([*args, "--threads", "2"], env=env, capture_output=True, text=True, check=True).stdout
    assert out.split() == ["2", "2", "PASSIVE"]
    out = subprocess.run(args, env={**env, "OMP_NUM_THREADS": "1", "OMP_WAIT_POLICY": "ACTIVE"},
                         capture_output=True, text=True, check=True).stdout
    assert out.split() == ["1", "1", "ACTIVE"]


def test_pretrain_takes_no_progress_and_threads(tmp_path, capsys, restore_threads):
    tok, data, out = tmp_path / "tok", tmp_path / "data", tmp_path / "run"
    assert cli.main(["tokenizer", "train", "--vocab-size", "400", "--output", str(tok), "--no-progress",
                     "--threads", "1", str(FIXTURE)]) == 0
    assert cli.main(["data", "build", "--tokenizer", str(tok), "--max-seq-length", "64", "--output", str(data),
                     "--no-progress", "--threads", "1", str(FIXTURE)]) == 0
    capsys.readouterr()
    assert cli.main(["pretrain", "--preset", "tiny", "--data", str(data), "--output-dir", str(out), "--no-progress",
                     "--threads", "1", "--set", "max_steps=2", "--set", "batch_size=4", "--set", "tensorboard=false",
                     "--set", "model.num_hidden_layers=1", "--set", "model.max_position_embeddings=64"]) == 0
    assert "train:" not in capsys.readouterr().err  # no bar
    assert json.loads((out / "run_config.json").read_text())["progress"] is False


@pytest.mark.parametrize("command, expected", [("serve", None), ("embed", "PASSIVE"), (None, "PASSIVE")])
def test_serve_keeps_openmps_own_wait_policy(monkeypatch, command, expected):
    """A server answers small requests one at a time: a passive wait cost ~5 ms a request."""
    from bertkit.parallel import prefer_passive_waiting

    monkeypatch.delenv("OMP_WAIT_POLICY", raising=False)
    prefer_passive_waiting(command)
    assert os.environ.get("OMP_WAIT_POLICY") == expected


def test_serve_command_leaves_the_wait_policy_alone():
    """Through cli.main, --threads included: `serve` keeps OpenMP's default policy."""
    probe = ("import os, sys, bertkit.commands.serve as s\n"
             "s.run = lambda args: print(os.environ.get('OMP_WAIT_POLICY', 'unset')) or 0\n"
             "from bertkit import cli\n"
             "sys.exit(cli.main(sys.argv[1:]))\n")
    env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
    out = subprocess.run([sys.executable, "-c", probe, "serve", "--model", "m", "--threads", "2"], env=env,
                         capture_output=True, text=True, check=True).stdout
    assert out.split() == ["unset"]


@pytest.mark.parametrize("config, expected", [
    ({"architectures": ["GPT2LMHeadModel"], "model_type": "gpt2"}, "PASSIVE"),
    ({"architectures": ["T5ForConditionalGeneration"], "is_encoder_decoder": True}, "PASSIVE"),
    ({"architectures": ["GPT2ForSequenceClassification"]}, "unset"),
    ({"architectures": ["BertModel"]}, "unset"),
])
def test_serving_a_generator_waits_passively(tmp_path, config, expected):
    """A generator's decoding loop and HTTP thread take turns every token: spinning OpenMP
    threads starved the HTTP thread on a busy machine, so its server waits passively."""
    (tmp_path / "config.json").write_text(json.dumps(config))
    probe = ("import os, sys, bertkit.commands.serve as s\n"
             "s.run = lambda args: print(os.environ.get('OMP_WAIT_POLICY', 'unset')) or 0\n"
             "from bertkit import cli\n"
             "sys.exit(cli.main(sys.argv[1:]))\n")
    env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
    out = subprocess.run([sys.executable, "-c", probe, "serve", "--model", str(tmp_path)], env=env,
                         capture_output=True, text=True, check=True).stdout
    assert out.split() == [expected]
