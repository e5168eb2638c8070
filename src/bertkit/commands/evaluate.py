"""`bertkit evaluate TASK`: official scores of a predictions file against a gold dataset.

Each task is one subcommand registered by a `_add_<task>` function listed in
`EVALUATORS`; it prints ONE JSON object of metrics on stdout. `squad` scores a
predictions JSON against an official SQuAD v1.1/v2.0 file; tasks that need a
fine-tuned model (glue, classify, ner, multiple-choice) add their subparser here.
"""

from __future__ import annotations

import argparse
import json
import sys
import warnings
from collections.abc import Iterator
from contextlib import contextmanager

from bertkit.errors import BertkitError


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser("evaluate", help="score predictions with the official metrics (SQuAD, ...)",
                                   description="Score predictions against a gold dataset; prints one JSON object.")
    tasks = parser.add_subparsers(dest="evaluate_task", metavar="{" + ",".join(name for name, _ in EVALUATORS) + "}")
    parser.set_defaults(func=lambda args: parser.print_help() or 2)
    for _, add_task in EVALUATORS:
        add_task(tasks)


def _add_squad(tasks) -> None:
    p = tasks.add_parser("squad", help="SQuAD v1.1 / v2.0 exact match and F1 (official evaluate-v1.1/v2.0 keys)",
                         description="Official SQuAD scoring of a predictions JSON {question id: answer text}.")
    p.add_argument("--data", required=True, metavar="FILE", help="official SQuAD dataset JSON (e.g. dev-v1.1.json)")
    p.add_argument("--predictions", required=True, metavar="FILE",
                   help='JSON object {question id: answer text}; "" means no answer (v2.0)')
    p.add_argument("--na-prob", metavar="FILE", help="v2.0: JSON {question id: no-answer probability}; "
                                                    "adds best_exact/best_f1 and their thresholds")
    p.add_argument("--na-prob-thresh", type=float, default=1.0, metavar="P",
                   help='v2.0: predict "" when the no-answer probability exceeds this (default 1.0)')
    p.add_argument("--version", choices=("auto", "1", "2"), default="auto",
                   help="scoring version (default: from the dataset file)")
    p.set_defaults(func=run_squad)


# One entry per task: (subcommand name, function adding its subparser).
EVALUATORS = [("squad", _add_squad)]


def run_squad(args: argparse.Namespace) -> int:
    from bertkit.evaluation.squad import evaluate_squad, read_na_probs, read_predictions, read_squad_dataset

    dataset = read_squad_dataset(args.data)
    predictions = read_predictions(args.predictions)
    na_probs = read_na_probs(args.na_prob) if args.na_prob else None
    version = dataset.scoring_version() if args.version == "auto" else int(args.version)
    if na_probs is not None and version == 1:
        raise BertkitError(f"--na-prob applies to SQuAD v2.0 scoring, but {args.data} is scored as v1.1 "
                           "(add --version 2 to score it as v2.0)")
    with _warnings_to_stderr():
        result = evaluate_squad(dataset, predictions, na_probs, version=version, na_prob_thresh=args.na_prob_thresh)
    print(json.dumps(result))
    return 0


@contextmanager
def _warnings_to_stderr() -> Iterator[None]:
    """Print each library warning as one `bertkit: warning: ...` line instead of Python's format."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            yield
        finally:
            for warning in caught:
                print(f"bertkit: warning: {warning.message}", file=sys.stderr)
