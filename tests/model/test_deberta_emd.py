"""DeBERTa's enhanced mask decoder (opt-in `enhanced_mask_decoder`): off, DebertaV2ForMaskedLM still
matches transformers and config.json does not carry the field; on, the logits change and depend on the
absolute position, the position table saves and loads (and transformers still loads the folder), its
gradient comes from the MLM loss; the deberta-v3 objective's generator runs it in a 2-step pre-training run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
import transformers

from bertkit.cli import main
from bertkit.errors import ConfigError
from bertkit.model.deberta import DebertaV2Config, DebertaV2ForMaskedLM, DebertaV2ForSequenceClassification
from bertkit.objectives.deberta_v3 import DebertaV3Objective, DebertaV3Settings

B, T = 2, 12
V3 = dict(vocab_size=120, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
          max_position_embeddings=64, relative_attention=True, pos_att_type=["p2c", "c2p"], position_buckets=8,
          share_att_key=True, norm_rel_ebd="layer_norm", position_biased_input=False, type_vocab_size=0, legacy=False)
TABLE = "deberta.embeddings.position_embeddings.weight"
FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "austen_small.txt"


def _config(**more) -> DebertaV2Config:
    return DebertaV2Config.from_dict({**V3, **more})


def _ids(seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    ids = torch.randint(5, 120, (B, T), generator=torch.Generator().manual_seed(seed))
    mask = torch.ones_like(ids)
    mask[1, -3:] = 0
    return ids, mask


def test_off_is_transformers_function_and_config_has_no_field(tmp_path):
    torch.manual_seed(0)
    ours = DebertaV2ForMaskedLM(_config()).eval()
    assert TABLE not in ours.state_dict()
    ours.save_pretrained(tmp_path)
    assert "enhanced_mask_decoder" not in json.loads((tmp_path / "config.json").read_text())
    ref = transformers.DebertaV2ForMaskedLM.from_pretrained(tmp_path).eval()
    ids, mask = _ids()
    with torch.no_grad():
        torch.testing.assert_close(ours(ids, mask).logits[mask.bool()], ref(input_ids=ids, attention_mask=mask).logits[mask.bool()],
                                   atol=1e-5, rtol=1e-5)


def test_on_changes_logits_and_they_depend_on_the_position():
    torch.manual_seed(1)
    on = DebertaV2ForMaskedLM(_config(enhanced_mask_decoder=True)).eval()
    off = DebertaV2ForMaskedLM(_config())
    missing, unexpected = off.load_state_dict(on.state_dict(), strict=False)
    assert (missing, unexpected) == ([], [TABLE])  # the same weights but the EMD's table
    off.eval()
    ids, mask = _ids()
    with torch.no_grad():
        a, b = on(ids, mask).logits, off(ids, mask).logits
    assert (a - b)[mask.bool()].abs().max() > 1e-3
    # one token, everything else the same: rows of identical content differ only by the absolute positions I
    same = torch.full((1, T), 7)
    with torch.no_grad():
        logits = on(same).logits[0]  # (T, V)
        encoder_states = on.deberta(same).last_hidden_state[0]
        on.deberta.embeddings.position_embeddings.weight.zero_()  # no I: the decoder can't tell positions apart
        flat = on(same).logits[0]
    assert (logits[2] - logits[6]).abs().max() > 1e-3
    assert (flat[2] - flat[6]).abs().max() < (logits[2] - logits[6]).abs().max() / 10
    assert encoder_states.shape == (T, 32)


def test_save_load_round_trip_and_transformers_loads_it(tmp_path):
    torch.manual_seed(2)
    model = DebertaV2ForMaskedLM(_config(enhanced_mask_decoder=True)).eval()
    model.save_pretrained(tmp_path)
    assert json.loads((tmp_path / "config.json").read_text())["enhanced_mask_decoder"] is True
    again, info = DebertaV2ForMaskedLM.from_pretrained(tmp_path, output_loading_info=True)
    assert info == {"missing_keys": [], "unexpected_keys": []}
    assert again.config.enhanced_mask_decoder and again.config.position_limit == 64
    ids, mask = _ids(3)
    with torch.no_grad():
        torch.testing.assert_close(again(ids, mask).logits, model(ids, mask).logits)
    ref = transformers.DebertaV2ForMaskedLM.from_pretrained(tmp_path)  # an unknown field: kept, ignored
    assert ref.config.enhanced_mask_decoder is True
    # other heads take the encoder; the table is the MLM head's only
    classifier = DebertaV2ForSequenceClassification.from_pretrained(tmp_path)
    assert TABLE not in classifier.state_dict()
    with pytest.raises(ConfigError, match="enhanced_mask_decoder"):
        _config(enhanced_mask_decoder="yes")


def test_gradients_reach_the_position_table():
    torch.manual_seed(3)
    model = DebertaV2ForMaskedLM(_config(enhanced_mask_decoder=True)).train()
    ids, mask = _ids(4)
    labels = torch.full_like(ids, -100)
    labels[:, [1, 4, 8]] = ids[:, [1, 4, 8]]
    out = model(ids, mask, labels=labels)
    assert out.logits.shape == (6, 120)
    out.loss.backward()
    grad = model.deberta.embeddings.position_embeddings.weight.grad
    assert grad is not None and grad[:T].abs().sum() > 0 and grad[T:].abs().sum() == 0  # rows past T unused


def test_objective_setting_builds_an_emd_generator_by_default():
    config = _config()
    model = DebertaV3Objective.build_model(config)
    assert model.generator.config.enhanced_mask_decoder and not model.discriminator.config.enhanced_mask_decoder
    plain = DebertaV3Objective.build_model(config, DebertaV3Settings(enhanced_mask_decoder=False))
    assert not plain.generator.config.enhanced_mask_decoder and TABLE not in plain.generator.state_dict()


def test_two_step_pretraining_with_emd(tmp_path):
    tok, data, run, text = tmp_path / "tok", tmp_path / "data", tmp_path / "run", tmp_path / "austen.txt"
    text.write_text(FIXTURE.read_text()[:12000])  # a quarter of the fixture: enough for 2 steps and an evaluation
    assert main(["tokenizer", "train", "--algorithm", "wordpiece", "--vocab-size", "300", "--output", str(tok),
                 "--no-progress", str(text)]) == 0
    assert main(["data", "build", "--tokenizer", str(tok), "--max-seq-length", "32", "--format", "packed",
                 "--output", str(data), "--eval-fraction", "0.2", str(text)]) == 0
    tiny = [x for name, value in (("hidden_size", 32), ("num_hidden_layers", 2), ("num_attention_heads", 2),
                                  ("intermediate_size", 64), ("max_position_embeddings", 64))
            for x in ("--set", f"model.{name}={value}")]
    assert main(["pretrain", "--objective", "deberta-v3", "--preset", "deberta-tiny", "--data", str(data), "--output-dir",
                 str(run), *tiny, "--set", "progress=false", "--set", "tensorboard=false", "--set", "batch_size=4",
                 "--set", "max_steps=2", "--set", "eval_steps=2"]) == 0  # the EMD: deberta-v3's default
    generator = DebertaV2ForMaskedLM.from_pretrained(run / "final" / "generator")
    assert generator.config.enhanced_mask_decoder and TABLE in generator.state_dict()
    metrics = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines() if line.strip()]
    assert any("eval_mlm_loss" in r and r["eval_mlm_loss"] > 0 for r in metrics)
