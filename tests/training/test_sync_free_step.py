"""The GPU step's sync-free path, run on the CPU: statistics summed on the device and read at
log steps, non-finite steps skipped by the fused optimizer on a device flag and counted (or
stopped on) when the window is read; MFU in the records; compile's one-line fallback."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
import torch

from bertkit.errors import BertkitError, ConfigError
from bertkit.training import loop as loop_module
from bertkit.training.compile import compile_with_fallback
from bertkit.training.config import TrainingConfig
from bertkit.training.loop import Trainer
from bertkit.training.nonfinite import PendingSteps
from bertkit.training.step_sums import add_into, read_sums
from bertkit.training.throughput import ModelFlops, Peak, non_embedding_parameters, table_peak
from tests.training.test_loop import ToyModel, ToyProgram, config
from tests.training.test_nonfinite import InfGradient


def train_deferred(tmp_path, program=None, dropout: float = 0.1, **overrides):
    """As the GPU trains: checks read at log steps only (forced on the CPU)."""
    torch.manual_seed(0)
    model = ToyModel(dropout)
    trainer = Trainer(program or ToyProgram(), config(**overrides), tmp_path)
    trainer.check_every_step = False
    return model, trainer.train(model)


def records(tmp_path):
    return [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]


def test_deferred_checks_train_the_same_weights_and_log_the_same_records(tmp_path):
    torch.manual_seed(0)
    model = ToyModel(0.1)
    Trainer(ToyProgram(), config(), tmp_path / "a").train(model)
    deferred, _ = train_deferred(tmp_path / "b")
    for p, q in zip(model.parameters(), deferred.parameters()):
        torch.testing.assert_close(p, q)
    for a, b in zip(records(tmp_path / "a"), records(tmp_path / "b")):
        assert a.keys() == b.keys()
        for key in a:
            if key != "tok/s":
                assert a[key] == pytest.approx(b[key], rel=1e-6), key


def test_deferred_skip_counts_the_step_and_keeps_weights_finite(tmp_path):
    model, result = train_deferred(tmp_path, program=InfGradient(at=5), on_nonfinite="skip")
    assert result.skipped_steps == 1 and result.step == 12
    assert all(torch.isfinite(p).all() for p in model.parameters())
    logged = records(tmp_path)
    assert {"step": 5, "nonfinite_skipped": 1} in logged
    assert all(r["loss"] == r["loss"] for r in logged if "loss" in r)  # the skipped step's NaN is not in a window


def test_deferred_stop_names_the_step_and_its_batch(tmp_path):
    with pytest.raises(BertkitError, match=r"^step 3: the loss or a gradient is non-finite \(the update was not "
                                           r"applied\); the batch held training examples \(epoch:index\) 0:"):
        train_deferred(tmp_path, program=InfGradient(at=3))


def test_deferred_skip_limit_counts_steps_in_a_row_across_the_window(tmp_path):
    class AlwaysNan(ToyProgram):
        def compute_loss(self, model, batch, totals):
            loss, stats = super().compute_loss(model, batch, totals)
            return loss * float("nan"), stats

    with pytest.raises(BertkitError, match=r"step 3: 3 steps in a row skipped \(nonfinite_skip_limit\)"):
        train_deferred(tmp_path, program=AlwaysNan(), on_nonfinite="skip", nonfinite_skip_limit=3)


def test_sums_stay_tensors_until_read_once():
    sums: dict = {}
    add_into(sums, {"loss": torch.tensor(1.5), "count": 3.0})
    add_into(sums, {"loss": torch.tensor(float("nan")), "count": 2.0}, keep=torch.tensor(False))
    add_into(sums, {"loss": torch.tensor(0.5), "count": 1.0}, keep=torch.tensor(True))
    assert isinstance(sums["loss"], torch.Tensor) and isinstance(sums["count"], torch.Tensor)
    assert read_sums(sums) == {"loss": 2.0, "count": 4.0}
    pending = PendingSteps()
    pending.add(4, torch.tensor(True))
    pending.add(5, torch.tensor(False))
    assert pending.read() == [(4, True), (5, False)] and not pending


def test_peak_table_and_model_flops():
    assert table_peak("NVIDIA H100 80GB HBM3", "bf16").flops == pytest.approx(989.4e12)
    assert table_peak("NVIDIA H200", "bf16").flops == pytest.approx(989.4e12)
    assert table_peak("NVIDIA H100 PCIe", "bf16").flops == pytest.approx(756e12)
    assert table_peak("NVIDIA A100-SXM4-80GB", "bf16").flops == pytest.approx(312e12)
    assert table_peak("Tesla T4", "bf16") is None  # no bf16 on that card
    assert table_peak("Some Future GPU", "bf16") is None
    from bertkit import BertConfig, BertForPreTraining

    config = BertConfig(vocab_size=100, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=64, max_position_embeddings=64)
    model = BertForPreTraining(config)
    embeddings = sum(p.numel() for p in model.bert.embeddings.parameters() if p.ndim == 2)
    assert non_embedding_parameters(model) == sum(p.numel() for p in model.parameters()) - embeddings
    flops = ModelFlops.of(model)
    assert (flops.layers, flops.hidden) == (2, 32)
    assert flops.per_token(128) == 6 * flops.non_embedding_params + 12 * 2 * 32 * 128


def test_records_carry_mfu_against_the_peak(tmp_path, monkeypatch):
    class Described(ToyModel):
        config = SimpleNamespace(hidden_size=8, num_hidden_layers=2)

    monkeypatch.setattr(loop_module, "device_peak", lambda device, precision: Peak(1e9, "a test peak"))
    torch.manual_seed(0)
    trainer = Trainer(ToyProgram(), config(), tmp_path)
    result = trainer.train(Described())
    logged = [r for r in records(tmp_path) if "loss" in r]
    per_token = 6 * sum(p.numel() for p in Described().parameters())  # no embeddings; no sequence axis
    for record in logged:
        assert record["mfu"] == pytest.approx(record["tok/s"] * per_token / 1e9, rel=1e-6)
    assert result.mfu is not None and result.mfu > 0
    assert "a test peak" in trainer.describe_mfu()


def test_no_peak_no_mfu(tmp_path):
    torch.manual_seed(0)
    trainer = Trainer(ToyProgram(), config(), tmp_path)
    result = trainer.train(ToyModel())
    assert result.mfu is None and all("mfu" not in r for r in records(tmp_path))


def test_a_failed_compile_says_one_line_and_runs_eagerly(tmp_path, monkeypatch):
    def broken_compile(function, **kwargs):
        def call(*args, **kw):
            raise RuntimeError("backend exploded\nwith a long traceback")
        return call

    monkeypatch.setattr(torch, "compile", broken_compile)
    monkeypatch.delenv("TORCHINDUCTOR_CACHE_DIR", raising=False)
    said = []
    torch.manual_seed(0)
    model = ToyModel(0.0)
    x = torch.randn(3, 4)
    expected = model(x)
    compile_with_fallback(model, tmp_path / "cache", said.append)
    torch.testing.assert_close(model(x), expected)
    assert said == ["torch.compile failed (RuntimeError: backend exploded); training eagerly"]
    torch.testing.assert_close(model(x), expected)  # eager from now on, said once
    assert len(said) == 1 and model._compiled_call_impl is None
    assert (tmp_path / "cache").is_dir()
    monkeypatch.delenv("TORCHINDUCTOR_CACHE_DIR", raising=False)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="the sync-free path is the GPU's default")
def test_on_the_gpu_a_nonfinite_step_is_skipped_on_the_device(tmp_path):  # pragma: no cover - GPU only
    from bertkit.training.distributed import setup

    torch.manual_seed(0)
    model = ToyModel(0.1)
    trainer = Trainer(InfGradient(at=5), config(on_nonfinite="skip"), tmp_path, ctx=setup())
    result = trainer.train(model)
    assert result.skipped_steps == 1 and result.step == 12
    assert all(torch.isfinite(p).all() for p in model.parameters())
    assert {"step": 5, "nonfinite_skipped": 1} in records(tmp_path)
    assert result.mfu is None  # the toy model has no config: no FLOPs count


def test_compile_mode_reaches_torch_compile_and_is_checked(tmp_path, monkeypatch):
    seen = {}

    def recording_compile(function, **kwargs):
        seen.update(kwargs)
        return function

    monkeypatch.setattr(torch, "compile", recording_compile)
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "inductor"))
    compile_with_fallback(ToyModel(0.0), tmp_path / "cache", print, "reduce-overhead")
    assert seen["mode"] == "reduce-overhead"
    compile_with_fallback(ToyModel(0.0), tmp_path / "cache", print)
    assert seen["mode"] is None  # "default": torch's own default
    with pytest.raises(ConfigError, match="field 'compile_mode' must be one of default, reduce-overhead"):
        TrainingConfig(compile_mode="fast")
