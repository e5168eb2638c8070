"""A pre-training run: a built data directory + an objective + the shared loop.

`pretrain(config)` is what `bertkit pretrain` calls; it resolves the model (a preset, or
`init_from` any BERT checkpoint for continued pre-training, naming the heads that start
fresh), checks the data against it, trains, and writes the run's report.
`resume_pretraining(output_dir)` is `--resume`: the newest readable checkpoint, the saved
configuration with the command line's allowed changes (bertkit.training.resume).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from bertkit.errors import BertkitError, ConfigError
from bertkit.training.config import EVAL_SEED, RUN_CONFIG_FILE, TrainingConfig, apply_overrides, check_choice
from bertkit.training.reporting import fresh_weights_note
from bertkit.training.resume import Notify, Resumption, absolute_paths

MASKING_STRATEGIES = ("token", "whole_word", "span")
PATH_FIELDS = ("data", "output_dir", "init_from")  # stored absolute in run_config.json
# a budget run ends on time; max_steps is then only a cap, this one unless the user sets theirs
BUDGET_MAX_STEPS = 1_000_000_000

# `--recipe NAME`: named sets of defaults under the YAML, the flags and `--set` (each field stays overridable).
# `default` (no --recipe) and `budget` are each family's own (its package's recipes.py, asked through the
# registry: bertkit.model.recipes), sized by preset and measured (experiments/family_recipes.py,
# experiments/budget_recipes.py, docs/pretraining.md). `bert` is the paper's BERT defaults (the dataclass
# defaults) for every objective, what every run used before the families had recipes.
RECIPE_NAMES = ("default", "bert", "budget")
BUDGET_OBJECTIVE = "mlm"  # `--recipe budget` without --objective: the cramming line's MLM

# the data each recipe is meant for (`bertkit data build --format F --max-seq-length N`): the demo builds it,
# and a budget run on other data gets a note (the data is the user's choice; the recipe still runs)
RECIPE_DATA: dict[str, tuple[str, int]] = {"bert": ("nsp", 128), "budget": ("packed", 64)}


def recipe_data_note(config: "PretrainConfig") -> str | None:
    """One line when a `--recipe budget` run's data is not the kind the recipe was measured on."""
    from bertkit.data.dataset import PretrainingDataset

    if config.recipe != "budget":
        return None  # the other recipes run on every objective's formats
    wanted_format, wanted_length = RECIPE_DATA[config.recipe]
    info = PretrainingDataset.open(config.data, "train").info
    if wanted_format not in _objective_formats(config.objective) or (
            (info.instance_format, info.max_seq_length) == (wanted_format, wanted_length)):
        return None
    return (f"{config.data}: {info.instance_format} instances of {info.max_seq_length} tokens; the budget recipe was "
            f"measured on {wanted_format} instances of {wanted_length} (bertkit data build --format {wanted_format} "
            f"--max-seq-length {wanted_length}), see docs/pretraining.md")


def _objective_formats(objective: str) -> tuple[str, ...]:
    from bertkit.objectives import get_objective

    return get_objective(objective).data_formats


def with_recipe(values: dict[str, Any], recipe: str, overrides: dict[str, str] | None = None) -> dict[str, Any]:
    """`values` (YAML and flags) over the recipe's defaults for the run's objective and preset, the
    recipe's name recorded (it lands in run_config.json and the report); `model` merges key by key.
    The family's recipe comes from the registry (bertkit.model.families.ModelFamily.pretraining_recipe);
    `overrides` (`--set`) may name the objective or the preset that pick it."""
    if recipe not in RECIPE_NAMES:
        raise ConfigError(f"--recipe {recipe!r}: must be one of {', '.join(RECIPE_NAMES)}")
    merged = {**values, "recipe": recipe}
    if recipe == "bert":
        return merged
    from bertkit.objectives import get_objective

    overrides = overrides or {}
    default_objective = BUDGET_OBJECTIVE if recipe == "budget" else PretrainConfig.objective
    objective = overrides.get("objective", values.get("objective", default_objective))
    objective_cls = get_objective(objective)
    preset = overrides.get("preset", values.get("preset"))
    family = objective_cls.model_family(preset)
    chosen = family.pretraining_recipe(recipe)
    if chosen is None:
        return merged
    if preset is None and not values.get("init_from"):
        preset = chosen.preset or getattr(objective_cls, "config_defaults", {}).get("preset", PretrainConfig.preset)
    defaults = chosen.values(preset)  # None: a run from a checkpoint names no size
    defaults["objective"] = objective
    return defaults_under(defaults, merged)


