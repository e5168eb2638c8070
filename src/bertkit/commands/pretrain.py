"""`bertkit pretrain`: pre-train (or continue pre-training) a BERT on a built data directory.

Configuration: defaults, then `--config run.yaml`, then the flags, then `--set key=value`
(any field of bertkit.pretraining.PretrainConfig; `model.X` for BertConfig fields,
`objective.X` for the objective's settings). Each objective setting also has a flag
(`--generator-size`, ...), made from the objectives' settings classes when `pretrain` is
the command parsed (importing the objectives loads torch, which other commands never pay).
Runs as one process, or under `torchrun` with one process per device.
"""

from __future__ import annotations

import argparse

from bertkit.commands import CommandParser, add_runtime_options, note, warn, warn_about_schedule


RUN_FIELD_FLAGS = (
    ("--max-steps", int, "optimizer steps (field max_steps)"),
    ("--lr", float, "peak learning rate (field lr; default: the family's recipe)"),
    ("--batch-size", int, "sequences per optimizer step (field batch_size)"),
    ("--seed", int, "random seed of the run (field seed)"),
)


def add_parser(subparsers) -> None:
    from bertkit.objectives import OBJECTIVES

    p = subparsers.add_parser("pretrain", help="pre-train BERT (MLM+NSP and the successors' objectives)",
                              description="Pre-train on a directory made by `bertkit data build`.")
    p.add_argument("--data", help="data directory from `bertkit data build`")
    p.add_argument("--output-dir", help="run folder: checkpoints, final/, metrics.jsonl, report.md, curves")
    p.add_argument("--objective", choices=sorted(OBJECTIVES), help="pre-training objective (default: mlm_nsp)")
    p.add_argument("--preset", choices=[],  # every objective's presets, added with the setting flags (torch)
                   help="model size for a fresh model (default: mini, the objective's own, or the recipe's: --recipe budget's tiny)")
    p.add_argument("--recipe", choices=["default", "bert", "budget"],
                   help="named defaults, each family's own (docs/pretraining.md): default (measured to learn at the "
                        "preset's size; printed at start), budget (the best held-out loss per CPU-minute under --budget: "
                        "the family's tiny preset, batch 16, no dropout; MLM for BERT; measured on 64-token packed data) "
                        "or bert (the paper's BERT defaults for every objective: lr 1e-4, 1%% warm-up); every field stays "
                        "overridable")
    p.add_argument("--budget", metavar="TIME", help="wall-clock budget (90s, 10m, 2h): the lr schedule is laid over "
                   "the time and the run ends, saved and evaluated, when it is spent")
    p.add_argument("--init-from", metavar="DIR", help="start from this checkpoint (continued pre-training; "
                   "its family's objective and recipe)")
    # the run fields users type as flags (each the same as --set FIELD=VALUE, which still wins)
    for flag, kind, field_help in RUN_FIELD_FLAGS:
        p.add_argument(flag, type=kind, metavar=flag.lstrip("-").split("-")[-1].upper(), help=field_help)
    p.add_argument("--max-seq-length", type=int, metavar="N",
                   help="positions of a fresh model (model.max_position_embeddings; default: the preset's, at least "
                        "512 and the data's length), e.g. 4096 for a BigBird; the data's instances must fit")
    p.add_argument("--config", metavar="YAML", help="YAML file of configuration fields")
    p.add_argument("--set", action="append", metavar="KEY=VALUE", help="override a field, e.g. --set lr=5e-4 (repeatable)")
    p.add_argument("--resume", action="store_true", help="continue the run in --output-dir from its newest readable checkpoint; other flags must "
                   "match the saved run, except max_steps, lr, warmup_steps, logging/saving fields and --data "
                   "of the same tokenizer")
    p.add_argument("--overwrite", action="store_true", help="start over in an --output-dir that holds checkpoints")
    add_runtime_options(p)
    p.set_defaults(func=run)
    p.__class__ = _PretrainParser  # the objectives' setting flags, added when `pretrain` is parsed


