"""Each objective's own settings (a dataclass in its file): reached by `--set objective.X`, the
flat `--set X` of before, the generated flags and YAML; checked with field-named errors; kept
in run_config.json as `objective_settings`, and run_config.json files of before (flat fields)
still load and resume."""

from __future__ import annotations

import dataclasses
import json

import pytest
from _successor_data import build_data, pretrain

from bertkit.cli import main
from bertkit.data.formats import FORMATS
from bertkit.errors import ConfigError
from bertkit.objectives import OBJECTIVES, get_objective
from bertkit.objectives.base import MaskedLMObjective
from bertkit.pretraining import RUN_CONFIG_FILE, PretrainConfig, build_config
from bertkit.training.config import to_json

BASE = {"data": "d", "output_dir": "o"}
# run_config.json as written before settings were nested: every objective's fields, flat
OLD_FLAT = {"generator_size": 0.25, "disc_weight": 50.0, "embedding_size": None, "share_layers": None}


def electra(values=None, overrides=None) -> PretrainConfig:
    return build_config({**BASE, "objective": "electra", **(values or {})}, overrides or {})


@pytest.mark.parametrize("values,overrides", [
    ({}, {"objective.generator_size": "0.5"}),
    ({}, {"generator_size": "0.5"}),  # the flat name of before
    ({"generator_size": 0.5}, {}),  # --generator-size, and old run_config.json files
    ({"objective_settings": {"generator_size": 0.5}}, {}),  # YAML / run_config.json
    ({"objective_settings": {"generator_size": 0.1}}, {"objective.generator_size": "0.5"}),  # --set wins
    ({"objective_settings": {"generator_size": 0.1}, "generator_size": 0.5}, {}),  # a flag over YAML / saved
])
def test_every_route_reaches_the_setting(values, overrides):
    assert electra(values, overrides).objective_settings == {"generator_size": 0.5, "disc_weight": 50.0}


def test_settings_are_filled_in_and_round_trip_through_run_config_json():
    config = electra(overrides={"objective.disc_weight": "10"})
    saved = json.loads(to_json(config))
    assert saved["objective_settings"] == {"generator_size": 0.25, "disc_weight": 10.0}
    assert not {"generator_size", "disc_weight", "embedding_size", "share_layers"} & set(saved)
    assert build_config(saved, {}) == config
    assert build_config({**BASE, "objective": "mlm"}, {}).objective_settings == {}


@pytest.mark.parametrize("objective,expected", [
    ("electra", {"generator_size": 0.3, "disc_weight": 50.0}),
    ("albert", {"embedding_size": None, "share_layers": None}),
    ("mlm_nsp", {}),
])
def test_old_run_config_files_with_flat_fields_load(objective, expected):
    old = {**BASE, "objective": objective, **OLD_FLAT, **({"generator_size": 0.3} if objective == "electra" else {})}
    assert build_config(old, {}).objective_settings == expected


@pytest.mark.parametrize("objective,overrides,message", [
    ("electra", {"objective.generatr_size": "0.5"},
     "field 'objective.generatr_size' is not a setting of objective 'electra'; did you mean 'objective.generator_size'?"),
    ("mlm", {"objective.generator_size": "0.5"}, "field 'objective.generator_size' is not a setting of objective 'mlm' "
     "(it has no settings)"),
    ("mlm", {"generator_size": "0.5"}, "field 'generator_size' applies to objective 'electra' only, not 'mlm'"),
    ("electra", {"objective.disc_weight": "heavy"}, "field 'disc_weight' expects float, got 'heavy'"),
    ("electra", {"objective.generator_size": "2"}, "field 'generator_size' must be in (0, 1]"),
    ("spanbert", {"objective.max_span_length": "0"}, "field 'max_span_length' must be positive, got 0"),
    ("albert", {"objective.share_layers": "some"}, "field 'share_layers' must be one of all, none, attention, ffn"),
])
def test_bad_settings_name_the_field(objective, overrides, message):
    with pytest.raises(ConfigError) as error:
        build_config({**BASE, "objective": objective}, overrides)
    assert message in str(error.value) and "\n" not in str(error.value)


def test_setting_names_do_not_shadow_run_fields_and_formats_are_registered():
    run_fields = {f.name for f in dataclasses.fields(PretrainConfig)}
    for name in OBJECTIVES:
        cls = get_objective(name)
        assert not set(cls.settings_class.names()) & run_fields, name
        assert set(cls.data_formats) <= set(FORMATS), name


@pytest.fixture(scope="module")
def data_dirs(tmp_path_factory):
    root = tmp_path_factory.mktemp("settings")
    return {fmt: build_data(root, "wordpiece", fmt) for fmt in ("nsp", "packed")}


def test_masker_is_a_tool_of_the_masking_objectives_only(data_dirs):
    from _successor_data import make_objective

    ltr = make_objective("ltr", data_dirs["nsp"], 1, {})
    assert not isinstance(ltr, MaskedLMObjective) and not hasattr(ltr, "masker")
    for name in ("mlm_nsp", "electra"):
        assert isinstance(make_objective(name, data_dirs["nsp"], 1, {}), MaskedLMObjective)
    spanbert = make_objective("spanbert", data_dirs["packed"], 1, {"objective.max_span_length": "3",
                                                                   "span_geometric_p": "0.5"})
    assert (spanbert.masker.config.max_span_length, spanbert.masker.config.span_geometric_p) == (3, 0.5)


def test_a_run_saved_with_flat_settings_resumes(data_dirs, tmp_path, capsys):
    run = tmp_path / "electra"
    assert pretrain("electra", data_dirs["nsp"], run, "--generator-size", "0.5", "--set", "model.embedding_size=16") == 0
    path = run / RUN_CONFIG_FILE
    values = json.loads(path.read_text())
    assert values["objective_settings"] == {"generator_size": 0.5, "disc_weight": 50.0}
    flat = {k: v for k, v in values.items() if k != "objective_settings"}
    path.write_text(json.dumps({**flat, **OLD_FLAT, "generator_size": 0.5}))  # as written before this change
    capsys.readouterr()
    assert main(["pretrain", "--output-dir", str(run), "--resume", "--set", "max_steps=4"]) == 0
    assert "resume applies from the command line: max_steps 4 (saved 2)" in capsys.readouterr().err
    assert json.loads(path.read_text())["objective_settings"] == {"generator_size": 0.5, "disc_weight": 50.0}
    generator = json.loads((run / "final" / "generator" / "config.json").read_text())
    assert generator["hidden_size"] == 16  # half the discriminator's 32
    capsys.readouterr()
    assert main(["pretrain", "--output-dir", str(run), "--resume", "--generator-size", "0.25"]) != 0
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "objective_settings.generator_size 0.25 (saved 0.5)" in err
