"""The family contract without BERT: a toy encoder-decoder family defined here (its own
config fields, a model taking `decoder_input_ids`) gets config.json round-trips, checked
save/load and `loading_info` from the bases, and reaches a caller through the registry's
declared input names."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, ClassVar

import pytest
import torch
from torch import nn

from bertkit.model.bert.config import BertConfig
from bertkit.errors import BertkitError, ConfigError
from bertkit.model import families
from bertkit.model.bert import BertForPreTraining, BertModel, BertPreTrainedModel
from bertkit.model.families import MODEL_FAMILIES, ModelFamily, family_of, load_config, model_inputs
from bertkit.model.outputs import ModelOutput
from bertkit.model.pretrained import PreTrainedModel
from bertkit.pretrained_config import PretrainedConfig

TOY = "toy-seq2seq"


@dataclass
class ToyConfig(PretrainedConfig):
    """T5-like names, none of BERT's."""

    model_type: str = TOY
    vocab_size: int = 13
    d_model: int = 8
    num_layers: int = 1
    dropout_rate: float = 0.0
    decoder_start_token_id: int = 0

    presets: ClassVar[dict[str, dict[str, Any]]] = {"micro": {"d_model": 4}, "wide": {"d_model": 16}}

    def validate(self) -> None:
        for name in ("vocab_size", "d_model", "num_layers"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise ConfigError(f"field {name!r} must be a positive integer, got {value!r}")
        super().validate()


@dataclass
class ToySeq2SeqOutput(ModelOutput):
    loss: torch.Tensor | None = None
    logits: torch.Tensor | None = None


class ToyPreTrainedModel(PreTrainedModel):
    config_class = ToyConfig
    base_model_prefix = "model"

    def _init_module(self, module: nn.Module) -> None:
        if isinstance(module, (nn.Linear, nn.Embedding)):
            nn.init.normal_(module.weight, 0.0, 0.5)


class ToyModel(ToyPreTrainedModel):
    """Bare encoder-decoder: (input_ids, attention_mask) encoded, mean-pooled, added to the
    embedded decoder inputs. (B, S), (B, T) -> (B, T, d_model)."""

    def __init__(self, config: ToyConfig):
        super().__init__(config)
        self.shared = nn.Embedding(config.vocab_size, config.d_model)
        self.encoder = nn.Linear(config.d_model, config.d_model)
        self.decoder = nn.Linear(config.d_model, config.d_model)
        self.init_weights()

    def forward(self, input_ids, decoder_input_ids, attention_mask=None):
        mask = torch.ones_like(input_ids) if attention_mask is None else attention_mask
        encoded = self.encoder(self.shared(input_ids)) * mask[..., None]  # (B, S, D)
        context = encoded.sum(1) / mask.sum(1, keepdim=True)  # (B, D)
        return self.decoder(self.shared(decoder_input_ids)) + context[:, None]  # (B, T, D)


class ToyForConditionalGeneration(ToyPreTrainedModel):
    backbone_prefix = "model."
    optional_prefixes = ("lm_head.",)

    def __init__(self, config: ToyConfig):
        super().__init__(config)
        self.model = ToyModel(config)
        self.lm_head = nn.Linear(config.d_model, config.vocab_size)
        self.init_weights()

    def forward(self, input_ids, decoder_input_ids, attention_mask=None, labels=None):
        logits = self.lm_head(self.model(input_ids, decoder_input_ids, attention_mask))  # (B, T, V)
        loss = None if labels is None else nn.functional.cross_entropy(logits.flatten(0, 1), labels.flatten())
        return ToySeq2SeqOutput(loss, logits)


@pytest.fixture()
def toy_family(monkeypatch):
    family = ModelFamily(TOY, f"{__name__}:ToyConfig", f"{__name__}:ToyModel", "model",
                         input_names=("input_ids", "attention_mask", "decoder_input_ids"),
                         generator=f"{__name__}:ToyForConditionalGeneration")
    monkeypatch.setitem(MODEL_FAMILIES, TOY, family)
    return family


def toy_batch(batch_size: int = 2) -> dict[str, torch.Tensor]:
    generator = torch.Generator().manual_seed(0)
    return {
        "input_ids": torch.randint(1, 13, (batch_size, 5), generator=generator),
        "attention_mask": torch.tensor([[1, 1, 1, 1, 1]] + [[1, 1, 1, 0, 0]] * (batch_size - 1)),
        "decoder_input_ids": torch.randint(1, 13, (batch_size, 3), generator=generator),
        "token_type_ids": torch.zeros(batch_size, 5, dtype=torch.long),  # a BERT input the toy does not take
    }


# ---------------------------------------------------------------------------- config


def test_toy_config_round_trips_config_json(tmp_path):
    config = ToyConfig.from_preset("micro", num_layers=2, num_labels=3)
    config.extra["transformers_version"] = "4.40.0"
    config.save_pretrained(tmp_path)
    written = json.loads((tmp_path / "config.json").read_text())
    assert written["d_model"] == 4 and written["model_type"] == TOY and written["transformers_version"] == "4.40.0"
    assert written["id2label"] == {"0": "LABEL_0", "1": "LABEL_1", "2": "LABEL_2"}
    assert "problem_type" not in written  # unset task fields are left out, as transformers
    loaded = ToyConfig.from_pretrained(tmp_path)
    assert loaded == config and loaded.num_labels == 3 and loaded.extra == {"transformers_version": "4.40.0"}


def test_toy_config_errors_name_the_field(tmp_path):
    with pytest.raises(ConfigError, match=r"unknown field 'd_modle' \(did you mean 'd_model'\?\)"):
        ToyConfig.from_dict({"d_modle": 4})
    with pytest.raises(ConfigError, match="field 'd_model' must be a positive integer, got 0"):
        ToyConfig(d_model=0)
    with pytest.raises(ConfigError, match="field 'model_type' must be 'toy-seq2seq', got 'bert'"):
        ToyConfig.from_dict({"model_type": "bert"})
    with pytest.raises(ConfigError, match="unknown preset 'huge'; choose one of micro, wide"):
        ToyConfig.from_preset("huge")
    (tmp_path / "config.json").write_text(json.dumps({"model_type": TOY, "hidden_size": 4}))
    with pytest.raises(ConfigError, match=r"config\.json: unknown field 'hidden_size'"):  # BERT's fields are not the toy's
        ToyConfig.from_pretrained(tmp_path)


def test_base_config_has_no_presets_and_no_bert_fields():
    with pytest.raises(ConfigError, match="PretrainedConfig has no presets"):
        PretrainedConfig.from_preset("tiny")
    assert PretrainedConfig().to_dict() == {"model_type": ""}


# ---------------------------------------------------------------------------- model


def test_toy_model_saves_and_loads_with_checks(tmp_path):
    torch.manual_seed(0)
    model = ToyForConditionalGeneration(ToyConfig()).eval()
    model.save_pretrained(tmp_path / "full")
    assert (tmp_path / "full" / "model.safetensors").exists()
    assert json.loads((tmp_path / "full" / "config.json").read_text())["architectures"] == ["ToyForConditionalGeneration"]

    loaded = ToyForConditionalGeneration.from_pretrained(tmp_path / "full")
    assert loaded.loading_info == {"missing_keys": [], "unexpected_keys": []}
    batch = toy_batch()
    inputs = {k: batch[k] for k in ("input_ids", "attention_mask", "decoder_input_ids")}
    torch.testing.assert_close(loaded(**inputs).logits, model(**inputs).logits, rtol=0, atol=0)

    # the bare model from the full checkpoint: the backbone prefix is stripped, the head is unexpected
    bare, info = ToyModel.from_pretrained(tmp_path / "full", output_loading_info=True)
    assert info["unexpected_keys"] == ["lm_head.bias", "lm_head.weight"] and info["missing_keys"] == []
    torch.testing.assert_close(bare.shared.weight, model.model.shared.weight, rtol=0, atol=0)

    # the head model from a bare checkpoint: the prefix is added, the head is fresh and listed
    bare.save_pretrained(tmp_path / "bare")
    headed = ToyForConditionalGeneration.from_pretrained(tmp_path / "bare")
    assert headed.loading_info["missing_keys"] == ["lm_head.bias", "lm_head.weight"]
    torch.testing.assert_close(headed.model.decoder.weight, model.model.decoder.weight, rtol=0, atol=0)


def test_toy_model_loading_errors_and_weights_only_bin(tmp_path):
    torch.manual_seed(0)
    model = ToyForConditionalGeneration(ToyConfig())
    model.save_pretrained(tmp_path)
    config = json.loads((tmp_path / "config.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps({**config, "vocab_size": 14}))
    with pytest.raises(BertkitError, match=r"shape mismatch for '[a-z_.]+': checkpoint \(13"):
        ToyForConditionalGeneration.from_pretrained(tmp_path)

    (tmp_path / "config.json").write_text(json.dumps(config))
    (tmp_path / "model.safetensors").unlink()
    state = {k: v for k, v in model.state_dict().items() if k != "model.encoder.bias"}
    torch.save(state, tmp_path / "pytorch_model.bin")
    with pytest.raises(BertkitError, match=r"pytorch_model\.bin: 1 backbone weights missing \(model\.encoder\.bias\)"):
        ToyForConditionalGeneration.from_pretrained(tmp_path)
    relaxed = ToyForConditionalGeneration.from_pretrained(tmp_path, strict=False)
    assert relaxed.loading_info["missing_keys"] == ["model.encoder.bias"]

    class Payload:
        def __reduce__(self):
            return (print, ("pickled code ran",))

    torch.save({"model.shared.weight": Payload()}, tmp_path / "pytorch_model.bin")
    with pytest.raises(BertkitError, match="cannot read weights safely"):
        ToyForConditionalGeneration.from_pretrained(tmp_path)


def test_toy_init_hook_runs_and_num_parameters():
    torch.manual_seed(0)
    model = ToyForConditionalGeneration(ToyConfig(d_model=64, vocab_size=200))
    assert 0.4 < float(model.model.shared.weight.detach().std()) < 0.6  # the family's hook, not PyTorch's N(0, 1)
    assert model.num_parameters() == sum(p.numel() for p in model.parameters())


# ---------------------------------------------------------------------------- registry


def test_registry_reaches_the_toy_family(tmp_path, toy_family):
    ToyForConditionalGeneration(ToyConfig()).save_pretrained(tmp_path)
    assert family_of(tmp_path) is toy_family and toy_family.can_generate and not toy_family.can_fill_mask
    assert toy_family.generator_class() is ToyForConditionalGeneration
    assert type(load_config(tmp_path)) is ToyConfig
    assert isinstance(toy_family.backbone_class().from_pretrained(tmp_path), ToyModel)
    assert not toy_family.supports("classification")
    with pytest.raises(BertkitError, match="toy-seq2seq models have no classification head"):
        toy_family.task_class("classification")


def test_model_inputs_take_the_declared_names(toy_family):
    model = ToyForConditionalGeneration(ToyConfig())
    batch = toy_batch()
    assert list(model_inputs(model, batch)) == ["input_ids", "attention_mask", "decoder_input_ids"]
    wrapped = nn.Module()
    wrapped.module = model  # DDP / FSDP hold the model at `module`
    assert list(model_inputs(wrapped, batch)) == list(model_inputs(toy_family, batch))
    bert = BertModel(BertConfig.from_preset("tiny", vocab_size=20))
    assert list(model_inputs(bert, batch)) == ["input_ids", "token_type_ids", "attention_mask"]


def test_a_caller_runs_the_toy_model_unchanged(toy_family):
    """`run_features` (evaluation and prediction) was written for encoders; it feeds the
    toy its decoder inputs because it asks the registry, not because it knows the toy."""
    from bertkit.tasks.programs import run_features

    torch.manual_seed(0)
    model = ToyForConditionalGeneration(ToyConfig()).eval()
    batch = toy_batch(3)
    features = [{key: value[i] for key, value in batch.items()} for i in range(3)]

    def collate(rows):
        return {key: torch.stack([row[key] for row in rows]) for key in rows[0]}

    with torch.no_grad():
        logits = run_features(model, features, collate, batch_size=2)
        expected = model(batch["input_ids"], batch["decoder_input_ids"], batch["attention_mask"]).logits
    for i in range(3):
        torch.testing.assert_close(torch.from_numpy(logits[i]), expected[i, :5], rtol=1e-6, atol=1e-6)


# ---------------------------------------------------------------------------- the four families


def test_the_four_families_stand_on_the_contract():
    assert issubclass(BertConfig, PretrainedConfig) and issubclass(BertPreTrainedModel, PreTrainedModel)
    for model_type, family in families.MODEL_FAMILIES.items():  # every family, encoder or not
        assert issubclass(family.config_class(), PretrainedConfig)
        assert issubclass(family.backbone_class(), PreTrainedModel)
        assert all(issubclass(family.task_class(task), PreTrainedModel) for task in family.task_families)
    t5, xlnet = families.MODEL_FAMILIES["t5"], families.MODEL_FAMILIES["xlnet"]
    assert t5.input_names == ("input_ids", "attention_mask", "decoder_input_ids", "decoder_attention_mask")
    assert t5.can_generate and not t5.can_fill_mask
    # a permutation LM: no masked-LM head, two more inputs
    assert xlnet.input_names == ("input_ids", "token_type_ids", "attention_mask", "perm_mask", "target_mapping")
    assert not xlnet.can_generate and not xlnet.can_fill_mask
    for model_type in ("bert", "roberta", "electra", "albert"):
        family = families.MODEL_FAMILIES[model_type]
        assert not family.can_generate
        assert family.input_names == ("input_ids", "token_type_ids", "attention_mask")
        assert family.can_fill_mask and not family.can_generate
        with pytest.raises(BertkitError, match=f"^the model: {family.model_type} models cannot generate text"):
            family.generator_class()
        assert issubclass(family.masked_lm().model_class(), PreTrainedModel)
    assert BertForPreTraining.base_model_prefix == "bert"
