"""Hugging Face checkpoint interop: both directions, .bin loading, and bad checkpoints."""

from __future__ import annotations

import json
import shutil

import pytest
import torch
import transformers

from bertkit import BertConfig, BertForPreTraining, BertModel
from bertkit.errors import BertkitError


def _inputs():
    gen = torch.Generator().manual_seed(3)
    ids = torch.randint(5, 120, (2, 9), generator=gen)
    mask = torch.ones_like(ids)
    mask[1, 6:] = 0
    return ids, torch.zeros_like(ids), mask


def _real(x, mask):
    """The real positions of (B, T, ...) per-token outputs (at padding bertkit's unpadded
    encoder path gives zeros, transformers computes values nobody reads)."""
    return x[mask.bool()]


def _hf_config(cfg):
    return transformers.BertConfig(**cfg.to_dict())


def test_bertkit_checkpoint_loads_in_transformers(tmp_path, tiny_config):
    torch.manual_seed(0)
    ours = BertForPreTraining(tiny_config).eval()
    ours.save_pretrained(tmp_path)
    ref = transformers.BertForPreTraining.from_pretrained(tmp_path).eval()
    ids, types, mask = _inputs()
    with torch.no_grad():
        a = ours(input_ids=ids, token_type_ids=types, attention_mask=mask)
        b = ref(input_ids=ids, token_type_ids=types, attention_mask=mask)
    torch.testing.assert_close(_real(a.prediction_logits, mask), _real(b.prediction_logits, mask), atol=1e-6, rtol=1e-6)
    torch.testing.assert_close(a.seq_relationship_logits, b.seq_relationship_logits, atol=1e-6, rtol=1e-6)
    backbone = transformers.BertModel.from_pretrained(tmp_path).eval()
    with torch.no_grad():
        torch.testing.assert_close(
            _real(backbone(input_ids=ids, attention_mask=mask).last_hidden_state, mask),
            _real(ours.bert(ids, attention_mask=mask).last_hidden_state, mask), atol=1e-6, rtol=1e-6)


def test_transformers_checkpoint_loads_in_bertkit(tmp_path, tiny_config):
    torch.manual_seed(1)
    ref = transformers.BertForPreTraining(_hf_config(tiny_config)).eval()
    ref.save_pretrained(tmp_path)
    ours, info = BertForPreTraining.from_pretrained(tmp_path, output_loading_info=True)
    assert info == {"missing_keys": [], "unexpected_keys": []}
    ids, types, mask = _inputs()
    with torch.no_grad():
        a, b = ours(input_ids=ids, token_type_ids=types, attention_mask=mask), ref(input_ids=ids, token_type_ids=types, attention_mask=mask)
    torch.testing.assert_close(_real(a.prediction_logits, mask), _real(b.prediction_logits, mask), atol=1e-6, rtol=1e-6)
    # the bare backbone loads from the same checkpoint, heads reported as unexpected
    backbone = BertModel.from_pretrained(tmp_path)
    assert backbone.loading_info["missing_keys"] == []
    assert all(k.startswith("cls.") for k in backbone.loading_info["unexpected_keys"])


def test_pytorch_bin_is_read_with_weights_only(tmp_path, tiny_config):
    torch.manual_seed(2)
    ref = transformers.BertModel(_hf_config(tiny_config)).eval()
    tiny_config.save_pretrained(tmp_path)
    torch.save(ref.state_dict(), tmp_path / "pytorch_model.bin")
    ours = BertModel.from_pretrained(tmp_path)
    ids, types, mask = _inputs()
    with torch.no_grad():
        torch.testing.assert_close(ours(input_ids=ids, token_type_ids=types, attention_mask=mask).pooler_output,
                                   ref(input_ids=ids, attention_mask=mask).pooler_output, atol=1e-6, rtol=1e-6)


class _Exploit:
    def __reduce__(self):
        return (print, ("pickle code ran",))


def test_pickled_code_is_never_executed(tmp_path, tiny_config, capsys):
    tiny_config.save_pretrained(tmp_path)
    torch.save({"x": _Exploit()}, tmp_path / "pytorch_model.bin")
    with pytest.raises(BertkitError, match="pytorch_model.bin: cannot read weights safely"):
        BertModel.from_pretrained(tmp_path)
    assert "pickle code ran" not in capsys.readouterr().out


def test_missing_heads_are_reported_not_silent(minilm_dir):
    model, info = BertForPreTraining.from_pretrained(minilm_dir, output_loading_info=True)
    assert "cls.predictions.transform.dense.weight" in info["missing_keys"]
    assert "cls.seq_relationship.weight" in info["missing_keys"]
    assert not any(k.startswith("bert.") for k in info["missing_keys"])


def test_legacy_gamma_beta_names_load(tmp_path, tiny_config):
    torch.manual_seed(4)
    ref = BertModel(tiny_config).eval()
    tiny_config.save_pretrained(tmp_path)
    legacy = {k.replace("LayerNorm.weight", "LayerNorm.gamma").replace("LayerNorm.bias", "LayerNorm.beta"): v
              for k, v in ref.state_dict().items()}
    torch.save(legacy, tmp_path / "pytorch_model.bin")
    ours = BertModel.from_pretrained(tmp_path)
    torch.testing.assert_close(ours.embeddings.LayerNorm.weight, ref.embeddings.LayerNorm.weight)


def test_bad_checkpoints_give_one_line_errors(tmp_path, tiny_config):
    with pytest.raises(BertkitError, match="no such model directory"):
        BertModel.from_pretrained(tmp_path / "nope")
    BertModel(tiny_config).save_pretrained(tmp_path / "ok")
    # truncated safetensors
    broken = tmp_path / "broken"
    shutil.copytree(tmp_path / "ok", broken)
    data = (broken / "model.safetensors").read_bytes()
    (broken / "model.safetensors").write_bytes(data[: len(data) // 2])
    with pytest.raises(BertkitError, match="model.safetensors: corrupt or truncated"):
        BertModel.from_pretrained(broken)
    # config that does not match the weights
    wrong = tmp_path / "wrong"
    shutil.copytree(tmp_path / "ok", wrong)
    cfg = json.loads((wrong / "config.json").read_text())
    cfg["vocab_size"] = 200
    (wrong / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(BertkitError, match="shape mismatch for 'embeddings.word_embeddings.weight'"):
        BertModel.from_pretrained(wrong)
    # no weights at all
    (wrong / "model.safetensors").unlink()
    with pytest.raises(BertkitError, match="no model.safetensors or pytorch_model.bin"):
        BertModel.from_pretrained(wrong)


def test_save_is_atomic_and_leaves_no_temp_files(tmp_path, tiny_config):
    BertModel(tiny_config).save_pretrained(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["config.json", "model.safetensors"]
    assert BertConfig.from_pretrained(tmp_path).extra["architectures"] == ["BertModel"]
