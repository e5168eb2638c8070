"""The `bertkit` command line: subcommands map onto plain typed library functions.

Each command module exposes `add_parser(subparsers)` which registers its subcommand
and sets `func` to a callable taking the parsed namespace. User errors
(`BertkitError`, bad files, bad arguments) print one line and exit 1; `--debug` shows
the traceback instead.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from bertkit.errors import BertkitError

# One line per command family; a new family is one module plus one line here.
COMMAND_MODULES = [
    "bertkit.commands.checkpoint",
    "bertkit.commands.data",
    "bertkit.commands.demo",
    "bertkit.commands.distill",
    "bertkit.commands.embed",
    "bertkit.commands.evaluate",
    "bertkit.commands.export",
    "bertkit.commands.fill_mask",
    "bertkit.commands.finetune",
    "bertkit.commands.generate",
    "bertkit.commands.predict",
    "bertkit.commands.pretrain",
    "bertkit.commands.serve",
    "bertkit.commands.tokenizer",
    "bertkit.commands.inspect",
    "bertkit.commands.report",
]


def build_parser() -> argparse.ArgumentParser:
    from bertkit.commands import CommandParser

    parser = CommandParser(prog="bertkit", description="BERT tokenizers, models, pre-training and fine-tuning.")
    parser.add_argument("--debug", action="store_true", help="show full tracebacks on errors")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMAND_MODULES:
        importlib.import_module(name).add_parser(subparsers)
    return parser


def command_parser(parser: argparse.ArgumentParser, argv: list[str]) -> argparse.ArgumentParser:
    """The deepest sub-command parser `argv` names (`finetune classify`), else `parser`."""
    for token in argv:
        sub = next((action.choices[token] for action in parser._actions
                    if isinstance(action, argparse._SubParsersAction) and token in action.choices), None)
        if sub is not None:
            parser = sub
    return parser


def resolve_model_arguments(args: argparse.Namespace) -> None:
    """--model / --teacher / --init-from given as a Hugging Face id (not a path here) that the
    local Hugging Face cache holds become its folder there; anything else is left to the
    command (a missing folder is one line saying where models come from: bertkit.interop.hub_cache)."""
    from pathlib import Path

    for name in ("model", "teacher", "init_from"):
        value = getattr(args, name, None)
        if isinstance(value, str) and value and not Path(value).exists():
            from bertkit.interop.hub_cache import cached_snapshot, looks_like_model_id

            snapshot = cached_snapshot(value) if looks_like_model_id(value) else None
            if snapshot is not None:
                setattr(args, name, str(snapshot))


def main(argv: list[str] | None = None) -> int:
    from bertkit.parallel import LATENCY_BOUND_COMMANDS, prefer_passive_waiting

    command = (sys.argv[1:] if argv is None else argv)[:1]
    name = command[0] if command else None
    if name not in LATENCY_BOUND_COMMANDS:
        prefer_passive_waiting(name)  # before anything loads torch (OpenMP reads it then): pretrain's parser does
    parser = build_parser()
    args, unknown = parser.parse_known_args(argv)
    if name in LATENCY_BOUND_COMMANDS:  # its parser loads no torch; the policy depends on what it serves
        prefer_passive_waiting(name, getattr(args, "model", None))
    if unknown:  # named by the sub-command that was given them, whose --help lists what it takes
        command_parser(parser, sys.argv[1:] if argv is None else argv).error(f"unrecognized arguments: {' '.join(unknown)}")
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        resolve_model_arguments(args)
        if "threads" in args:  # a long-running command: size the thread pools before anything starts them
            from bertkit.parallel import apply_thread_policy

            args.threads = apply_thread_policy(args.threads)
        from bertkit.commands import one_line_warnings

        with one_line_warnings():  # a library's warning is one `bertkit: warning:` line
            result = args.func(args)
    except BertkitError as exc:
        if args.debug:
            raise
        print(f"bertkit: error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("bertkit: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0
    return int(result or 0)


if __name__ == "__main__":
    sys.exit(main())
