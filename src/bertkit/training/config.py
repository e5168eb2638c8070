"""Run configuration as dataclasses: defaults, optional YAML, then `--set key=value`.

Every value passes through `apply_overrides`, which knows the dataclass's fields and
their types, so a typo or a bad value fails before any work with the field's name
(and a did-you-mean), never deep inside the run.
"""

from __future__ import annotations

import dataclasses
import difflib
import json
import math
import types
import typing
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bertkit.errors import BertkitError, ConfigError

OPTIMIZERS = ("adamw", "lamb")
PRECISIONS = ("auto", "fp32", "bf16", "fp16")
NONFINITE_POLICIES = ("stop", "skip")
PARALLEL_MODES = ("ddp", "fsdp")
# torch.compile's modes (compile=true): reduce-overhead adds CUDA graphs, which the static shapes of a
# pre-training step allow (bertkit.model.static_shapes); max-autotune-no-cudagraphs searches kernels only
COMPILE_MODES = ("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")
# The paper's schedule: 10,000 warm-up steps of 1,000,000, kept as a fraction so a run of any length reaches its peak lr
DEFAULT_WARMUP_RATIO = 0.01
# Held-out masks (and an objective's other evaluation draws) come from this seed, not the run's `seed`, so
# runs of different seeds, objectives or ablation arms score the same tokens; any constant would do
EVAL_SEED = 1234
RUN_CONFIG_FILE = "run_config.json"  # a run folder's configuration as trained (`--resume` reads it back)


