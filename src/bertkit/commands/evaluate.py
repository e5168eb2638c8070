"""`bertkit evaluate TASK`: official scores of predictions or of a fine-tuned model on gold data.

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

from bertkit.commands import add_precision_argument, add_runtime_options
from bertkit.errors import BertkitError
from bertkit.model.families import families_that
from bertkit.tasks.registry import CLASSIFICATION, MULTIPLE_CHOICE, QA, TAGGING, TEXT2TEXT


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser("evaluate", help="score predictions with the official metrics (SQuAD, ...)",
                                   description="Score predictions against a gold dataset; prints one JSON object.")
    tasks = parser.add_subparsers(dest="evaluate_task", metavar="{" + ",".join(name for name, _ in EVALUATORS) + "}")
    parser.set_defaults(func=lambda args: parser.print_help() or 2)
    for _, add_task in EVALUATORS:
        add_task(tasks)


def _add_squad(tasks) -> None:
    p = tasks.add_parser("squad", help="SQuAD v1.1 / v2.0 / KorQuAD 1.0 exact match and F1 in percent (official keys)",
                         description="Official SQuAD scoring of a predictions JSON {question id: answer text}, or "
                                     "of a fine-tuned model's answers. SQuAD v2.0 thresholds (best_exact_thresh, "
                                     "best_f1_thresh) come in each route's unit: with --model a score difference, "
                                     "null score minus best span score (keys best_exact_thresh_unit and "
                                     "best_f1_thresh_unit say so); with --predictions and --na-prob the unit of the "
                                     "--na-prob file, as the official script (a probability for a run's "
                                     "dev_na_probs.json, which holds sigmoid(difference)). Scores are "
                                     "percentages (0-100), as the official scripts print them.")
    p.add_argument("--data", required=True, metavar="FILE", help="official SQuAD dataset JSON (e.g. dev-v1.1.json)")
    source = p.add_mutually_exclusive_group(required=True)
    source.add_argument("--predictions", metavar="FILE",
                        help='JSON object {question id: answer text}; "" means no answer (v2.0)')
    source.add_argument("--model", metavar="DIR", help="a fine-tuned QA model: answer the questions, then score "
                                                      "(v2.0: with its saved no-answer threshold)")
    p.add_argument("--batch-size", type=int, default=64, help="with --model")
    add_runtime_options(p)
    add_precision_argument(p, "; with --model")
    p.add_argument("--na-prob", metavar="FILE", help="v2.0: JSON {question id: no-answer probability}; "
                                                    "adds best_exact/best_f1 and their thresholds (in "
                                                    "the file's unit: probabilities)")
    p.add_argument("--na-prob-thresh", type=float, default=1.0, metavar="P",
                   help='v2.0: predict "" when the no-answer probability exceeds this (default 1.0)')
    p.add_argument("--version", choices=("auto", "1", "2"), default="auto",
                   help="scoring version (default: from the dataset file)")
    p.add_argument("--metric", choices=("auto", "squad", "korquad"), default="auto",
                   help="answer comparison: squad (official SQuAD rule, word-level F1) or korquad (official "
                        "KorQuAD 1.0 rule: strips brackets and quotes too, character-level F1); default: korquad "
                        "for a file whose version starts with KorQuAD_v1 (e.g. KorQuAD_v1.0_dev), else squad")
    p.set_defaults(func=run_squad, family=QA)


def _add_model_options(p) -> None:
    p.add_argument("--model", required=True, metavar="DIR",
                   help="fine-tuned checkpoint (bertkit best/, or a transformers *ForSequenceClassification / "
                        "*ForTokenClassification ... folder of a family bertkit reads)")
    p.add_argument("--data", required=True, metavar="FILE", help="labelled file to score")
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--max-seq-length", type=int, help="default: as the model was fine-tuned")
    add_runtime_options(p)
    add_precision_argument(p)


def _add_glue(tasks) -> None:
    p = tasks.add_parser("glue", help="a fine-tuned model on a GLUE file (the task's official metrics)",
                         description="Score a fine-tuned model on a GLUE TSV (or task folder: its dev file).")
    _add_model_options(p)
    p.add_argument("--task", help="GLUE task (default: the one the model was fine-tuned on)")
    p.set_defaults(func=run_model_evaluation, family=CLASSIFICATION)


def _add_classify(tasks) -> None:
    p = tasks.add_parser("classify", help="a fine-tuned classifier on a CSV / TSV / JSONL file (accuracy, F1 ...)",
                         description="Score a fine-tuned sequence classifier (or regressor) on a labelled table.")
    _add_model_options(p)
    p.add_argument("--text-column", help="default: as fine-tuned")
    p.add_argument("--pair-column", help="default: as fine-tuned")
    p.add_argument("--label-column", help="default: as fine-tuned")
    p.set_defaults(func=run_model_evaluation, family=CLASSIFICATION)


def _add_ner(tasks) -> None:
    p = tasks.add_parser("ner", help="a fine-tuned tagger on a CoNLL file (entity-level F1, seqeval semantics)",
                         description="Score a fine-tuned token tagger on a CoNLL file.")
    _add_model_options(p)
    p.add_argument("--tag-column", type=int, help="column of the tag (default: as fine-tuned, usually the last)")
    p.set_defaults(func=run_model_evaluation, family=TAGGING)


def _add_multiple_choice(tasks) -> None:
    p = tasks.add_parser("multiple-choice", help="a fine-tuned multiple-choice model (accuracy)",
                         description="Score a fine-tuned multiple-choice model on SWAG CSV or JSONL.")
    _add_model_options(p)
    p.add_argument("--labels", metavar="FILE", help="labels in a separate file, one index a line (PIQA)")
    p.set_defaults(func=run_model_evaluation, family=MULTIPLE_CHOICE)


def _add_text2text(tasks) -> None:
    from bertkit.commands.finetune import add_text2text_options

    p = tasks.add_parser("text2text", help=f"a text-to-text model ({families_that('text2text')}): generate, then the "
                         "task's official metric",
                         description="Score a text-to-text model: it generates for each example of --data (a GLUE "
                                     "file or task folder, SQuAD v1.1 JSON, CoNLL or source/target pairs) and the "
                                     "task's official metric scores the text; invalid outputs count as wrong and "
                                     "`invalid` counts them.")
    _add_model_options(p)
    add_text2text_options(p)
    p.add_argument("--max-target-length", type=int, help="tokens generated at most (default: as fine-tuned)")
    p.set_defaults(func=run_model_evaluation, family=TEXT2TEXT)


# One entry per task: (subcommand name, function adding its subparser).
EVALUATORS = [("squad", _add_squad), ("glue", _add_glue), ("classify", _add_classify), ("ner", _add_ner),
              ("multiple-choice", _add_multiple_choice), ("text2text", _add_text2text)]



def _load_model_of_family(args: argparse.Namespace):
    """The fine-tuned model of --model; a one-line error naming the subcommand that scores
    it when it is not of this subcommand's task family."""
    from bertkit.inference.loading import load_finetuned
    from bertkit.tasks.registry import get_task_family

    from bertkit.tasks.multitask import task_checkpoint

    model = task_checkpoint(args.model, args.task if args.evaluate_task == "glue" else None)  # a multi-task one's task
    loaded = load_finetuned(model, precision=args.precision)
    family = get_task_family(loaded.spec.family)
    if family.name != args.family:
        raise BertkitError(f"{args.model}: a {family.title} model; score it with "
                           f"`bertkit evaluate {family.evaluate_command}`")
    return loaded


