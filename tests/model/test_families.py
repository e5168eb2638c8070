"""The model-family registry the task layer loads checkpoints through."""

import json

import pytest

from bertkit.model.bert.config import BertConfig
from bertkit.errors import BertkitError
from bertkit.model.families import (
    MODEL_FAMILIES,
    architecture_task_families,
    family_of,
    get_model_family,
    load_config,
    task_model_class,
)
from bertkit.model.bert.task_heads import BertForQuestionAnswering, BertForSequenceClassification


def write_config(directory, values):
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "config.json").write_text(json.dumps(values))
    return directory


def test_bert_checkpoint_without_model_type_is_bert(tmp_path):
    tiny = BertConfig(vocab_size=50, hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=64)
    values = tiny.to_dict()
    values.pop("model_type")
    directory = write_config(tmp_path / "m", values)
    assert family_of(directory).model_type == "bert"
    config = load_config(directory)
    assert type(config) is BertConfig and config.hidden_size == 32
    assert task_model_class(config, "classification") is BertForSequenceClassification
    assert task_model_class(config, "qa") is BertForQuestionAnswering


def test_unknown_model_type_names_the_file(tmp_path):
    directory = write_config(tmp_path / "m", {"model_type": "reformer"})
    with pytest.raises(BertkitError, match=r"config\.json: model_type 'reformer' is not supported"):
        family_of(directory)


def test_missing_config_and_bad_json_are_one_line_errors(tmp_path):
    with pytest.raises(BertkitError, match="no such model directory"):
        family_of(tmp_path / "absent")
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "config.json").write_text("{not json")
    with pytest.raises(BertkitError, match="not valid JSON"):
        family_of(tmp_path / "m")


def test_every_family_resolves_its_classes():
    for model_type, family in MODEL_FAMILIES.items():
        config_cls = family.config_class()
        assert config_cls.__dataclass_fields__["model_type"].default == model_type
        assert family.backbone_class() is not None
        for task in family.tasks:
            family.task_class(task)  # imports without error
    assert architecture_task_families()["BertForTokenClassification"] == "tagging"


def test_a_family_without_the_head_says_so():
    family = get_model_family("bert")
    with pytest.raises(BertkitError, match="no summarization head"):
        family.task_class("summarization", "runs/x")
