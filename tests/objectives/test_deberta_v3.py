"""DeBERTa-v3's objective: gradient-disentangled embedding sharing (the RTD loss never reaches the
generator's token table; the discriminator's table is the generator's plus a delta that starts at zero),
and `bertkit pretrain --objective deberta-v3` end to end: a DebertaV2 discriminator folder with the delta
merged (transformers and `finetune` load it), its generator for fill-mask, resume to the same weights."""

from __future__ import annotations

import json
import shutil

import pytest
import torch
from _successor_data import QUIET, TINY, build_data, finetune_mrpc
from safetensors.torch import load_file

from bertkit.cli import main
from bertkit.model.deberta import DebertaV2Config
from bertkit.objectives.deberta_v3 import DebertaV3Objective, DebertaV3Settings

WORDS = "deberta.embeddings.word_embeddings.weight"


def _model(depth: float = 0.5):
    config = DebertaV2Config.from_preset("deberta-tiny", vocab_size=50, hidden_size=16, num_attention_heads=2,
                                         intermediate_size=32, num_hidden_layers=2)
    torch.manual_seed(0)
    return DebertaV3Objective.build_model(config, DebertaV3Settings(generator_depth=depth))


def test_gdes_keeps_the_rtd_loss_out_of_the_generator_embeddings():
    model = _model()
    assert model.generator.config.num_hidden_layers == 1 and model.generator.config.hidden_size == 16
    words = model.discriminator.deberta.embeddings.word_embeddings
    shared = model.generator.deberta.embeddings.word_embeddings.weight
    assert torch.count_nonzero(words.delta) == 0 and torch.equal(words.weight, shared)  # E_delta starts at zero
    ids = torch.randint(5, 50, (2, 7))
    model.discriminator(input_ids=ids).logits.sum().backward()  # the RTD side only
    assert shared.grad is None and words.delta.grad is not None and words.delta.grad.abs().sum() > 0
    labels = torch.full_like(ids, -100)
    labels[:, 3] = ids[:, 3]
    model.generator(input_ids=ids, labels=labels).loss.backward()  # the MLM side trains E_G
    assert shared.grad is not None and shared.grad.abs().sum() > 0
    names = dict(model.named_parameters())
    assert "discriminator.deberta.embeddings.word_embeddings.delta" in names
    assert sum(p is shared for p in names.values()) == 1  # E_G is one parameter, the generator's


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    return build_data(tmp_path_factory.mktemp("deberta_v3"), "wordpiece", "packed")


def _args(data, out, *extra):
    return ["pretrain", "--objective", "deberta-v3", "--preset", "deberta-tiny", "--data", str(data), "--output-dir",
            str(out), *TINY, *QUIET, "--set", "batch_size=8", "--set", "warmup_steps=1", "--set", "lr=1e-3", *extra]


def test_pretrain_deberta_v3_end_to_end_and_resume(data_dir, tmp_path):
    import transformers

    from bertkit.model.deberta import DebertaV2Model

    straight, resumed = tmp_path / "straight", tmp_path / "resumed"
    assert main(_args(data_dir, straight, "--set", "max_steps=4", "--set", "eval_steps=4", "--set", "save_steps=2")) == 0
    records = [json.loads(line) for line in (straight / "metrics.jsonl").read_text().splitlines()]
    assert any("eval_disc_accuracy" in r and "eval_mlm_loss" in r for r in records)
    final = straight / "final"
    config = json.loads((final / "config.json").read_text())
    assert (config["model_type"], config["architectures"]) == ("deberta-v2", ["DebertaV2ForReplacedTokenDetection"])
    disc, gen = load_file(final / "model.safetensors"), load_file(final / "generator" / "model.safetensors")
    assert not any("delta" in key for key in disc)  # merged: E_D = E_G + E_delta
    assert not torch.equal(disc[WORDS], gen[WORDS])  # the RTD loss moved E_delta, and only it
    ref, info = transformers.DebertaV2ForSequenceClassification.from_pretrained(final, output_loading_info=True)
    assert sorted(info["missing_keys"]) == ["classifier.bias", "classifier.weight", "pooler.dense.bias",
                                            "pooler.dense.weight"]
    ref = transformers.DebertaV2Model.from_pretrained(final).eval()
    ours = DebertaV2Model.from_pretrained(final)
    ids = torch.randint(5, 300, (2, 12))
    with torch.no_grad():
        torch.testing.assert_close(ours(ids).last_hidden_state, ref(input_ids=ids).last_hidden_state,
                                   atol=1e-5, rtol=1e-5)
    assert finetune_mrpc(final, tmp_path / "mrpc") == 0
    assert main(["fill-mask", "--model", str(final / "generator"), "It was a [MASK] day."]) == 0

    shutil.copytree(straight, resumed)  # the same run, stopped after its step-2 checkpoint
    shutil.rmtree(resumed / "final")
    shutil.rmtree(resumed / "checkpoint-0000004")
    (resumed / "run_config.json").write_text((straight / "run_config.json").read_text().replace(str(straight), str(resumed)))
    assert main(["pretrain", "--output-dir", str(resumed), "--resume"]) == 0
    for part in ("model.safetensors", "generator/model.safetensors"):
        a, b = load_file(straight / "final" / part), load_file(resumed / "final" / part)
        assert a.keys() == b.keys()
        for key in a:  # E_delta split off again on resume (E_D - E_G): equal up to float rounding
            torch.testing.assert_close(a[key], b[key], atol=1e-6, rtol=0)


def test_bad_generator_depth_fails_in_one_line(data_dir, tmp_path, capsys):
    assert main(_args(data_dir, tmp_path / "bad", "--set", "generator_depth=0")) != 0
    assert "generator_depth" in capsys.readouterr().err
