"""transformers' calling conventions, exactly: every model class bertkit exports that
transformers also has takes transformers' positional order (BERT: input_ids,
attention_mask, token_type_ids, ...), every family's model and config classes come from
the package top level, and a positional call computes what the keyword call does."""

from __future__ import annotations

import inspect

import pytest
import torch

import bertkit
from bertkit.errors import ConfigError

transformers = pytest.importorskip("transformers")

SAME = {"cache": "past_key_values"}  # transformers renamed past_key_values; the position is the same
SKIPPED = {"self", "kwargs", "args"}


def exported_models() -> list[str]:
    return [name for name in bertkit.__all__ if inspect.isclass(getattr(bertkit, name))
            and issubclass(getattr(bertkit, name), torch.nn.Module) and hasattr(transformers, name)
            and name != "PreTrainedModel"]  # the base class: no forward of its own


def parameters(forward) -> list[str]:
    return [SAME.get(p, p) for p in inspect.signature(forward).parameters if p not in SKIPPED]


@pytest.mark.parametrize("name", exported_models())
def test_positional_order_is_transformers(name):
    ours, theirs = parameters(getattr(bertkit, name).forward), parameters(getattr(transformers, name).forward)
    # every parameter before the first one bertkit does not take sits where transformers has it
    shared = next((i for i, p in enumerate(theirs) if p not in ours), len(theirs))
    assert shared >= 2 and ours[:shared] == theirs[:shared], (ours, theirs)


def test_every_family_model_and_config_comes_from_the_top_level():
    import importlib

    for family in ("bert", "roberta", "electra", "albert", "t5", "xlnet"):
        module = importlib.import_module(f"bertkit.model.{family}")
        public = [n for n in dir(module) if n[0].isupper() and not n.endswith(("PreTrainedModel", "Output", "TaskModel"))
                  and (n.endswith(("Model", "Config")) or "For" in n)]
        assert public and all(n in bertkit.__all__ for n in public), [n for n in public if n not in bertkit.__all__]
    assert len(exported_models()) >= 30


TINY = dict(vocab_size=99, hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=37,
            max_position_embeddings=64)


@pytest.mark.parametrize("name", ["BertModel", "BertForSequenceClassification", "RobertaModel", "ElectraModel",
                                  "AlbertModel", "BertForPreTraining"])
def test_a_positional_call_as_transformers_docs_write_it(name):
    cls = getattr(bertkit, name)
    torch.manual_seed(0)
    model = cls(cls.config_class(**TINY)).eval()
    ids = torch.randint(5, 99, (2, 9))
    mask = torch.ones_like(ids)
    mask[1, 6:] = 0
    types = torch.zeros_like(ids)
    types[:, 4:] = 1
    with torch.no_grad():
        positional = model(ids, mask, types)  # transformers: model(input_ids, attention_mask, token_type_ids)
        keywords = model(input_ids=ids, attention_mask=mask, token_type_ids=types)
    field = "logits" if hasattr(positional, "logits") and positional.logits is not None else (
        "prediction_logits" if hasattr(positional, "prediction_logits") else "last_hidden_state")
    torch.testing.assert_close(getattr(positional, field), getattr(keywords, field))
    with torch.no_grad():  # the mask is the second argument: swapping it for the segment ids changes the answer
        swapped = model(ids, types, mask)
    assert not torch.allclose(getattr(swapped, field), getattr(keywords, field))


def test_from_pretrained_takes_config_fields_by_keyword(tmp_path):
    """transformers' `from_pretrained(path, num_labels=3)`: config fields on top of config.json; an unknown
    one is a one-line error naming it."""
    config = bertkit.BertConfig(vocab_size=50, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                                intermediate_size=32)
    bertkit.BertModel(config).save_pretrained(tmp_path)
    model = bertkit.BertForSequenceClassification.from_pretrained(tmp_path, num_labels=3, classifier_pooling="mean")
    assert model.config.num_labels == 3 and model.config.classifier_pooling == "mean"
    assert model(input_ids=torch.tensor([[2, 5, 7]])).logits.shape == (1, 3)
    with pytest.raises(ConfigError, match="num_lables"):
        bertkit.BertForSequenceClassification.from_pretrained(tmp_path, num_lables=3)
