"""BertConfig: presets, HF config.json round-trip, field validation."""

from __future__ import annotations

import json

import pytest
import transformers

from bertkit import BertConfig
from bertkit.errors import ConfigError


@pytest.mark.parametrize("name,layers,hidden,heads", [
    ("tiny", 2, 128, 2), ("mini", 4, 256, 4), ("small", 4, 512, 8),
    ("medium", 8, 512, 8), ("base", 12, 768, 12), ("large", 24, 1024, 16),
])
def test_presets(name, layers, hidden, heads):
    cfg = BertConfig.from_preset(name)
    assert (cfg.num_hidden_layers, cfg.hidden_size, cfg.num_attention_heads) == (layers, hidden, heads)
    assert cfg.intermediate_size == 4 * hidden and cfg.layer_norm_eps == 1e-12


def test_base_preset_has_110m_parameters():
    from bertkit import BertModel
    import torch

    with torch.device("meta"):
        model = BertModel(BertConfig.from_preset("base"))
    assert 109e6 < model.num_parameters() < 111e6


def test_hf_config_json_round_trip(tmp_path, minilm_dir):
    cfg = BertConfig.from_pretrained(minilm_dir)
    assert cfg.hidden_size == 384 and cfg.extra["transformers_version"] == "4.8.2"
    cfg.save_pretrained(tmp_path)
    again = BertConfig.from_pretrained(tmp_path)
    assert again == cfg
    hf = transformers.BertConfig.from_pretrained(tmp_path)
    assert hf.hidden_size == 384 and hf.num_hidden_layers == 6 and hf.layer_norm_eps == 1e-12
    # and a config written by transformers loads here
    transformers.BertConfig(hidden_size=64, num_attention_heads=4, num_hidden_layers=3).save_pretrained(tmp_path / "hf")
    mine = BertConfig.from_pretrained(tmp_path / "hf")
    assert (mine.hidden_size, mine.num_attention_heads, mine.num_hidden_layers) == (64, 4, 3)


def test_pre_layer_norm_is_written_only_when_set(tmp_path):
    assert "pre_layer_norm" not in BertConfig.from_preset("tiny").to_dict()
    cfg = BertConfig.from_preset("tiny", pre_layer_norm=True)
    cfg.save_pretrained(tmp_path)
    assert json.loads((tmp_path / "config.json").read_text())["pre_layer_norm"] is True
    assert BertConfig.from_pretrained(tmp_path).pre_layer_norm


def test_unknown_field_names_the_field_and_suggests(tmp_path):
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"hiden_size": 64}))
    with pytest.raises(ConfigError, match=r"config.json: unknown field 'hiden_size' \(did you mean 'hidden_size'\?\)"):
        BertConfig.from_json_file(path)


@pytest.mark.parametrize("field,value,message", [
    ("hidden_size", 129, "divisible"),
    ("num_hidden_layers", 0, "num_hidden_layers"),
    ("hidden_act", "swish", "hidden_act"),
    ("hidden_dropout_prob", 1.5, "hidden_dropout_prob"),
    ("position_embedding_type", "relative_key", "position_embedding_type"),
    ("vocab_size", "30522", "vocab_size"),
])
def test_invalid_values_name_the_field(field, value, message):
    with pytest.raises(ConfigError, match=message):
        BertConfig.from_preset("tiny", **{field: value})


def test_bad_json_and_unknown_preset(tmp_path):
    from bertkit.errors import BertkitError

    bad = tmp_path / "config.json"
    bad.write_text("{not json")
    with pytest.raises(BertkitError, match="config.json: not valid JSON"):
        BertConfig.from_json_file(bad)
    with pytest.raises(ConfigError, match="unknown preset 'huge'"):
        BertConfig.from_preset("huge")
