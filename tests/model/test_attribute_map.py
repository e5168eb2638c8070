"""transformers' attribute_map on every family's config: the generic names read and set the family's own
fields, and each of bertkit's entries is transformers' own for that config class."""

from __future__ import annotations

import pytest
import transformers

from bertkit.model.families import MODEL_FAMILIES

REFERENCE = {"gpt2": transformers.GPT2Config, "openai-gpt": transformers.OpenAIGPTConfig,
             "t5": transformers.T5Config, "bart": transformers.BartConfig, "xlnet": transformers.XLNetConfig}
# generic names bertkit's shared code reads that transformers' class does not map
BERTKIT_ONLY = {"xlnet": {"intermediate_size"}}


@pytest.mark.parametrize("model_type", sorted(REFERENCE))
def test_each_entry_is_transformers_own(model_type):
    ours = MODEL_FAMILIES[model_type].config_class().attribute_map
    assert ours, model_type
    theirs = REFERENCE[model_type].attribute_map
    shared = {name: own for name, own in ours.items() if name not in BERTKIT_ONLY.get(model_type, set())}
    assert {name: theirs.get(name) for name in shared} == shared


@pytest.mark.parametrize("model_type", sorted(name for name, family in MODEL_FAMILIES.items()
                                              if family.config_class().attribute_map))
def test_generic_names_read_and_set_the_field(model_type):
    config = MODEL_FAMILIES[model_type].config_class()()
    for generic, own in type(config).attribute_map.items():
        assert getattr(config, generic) == getattr(config, own)
        setattr(config, generic, 3)
        assert getattr(config, own) == 3 and generic not in config.to_dict()
    with pytest.raises(AttributeError, match="no attribute 'not_a_field'"):
        config.not_a_field  # noqa: B018