def run_model_evaluation(args: argparse.Namespace) -> int:
    """glue / classify / ner / multiple-choice: load the model, score --data, print one JSON object."""
    from bertkit.finetuning import glue_file
    from bertkit.inference.evaluation import evaluate

    loaded = _load_model_of_family(args)
    overrides = {}
    data = args.data
    if args.evaluate_task == "text2text":
        overrides.update(text2text_task=args.task, glue_task=args.glue_task, source_field=args.source_field,
                         target_field=args.target_field, num_beams=args.num_beams,
                         max_target_length=args.max_target_length)
        if (args.task or loaded.spec.text2text_task) == "glue":
            task = args.glue_task or loaded.spec.glue_task
            if task is None:
                raise BertkitError(f"{args.model}: the model records no GLUE task; give --glue-task")
            data = glue_file(args.data, task, "dev")
    if args.evaluate_task == "glue":
        task = args.task or loaded.spec.glue_task
        if task is None:
            raise BertkitError(f"{args.model}: the model records no GLUE task; give --task")
        overrides["glue_task"] = task
        data = glue_file(args.data, task, "dev")
    for name in ("text_column", "pair_column", "label_column", "tag_column"):
        if getattr(args, name, None) is not None:
            overrides[name] = getattr(args, name)
    result = evaluate(loaded, data, labels_path=getattr(args, "labels", None), batch_size=args.batch_size,
                      max_seq_length=args.max_seq_length, progress=not args.no_progress, **overrides)
    print(json.dumps(result))
    return 0


