"""TrainingConfig's warm-up fields: `warmup_ratio` of the run unless `warmup_steps` is given,
validated naming the field; configurations saved with an explicit 1,000 steps still load."""

from __future__ import annotations

import json

import pytest

from bertkit.errors import ConfigError
from bertkit.pretraining import build_config
from bertkit.training.config import TrainingConfig, apply_overrides, to_json


@pytest.mark.parametrize("max_steps, expected", [(1_000_000, 10_000), (10_000, 100), (250, 2), (20, 0)])
def test_default_warmup_is_one_percent_of_the_run(max_steps, expected):
    config = TrainingConfig(max_steps=max_steps)
    assert (config.warmup_steps, config.warmup_ratio) == (None, 0.01)
    assert config.num_warmup_steps() == expected
    assert config.warmup_warning() is None


def test_explicit_warmup_steps_win_over_the_ratio():
    config = apply_overrides(TrainingConfig(max_steps=100), {"warmup_steps": "30", "warmup_ratio": "0.5"})
    assert config.num_warmup_steps() == 30 and config.describe_warmup() == "30 steps"
    assert apply_overrides(config, {"warmup_steps": "null"}).num_warmup_steps() == 50


@pytest.mark.parametrize("field, value, message", [
    ("warmup_ratio", "1", "field 'warmup_ratio' must be in [0, 1), got 1"),
    ("warmup_ratio", "-0.1", "field 'warmup_ratio' must be in [0, 1), got -0.1"),
    ("warmup_steps", "-1", "field 'warmup_steps' must be >= 0, got -1"),
])
def test_bad_warmup_fields_are_named(field, value, message):
    with pytest.raises(ConfigError) as info:
        apply_overrides(TrainingConfig(), {field: value})
    assert str(info.value) == f"--set: {message}"


def test_a_saved_run_config_with_1000_warmup_steps_still_loads():
    """run_config.json written before warmup_ratio existed: warmup_steps 1000, no warmup_ratio."""
    config = build_config({"data": "d", "output_dir": "o", "max_steps": 5000, "warmup_steps": 1000}, {})
    assert config.num_warmup_steps() == 1000
    assert config.training_fields().num_warmup_steps() == 1000


def test_an_unset_warmup_round_trips_through_run_config_json():
    config = build_config({"data": "d", "output_dir": "o", "max_steps": 5000, "recipe": "bert"}, {})
    saved = json.loads(to_json(config))
    assert (saved["warmup_steps"], saved["warmup_ratio"]) == (None, 0.01)
    assert build_config(saved, {}) == config and config.num_warmup_steps() == 50
