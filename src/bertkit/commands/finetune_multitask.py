"""`bertkit finetune multitask`: MT-DNN, several GLUE tasks on one shared encoder.

  bertkit finetune multitask --tasks sst-2,mrpc,rte,sts-b --data glue/ --model DIR --output-dir runs/mtdnn
  bertkit finetune glue --task rte --data glue/RTE --model runs/mtdnn/final --output-dir runs/mtdnn-rte
  bertkit predict --task rte --model runs/mtdnn/best "A man sleeps." "Nobody sleeps."

See bertkit.finetuning_multitask for the run and bertkit.tasks.multitask for the batches
and the checkpoint's layout.
"""

from __future__ import annotations

import argparse
import sys


def add_multitask_parser(tasks, add_run_options, epilog: str, common_fields: dict[str, str]) -> None:
    """The `multitask` subcommand on `bertkit finetune`'s subparsers, with the flags every fine-tuning
    run takes (`add_run_options`) mapped to config fields by `common_fields` (flag attribute -> field)."""
    p = tasks.add_parser("multitask", help="MT-DNN: GLUE tasks at once on one shared encoder, a head per task",
                         description="Multi-task fine-tuning (MT-DNN): one encoder, a head per GLUE task, each batch "
                                     "from one task, tasks in proportion to their size; writes best/ and final/ with "
                                     "the shared encoder and tasks/<task>/ per task.")
    p.epilog = epilog
    p.add_argument("--tasks", required=True, metavar="LIST",
                   help="GLUE tasks separated by commas, e.g. mnli,qnli,sst-2,mrpc,rte,sts-b")
    p.add_argument("--data", required=True, metavar="DIR", help="the GLUE folder: one sub-folder per task (RTE, STS-B, ...)")
    p.add_argument("--head", choices=("linear", "san"), default=None,
                   help="the pair classification tasks' head: linear (default) or san, MT-DNN's stochastic answer "
                        "network (K steps: --set san_steps=5, san_step_dropout=0.1; a bertkit-only task folder)")
    add_run_options(p, grid=False)
    p.set_defaults(func=run, common_fields=common_fields)


def config_values(args: argparse.Namespace) -> dict:
    """Configuration fields from a YAML file and the flags of `args`."""
    from bertkit.training.config import read_yaml_config

    values = read_yaml_config(args.config) if args.config else {}
    for attribute, name in args.common_fields.items():
        if getattr(args, attribute, None) is not None:
            values[name] = getattr(args, attribute)
    values["tasks"] = [t for t in args.tasks.split(",") if t.strip()]
    values["data"] = args.data
    if args.head is not None:
        values["head"] = args.head
    if args.no_progress:
        values["progress"] = False
    return values


def run(args: argparse.Namespace) -> int:
    from bertkit.finetuning_multitask import build_multitask_config, finetune_multitask
    from bertkit.training.config import parse_set_arguments

    config = build_multitask_config(config_values(args), parse_set_arguments(args.set))
    result = finetune_multitask(config, overwrite=args.overwrite,
                                notify=lambda line: print(f"bertkit: {line}", file=sys.stderr))
    shown = "; ".join(f"{task} " + ", ".join(f"{k} {v:.2f}" for k, v in metrics.items() if k != "loss")
                      for task, metrics in result.task_metrics.items())
    where = result.best_dir or result.output_dir / "final"
    best = f"average {result.best_metric:.2f} at step {result.best_step}" if result.best_dir else "no dev evaluation"
    print(f"best model: {where}  ({best}: {shown}; per task: {where}/tasks/<task>; "
          f"report: {result.output_dir / 'report.md'})")
    return 0
