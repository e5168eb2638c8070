"""An objective's own settings: a small frozen dataclass per objective (`settings_class`).

A field is declared with `setting(default, help, choices=...)`; its checks go in the
dataclass's `check()` and raise ConfigError naming the field. A run's `PretrainConfig`
keeps the settings as the mapping `objective_settings`, reached as `--set objective.FIELD=V`,
as the flat `--set FIELD=V` of before, in YAML as `objective_settings: {FIELD: V}`, and as a
generated flag `--FIELD-NAME` (bertkit.commands.pretrain). Nothing outside the objective's
file names its fields.
"""

from __future__ import annotations

import dataclasses
import difflib
import typing
from dataclasses import dataclass
from typing import Any

from bertkit.errors import ConfigError
from bertkit.training.config import apply_overrides, check_choice, validate_types


def setting(default: Any, help: str, choices: tuple[str, ...] | None = None) -> Any:
    """A settings field: its default, its flag's help and, for a string, the allowed values."""
    return dataclasses.field(default=default, metadata={"help": help, "choices": choices})


@dataclass(frozen=True)
class ObjectiveSettings:
    """No settings (the base of every objective's settings dataclass)."""

    def __post_init__(self) -> None:
        validate_types(self)
        for f in dataclasses.fields(self):
            choices = f.metadata.get("choices")
            if choices is not None and getattr(self, f.name) is not None:
                check_choice(f.name, getattr(self, f.name), choices)
        self.check()

    def check(self) -> None:
        """Field checks beyond type and choice; raise ConfigError naming the field."""

    @classmethod
    def names(cls) -> list[str]:
        return [f.name for f in dataclasses.fields(cls)]

    def updated(self, values: dict[str, Any], objective: str, source: str = "config") -> "ObjectiveSettings":
        """These settings with `values` applied (typed, or `--set` strings parsed against the
        field's type); a name that is not a field raises one line naming it (did you mean ...)."""
        names = self.names()
        for key in values:
            if key not in names:
                close = difflib.get_close_matches(key, names, n=1)
                known = f"; did you mean 'objective.{close[0]}'?" if close else (
                    f" (its settings: {', '.join(names)})" if names else " (it has no settings)")
                raise ConfigError(f"{source}: field 'objective.{key}' is not a setting of objective {objective!r}{known}")
        return apply_overrides(self, values, source=source)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def flag_specs(settings_class: type[ObjectiveSettings]) -> list[tuple[str, dict[str, Any]]]:
    """(field name, argparse keyword arguments) for each field: `type` from its annotation."""
    hints = typing.get_type_hints(settings_class)
    specs = []
    for f in dataclasses.fields(settings_class):
        hint = hints[f.name]
        kinds = [t for t in typing.get_args(hint) if t is not type(None)] or [hint]
        kwargs: dict[str, Any] = {"type": kinds[0] if kinds[0] in (int, float, str) else str,
                                  "help": f.metadata.get("help", "") + ("" if f.default is None else f" (default: {f.default})")}
        if f.metadata.get("choices"):
            kwargs["choices"] = list(f.metadata["choices"])
        specs.append((f.name, kwargs))
    return specs


def resolve_run_settings(values: dict[str, Any], overrides: dict[str, str], objective: str, source: str,
                         run_fields: set[str]) -> tuple[dict[str, Any], dict[str, str], dict[str, Any]]:
    """Split a run's `values` (YAML, flags, a saved run_config.json) and `--set` `overrides`
    into (other values, other overrides, the objective's settings as a mapping).

    Settings come, later winning, from `values["objective_settings"]` (YAML, run_config.json),
    flat names in `values` (the flags, and run_config.json files written before settings were
    nested), flat `--set` names and `--set objective.FIELD`. A flat name of another objective's setting is dropped
    when it holds that setting's default (old run_config.json files hold every objective's),
    and otherwise refused in one line naming the field. `run_fields`: the run config's own
    field names, never taken for settings."""
    from bertkit.objectives import get_objective, setting_owners

    settings_class = get_objective(objective).settings_class
    owners = {name: by for name, by in setting_owners().items() if name not in run_fields}
    values = dict(values)
    nested = values.pop("objective_settings", None) or {}
    if not isinstance(nested, dict):
        raise ConfigError(f"{source}: field 'objective_settings' expects a mapping of setting: value, got {nested!r}")
    nested_overrides = {k.removeprefix("objective."): v for k, v in overrides.items() if k.startswith("objective.")}
    plain = {k: v for k, v in overrides.items() if not k.startswith("objective.")}
    settings = settings_class().updated({**nested, **_own(values, owners, objective)}, objective, source)
    settings = settings.updated({**_own(plain, owners, objective), **nested_overrides}, objective, "--set")
    return values, plain, settings.to_dict()


def _own(mapping: dict[str, Any], owners: dict[str, dict[str, Any]], objective: str) -> dict[str, Any]:
    """Remove the flat setting names from `mapping` (in place); return those of `objective`."""
    from bertkit.training.config import parse_value

    own = {}
    for key in [k for k in mapping if k in owners]:
        value = mapping.pop(key)
        if objective in owners[key]:
            own[key] = value
            continue
        parsed = parse_value(value, Any) if isinstance(value, str) else value
        if parsed is not None and all(parsed != default for default in owners[key].values()):
            names = " or ".join(repr(name) for name in owners[key])
            raise ConfigError(f"field {key!r} applies to objective {names} only, not {objective!r}")
    return own