@dataclass
class TrainingConfig:
    """What the model-agnostic loop needs. `batch_size` is the *global* batch (sequences
    per optimizer step, over all processes and accumulation steps), so a run means the
    same thing on one CPU or on eight GPUs.

    Warm-up lasts `warmup_steps` when set, else `warmup_ratio` of `max_steps` (Hugging
    Face's pair of fields); the learning rate then decays linearly to 0 at `max_steps`."""

    max_steps: int = 10_000
    batch_size: int = 32
    micro_batch_size: int | None = None  # per process per forward; None = batch_size / world size
    lr: float = 1e-4
    warmup_steps: int | None = None  # None: warmup_ratio x max_steps
    warmup_ratio: float = DEFAULT_WARMUP_RATIO
    weight_decay: float = 0.01
    adam_beta1: float = 0.9
    adam_beta2: float = 0.999
    adam_epsilon: float = 1e-6
    optimizer: str = "adamw"
    max_grad_norm: float = 1.0
    precision: str = "auto"  # auto: bf16 autocast on a GPU that has it, fp32 on CPU
    compile: bool = False
    compile_mode: str = "default"  # torch.compile's mode when compile is on (COMPILE_MODES)
    seed: int = 42
    log_steps: int = 10
    eval_steps: int = 500
    save_steps: int = 1_000
    save_total_limit: int = 2
    eval_batches: int | None = None  # None: the whole held-out split
    on_nonfinite: str = "stop"  # stop | skip a step whose loss or gradient is NaN/inf
    nonfinite_skip_limit: int = 10  # on_nonfinite=skip: stop after this many skipped steps in a row
    parallel: str = "ddp"  # ddp | fsdp (torch fully_shard), under torchrun
    tensorboard: bool = True  # event files when the `tensorboard` package is installed
    progress: bool = True
    save_checkpoints: bool = True  # checkpoint-N folders (optimizer state, for --resume); final/ is always written
    metric_for_best: str | None = None  # an evaluation metric (e.g. "accuracy"); set: keep the best model in best/
    greater_is_better: bool | None = None  # None: True unless metric_for_best ends in "loss"
    early_stopping_patience: int | None = None  # stop after this many evaluations without improvement
    # a wall-clock budget (`--budget 10m`): the run ends when it is spent (max_steps is then only a cap), its lr
    # schedule follows the fraction of the time spent (warmup_ratio of the time, then decay to 0), and it
    # evaluates at each 1/budget_evals of the time instead of every eval_steps (bertkit.training.budget)
    budget_seconds: float | None = None
    budget_evals: int = 10
    # a batch ramp (bertkit.training.ramp): the batch grows by accumulation from batch_ramp_start sequences to
    # batch_size over the first batch_ramp_ratio of the run (of the budget's time, else of max_steps); None = no ramp
    batch_ramp_start: int | None = None
    batch_ramp_ratio: float = 0.5

    def __post_init__(self) -> None:
        validate_types(self)
        for name in ("max_steps", "batch_size", "log_steps", "eval_steps", "save_steps"):
            if getattr(self, name) <= 0:
                raise ConfigError(f"field {name!r} must be positive, got {getattr(self, name)}")
        if self.micro_batch_size is not None and self.micro_batch_size <= 0:
            raise ConfigError(f"field 'micro_batch_size' must be positive, got {self.micro_batch_size}")
        if self.warmup_steps is not None and self.warmup_steps < 0:
            raise ConfigError(f"field 'warmup_steps' must be >= 0, got {self.warmup_steps}")
        if not 0 <= self.warmup_ratio < 1:
            raise ConfigError(f"field 'warmup_ratio' must be in [0, 1), got {self.warmup_ratio}")
        if self.save_total_limit < 1:
            raise ConfigError(f"field 'save_total_limit' must be >= 1, got {self.save_total_limit}")
        if not (self.lr > 0 and math.isfinite(self.lr)):
            raise ConfigError(f"field 'lr' must be a positive number, got {self.lr}")
        if not (0 <= self.adam_beta1 < 1 and 0 <= self.adam_beta2 < 1):
            raise ConfigError("fields 'adam_beta1' and 'adam_beta2' must be in [0, 1)")
        check_choice("optimizer", self.optimizer, OPTIMIZERS)
        check_choice("precision", self.precision, PRECISIONS)
        check_choice("on_nonfinite", self.on_nonfinite, NONFINITE_POLICIES)
        if self.nonfinite_skip_limit < 1:
            raise ConfigError(f"field 'nonfinite_skip_limit' must be >= 1, got {self.nonfinite_skip_limit}")
        check_choice("parallel", self.parallel, PARALLEL_MODES)
        check_choice("compile_mode", self.compile_mode, COMPILE_MODES)
        if self.budget_seconds is not None and not self.budget_seconds > 0:
            raise ConfigError(f"field 'budget_seconds' must be positive, got {self.budget_seconds}")
        if self.budget_seconds is not None and self.warmup_steps is not None:
            raise ConfigError("field 'warmup_steps' counts steps; a budget run warms up over warmup_ratio of its time "
                              "(leave warmup_steps unset)")
        if self.budget_evals < 1:
            raise ConfigError(f"field 'budget_evals' must be >= 1, got {self.budget_evals}")
        self._check_batch_ramp()
        if self.early_stopping_patience is not None:
            if self.early_stopping_patience <= 0:
                raise ConfigError(f"field 'early_stopping_patience' must be positive, got {self.early_stopping_patience}")
            if not self.metric_for_best:
                raise ConfigError("field 'early_stopping_patience' needs 'metric_for_best' (the metric to watch)")

    def _check_batch_ramp(self) -> None:
        if not 0 < self.batch_ramp_ratio <= 1:
            raise ConfigError(f"field 'batch_ramp_ratio' must be in (0, 1], got {self.batch_ramp_ratio}")
        start = self.batch_ramp_start
        if start is None:
            return
        if not 0 < start <= self.batch_size:
            raise ConfigError(f"field 'batch_ramp_start' must be in [1, batch_size {self.batch_size}], got {start}")
        if self.micro_batch_size is not None and start % self.micro_batch_size:
            raise ConfigError(f"field 'batch_ramp_start' ({start}) must be a multiple of micro_batch_size "
                              f"({self.micro_batch_size})")

    def describe_batch_ramp(self) -> str | None:
        """The ramp for a report: "8 -> 32 sequences over the first 50% of the 10m budget"; None without one."""
        if self.batch_ramp_start is None:
            return None
        if self.budget_seconds is not None:
            from bertkit.training.budget import describe_budget

            run = f"the {describe_budget(self.budget_seconds)} budget"
        else:
            run = f"{self.max_steps} steps"
        return (f"{self.batch_ramp_start} -> {self.batch_size} sequences over the first "
                f"{self.batch_ramp_ratio * 100:g}% of {run}")

    def num_warmup_steps(self) -> int:
        """The warm-up the schedule uses: `warmup_steps` if set, else `warmup_ratio` of `max_steps`."""
        return resolve_warmup_steps(self.warmup_steps, self.warmup_ratio, self.max_steps)

    def describe_warmup(self) -> str:
        """The resolved warm-up for a report: "100 steps (warmup_ratio 0.01 of 10000)" or "1000 steps"
        (a budget run: "warmup_ratio 0.1 of the 10m budget")."""
        if self.budget_seconds is not None:
            from bertkit.training.budget import describe_budget

            return f"warmup_ratio {self.warmup_ratio:g} of the {describe_budget(self.budget_seconds)} budget"
        steps = self.num_warmup_steps()
        text = f"{steps} step" + ("" if steps == 1 else "s")
        return text if self.warmup_steps is not None else f"{text} (warmup_ratio {self.warmup_ratio:g} of {self.max_steps})"

    def warmup_warning(self) -> str | None:
        """One line when an explicit `warmup_steps` lasts the whole run, so the lr never reaches
        its peak (a ratio never does); else None."""
        if self.budget_seconds is None and self.warmup_steps is not None and 0 < self.max_steps <= self.warmup_steps:
            return (f"warmup_steps {self.warmup_steps} >= max_steps {self.max_steps}: the learning rate never reaches "
                    f"its peak {self.lr:g} (lower it with --set warmup_steps=N, or leave it unset for "
                    f"warmup_ratio {self.warmup_ratio:g} of the run)")
        return None

    def best_is_greater(self) -> bool:
        """Whether a larger `metric_for_best` is better (explicit, else: unless it is a loss)."""
        if self.greater_is_better is not None:
            return self.greater_is_better
        return not (self.metric_for_best or "").endswith("loss")


