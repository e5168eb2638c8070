"""`bertkit report RUN_DIR [--output FILE]`: a run's report.md, metrics and plots as one
self-contained HTML page (default: RUN_DIR/report.html)."""

from __future__ import annotations

import argparse
from pathlib import Path


def add_parser(subparsers) -> None:
    p = subparsers.add_parser("report", help="a run folder's report, metrics and plots as one HTML page",
                              description="Render a pre-training, fine-tuning or distillation run folder "
                                          "(report.md, metrics.jsonl, *.png) as one self-contained HTML file.")
    p.add_argument("run_dir", help="the run folder (a run's --output-dir)")
    p.add_argument("--output", "-o", help="HTML file to write (default: RUN_DIR/report.html)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from bertkit.atomic import write_text_atomic
    from bertkit.errors import BertkitError
    from bertkit.pages.report import report_page

    html = report_page(args.run_dir)
    output = Path(args.output) if args.output else Path(args.run_dir) / "report.html"
    if not output.parent.is_dir():
        raise BertkitError(f"--output {output}: folder {output.parent} does not exist")
    write_text_atomic(output, html)
    print(output)
    return 0
