"""A family's recipes: named sets of pre-training run defaults, sized by preset, and the one
fine-tuning recipe a family may register.

Each family package may hold a `recipes.py` whose `PRETRAINING` maps a recipe name to a
`PretrainingRecipe`; its registry entry names the module (`ModelFamily.recipes`), and
`bertkit.pretraining` asks the registry, never a family by name. The names:
- "default": what `bertkit pretrain` uses when no --recipe is given — the settings measured
  to learn at the family's small sizes (experiments/family_recipes.py, docs/pretraining.md),
  the published ones at the published sizes;
- "budget": the best held-out loss per CPU-minute under `--budget` (a preset of its own).
`--recipe bert` (the paper's BERT defaults, the dataclass defaults) needs no entry.
Every value stays overridable by the YAML, the flags and `--set`. `model` holds fields of
the family's own config (a recipe never sets a field the family's config lacks: a test checks).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class PretrainingRecipe:
    """Run defaults: `common` at every size, `sizes[preset]` on top (a larger model takes a lower
    peak lr); `preset`: the size the recipe picks when the run names none (None: the objective's)."""

    common: dict[str, Any] = field(default_factory=dict)
    sizes: dict[str, dict[str, Any]] = field(default_factory=dict)
    preset: str | None = None
    why: str = ""  # one line: where the values come from (the measurement, the paper)

    def values(self, preset: str | None) -> dict[str, Any]:
        """The defaults for a run of `preset` (None: a run from a checkpoint: the common values only);
        `model` merged key by key."""
        sized = self.sizes.get(preset, {}) if preset is not None else {}
        merged = {**self.common, **sized}
        if "model" in self.common or "model" in sized:
            merged["model"] = {**self.common.get("model", {}), **sized.get("model", {})}
        if self.preset is not None:
            merged.setdefault("preset", self.preset)
        return merged

    def model_fields(self) -> set[str]:
        """Every config field any size of the recipe sets."""
        return set(self.common.get("model", {})).union(*(set(s.get("model", {})) for s in self.sizes.values()))


# what every family's budget recipe shares (the cramming line, measured for BERT: experiments/budget_recipes.py):
# a triangular schedule warming up over 10% of the time, RoBERTa's beta2, gradients clipped at 0.5
BUDGET_SCHEDULE = {"warmup_ratio": 0.1, "adam_beta2": 0.98, "max_grad_norm": 0.5}


def budget_recipe(preset: str, lr: float, batch_size: int, model: dict[str, Any], why: str,
                  **more: Any) -> PretrainingRecipe:
    """A family's `budget` recipe: its tiny `preset`, its measured `lr` and `batch_size`, its config's `model`
    fields (dropout off), on the shared budget schedule (`more` overrides any of it)."""
    return PretrainingRecipe(common={"batch_size": batch_size, "lr": lr, **BUDGET_SCHEDULE, **more, "model": model},
                             preset=preset, why=why)


@dataclass(frozen=True)
class AuxiliaryLoss:
    """A loss a fine-tuning recipe adds to the task's: `weight` * `compute(model, outputs, batch)` ->
    (its mean over this micro-batch, the count it is a mean of), reported as `<name>_loss`;
    `model_options` are what the model call must also return for it (e.g. output_hidden_states)."""

    name: str
    weight: float
    compute: Callable[[Any, Any, Mapping[str, Any]], tuple[Any, float]]
    model_options: Mapping[str, Any] = field(default_factory=dict)


class FinetuningRecipe:
    """How a family fine-tunes beyond the shared loop (the plain recipe changes nothing): registered
    as `FINETUNING` in its package's `recipes.py`, read through `ModelFamily.finetuning_recipe()`,
    so the fine-tuning code names no family. Each hook gets the run's settings (a FinetuneConfig).

    `defaults`: FinetuneConfig values the family's runs start from (flags, YAML and --set override), its
    registry line's `finetuning_defaults` (torch-free data, which `bertkit finetune --help` lists);
    `fields`: the FinetuneConfig fields only this recipe reads (set on another family: an error)."""

    name = "plain"
    defaults: Mapping[str, Any] = {}
    fields: tuple[str, ...] = ()

    def prepare(self, tokenizer, config, source) -> tuple[Any, Any]:
        """(tokenizer, model config) for the task: e.g. new input markers and the table grown for them;
        `source` is the checkpoint folder, for errors."""
        return tokenizer, config

    def fit_spec(self, spec, settings):
        """The task spec once the data is read (e.g. how pairs are read)."""
        return spec

    def prepare_model(self, model, settings) -> None:
        """Changes to the task model before training (e.g. dropout on the classifier's input)."""

    def auxiliary_loss(self, settings) -> AuxiliaryLoss | None:
        """A loss added to the task's, None for none."""
        return None


PLAIN_FINETUNING = FinetuningRecipe()