def resolve_warmup_steps(warmup_steps: int | None, warmup_ratio: float, max_steps: int) -> int:
    """An explicit `warmup_steps` wins; else `warmup_ratio` of `max_steps`, rounded to a step."""
    return warmup_steps if warmup_steps is not None else round(warmup_ratio * max_steps)


def check_choice(name: str, value: Any, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        raise ConfigError(f"field {name!r} must be one of {', '.join(allowed)}, got {value!r}")


def _field_types(cls) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def _accepts(hint: Any, value: Any) -> bool:
    if hint is Any:
        return True
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        return any(_accepts(arg, value) for arg in typing.get_args(hint))
    if hint is type(None):
        return value is None
    if hint is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if origin is not None:
        return isinstance(value, origin)
    return isinstance(value, hint)


def validate_types(obj) -> None:
    """Check every field of dataclass `obj` against its annotation (ConfigError naming it)."""
    hints = _field_types(type(obj))
    for f in dataclasses.fields(obj):
        value = getattr(obj, f.name)
        if not _accepts(hints[f.name], value):
            raise ConfigError(f"field {f.name!r} expects {_type_name(hints[f.name])}, got {value!r}")
        if isinstance(value, float) and hints[f.name] in (float, float | None) and not math.isfinite(value):
            raise ConfigError(f"field {f.name!r} must be finite, got {value!r}")


def _type_name(hint: Any) -> str:
    return str(hint).replace("typing.", "").replace("<class '", "").replace("'>", "")


def parse_value(text: str, hint: Any) -> Any:
    """`--set` text -> a value for a field annotated `hint` (YAML scalar rules: 5e-4, true, null)."""
    import yaml

    try:
        value = yaml.safe_load(text)
    except yaml.YAMLError:
        value = text
    if isinstance(value, str):  # YAML 1.1 reads "5e-4" (no dot) as a string
        for number in (int, float):
            try:
                value = number(text)
                break
            except ValueError:
                continue
    if _accepts(hint, value):
        return value
    if _accepts(hint, text):  # e.g. a string field given "123"
        return text
    return value  # let validation name the field and the expected type


# transformers' TrainingArguments names -> bertkit's field, so `--set learning_rate=2e-5` works
# as a transformers user types it; a run without that field gets the advice instead
TRAINING_ARGUMENTS_NAMES = {
    "learning_rate": "lr",
    "num_train_epochs": "epochs",
    "per_device_train_batch_size": "batch_size",
    "train_batch_size": "batch_size",
    "per_device_eval_batch_size": "eval_batch_size",
    "logging_steps": "log_steps",
    "metric_for_best_model": "metric_for_best",
}
TRAINING_ARGUMENTS_ADVICE = {
    "num_train_epochs": "a pre-training run counts steps: max_steps, or a wall-clock --budget",
    "gradient_accumulation_steps": "set batch_size (the optimizer's batch) and micro_batch_size (one forward); "
                                   "bertkit accumulates batch_size / micro_batch_size forwards",
    "lr_scheduler_type": "the schedule is linear warm-up then linear decay (warmup_steps / warmup_ratio)",
    "fp16": "precision=fp16 (or bf16, auto)", "bf16": "precision=bf16 (or fp16, auto)",
}


def transformers_name(key: str, names: list[str], source: str) -> str | None:
    """bertkit's field for transformers' TrainingArguments name `key` (a warning names the
    translation, once), or None when `key` is not one or this config lacks the field."""
    field_name = TRAINING_ARGUMENTS_NAMES.get(key)
    if field_name is None or field_name not in names:
        return None
    warnings.warn(f"{source} {key}: transformers' name, taken as bertkit's {field_name!r}", stacklevel=3)
    return field_name


def apply_overrides(obj, overrides: dict[str, Any], source: str = "--set"):
    """A copy of dataclass `obj` with `overrides` applied; unknown fields raise ConfigError.

    Values given as strings (from `--set`) are parsed against the field's type.
    transformers' TrainingArguments names (`learning_rate`, `num_train_epochs`, ...) are
    taken for bertkit's fields, with a warning naming the field.
    """
    hints = _field_types(type(obj))
    names = [f.name for f in dataclasses.fields(obj) if f.init]
    changes = {}
    for key, value in overrides.items():
        if key not in names:
            field_name = transformers_name(key, names, source)
            if field_name is None:
                raise ConfigError(f"{source}: unknown field {key!r}{_unknown_field_advice(key, names)}")
            key = field_name
        changes[key] = parse_value(value, hints[key]) if isinstance(value, str) else value
    try:
        return dataclasses.replace(obj, **changes)
    except ConfigError as exc:
        raise ConfigError(f"{source}: {exc}") from None


def _unknown_field_advice(key: str, names: list[str]) -> str:
    if key in TRAINING_ARGUMENTS_ADVICE:
        return f" (transformers' TrainingArguments name; here: {TRAINING_ARGUMENTS_ADVICE[key]})"
    hint = difflib.get_close_matches(key, names, n=1)
    return f" (did you mean {hint[0]!r}?)" if hint else ""


def parse_set_arguments(items: list[str] | None) -> dict[str, str]:
    """['lr=5e-4', 'max_steps=2000'] -> {'lr': '5e-4', 'max_steps': '2000'}."""
    result = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"--set {item!r}: expected key=value")
        result[key.strip()] = value.strip()
    return result


