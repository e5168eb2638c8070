"""Every family trains on the same fast path (issue 36, deliverable 4): bf16 autocast with fp32
master weights, the loop's fused AdamW, and torch.compile through its one-line eager fallback.

One objective per family (BERT and its successors, XLNet, T5, GPT, ELMo, BART), two steps each on
the tiny data of the recorded-batch tests, through the model-agnostic Trainer: no per-family
switch anywhere. The compiler itself is replaced by one that fails (a real compile takes
minutes on a CPU; bench/gpu_checks.sh times the compiled step where a GPU is lent), so what
is checked here is the contract: the failure is said in one line, the step runs eagerly, and
the loss is finite and moves.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch
from _objective_batches import CASE_MODELS, CASES, build_data
from _successor_data import make_objective

from bertkit.training.config import TrainingConfig
from bertkit.training.loop import Trainer

# one objective per family: BERT and its successors (ALBERT, ELECTRA share its encoder blocks)
FAMILY_CASES = ["mlm_nsp", "roberta", "electra", "albert", "xlnet", "t5", "clm", "bilm", "bart"]
STATIC_BUDGET = {"mlm_nsp", "roberta", "albert"}  # a masked LM's head reads a fixed number of rows compiled


@pytest.fixture(scope="module")
def data_root(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("family_path")


@pytest.mark.parametrize("case", FAMILY_CASES)
def test_every_family_trains_in_bf16_with_fused_adamw_and_the_compile_fallback(case, data_root, tmp_path,
                                                                                 monkeypatch, capsys):
    def failing_compile(function, **kwargs):
        def compiled(*args, **kw):
            raise RuntimeError("no compiler here")
        return compiled

    monkeypatch.setattr(torch, "compile", failing_compile)
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "inductor"))  # the run sets none for later tests
    name, instance_format, masking, fields = CASES[case]
    tokenizer, preset = CASE_MODELS.get(case, (None, "tiny"))
    data = build_data(data_root, instance_format, masking, tokenizer)
    objective = make_objective(name, data, 42, fields, preset)
    config = TrainingConfig(max_steps=2, batch_size=4, lr=3e-3, warmup_steps=0, precision="bf16", compile=True,
                            log_steps=1, eval_steps=100, save_checkpoints=False, progress=False, tensorboard=False,
                            eval_batches=1)
    model = objective.model
    before = {k: v.detach().clone() for k, v in model.state_dict().items()}
    result = Trainer(objective, config, tmp_path / "run").train(model)

    said = [line for line in capsys.readouterr().out.splitlines() if "torch.compile failed" in line]
    assert said == ["torch.compile failed (RuntimeError: no compiler here); training eagerly"]
    losses = [record["loss"] for record in result.records if "loss" in record]
    assert len(losses) == 2 and all(math.isfinite(loss) for loss in losses), losses
    assert losses[0] != losses[1]
    trainable = dict(model.named_parameters())
    assert all(p.dtype == torch.float32 for p in trainable.values())  # fp32 master weights under bf16 autocast
    changed = [k for k, v in model.state_dict().items() if k in trainable and not torch.equal(v, before[k])]
    assert changed, "no weight moved"
    if case in STATIC_BUDGET:  # set before compiling: the compiled step's rows (the eager fallback ignores it)
        assert model.prediction_budget == objective.masker.max_predictions(64) == 10
