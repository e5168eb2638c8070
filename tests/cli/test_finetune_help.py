"""`bertkit finetune --help` names each model family's fine-tuning defaults (issue 42 item 11), read from
the registry lines without importing torch; the recipes read the same values."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from pathlib import Path

import pytest

from bertkit import cli
from bertkit.commands.finetune import PLAIN_DEFAULTS
from bertkit.model.families import MODEL_FAMILIES

SRC = str(Path(__file__).resolve().parents[2] / "src")


@pytest.mark.parametrize("command", [["finetune"], ["finetune", "glue"], ["finetune", "classify"]])
def test_finetune_help_lists_the_gpt_recipes_defaults(command, capsys):
    with pytest.raises(SystemExit):
        cli.main([*command, "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert ("gpt2, openai-gpt: lr=6.25e-05, batch_size=32, epochs=3, warmup_ratio=0.002, lm_coef=0.5, "
            "classifier_dropout=0.1") in text
    assert "every other family: the paper's BERT recipe, lr=3e-05" in text
    if command != ["finetune"]:  # the flags name the families whose default differs
        assert "peak learning rate (default 3e-05; gpt2, openai-gpt: 6.25e-05)" in text
        assert "(default 0.1; gpt2, openai-gpt: 0.002)" in text
        assert "training epochs (default 3)" in text


def test_finetune_help_imports_no_torch():
    probe = ("import sys, contextlib, io\n"
             "from bertkit.cli import main\n"
             "out = io.StringIO()\n"
             "with contextlib.redirect_stdout(out):\n"
             "    try:\n"
             "        main(['finetune', 'glue', '--help'])\n"
             "    except SystemExit:\n"
             "        pass\n"
             "assert 'lm_coef=0.5' in out.getvalue()\n"
             "print(sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'transformers')))\n")
    out = subprocess.run([sys.executable, "-c", probe], env={"PYTHONPATH": SRC, "PATH": "/usr/bin:/bin"},
                         capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_the_recipes_start_from_the_registry_values():
    from bertkit.finetuning import FinetuneConfig, model_family_defaults

    for family in MODEL_FAMILIES.values():
        assert dict(family.finetuning_recipe().defaults) == dict(family.finetuning_defaults), family.model_type
    assert MODEL_FAMILIES["gpt2"].finetuning_defaults["lr"] == 6.25e-5
    plain = {f.name: f.default for f in dataclasses.fields(FinetuneConfig) if f.name in PLAIN_DEFAULTS}
    assert plain == PLAIN_DEFAULTS  # the help's "(default X)" is FinetuneConfig's
    assert model_family_defaults(None) == {}
