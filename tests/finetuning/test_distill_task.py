"""`bertkit distill --task glue`: a tiny teacher fine-tuned on the MRPC fixture with the
fine-tuning API, distilled into a 1-layer student in 2 steps; best/ loads in transformers
with equal logits and in `bertkit evaluate` / `predict`; the loss is the soft targets
(T^2 KL) plus the gold labels' cross-entropy; a teacher without a task head is refused."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F
import transformers

from bertkit.cli import main

from conftest import QUIET, stdout_jsonl

STEPS = ["--batch-size", "8", "--max-seq-length", "32", "--seed", "3", "--lr", "1e-3", *QUIET]


@pytest.fixture(scope="module")
def teacher(tiny_model_dir, fixtures, tmp_path_factory) -> Path:
    from bertkit.finetuning import build_config, finetune

    mrpc = fixtures / "glue" / "MRPC" / "dev.tsv"
    out = tmp_path_factory.mktemp("teacher") / "mrpc"
    config = build_config({"init_from": str(tiny_model_dir), "output_dir": str(out), "train": str(mrpc),
                           "dev": str(mrpc), "glue_task": "mrpc", "epochs": 2, "batch_size": 8, "max_seq_length": 32,
                           "lr": 1e-3, "progress": False, "tensorboard": False}, {})
    result = finetune(config)
    return result.best_dir


def test_task_distillation_two_steps(teacher, fixtures, tmp_path, capsys):
    mrpc = fixtures / "glue" / "MRPC"
    out = tmp_path / "small"
    assert main(["distill", "--teacher", str(teacher), "--task", "glue", "--glue-task", "mrpc", "--data", str(mrpc),
                 "--train", str(mrpc / "dev.tsv"), "--output-dir", str(out), "--student-layers", "1", "--epochs", "1",
                 "--set", "log_steps=1", *STEPS]) == 0
    captured = capsys.readouterr()
    assert "student 1 layers from teacher layers [0]; every weight copied" in captured.err
    assert "student dev f1" in captured.out and "vs teacher" in captured.out
    best = out / "best"
    for name in ("config.json", "model.safetensors", "vocab.txt", "bertkit_task.json", "best_metrics.json"):
        assert (best / name).is_file(), name
    config = json.loads((best / "config.json").read_text())
    assert config["num_hidden_layers"] == 1 and config["architectures"] == ["BertForSequenceClassification"]
    assert config["id2label"] == {"0": "not_equivalent", "1": "equivalent"}
    records = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in records if "soft_loss" in r] == [1, 2]
    report = (out / "report.md").read_text()
    assert "| student / teacher |" in report and "## Teacher dev metrics" in report

    tokenizer = transformers.AutoTokenizer.from_pretrained(best)
    inputs = dict(tokenizer(["The cat sat.", "Shares rose 5 % ."], ["A cat was sitting.", "Stocks fell ."],
                            padding=True, return_tensors="pt"))
    from bertkit.inference.loading import load_finetuned

    ours = load_finetuned(best, device="cpu").model
    theirs = transformers.BertForSequenceClassification.from_pretrained(best).eval()
    with torch.no_grad():
        torch.testing.assert_close(ours(input_ids=inputs["input_ids"], token_type_ids=inputs["token_type_ids"], attention_mask=inputs["attention_mask"]).logits,
                                   theirs(**inputs).logits, atol=1e-5, rtol=1e-5)

    assert main(["evaluate", "glue", "--model", str(best), "--data", str(mrpc), "--no-progress"]) == 0
    result = json.loads(capsys.readouterr().out.strip())
    assert result["f1"] == pytest.approx(json.loads((best / "best_metrics.json").read_text())["eval_f1"], abs=1e-9)
    assert main(["predict", "--model", str(best), "The cat sat.", "A cat was sitting."]) == 0
    (line,) = stdout_jsonl(capsys.readouterr().out)
    assert line["label"] in ("not_equivalent", "equivalent")  # GLUE names


def test_task_loss_is_soft_targets_plus_labels(tiny_model_dir):
    from bertkit import BertConfig, BertForSequenceClassification, Tokenizer
    from bertkit.tasks.programs import TaskSpec
    from bertkit.distillation import TaskDistillation, TaskDistillConfig

    torch.manual_seed(0)
    config = BertConfig.from_pretrained(tiny_model_dir).with_labels(["0", "1"])
    model = BertForSequenceClassification(config).eval()
    rng = np.random.default_rng(0)
    features = [{"input_ids": rng.integers(5, 100, size=n), "token_type_ids": np.zeros(n, dtype=np.int64),
                 "labels": int(label)} for n, label in ((6, 0), (9, 1), (4, 1))]
    teacher_logits = np.array([[2.0, -1.0], [0.5, 0.5], [-3.0, 1.0]], dtype=np.float32)
    cfg = TaskDistillConfig(temperature=3.0, alpha_soft=0.7, alpha_hard=0.4)
    program = TaskDistillation(model, Tokenizer.from_pretrained(tiny_model_dir), TaskSpec("classification", "mrpc"),
                               features, None, {0: "0", 1: "1"}, teacher_logits=teacher_logits, config=cfg,
                               progress=False)
    batch = program.collate([program.train_example(i, 0) for i in range(3)])
    assert batch["teacher_logits"].shape == (3, 2) and batch["input_ids"].shape == (3, 16)
    with torch.no_grad():
        loss, stats = program.compute_loss(model, batch, {"task": 6.0})  # this micro-batch: half the global batch
        logits = model(input_ids=batch["input_ids"], token_type_ids=batch["token_type_ids"], attention_mask=batch["attention_mask"]).logits
    labels = batch["labels"]
    ce_sum = F.cross_entropy(logits, labels, reduction="sum").item()
    kl_sum = 0.0
    for s, t in zip(logits.tolist(), teacher_logits.tolist(), strict=True):
        p_t = np.exp(np.array(t) / 3) / np.exp(np.array(t) / 3).sum()
        log_s = np.array(s) / 3 - math.log(np.exp(np.array(s) / 3).sum())
        kl_sum += float((p_t * (np.log(p_t) - log_s)).sum())
    assert loss.item() == pytest.approx((0.4 * ce_sum + 0.7 * 9 * kl_sum) / 6.0, rel=1e-5)
    assert stats["soft_loss_sum"] == pytest.approx(9 * kl_sum, rel=1e-5) and stats["task_count"] == 3


@pytest.mark.parametrize("case", ["no_head", "deeper"])
def test_task_errors(case, teacher, tiny_model_dir, fixtures, tmp_path, capsys):
    mrpc = fixtures / "glue" / "MRPC"
    source, extra = (tiny_model_dir, []) if case == "no_head" else (teacher, ["--student-layers", "3"])
    out = tmp_path / "run"
    code = main(["distill", "--teacher", str(source), "--task", "glue", "--glue-task", "mrpc", "--data", str(mrpc),
                 "--train", str(mrpc / "dev.tsv"), "--output-dir", str(out), *extra, *STEPS])
    err = capsys.readouterr().err.strip()
    assert code == 1 and len(err.splitlines()) == 1, err
    expected = ("not a fine-tuned BertForSequenceClassification" if case == "no_head"
                else "the student is deeper than the teacher (2 layers")
    assert expected in err, err
    assert not out.exists()


@pytest.mark.parametrize("family", ["roberta", "electra", "albert"])
def test_task_distillation_from_other_model_families(family, tiny_model_dir, fixtures, tmp_path, capsys):
    """Task distillation takes every model family (general distillation only BERT): a RoBERTa, ELECTRA or
    ALBERT teacher fine-tuned on MRPC gives a 1-layer student of its own head class that transformers loads
    with equal logits."""
    from bertkit import Tokenizer
    from bertkit.finetuning import build_config, finetune
    from bertkit.model.albert import AlbertConfig, AlbertModel
    from bertkit.model.electra import ElectraConfig, ElectraModel
    from bertkit.model.roberta import RobertaConfig, RobertaModel
    from bertkit.inference.loading import load_finetuned

    sizes = {k: v for k, v in json.loads((tiny_model_dir / "config.json").read_text()).items()
             if k in ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size",
                      "max_position_embeddings")}
    model = {"roberta": lambda: RobertaModel(RobertaConfig.from_dict({**sizes, "pad_token_id": 0})),
             "electra": lambda: ElectraModel(ElectraConfig.from_dict({**sizes, "embedding_size": 16})),
             "albert": lambda: AlbertModel(AlbertConfig.from_dict({**sizes, "embedding_size": 16}))}[family]
    torch.manual_seed(0)
    base = tmp_path / family
    model().save_pretrained(base)
    Tokenizer.from_pretrained(tiny_model_dir).save_pretrained(base)
    mrpc = fixtures / "glue" / "MRPC"
    config = build_config({"init_from": str(base), "output_dir": str(tmp_path / "teacher"),
                           "train": str(mrpc / "dev.tsv"), "dev": str(mrpc / "dev.tsv"), "glue_task": "mrpc",
                           "epochs": 1, "batch_size": 8,
                           "max_seq_length": 32, "lr": 1e-3, "progress": False, "tensorboard": False}, {})
    teacher = finetune(config).best_dir
    out = tmp_path / "small"
    assert main(["distill", "--teacher", str(teacher), "--task", "glue", "--glue-task", "mrpc", "--data", str(mrpc),
                 "--train", str(mrpc / "dev.tsv"), "--output-dir", str(out), "--student-layers", "1", "--epochs", "1",
                 *STEPS]) == 0
    assert "student 1 layers from teacher layers [0]; every weight copied" in capsys.readouterr().err
    best = out / "best"
    saved = json.loads((best / "config.json").read_text())
    head = {"roberta": "Roberta", "electra": "Electra", "albert": "Albert"}[family] + "ForSequenceClassification"
    assert saved["model_type"] == family and saved["num_hidden_layers"] == 1 and saved["architectures"] == [head]
    ids = torch.tensor([[2, 10, 20, 30, 3], [2, 11, 21, 3, 0]])
    mask = (ids != 0).long()
    ours = load_finetuned(best, device="cpu").model
    theirs = getattr(transformers, head).from_pretrained(best).eval()
    with torch.no_grad():
        torch.testing.assert_close(ours(ids, attention_mask=mask, token_type_ids=torch.zeros_like(ids)).logits,
                                   theirs(input_ids=ids, attention_mask=mask).logits, atol=1e-5, rtol=1e-5)


def test_hugging_face_teacher_with_placeholder_labels(tiny_model_dir, fixtures, tmp_path, capsys):
    """A BertForSequenceClassification saved by transformers (LABEL_0 / LABEL_1) teaches too."""
    from bertkit import Tokenizer

    teacher = tmp_path / "hf-teacher"
    torch.manual_seed(4)
    config = transformers.BertConfig.from_pretrained(tiny_model_dir, num_labels=2)
    transformers.BertForSequenceClassification(config).save_pretrained(teacher)
    Tokenizer.from_pretrained(tiny_model_dir).save_pretrained(teacher)
    mrpc = fixtures / "glue" / "MRPC"
    out = tmp_path / "student"
    assert main(["distill", "--teacher", str(teacher), "--task", "glue", "--glue-task", "mrpc", "--data", str(mrpc),
                 "--train", str(mrpc / "dev.tsv"), "--output-dir", str(out), "--epochs", "1", *STEPS]) == 0
    assert "every weight copied" in capsys.readouterr().err
    assert json.loads((out / "best" / "config.json").read_text())["num_hidden_layers"] == 1
