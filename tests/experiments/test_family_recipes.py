"""experiments/family_recipes.py: docs/pretraining.md's recipe table is the one its records make, and every
family's recipes set only fields its config has (issue 45, deliverables 1 and 7)."""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "experiments"))
import family_recipes as driver  # noqa: E402


def test_the_docs_table_is_written_from_the_records():
    doc = driver.DOC.read_text()
    assert driver.with_table(doc, driver.table_markdown(driver.RESULTS)) == doc, \
        "docs/pretraining.md's table differs from the records: python experiments/family_recipes.py table --write"


def test_every_chosen_arm_is_recorded_and_every_default_beats_its_baseline():
    import json

    records = {r["arm"]: r for r in map(json.loads, driver.RESULTS.read_text().splitlines())}
    baselines = {r["objective"]: r["unigram_loss"]
                 for r in map(json.loads, driver.RESULTS.with_name("family_recipes_baselines.jsonl").read_text().splitlines())}
    assert driver.CHOSEN <= set(records)
    for objective in driver.OBJECTIVES:
        assert records[f"{objective}_default"]["final"] < baselines[objective], objective
        assert records[f"{objective}_default"]["final"] < records[f"{objective}_bert"]["final"], objective


def test_recipes_set_only_their_familys_fields_and_print_on_one_line():
    from bertkit.model.families import MODEL_FAMILIES
    from bertkit.pretraining import RECIPE_NAMES, build_config, describe_recipe
    from bertkit.training.config import TrainingConfig

    run_fields = {f.name for f in dataclasses.fields(TrainingConfig)} | {"preset", "mlm_probability"}
    for family in MODEL_FAMILIES.values():
        config_fields = {f.name for f in dataclasses.fields(family.config_class())}
        for name in RECIPE_NAMES:
            recipe = family.pretraining_recipe(name)
            if recipe is None:
                continue
            assert recipe.model_fields() <= config_fields, (family.model_type, name)
            for size in (None, *recipe.sizes):
                assert set(recipe.values(size)) - {"model"} <= run_fields, (family.model_type, name, size)
    config = build_config({"objective": "bart", "recipe": "budget", "data": "d", "output_dir": "o"}, {})
    assert (config.preset, config.batch_size, config.model["dropout"]) == ("bart-tiny", 16, 0.0)
    line = describe_recipe(config)
    assert "\n" not in line and line.startswith("recipe budget (bart, bart-tiny): lr 0.001")
    default = build_config({"objective": "bilm", "preset": "elmo-tiny", "data": "d", "output_dir": "o"}, {"lr": "1e-2"})
    assert (default.recipe, default.lr, default.model) == ("default", 1e-2, {"dropout": 0.0})  # --set wins
    assert build_config({"objective": "clm", "data": "d", "output_dir": "o", "recipe": "bert"}, {}).lr == 1e-4
