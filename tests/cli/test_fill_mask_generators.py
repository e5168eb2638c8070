"""fill-mask on a family without an MLM head names the family and the command that fits (issue 42's
journey re-run): a T5 said 'tokenizer: has no mask token (set mask_token in tokenizer_config.json)',
advice that cannot work, and a BART said only that it has no masked-LM head."""

from __future__ import annotations

import pytest

from bertkit import cli


@pytest.mark.parametrize("model_type, hint", [
    ("t5", "an encoder-decoder fills its blanks by generating the text: bertkit generate --model"),
    ("bart", "an encoder-decoder fills its blanks by generating the text: bertkit generate --model"),
    ("gpt2", "a decoder continues text: bertkit generate --model"),
])
def test_fill_mask_on_a_generator_points_at_generate(model_type, hint, tmp_path, capsys):
    from bertkit.model.families import MODEL_FAMILIES

    directory = tmp_path / model_type
    MODEL_FAMILIES[model_type].config_class()().save_pretrained(directory)  # config.json is what is read first
    assert cli.main(["fill-mask", "--model", str(directory), "It is a [MASK] truth."]) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and f"{model_type} models have no masked-LM head" in err and hint in err, err
