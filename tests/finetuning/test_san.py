"""MT-DNN's stochastic answer network head (bertkit.tasks.san): shapes and the premise /
hypothesis split, stochastic prediction dropout only in training, the save/load round trip,
and a 2-step `bertkit finetune multitask --head san` run that `predict --task` and
`evaluate glue --task` read back."""

from __future__ import annotations

import contextlib
import io
import json
import shutil
from pathlib import Path

import pytest
import torch

from bertkit import BertConfig
from bertkit.cli import main
from bertkit.errors import ConfigError
from bertkit.tasks.san import SanForSequenceClassification, StochasticAnswerNetwork, is_san_model

from conftest import QUIET, stdout_jsonl


def tiny_config(**fields) -> BertConfig:
    return BertConfig.from_dict({"vocab_size": 60, "hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2,
                                 "intermediate_size": 64, "num_labels": 3, "hidden_dropout_prob": 0.0,
                                 "attention_probs_dropout_prob": 0.0, **fields})


def pair_batch() -> dict[str, torch.Tensor]:
    """Two pairs, the second padded: [CLS] a a [SEP] b b [SEP] (types 0 0 0 0 1 1 1)."""
    ids = torch.tensor([[2, 10, 11, 3, 12, 13, 3], [2, 14, 3, 15, 3, 0, 0]])
    types = torch.tensor([[0, 0, 0, 0, 1, 1, 1], [0, 0, 0, 1, 1, 0, 0]])
    mask = torch.tensor([[1] * 7, [1] * 5 + [0] * 2])
    return {"input_ids": ids, "attention_mask": mask, "token_type_ids": types}


def test_shapes_and_the_average_of_the_steps():
    torch.manual_seed(0)
    model = SanForSequenceClassification(tiny_config(), steps=4).eval()
    batch = pair_batch()
    out = model(**batch, labels=torch.tensor([0, 2]))
    assert out.logits.shape == (2, 3)
    torch.testing.assert_close(out.logits.exp().sum(-1), torch.ones(2))  # log-probabilities
    memory = model.bert(**batch).last_hidden_state
    real = batch["attention_mask"].bool()
    steps = model.san.step_probabilities(memory, real & (batch["token_type_ids"] == 0), memory,
                                         real & (batch["token_type_ids"] == 1))
    assert steps.shape == (2, 4, 3)
    torch.testing.assert_close(out.logits, steps.mean(1).log())  # inference: every step averaged
    torch.testing.assert_close(out.loss, torch.nn.functional.nll_loss(out.logits, torch.tensor([0, 2])))
    # padding is in neither memory
    padded = {k: v.clone() for k, v in batch.items()}
    padded["input_ids"][1, 5:] = 7
    torch.testing.assert_close(model(**padded).logits, out.logits)
    with pytest.raises(ConfigError, match="field 'head'"):
        SanForSequenceClassification(tiny_config(num_labels=1))


def test_step_dropout_only_in_training():
    torch.manual_seed(0)
    san = StochasticAnswerNetwork(16, 2, steps=5, step_dropout=0.5)
    memory, mask = torch.randn(3, 6, 16), torch.ones(3, 6, dtype=torch.bool)
    steps = san.step_probabilities(memory, mask, memory, mask)  # (3, 5, 2)
    san.eval()
    assert torch.equal(san(memory, mask, memory, mask), san(memory, mask, memory, mask))
    torch.testing.assert_close(san(memory, mask, memory, mask), steps.mean(1).log())
    san.train()
    draws = [san(memory, mask, memory, mask).exp() for _ in range(40)]
    assert any(not torch.allclose(draws[0], d) for d in draws[1:])  # steps dropped at random
    for draw in draws:  # each an average over a non-empty subset of the steps
        for row in range(3):
            subsets = [steps[row, [k for k in range(5) if bits >> k & 1]].mean(0) for bits in range(1, 32)]
            assert any(torch.allclose(draw[row], s, atol=1e-6) for s in subsets)
    san.step_dropout = 0.0
    torch.testing.assert_close(san(memory, mask, memory, mask), steps.mean(1).log())


def test_save_and_load_round_trip(tmp_path):
    torch.manual_seed(1)
    model = SanForSequenceClassification(tiny_config(), steps=3, step_dropout=0.2).eval()
    model.save_pretrained(tmp_path)
    assert is_san_model(tmp_path) and json.loads((tmp_path / "san.json").read_text()) == {"steps": 3,
                                                                                        "step_dropout": 0.2}
    assert json.loads((tmp_path / "config.json").read_text())["architectures"] == ["SanForSequenceClassification"]
    loaded = SanForSequenceClassification.from_pretrained(tmp_path)
    assert loaded.san.steps == 3 and loaded.san.step_dropout == 0.2 and not loaded.training
    assert loaded.loading_info == {"missing_keys": [], "unexpected_keys": []}
    torch.testing.assert_close(loaded(**pair_batch()).logits, model(**pair_batch()).logits, atol=0, rtol=0)


@pytest.fixture(scope="module")
def glue(tmp_path_factory, fixtures) -> Path:
    root = tmp_path_factory.mktemp("glue-san")
    for folder in ("RTE", "STS-B"):
        (root / folder).mkdir()
        for split in ("train", "dev"):
            shutil.copy(fixtures / "glue" / folder / "dev.tsv", root / folder / f"{split}.tsv")
    return root


def test_multitask_run_with_a_san_head(glue, tiny_model_dir, tmp_path, capsys):
    output = tmp_path / "mtdnn-san"
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        assert main(["finetune", "multitask", "--tasks", "rte,sts-b", "--data", str(glue), "--head", "san",
                     "--model", str(tiny_model_dir), "--output-dir", str(output), "--batch-size", "4",
                     "--max-seq-length", "32", "--max-train-samples", "4", "--epochs", "1", *QUIET]) == 0
    assert "rte: san.bilinear.weight" in err.getvalue()  # the SAN head starts fresh
    records = [json.loads(line) for line in (output / "metrics.jsonl").read_text().splitlines()]
    assert max(r["step"] for r in records) == 2  # one batch of each task
    final = output / "final"
    assert json.loads((final / "multitask.json").read_text())["tasks"]["rte"]["head"] == "SanForSequenceClassification"
    assert is_san_model(final / "tasks" / "rte") and not is_san_model(final / "tasks" / "stsb")  # STS-B: regression
    capsys.readouterr()
    assert main(["predict", "--task", "rte", "--model", str(final), "A man sleeps.", "Nobody sleeps."]) == 0
    assert stdout_jsonl(capsys.readouterr().out)[0]["label"] in ("entailment", "not_entailment")
    assert main(["evaluate", "glue", "--task", "rte", "--model", str(final), "--data", str(glue / "RTE"),
                 "--no-progress"]) == 0
    scored = json.loads(capsys.readouterr().out)
    last = [r for r in records if "eval_rte_accuracy" in r][-1]
    assert scored["accuracy"] == pytest.approx(last["eval_rte_accuracy"], abs=1e-4)
