"""`bertkit pretrain`: pre-train (or continue pre-training) a BERT on a built data directory.

Configuration: defaults, then `--config run.yaml`, then the flags, then `--set key=value`
(any field of bertkit.pretraining.PretrainConfig; `model.X` for BertConfig fields).
Runs as one process, or under `torchrun` with one process per device.
"""

from __future__ import annotations

import argparse

from bertkit.commands import note, warn_about_schedule


def add_parser(subparsers) -> None:
    from bertkit.config import PRESETS
    from bertkit.objectives import OBJECTIVES

    p = subparsers.add_parser("pretrain", help="pre-train BERT (MLM+NSP and the successors' objectives)",
                              description="Pre-train on a directory made by `bertkit data build`.")
    p.add_argument("--data", help="data directory from `bertkit data build`")
    p.add_argument("--output-dir", help="run folder: checkpoints, final/, metrics.jsonl, report.md, curves")
    p.add_argument("--objective", choices=sorted(OBJECTIVES), help="pre-training objective (default: mlm_nsp)")
    p.add_argument("--preset", choices=list(PRESETS), help="model size for a fresh model (default: mini)")
    p.add_argument("--init-from", metavar="DIR", help="start from this BERT checkpoint (continued pre-training)")
    p.add_argument("--generator-size", type=float, metavar="F",
                   help="electra: generator hidden size as a fraction of the discriminator's, in (0, 1] (default: 0.25)")
    p.add_argument("--embedding-size", type=int, metavar="E",
                   help="albert: factorized embedding width E (V x E, then E x H; default: 128)")
    p.add_argument("--share-layers", choices=["all", "none", "attention", "ffn"],
                   help="albert: cross-layer parameter sharing (default: all)")
    p.add_argument("--config", metavar="YAML", help="YAML file of configuration fields")
    p.add_argument("--set", action="append", metavar="KEY=VALUE", help="override a field, e.g. --set lr=5e-4 (repeatable)")
    p.add_argument("--resume", action="store_true", help="continue the run in --output-dir from its newest readable checkpoint; other flags must "
                   "match the saved run, except max_steps, lr, warmup_steps, logging/saving fields and --data "
                   "of the same tokenizer")
    p.add_argument("--overwrite", action="store_true", help="start over in an --output-dir that holds checkpoints")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from bertkit.errors import ConfigError
    from bertkit.pretraining import build_config, pretrain, resume_pretraining
    from bertkit.training.config import parse_set_arguments, read_yaml_config

    values = read_yaml_config(args.config) if args.config else {}
    for name in ("data", "output_dir", "objective", "preset", "init_from", "generator_size", "embedding_size",
                 "share_layers"):
        if getattr(args, name) is not None:
            values[name] = getattr(args, name)
    overrides = parse_set_arguments(args.set)
    if args.resume:  # the saved run_config.json supplies the rest; what is given here must fit it
        if not values.get("output_dir"):
            raise ConfigError("field 'output_dir' is required (--output-dir DIR)")
        result = resume_pretraining(values["output_dir"], values, overrides, notify=note)
    else:
        config = build_config(values, overrides, source=args.config or "config")
        result = pretrain(config, overwrite=args.overwrite, on_start=warn_about_schedule, notify=note)
    if result.final_dir is not None:
        print(f"final model: {result.final_dir}  (report: {result.final_dir.parent / 'report.md'})")
    return 0
