"""Objective mlm trains the masked LM of the family its preset names: a fill-mask family whose presets
carry their own names (here a RoBERTa registered under a prefixed preset) is built, trained, saved and
resumed by `--objective mlm --preset <its name>`, its recipe read from its registry entry; BERT's plain
sizes still build BERT."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any, ClassVar

import pytest
from _successor_data import QUIET, build_data

from bertkit.cli import main
from bertkit.model import families
from bertkit.model.roberta import RobertaConfig, RobertaForMaskedLM
from bertkit.objectives.mlm_nsp import MlmObjective, masked_lm_presets

PRESET = "prefixed-tiny"


@dataclasses.dataclass
class PrefixedRobertaConfig(RobertaConfig):
    presets: ClassVar[dict[str, dict[str, Any]]] = {PRESET: {
        "hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2, "intermediate_size": 64,
        "type_vocab_size": 1}}


@pytest.fixture
def prefixed_family(monkeypatch):
    family = dataclasses.replace(families.MODEL_FAMILIES["roberta"], config=f"{__name__}:PrefixedRobertaConfig")
    monkeypatch.setitem(families.MODEL_FAMILIES, "roberta", family)
    return family


def test_plain_sizes_stay_bert_and_prefixed_presets_name_their_family(prefixed_family):
    assert MlmObjective.model_family("tiny").model_type == "bert"
    assert MlmObjective.model_family(None).model_type == "bert"
    assert masked_lm_presets()[PRESET] is prefixed_family and "tiny" not in masked_lm_presets()
    assert MlmObjective.model_family(PRESET) is prefixed_family
    assert PRESET in MlmObjective.preset_names() and "tiny" in MlmObjective.preset_names()


def test_mlm_trains_and_resumes_the_presets_family(prefixed_family, tmp_path):
    data = build_data(tmp_path, "bbpe", "packed")
    out = tmp_path / "run"
    args = ["pretrain", "--objective", "mlm", "--preset", PRESET, "--data", str(data), "--output-dir", str(out),
            *QUIET, "--set", "batch_size=8", "--set", "max_steps=3", "--set", "eval_steps=3",
            "--set", "model.max_position_embeddings=72"]
    assert main(args) == 0
    config = json.loads((out / "final" / "config.json").read_text())
    assert config["model_type"] == "roberta" and config["architectures"] == ["RobertaForMaskedLM"]
    assert config["hidden_size"] == 32
    records = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    evaluated = [r for r in records if "eval_mlm_loss" in r]
    assert evaluated and 0.0 <= evaluated[-1]["eval_mlm_accuracy"] <= 100.0
    assert isinstance(MlmObjective.load_model(Path(out / "final")), RobertaForMaskedLM)
    # continued pre-training from the checkpoint takes the same family's model
    more = tmp_path / "more"
    assert main([*args[:3], "--init-from", str(out / "final"), *args[5:7], "--output-dir", str(more), *args[9:]]) == 0
    assert json.loads((more / "final" / "config.json").read_text())["architectures"] == ["RobertaForMaskedLM"]
