"""T5Config: presets (the published t5-small / t5-base shapes), transformers' config.json
both ways, field-named errors, and presets reached from `bertkit pretrain`."""

from __future__ import annotations

import json

import pytest
import transformers

from bertkit.cli import build_parser
from bertkit.errors import ConfigError
from bertkit.model.t5 import T5Config, T5ForConditionalGeneration
from bertkit.objectives.base import preset_config
from bertkit.objectives.mlm_nsp import MlmObjective


@pytest.mark.parametrize("name,shape,parameters", [
    ("t5-small", (512, 2048, 6, 8, 64), 60_506_624),  # google-t5/t5-small's published count
    ("t5-base", (768, 3072, 12, 12, 64), 222_903_552),  # google-t5/t5-base's
])
def test_published_presets(name, shape, parameters):
    config = T5Config.from_preset(name)
    assert (config.d_model, config.d_ff, config.num_layers, config.num_heads, config.d_kv) == shape
    assert config.num_decoder_layers == config.num_layers and config.vocab_size == 32128
    assert config.feed_forward_proj == "relu" and config.tie_word_embeddings and config.scale_decoder_outputs
    if name == "t5-small":  # t5-base builds in ~1 GB: counted for the small one only
        assert T5ForConditionalGeneration(config).num_parameters() == parameters


def test_tiny_and_mini_are_v1_1():
    for name in ("t5-tiny", "t5-mini"):
        config = T5Config.from_preset(name, vocab_size=500)
        assert config.is_gated_act and config.dense_act_fn == "gelu_new"
        assert not config.tie_word_embeddings and not config.scale_decoder_outputs
        assert T5ForConditionalGeneration(config).lm_head.weight.shape == (500, config.d_model)


def test_transformers_config_json_round_trip(tmp_path):
    theirs = transformers.T5Config(d_model=64, num_layers=3, num_decoder_layers=2, feed_forward_proj="gated-gelu",
                                   tie_word_embeddings=False, decoder_start_token_id=0)
    theirs.save_pretrained(tmp_path)
    ours = T5Config.from_pretrained(tmp_path)
    assert (ours.d_model, ours.num_layers, ours.num_decoder_layers) == (64, 3, 2)
    assert ours.is_gated_act and ours.scale_decoder_outputs is False
    ours.save_pretrained(tmp_path / "back")
    again = transformers.T5Config.from_pretrained(tmp_path / "back")
    assert (again.d_model, again.num_decoder_layers, again.dense_act_fn, again.is_gated_act) == (64, 2, "gelu_new", True)
    assert again.scale_decoder_outputs is False
    saved = json.loads((tmp_path / "back" / "config.json").read_text())
    assert saved["model_type"] == "t5" and saved["decoder_start_token_id"] == 0


def test_published_checkpoint_configs_load():
    """google-t5/t5-small's and google/t5-v1_1-small's config.json fields (as published)."""
    t5_small = {"architectures": ["T5ForConditionalGeneration"], "d_ff": 2048, "d_kv": 64, "d_model": 512,
                "decoder_start_token_id": 0, "dropout_rate": 0.1, "eos_token_id": 1, "initializer_factor": 1.0,
                "is_encoder_decoder": True, "layer_norm_epsilon": 1e-06, "model_type": "t5", "n_positions": 512,
                "num_heads": 8, "num_layers": 6, "output_past": True, "pad_token_id": 0,
                "relative_attention_num_buckets": 32, "task_specific_params": {"translation_en_to_de": {}},
                "vocab_size": 32128}
    config = T5Config.from_dict(t5_small)
    assert config.to_dict()["n_positions"] == 512 and config.scale_decoder_outputs
    v1_1 = {**t5_small, "d_ff": 1024, "num_heads": 6, "num_layers": 8, "num_decoder_layers": 8, "d_model": 512,
            "feed_forward_proj": "gated-gelu", "tie_word_embeddings": False}
    config = T5Config.from_dict(v1_1)
    assert config.dense_act_fn == "gelu_new" and not config.scale_decoder_outputs


@pytest.mark.parametrize("field,value,message", [
    ("feed_forward_proj", "gated-swish", "field 'feed_forward_proj' must be ACT or gated-ACT"),
    ("d_kv", 0, "field 'd_kv' must be a positive integer"),
    ("dropout_rate", 1.5, r"field 'dropout_rate' must be in \[0, 1\)"),
    ("eos_token_id", 500, "field 'eos_token_id' must be a token id"),
    ("d_modle", 8, "unknown field 'd_modle' \\(did you mean 'd_model'\\?\\)"),
])
def test_bad_fields_are_named(field, value, message):
    with pytest.raises(ConfigError, match=message):
        T5Config.from_dict({"vocab_size": 100, field: value})


def test_preset_config_fills_only_the_fields_the_family_has():
    config = preset_config("t5-mini", 321, 128, 0, {"dropout_rate": 0.0}, config_class=T5Config)
    assert (config.vocab_size, config.d_model, config.dropout_rate) == (321, 256, 0.0)
    assert not hasattr(config, "max_position_embeddings")


class _T5Objective(MlmObjective):  # stands in for an objective whose model is another family's
    config_class = T5Config
    config_defaults = {"preset": "t5-mini"}


def test_pretrain_offers_every_objectives_presets(monkeypatch):
    import bertkit.objectives as objectives
    from bertkit.pretraining import build_config

    monkeypatch.setitem(objectives.OBJECTIVES, "t5_stand_in", f"{__name__}:_T5Objective")
    args = build_parser().parse_args(["pretrain", "--objective", "t5_stand_in", "--preset", "t5-mini"])
    assert args.preset == "t5-mini"
    assert build_config({"objective": "t5_stand_in", "data": "d", "output_dir": "o"}, {}).preset == "t5-mini"
    assert build_config({"data": "d", "output_dir": "o"}, {}).preset == "mini"