def read_yaml_config(path: str | Path) -> dict[str, Any]:
    """A YAML (or JSON) mapping of field -> value; errors name the file."""
    import yaml

    path = Path(path)
    try:
        values = yaml.safe_load(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise BertkitError(f"{path}: no such file") from None
    except (UnicodeDecodeError, yaml.YAMLError) as exc:
        detail = str(exc).splitlines()[0]
        raise BertkitError(f"{path}: not valid YAML ({detail})") from None
    if values is None:
        return {}
    if not isinstance(values, dict):
        raise BertkitError(f"{path}: expected a mapping of field: value")
    return values


def write_run_config(output_dir: Path, config) -> None:
    """`config` as the run folder's RUN_CONFIG_FILE (atomically)."""
    from bertkit.atomic import write_text_atomic

    write_text_atomic(Path(output_dir) / RUN_CONFIG_FILE, to_json(config))


def read_run_config(output_dir: Path) -> tuple[Path, dict[str, Any]]:
    """A run folder's saved configuration: (its path, its values), older runs' values
    brought up to date (`with_legacy_fields`); one line naming the file when it cannot be read."""
    path = Path(output_dir) / RUN_CONFIG_FILE
    try:
        values = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise BertkitError(f"{path}: cannot read the run's configuration ({exc})") from None
    if not isinstance(values, dict):
        raise BertkitError(f"{path}: expected a mapping of field: value")
    return path, with_legacy_fields(values)


def with_legacy_fields(values: dict[str, Any]) -> dict[str, Any]:
    """A saved run_config.json from an older bertkit brought up to date: before `eval_seed`
    existed a run scored its held-out split with its run `seed` (resuming it keeps doing so,
    so its evaluations stay comparable); `nonfinite` is now `on_nonfinite`."""
    values = dict(values)
    if "seed" in values and "eval_seed" not in values:
        values["eval_seed"] = values["seed"]
    if "nonfinite" in values:
        values.setdefault("on_nonfinite", values.pop("nonfinite"))
    return values


def to_json(obj) -> str:
    return json.dumps(dataclasses.asdict(obj), indent=2, sort_keys=True) + "\n"
