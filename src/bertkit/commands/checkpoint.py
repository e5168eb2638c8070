"""`bertkit checkpoint verify`: check a run's checkpoints against their manifests."""

from __future__ import annotations

from pathlib import Path

from bertkit.errors import BertkitError


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser("checkpoint", help="check saved checkpoints")
    commands = parser.add_subparsers(dest="checkpoint_command", metavar="{verify}")
    parser.set_defaults(func=lambda args: parser.print_help() or 2)
    p = commands.add_parser(
        "verify",
        help="check every checkpoint's files against their recorded sizes and SHA-256 hashes",
        description="Check every checkpoint of a run folder (checkpoint-N, final/, best/) — or one checkpoint "
        "folder — against its manifest.json (each file's size and SHA-256) and read its training state, "
        "weights and configuration back. Prints one line per folder; exits 1 naming the first damaged file.",
    )
    p.add_argument("run_dir", metavar="DIR", help="a run's output folder, or one checkpoint folder")
    p.set_defaults(func=run_verify)


def run_verify(args) -> int:
    from bertkit.training.checkpoints import verify_run

    run_dir = Path(args.run_dir)
    if not run_dir.is_dir():
        raise BertkitError(f"{run_dir}: no such folder")
    results = verify_run(run_dir)
    if not results:
        raise BertkitError(f"{run_dir}: holds no checkpoint (checkpoint-N, final/ or best/)")
    bad = [(path, problem) for path, problem in results if problem is not None]
    for path, problem in results:
        print(f"{path}: {'ok' if problem is None else 'DAMAGED'}")
    if bad:
        raise BertkitError(f"{bad[0][1]}" + (f" (and {len(bad) - 1} more damaged)" if len(bad) > 1 else ""))
    return 0