def defaults_under(defaults: dict[str, Any], values: dict[str, Any]) -> dict[str, Any]:
    """`values` over `defaults`, `model` merged key by key (a non-mapping `model` is left for validation to name)."""
    merged = {**defaults, **values}
    if "model" in defaults and isinstance(values.get("model", {}), dict):
        merged["model"] = {**defaults["model"], **values.get("model", {})}
    return merged


def describe_recipe(config: "PretrainConfig") -> str:
    """The recipe a run uses, on one line: its name, family and size, and the values that decide learning."""
    from bertkit.objectives import get_objective

    family = get_objective(config.objective).model_family(config.preset)
    size = f"from {config.init_from}" if config.init_from else config.preset
    model = ", ".join(f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}" for k, v in sorted(config.model.items()))
    hint = "--recipe bert for the paper's BERT defaults; " if config.recipe != "bert" else ""
    return (f"recipe {config.recipe} ({family.model_type}, {size}): lr {config.lr:g}, {config.describe_warmup()}, "
            f"batch {config.batch_size}, weight decay {config.weight_decay:g}, betas ({config.adam_beta1:g}, "
            f"{config.adam_beta2:g}), grad norm {config.max_grad_norm:g}" + (f", model {model}" if model else "")
            + f" ({hint}--set FIELD=VALUE overrides any)")


@dataclass
class PretrainConfig(TrainingConfig):
    """A pre-training run: the loop's fields plus data, model and masking.

    `model` holds overrides of the objective's model config for the preset (e.g.
    {"hidden_dropout_prob": 0.0}); on the command line they are `--set model.hidden_dropout_prob=0`.
    An objective whose model is another family's names its default size in its
    `config_defaults` (e.g. {"preset": "t5-mini"})."""

    data: str = ""
    output_dir: str = ""
    # the named defaults the run started from (RECIPE_NAMES), informational once applied: `build_config` (the CLI,
    # YAML) applies the family's "default" when none is named; a PretrainConfig made directly holds the
    # dataclass defaults, BERT's
    recipe: str = "bert"
    objective: str = "mlm_nsp"
    preset: str = "mini"
    init_from: str | None = None
    masking: str = "token"  # dynamic masking: token | whole_word | span
    mlm_probability: float = 0.15
    max_predictions_per_seq: int | None = None
    eval_seed: int = EVAL_SEED  # the held-out masks' seed, independent of `seed`
    model: dict = field(default_factory=dict)
    # the objective's own settings (its `settings_class`, e.g. ELECTRA's generator_size), every
    # field filled in; `--set objective.FIELD=V` (or the flat `--set FIELD=V`) on the command line
    objective_settings: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        super().__post_init__()
        check_choice("masking", self.masking, MASKING_STRATEGIES)
        check_choice("recipe", self.recipe, RECIPE_NAMES)
        from bertkit.objectives import get_objective

        settings = get_objective(self.objective).settings_class()
        self.objective_settings = settings.updated(self.objective_settings, self.objective).to_dict()

    def training_fields(self) -> TrainingConfig:
        names = {f.name for f in dataclasses.fields(TrainingConfig)}
        return TrainingConfig(**{k: v for k, v in dataclasses.asdict(self).items() if k in names})

    def masking_config(self):
        """The run's masking (bertkit.data.masking.MaskingConfig), for the objectives that mask."""
        from bertkit.data.masking import MaskingConfig

        return MaskingConfig(mlm_probability=self.mlm_probability, strategy=self.masking,
                             max_predictions_per_seq=self.max_predictions_per_seq)