class _PretrainParser(CommandParser):
    """The `pretrain` parser: before its arguments are parsed (or its help is shown), it adds
    one flag per objective setting, from the registry's settings classes."""

    setting_flags: tuple[str, ...] = ()

    def parse_known_args(self, args=None, namespace=None):
        self._add_setting_flags()
        return super().parse_known_args(args, namespace)

    def format_help(self) -> str:
        self._add_setting_flags()
        return super().format_help()

    def _add_setting_flags(self) -> None:
        if self.setting_flags:
            return
        from bertkit.objectives import OBJECTIVES, get_objective
        from bertkit.objectives.settings import flag_specs

        group = self.add_argument_group("objective settings (also --set objective.NAME=VALUE)")
        names: list[str] = []
        for objective in OBJECTIVES:
            for name, kwargs in flag_specs(get_objective(objective).settings_class):
                if name not in names:
                    metavar = {} if "choices" in kwargs else {"metavar": name.split("_")[-1].upper()}
                    group.add_argument(f"--{name.replace('_', '-')}", dest=name, **metavar, **kwargs)
                    names.append(name)
        self.setting_flags = tuple(names)
        preset = next(action for action in self._actions if action.dest == "preset")  # every objective's sizes
        for objective in OBJECTIVES:
            preset.choices += [name for name in get_objective(objective).preset_names()
                               if name not in preset.choices]
        self.set_defaults(setting_flags=self.setting_flags)  # run() reads them off the namespace


def warn_before_training(config) -> None:
    """The recipe on one line, the schedule's warnings, and a note when a budget run's data is not the recipe's."""
    from bertkit.pretraining import describe_recipe, recipe_data_note

    note(describe_recipe(config))
    warn_about_schedule(config)
    warn(recipe_data_note(config))


def run(args: argparse.Namespace) -> int:
    from bertkit.errors import ConfigError
    from bertkit.pretraining import build_config, pretrain, resume_pretraining
    from bertkit.training.config import parse_set_arguments, read_yaml_config

    values = read_yaml_config(args.config) if args.config else {}
    run_fields = tuple(flag.lstrip("-").replace("-", "_") for flag, _, _ in RUN_FIELD_FLAGS)
    for name in ("data", "output_dir", "objective", "preset", "init_from", *run_fields,
                 *getattr(args, "setting_flags", ())):
        if getattr(args, name) is not None:
            values[name] = getattr(args, name)
    if args.no_progress:
        values["progress"] = False
    if args.max_seq_length is not None and args.max_seq_length <= 0:  # named as typed, not as the config field
        raise ConfigError(f"--max-seq-length: must be a positive number of positions, got {args.max_seq_length}")
    positions = [] if args.max_seq_length is None else [f"model.max_position_embeddings={args.max_seq_length}"]
    overrides = parse_set_arguments([*positions, *(args.set or [])])  # --set still wins
    if args.budget is not None:
        from bertkit.training.budget import parse_budget

        values["budget_seconds"] = parse_budget(args.budget)
    if args.recipe is not None:
        values["recipe"] = args.recipe  # applied under the other values by build_config
    from bertkit.training.resume import resumes_by_itself

    if resumes_by_itself(values.get("output_dir"), args.resume, note):  # the saved run_config.json supplies the rest
        if not values.get("output_dir"):
            raise ConfigError("field 'output_dir' is required (--output-dir DIR)")
        result = resume_pretraining(values["output_dir"], values, overrides, notify=note)
    else:
        config = build_config(values, overrides, source=args.config or "config")
        result = pretrain(config, overwrite=args.overwrite, on_start=warn_before_training, notify=note)
    if result.final_dir is not None:
        print(f"final model: {result.final_dir}  (report: {result.final_dir.parent / 'report.md'})")
    return 0
