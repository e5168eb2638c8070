"""Command-line start-up: wall time of `bertkit --help` and of a few `bertkit <command> --help`.

Each command runs as a fresh `python -m bertkit ...` process (what a user's shell pays),
interleaved with two references in the same run: a bare interpreter (`python -c pass`,
the floor no command can beat) and `python -c "import torch"` (what every command paid
while the parser imported torch). The best of `--repeats` runs is reported (the run least
disturbed by other load), and each command's modules are checked: none may be torch or
transformers (tests/cli/test_startup.py checks the same with torch blocked).

Run: `python bench/bench_cli_startup.py [--repeats 7]`. Target: `bertkit --help` < 0.5 s.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, os.path.dirname(__file__))
from common import WALL  # noqa: E402  (a process's start-up is wall time)

TARGET_SECONDS = 0.5
COMMANDS = [["--help"], ["finetune", "--help"], ["tokenizer", "encode", "--help"], ["evaluate", "text2text", "--help"],
            ["data", "build", "--help"]]
REFERENCES = {"python -c pass": ["-c", "pass"], "python -c 'import torch'": ["-c", "import torch"]}
HEAVY = ("torch", "transformers")


def environment() -> dict[str, str]:
    src = str(Path(__file__).resolve().parents[1] / "src")
    return {**os.environ, "PYTHONPATH": os.pathsep.join([src, os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)}


def wall_seconds(args: list[str], env: dict[str, str]) -> float:
    start = WALL()
    subprocess.run([sys.executable, *args], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    return WALL() - start


def heavy_modules(command: list[str], env: dict[str, str]) -> list[str]:
    """The torch / transformers modules `bertkit COMMAND` imported (from -X importtime)."""
    result = subprocess.run([sys.executable, "-X", "importtime", "-m", "bertkit", *command], env=env,
                            capture_output=True, text=True)
    names = {line.rsplit("|", 1)[-1].strip() for line in result.stderr.splitlines() if line.startswith("import time:")}
    return sorted(name for name in names if name.split(".")[0] in HEAVY)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    env = environment()
    candidates = {**{name: argv for name, argv in REFERENCES.items()},
                  **{"bertkit " + " ".join(c): ["-m", "bertkit", *c] for c in COMMANDS}}
    best = {name: float("inf") for name in candidates}
    for name, argv in candidates.items():  # warm the file cache once
        wall_seconds(argv, env)
    for _ in range(args.repeats):
        for name, argv in candidates.items():
            best[name] = min(best[name], wall_seconds(argv, env))
    floor, torch_import = best["python -c pass"], best["python -c 'import torch'"]
    print(f"best of {args.repeats} runs, wall seconds (python {sys.version.split()[0]}, {os.cpu_count()} cores)")
    for name, seconds in best.items():
        print(f"  {name:34s} {seconds:6.3f} s")
    failed = False
    for command in COMMANDS:
        heavy = heavy_modules(command, env)
        if heavy:
            failed = True
            print(f"  bertkit {' '.join(command)} imported {', '.join(heavy[:3])}{' ...' if len(heavy) > 3 else ''}")
    help_seconds = best["bertkit --help"]
    print(f"bertkit --help: {help_seconds:.3f} s = {help_seconds - floor:.3f} s over a bare interpreter; "
          f"{torch_import / help_seconds:.1f}x faster than importing torch alone ({torch_import:.3f} s); "
          f"target < {TARGET_SECONDS} s: {'met' if help_seconds < TARGET_SECONDS else 'MISSED'}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