def build_config(values: dict[str, Any], overrides: dict[str, str], source: str = "config") -> PretrainConfig:
    """Defaults <- `values` (YAML and flags) <- `--set` overrides; `model.X` keys go to `model`,
    `objective.X` keys (and the objective's settings by their flat names) to `objective_settings`.

    `source` names where `values` came from in error messages (e.g. the YAML file)."""
    from bertkit.objectives.settings import resolve_run_settings

    model_overrides = {k.removeprefix("model."): v for k, v in overrides.items() if k.startswith("model.")}
    plain = {k: v for k, v in overrides.items() if not k.startswith("model.")}
    values = with_recipe(values, str(plain.get("recipe", values.get("recipe", "default"))), plain)
    objective = plain.get("objective", values.get("objective", PretrainConfig.objective))
    values = with_objective_defaults(values, objective)
    run_fields = {f.name for f in dataclasses.fields(PretrainConfig)}
    values, plain, settings = resolve_run_settings(values, plain, objective, source, run_fields)
    base = apply_overrides(PretrainConfig(data="?", output_dir="?"), values, source=source)
    config = apply_overrides(base, {**plain, "objective_settings": settings})
    if model_overrides:
        from bertkit.training.config import parse_value

        parsed = {k: parse_value(v, Any) for k, v in model_overrides.items()}
        config = dataclasses.replace(config, model={**config.model, **parsed})
    if config.budget_seconds is not None and "max_steps" not in values and "max_steps" not in plain:
        config = dataclasses.replace(config, max_steps=BUDGET_MAX_STEPS)
    if config.data in ("", "?"):
        raise ConfigError("field 'data' is required (--data DIR)")
    if config.output_dir in ("", "?"):
        raise ConfigError("field 'output_dir' is required (--output-dir DIR)")
    return config


def with_objective_defaults(values: dict[str, Any], objective: str) -> dict[str, Any]:
    """`values` over the objective's own defaults (its `config_defaults`, e.g. RoBERTa's
    adam_beta2 0.98): the user's YAML, flags and `--set` still override them; `model`
    defaults merge key by key under the user's."""
    from bertkit.objectives import get_objective

    defaults = dict(getattr(get_objective(objective), "config_defaults", {}))
    return defaults_under(defaults, values) if defaults else values


def pretrain(config: PretrainConfig, *, overwrite: bool = False, on_start=None, notify: Notify | None = None):
    """Run pre-training from scratch or `init_from` a checkpoint; returns the loop's
    `TrainResult`. `on_start(config)` runs once every check has passed, just before the
    first step (the CLI's warnings: an error stays one line); `notify` receives one-line
    notes (which weights start fresh)."""
    from bertkit.training import checkpoints as ckpt

    ckpt.refuse_existing_run(Path(config.output_dir), overwrite)
    return _run(absolute_paths(config, PATH_FIELDS), None, on_start, notify)


def resume_pretraining(output_dir: str | Path, values: dict[str, Any] | None = None,
                       overrides: dict[str, str] | None = None, *, notify: Notify | None = None):
    """Continue the run in `output_dir` from its newest readable checkpoint. `values` (YAML
    and flags) and `overrides` (`--set`) must match the saved run except where
    bertkit.training.resume allows a change; `notify` receives the checkpoint and step
    resumed from, the changes applied, and a warning per unreadable newer checkpoint."""
    from bertkit.training.resume import resume_run

    resumption = resume_run(output_dir, lambda v, o, source: build_config(v, o, source=source), values or {},
                            overrides or {}, PATH_FIELDS)
    return _run(resumption.config, resumption, None, notify)


def _run(config: PretrainConfig, resumption: Resumption | None, on_start, notify: Notify | None):
    from bertkit.data.dataset import PretrainingDataset
    from bertkit.objectives import get_objective
    from bertkit.training.run import run_training

    checkpoint = resumption.checkpoint if resumption is not None else None
    objective_cls = get_objective(config.objective)
    options = objective_cls.run_options(config)  # objective-specific fields (ELECTRA's generator_size, ...)
    train = PretrainingDataset.open(config.data, "train")
    objective_cls.check_data(train)
    eval_data = _open_eval(config.data)
    info = train.info

    torch.manual_seed(config.seed)  # the same initial weights on every rank
    source = checkpoint or (Path(config.init_from) if config.init_from else None)
    fresh: list[str] = []
    if source is not None:
        model = objective_cls.load_model(source)
        # a model over words' characters (ELMo) has no sub-word vocabulary to match
        if getattr(model.config, "vocab_size", info.vocab_size) != info.vocab_size:
            raise BertkitError(
                f"{config.data}: built with a tokenizer of {info.vocab_size} tokens, but the model at {source} "
                f"has vocab_size {model.config.vocab_size}; rebuild the data with the model's tokenizer"
            )
        fresh = fresh_keys(model)
    else:
        model_config = objective_cls.model_config(config.preset, train, config.model, **options)
        model = objective_cls.build_model(model_config, **options)
    limit = model.config.position_limit  # None: relative positions (XLNet)
    if limit is not None and limit < info.max_seq_length:
        raise BertkitError(f"{config.data}: max_seq_length {info.max_seq_length} exceeds the model's "
                           f"max_position_embeddings {limit}")
    objective = objective_cls(model, train, eval_data, config.masking_config(), config.seed, eval_seed=config.eval_seed, **options)
    notes = []
    if checkpoint is None and config.init_from:
        notes.append(fresh_weights_note(type(model).__name__, config.init_from, fresh))
    return run_training(
        config, objective, model, config.training_fields(), config.output_dir, resumption=resumption, notes=notes,
        notify=notify, on_start=on_start,
        report=lambda run: write_run_report(config, objective, model, train, run.result, run.seconds, run.trainer,
                                            fresh=fresh, resumption=resumption),
    ).result