def run_squad(args: argparse.Namespace) -> int:
    from bertkit.evaluation.squad import evaluate_squad, read_na_probs, read_predictions, read_squad_dataset

    if args.model:
        return _run_squad_model(args)
    dataset = read_squad_dataset(args.data)
    predictions = read_predictions(args.predictions)
    na_probs = read_na_probs(args.na_prob) if args.na_prob else None
    version = dataset.scoring_version() if args.version == "auto" else int(args.version)
    if na_probs is not None and version == 1:
        raise BertkitError(f"--na-prob applies to SQuAD v2.0 scoring, but {args.data} is scored as v1.1 "
                           "(add --version 2 to score it as v2.0)")
    _say_answer_metric(args, dataset.version)
    with _warnings_to_stderr():
        result = evaluate_squad(dataset, predictions, na_probs, version=version, na_prob_thresh=args.na_prob_thresh,
                                metric=args.metric)
    print(json.dumps(result))
    return 0


def _say_answer_metric(args: argparse.Namespace, version: str | None) -> None:
    """One stderr line when the file's version picked KorQuAD's rule (stdout stays one JSON object)."""
    from bertkit.evaluation.squad import resolve_answer_metric

    rule = resolve_answer_metric(args.metric, version)
    if args.metric == "auto" and rule.name != "squad":
        print(f"bertkit: scoring with {rule.description}, chosen by the file's version {version!r} "
              "(--metric squad for SQuAD's)", file=sys.stderr)


def _run_squad_model(args: argparse.Namespace) -> int:
    from bertkit.inference.evaluation import evaluate
    from bertkit.tasks.qa import NULL_THRESHOLD_UNIT

    if args.na_prob:
        raise BertkitError("--na-prob goes with --predictions; with --model the model's own no-answer scores are used")
    loaded = _load_model_of_family(args)
    from bertkit.evaluation.squad import read_squad_dataset

    dataset = read_squad_dataset(args.data)
    # as with --predictions: the dataset file's version and rule, not the model's
    version = dataset.scoring_version() if args.version == "auto" else int(args.version)
    _say_answer_metric(args, dataset.version)
    overrides = {"squad_version": version, "qa_metric": None if args.metric == "auto" else args.metric}
    with _warnings_to_stderr():
        result = evaluate(loaded, args.data, batch_size=args.batch_size, progress=not args.no_progress, **overrides)
    result.pop("examples")  # the official script's keys, plus the unit of its thresholds (v2.0)
    for name in ("best_exact_thresh", "best_f1_thresh"):
        if name in result:  # a null-score difference here, a probability with --na-prob dev_na_probs.json
            result[f"{name}_unit"] = NULL_THRESHOLD_UNIT
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