def fresh_keys(model) -> list[str]:
    """The state-dict keys `model` initialised fresh when it was loaded (its checkpoint
    lacked them: an encoder-only checkpoint has no MLM/NSP heads); a model made of loaded
    parts (ELECTRA's discriminator and generator) lists each part's, prefixed."""
    if hasattr(model, "loading_info"):
        return sorted(model.loading_info["missing_keys"])
    return sorted(f"{name}.{key}" for name, part in model.named_children() if hasattr(part, "loading_info")
                  for key in part.loading_info["missing_keys"])


def _open_eval(directory: str):
    from bertkit.data.dataset import PretrainingDataset

    try:
        return PretrainingDataset.open(directory, "eval")
    except BertkitError:
        return None  # a data directory without a held-out split trains without evaluation


def write_run_report(config: PretrainConfig, objective, model, train, result, seconds: float, trainer,
                     fresh: list[str] | None = None, resumption: Resumption | None = None) -> Path:
    from bertkit.training.budget import describe_budget
    from bertkit.training.reporting import plot_curves, write_report

    output_dir = Path(config.output_dir)
    plots = plot_curves(result.records, output_dir, objective.plot_panels)
    evals = [r for r in result.records if any(k.startswith("eval_") for k in r)]
    trains = [r for r in result.records if "loss" in r and not any(k.startswith("eval_") for k in r)]
    final: dict[str, Any] = {}
    if trains:
        final.update({k: v for k, v in trains[-1].items() if k != "step"})
    if evals:
        final.update({k: v for k, v in evals[-1].items() if k not in objective.evaluation_details()})
    mc = model.config
    sections = [
        ("Run", {"objective": config.objective, "model": f"{mc.describe_size()}, {sum(p.numel() for p in model.parameters()) / 1e6:.2f}M parameters",
                 "initialised from": config.init_from or f"preset {config.preset} (random)",
                 **({"initialised fresh": ", ".join(fresh or []) or "nothing (every weight loaded)"}
                    if config.init_from else {}),
                 **({"resumed from": resumption.report_entry()} if resumption is not None else {}),
                 "recipe": config.recipe,
                 **({"budget": f"{describe_budget(config.budget_seconds)}; spent {result.elapsed_seconds:.1f}s"
                     + (" (ended on time)" if result.budget_ended else "")}
                    if config.budget_seconds is not None else {}),
                 "steps": result.step, "global batch": config.batch_size,
                 **({"batch ramp": config.describe_batch_ramp()} if config.batch_ramp_start is not None else {}),
                 "micro-batch x accumulation x processes": f"{trainer.micro_batch} x {trainer.describe_accumulation()} x "
                                                           f"{trainer.ctx.world_size}",
                 "lr (peak), warm-up": f"{config.lr:g}, {config.describe_warmup()}",
                 "masking": objective.describe_masking(config), "seed": config.seed,
                 "held-out masks": objective.describe_eval_masks(),
                 "skipped non-finite steps": result.skipped_steps,
                 **({"fp16 steps skipped by the loss scaler": result.amp_skipped_steps}
                    if result.amp_skipped_steps else {})}),
        ("Data", {"directory": config.data, "instances": train.info.num_instances, "tokens": train.info.num_tokens,
                  "format": train.info.instance_format, "max_seq_length": train.info.max_seq_length,
                  "masking at build": train.info.masking}),
        ("Throughput", {"wall time (s)": round(seconds, 1), "training tokens/s": round(result.tokens_per_second, 1),
                        "MFU": f"{result.mfu:.1%}" if result.mfu is not None else "not reported",
                        "MFU counted as": trainer.describe_mfu()}),
        ("Final metrics", final or "no metrics logged"),
        ("Files", f"`final/` (HF layout: config.json, model.safetensors, tokenizer), `metrics.jsonl`, checkpoints "
                  f"`checkpoint-*` (with training_state.pt), `{RUN_CONFIG_FILE}`"),
    ]
    return write_report(output_dir, f"Pre-training run: {output_dir.name}", sections, plots)
