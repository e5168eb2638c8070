"""Task distillation beyond classification: `bertkit distill --task ner|squad|multiple-choice`.

For each family: the soft-target loss against a hand computation on small tensors (and
~0 when the student's logits are the teacher's; QA's finfo.min padding gives no NaN, even
at T < 1), a 1-layer student distilled from a tiny random 2-layer teacher on the task
fixtures whose best/ loads as the family's head and works with `bertkit evaluate` /
`predict`, the teacher cache aligned with the features, and the one-line errors for a
teacher of another head or another label map."""

from __future__ import annotations

import contextlib
import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from bertkit.cli import main

from conftest import FIXTURES, QUIET, stdout_jsonl

CONLL = FIXTURES / "conll2003" / "eng.testa"
SQUAD = {1: (FIXTURES / "squad_train-v1.1.json", FIXTURES / "squad_dev-v1.1.json"),
         2: (FIXTURES / "squad_v2-handmade.json", FIXTURES / "squad_v2-handmade.json")}
CHOICES = FIXTURES / "commonsenseqa" / "dev.jsonl"
STEPS = ["--batch-size", "8", "--max-seq-length", "32", "--seed", "3", "--lr", "1e-3", "--student-layers", "1", *QUIET]
SQUAD_STEPS = ["--batch-size", "8", "--max-seq-length", "64", "--doc-stride", "16", "--seed", "3", "--lr", "1e-3",
               "--student-layers", "1", "--set", "max_steps=2", *QUIET]
# family -> (training file, prepare() fields)
TASKS = {
    "tagging": (CONLL, {"max_seq_length": 32}),
    "qa": (SQUAD[2][0], {"max_seq_length": 64, "doc_stride": 16, "squad_version": 2}),
    "multiple_choice": (CHOICES, {"max_seq_length": 32}),
}


def prepared_task(tiny_model_dir: Path, family: str, source: Path | None = None):
    from bertkit.finetuning import build_config, prepare

    train, fields = TASKS[family]
    config = build_config({"init_from": str(source or tiny_model_dir), "output_dir": "unused", "train": str(train),
                           "family": family, "progress": False, **fields}, {})
    return prepare(config)


def save_random_head(directory: Path, tiny_model_dir: Path, model_cls, labels: list[str] | None = None,
                     seed: int = 1) -> Path:
    """A randomly initialised task model on the tiny config (with `labels`), saved with the tokenizer."""
    from bertkit import BertConfig, Tokenizer

    config = BertConfig.from_pretrained(tiny_model_dir)
    if labels is not None:
        config = config.with_labels(labels)
    torch.manual_seed(seed)
    model_cls(config).save_pretrained(directory)
    Tokenizer.from_pretrained(tiny_model_dir).save_pretrained(directory)
    return directory


@pytest.fixture(scope="module")
def teachers(tiny_model_dir, tmp_path_factory) -> dict[str, Path]:
    """A tiny random teacher of each family's head (2 layers, the data's label map)."""
    from bertkit.finetuning import task_model_config

    root = tmp_path_factory.mktemp("teachers")
    made = {}
    for family in TASKS:
        prepared = prepared_task(tiny_model_dir, family)
        torch.manual_seed(1)
        model = prepared.program_cls.model_class(prepared.base_config)(task_model_config(prepared))
        model.save_pretrained(root / family)
        prepared.tokenizer.save_pretrained(root / family)
        made[family] = root / family
    return made


# ---------------------------------------------------------------------------- the soft loss by hand


def kl_rows(student: np.ndarray, teacher: np.ndarray, temperature: float) -> float:
    """T^2 * sum over rows of KL(softmax(t / T) || softmax(s / T)), float64."""
    s, t = np.asarray(student, np.float64) / temperature, np.asarray(teacher, np.float64) / temperature
    log_s = s - s.max(-1, keepdims=True)
    log_s -= np.log(np.exp(log_s).sum(-1, keepdims=True))
    log_t = t - t.max(-1, keepdims=True)
    log_t -= np.log(np.exp(log_t).sum(-1, keepdims=True))
    return float((np.exp(log_t) * (log_t - log_s)).sum() * temperature**2)


def program_for(teachers, tiny_model_dir, family, teacher_logits, n, **fields):
    """The family's distillation program on the first `n` training features, the teacher
    model (eval mode) playing the student."""
    from bertkit.distillation import DISTILL_PROGRAMS, TaskDistillConfig, load_teacher

    prepared = prepared_task(tiny_model_dir, family, teachers[family])
    model = load_teacher(prepared.program_cls.model_class(prepared.base_config), teachers[family])
    model.requires_grad_(True)  # eval mode (no dropout) but trainable: the gradient is checked too
    features = pick(prepared.train.features, n)
    logits = teacher_logits
    if isinstance(teacher_logits, str):  # "own": the student's own logits as the soft targets
        from bertkit.tasks.programs import run_features

        pad_id = prepared.tokenizer.pad_token_id
        with torch.no_grad():
            logits = run_features(model, features, lambda rows: prepared.program_cls.module().collate(rows, pad_id), 8)
    id2label = None if prepared.labels is None else dict(enumerate(prepared.labels))
    config = TaskDistillConfig(family=family, **fields)
    program = DISTILL_PROGRAMS[family](model, prepared.tokenizer, prepared.spec, features, None, id2label,
                                       teacher_logits=logits, config=config, progress=False)
    return program, model, features, prepared


def pick(features: list[dict], n: int) -> list[dict]:
    """n features from the shortest to the longest (sequences of different lengths: padding in a batch)."""
    order = sorted(range(len(features)), key=lambda i: (features[i]["input_ids"].shape[-1], i))
    return [features[order[round(k * (len(order) - 1) / (n - 1))]] for k in range(n)]


def random_logits(shapes, seed=0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.normal(0.0, 2.0, size=shape).astype(np.float32) for shape in shapes]


def loss_and_soft(program, model, n, totals_factor=2.0):
    batch = program.collate([program.train_example(i, 0) for i in range(n)])
    totals = program.loss_counts(batch)
    totals = {"task": totals["task"] * totals_factor}  # this micro-batch: half the global batch
    loss, stats = program.compute_loss(model, batch, totals)
    return batch, totals["task"], loss, stats


def test_tagging_soft_loss_by_hand(teachers, tiny_model_dir):
    n, temperature = 4, 3.0
    prepared = prepared_task(tiny_model_dir, "tagging", teachers["tagging"])
    labels_k = len(prepared.labels)
    teacher = random_logits([(len(f["input_ids"]), labels_k) for f in pick(prepared.train.features, n)])
    program, model, features, _ = program_for(teachers, tiny_model_dir, "tagging", teacher, n,
                                              temperature=temperature, alpha_soft=0.7, alpha_hard=0.4)
    with torch.no_grad():
        batch, total, loss, stats = loss_and_soft(program, model, n)
        out = model(input_ids=batch["input_ids"], token_type_ids=batch["token_type_ids"], attention_mask=batch["attention_mask"], labels=batch["labels"])
    assert batch["teacher_logits"].shape == (*batch["input_ids"].shape, labels_k)
    labels, student = batch["labels"].numpy(), out.logits.numpy()
    rows_s, rows_t = [], []
    for b, feature in enumerate(features):
        for t, label in enumerate(feature["labels"]):
            if label != -100:  # a word's first sub-token
                rows_s.append(student[b, t])
                rows_t.append(teacher[b][t])
    assert len(rows_s) == int((labels != -100).sum()) == stats["task_count"] and 0 < len(rows_s) < labels.size
    soft = kl_rows(np.stack(rows_s), np.stack(rows_t), temperature)
    assert stats["soft_loss_sum"] == pytest.approx(soft, rel=1e-5)
    count = stats["task_count"]
    assert loss.item() == pytest.approx(0.4 * out.loss.item() * count / total + 0.7 * soft / total, rel=1e-5)
    assert program.summarize(stats)["soft_loss"] == pytest.approx(soft / count, rel=1e-5)  # per labelled token

    same, model, _, _ = program_for(teachers, tiny_model_dir, "tagging", "own", n)
    with torch.no_grad():
        _, _, _, stats = loss_and_soft(same, model, n)
    assert abs(stats["soft_loss_sum"]) < 1e-5


@pytest.mark.parametrize("temperature", [2.0, 0.5])
def test_qa_soft_loss_by_hand(temperature, teachers, tiny_model_dir):
    n = 4
    prepared = prepared_task(tiny_model_dir, "qa", teachers["qa"])
    features = pick(prepared.train.features, n)
    assert len({len(f["input_ids"]) for f in features}) > 1  # windows of their own lengths: padding in the batch
    teacher = random_logits([(len(f["input_ids"]), 2) for f in features])
    program, model, _, _ = program_for(teachers, tiny_model_dir, "qa", teacher, n, temperature=temperature)
    batch, total, loss, stats = loss_and_soft(program, model, n)
    with torch.no_grad():
        out = model(input_ids=batch["input_ids"], token_type_ids=batch["token_type_ids"], attention_mask=batch["attention_mask"],
                    start_positions=batch["start_positions"], end_positions=batch["end_positions"])
    start, end = out.start_logits.numpy(), out.end_logits.numpy()
    padding = batch["attention_mask"] == 0
    assert bool(padding.any()) and bool((out.start_logits[padding] == torch.finfo(torch.float32).min).all())
    soft = 0.0
    for b, feature in enumerate(features):
        real = len(feature["input_ids"])
        soft += (kl_rows(start[b, :real], teacher[b][:, 0], temperature)
                 + kl_rows(end[b, :real], teacher[b][:, 1], temperature)) / 2
    assert stats["soft_loss_sum"] == pytest.approx(soft, rel=1e-5) and stats["task_count"] == n
    assert loss.item() == pytest.approx(out.loss.item() * n / total + soft / total, rel=1e-5)  # weights 1 / 1
    loss.backward()
    grads = [p.grad for p in model.parameters() if p.grad is not None]
    assert grads and all(bool(torch.isfinite(g).all()) for g in grads)

    same, model, _, _ = program_for(teachers, tiny_model_dir, "qa", "own", n, temperature=temperature)
    with torch.no_grad():
        _, _, _, stats = loss_and_soft(same, model, n)
    assert abs(stats["soft_loss_sum"]) < 1e-4


def test_multiple_choice_soft_loss_by_hand(teachers, tiny_model_dir):
    n, temperature = 3, 2.0
    prepared = prepared_task(tiny_model_dir, "multiple_choice", teachers["multiple_choice"])
    choices = len(prepared.train.features[0]["lengths"])
    teacher = random_logits([(choices,)] * n)
    program, model, features, _ = program_for(teachers, tiny_model_dir, "multiple_choice", np.stack(teacher), n,
                                              alpha_soft=2.0, alpha_hard=0.0)
    with torch.no_grad():
        batch, total, loss, stats = loss_and_soft(program, model, n)
        out = model(input_ids=batch["input_ids"], token_type_ids=batch["token_type_ids"], attention_mask=batch["attention_mask"], labels=batch["labels"])
    assert batch["teacher_logits"].shape == (n, choices)
    soft = kl_rows(out.logits.numpy(), np.stack(teacher), temperature)
    assert stats["soft_loss_sum"] == pytest.approx(soft, rel=1e-5)
    assert loss.item() == pytest.approx(2.0 * soft / total, rel=1e-5)  # alpha_hard 0: the soft term alone

    same, model, _, _ = program_for(teachers, tiny_model_dir, "multiple_choice", "own", n)
    with torch.no_grad():
        _, _, _, stats = loss_and_soft(same, model, n)
    assert abs(stats["soft_loss_sum"]) < 1e-5


def test_masked_soft_target_loss_ignores_finfo_min():
    """Masked entries (QA padding at finfo.min) take no part: the value and the gradient
    equal those over the real entries alone, at any temperature."""
    from bertkit.distillation import soft_target_loss

    lowest = torch.finfo(torch.float32).min
    student = torch.tensor([[1.0, -2.0, 0.5, lowest, lowest], [0.3, 0.1, -1.0, 2.0, lowest]], requires_grad=True)
    teacher = torch.tensor([[0.0, 1.0, 2.0, 0.0, 0.0], [1.0, -1.0, 0.5, 0.2, 7.0]])
    mask = student.detach() != lowest
    for temperature in (0.5, 1.0, 4.0):
        for kind in ("kl", "ce"):
            value = soft_target_loss(student, teacher, temperature, kind, mask)
            (grad,) = torch.autograd.grad(value, student)
            expected = sum(soft_target_loss(student[i, mask[i]][None], teacher[i, mask[i]][None], temperature, kind)
                           for i in range(2))
            (reference,) = torch.autograd.grad(expected, student)
            assert torch.isfinite(value) and bool(torch.isfinite(grad).all())
            torch.testing.assert_close(value, expected)
            torch.testing.assert_close(grad, reference)
            assert bool((grad[~mask] == 0).all())
    kl = soft_target_loss(student, teacher, 1.0, "kl", mask)
    reference = sum(F.kl_div(F.log_softmax(student[i, mask[i]], -1), F.log_softmax(teacher[i, mask[i]], -1),
                             log_target=True, reduction="sum") for i in range(2))
    torch.testing.assert_close(kl, reference)


def test_teacher_cache_round_trip(tmp_path):
    from bertkit.distillation import load_teacher_logits, save_teacher_logits

    ragged = random_logits([(5, 3), (8, 3), (2, 3)])
    fixed = random_logits([(4,), (4,)])
    for name, logits in (("ragged", ragged), ("fixed", fixed)):
        save_teacher_logits(tmp_path / f"{name}.npz", logits)
        loaded = load_teacher_logits(tmp_path / f"{name}.npz")
        assert len(loaded) == len(logits)
        for a, b in zip(loaded, logits, strict=True):
            assert a.dtype == np.float32 and np.array_equal(a, b)


# ---------------------------------------------------------------------------- end to end


def distill(*args: str) -> int:
    return main(["distill", *args])


def check_best(out: Path, head: str, capsys, teacher: Path) -> dict:
    from bertkit.inference.loading import load_finetuned

    captured = capsys.readouterr()
    assert "student 1 layers from teacher layers [0]; every weight copied" in captured.err
    assert "student dev" in captured.out and "vs teacher" in captured.out
    best = out / "best"
    for name in ("config.json", "model.safetensors", "vocab.txt", "bertkit_task.json", "best_metrics.json"):
        assert (best / name).is_file(), name
    config = json.loads((best / "config.json").read_text())
    assert config["num_hidden_layers"] == 1 and config["architectures"] == [head]
    assert config.get("id2label") == json.loads((teacher / "config.json").read_text()).get("id2label")
    assert type(load_finetuned(best, device="cpu").model).__name__ == head
    records = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert any("soft_loss" in r and math.isfinite(r["soft_loss"]) for r in records)
    assert all(math.isfinite(r["loss"]) for r in records if "loss" in r)
    report = (out / "report.md").read_text()
    assert "| soft targets |" in report and "## Teacher dev metrics" in report
    return json.loads((best / "best_metrics.json").read_text())


def evaluate(capsys, *args: str) -> dict:
    assert main(["evaluate", *args, "--no-progress"]) == 0
    (line,) = capsys.readouterr().out.splitlines()
    return json.loads(line)


def test_ner_end_to_end_with_teacher_cache(teachers, tmp_path, capsys):
    out = tmp_path / "ner"
    assert distill("--teacher", str(teachers["tagging"]), "--task", "ner", "--train", str(CONLL), "--dev", str(CONLL),
                   "--output-dir", str(out), "--epochs", "1", "--cache-teacher", "--set", "log_steps=1", *STEPS) == 0
    summary = check_best(out, "BertForTokenClassification", capsys, teachers["tagging"])
    result = evaluate(capsys, "ner", "--model", str(out / "best"), "--data", str(CONLL))
    assert result["f1"] == pytest.approx(summary["eval_f1"])
    assert main(["predict", "--model", str(out / "best"), "John Smith lives in Paris."]) == 0
    (line,) = stdout_jsonl(capsys.readouterr().out)
    assert line["words"] == ["John", "Smith", "lives", "in", "Paris", "."] and len(line["tags"]) == 6

    # the cache: one array per training feature at the feature's own length; a second run reads it
    from bertkit.distillation import load_teacher_logits

    (cached,) = (out / "teacher-cache").glob("task-*.npz")
    prepared = prepared_task(None, "tagging", teachers["tagging"])
    logits = load_teacher_logits(cached)
    assert [a.shape for a in logits] == [(len(f["input_ids"]), len(prepared.labels)) for f in prepared.train.features]
    before = cached.stat().st_mtime_ns
    again = tmp_path / "ner-again"
    assert distill("--teacher", str(teachers["tagging"]), "--task", "ner", "--train", str(CONLL), "--dev", str(CONLL),
                   "--output-dir", str(again), "--epochs", "1", "--cache-teacher", "--set", "log_steps=1",
                   "--set", f"cache_dir={out / 'teacher-cache'}", *STEPS) == 0
    assert cached.stat().st_mtime_ns == before and not (again / "teacher-cache").exists()
    losses = [[r["loss"] for r in map(json.loads, (run / "metrics.jsonl").read_text().splitlines()) if "loss" in r]
              for run in (out, again)]
    assert losses[0] == pytest.approx(losses[1], rel=1e-6)


@pytest.mark.parametrize("version", [1, 2])
def test_squad_end_to_end(version, teachers, tmp_path, capsys):
    train, dev = SQUAD[version]
    out = tmp_path / "squad"
    assert distill("--teacher", str(teachers["qa"]), "--task", "squad", "--version", str(version), "--train",
                   str(train), "--dev", str(dev), "--output-dir", str(out), *SQUAD_STEPS) == 0
    summary = check_best(out, "BertForQuestionAnswering", capsys, teachers["qa"])
    task = json.loads((out / "best" / "bertkit_task.json").read_text())
    assert (task["family"], task["squad_version"], task["doc_stride"], task["max_seq_length"]) == ("qa", version, 16, 64)
    assert (out / "dev_predictions.json").is_file() and (out / "dev_na_probs.json").is_file() == (version == 2)
    # v2.0: report.md says the thresholds' unit (a null-score difference; dev_na_probs.json gives probabilities)
    assert ("## No-answer threshold unit" in (out / "report.md").read_text()) == (version == 2)
    result = evaluate(capsys, "squad", "--model", str(out / "best"), "--data", str(dev))
    assert result["f1"] == pytest.approx(summary["eval_f1"])  # v2.0: the threshold chosen on dev was saved
    context = "The Kestrel Valley railway opened in 1887 to carry slate."
    assert main(["predict", "--model", str(out / "best"), "When did the railway open?", context]) == 0
    (line,) = stdout_jsonl(capsys.readouterr().out)
    assert line["question"] == "When did the railway open?" and 0.0 <= line["score"] <= 1.0


def test_multiple_choice_end_to_end(teachers, tmp_path, capsys):
    out = tmp_path / "mc"
    assert distill("--teacher", str(teachers["multiple_choice"]), "--task", "multiple-choice", "--train",
                   str(CHOICES), "--dev", str(CHOICES), "--output-dir", str(out), "--epochs", "1", *STEPS) == 0
    summary = check_best(out, "BertForMultipleChoice", capsys, teachers["multiple_choice"])
    result = evaluate(capsys, "multiple-choice", "--model", str(out / "best"), "--data", str(CHOICES))
    assert result["accuracy"] == pytest.approx(summary["eval_accuracy"])
    choices = ["bank", "library", "mall"]
    assert main(["predict", "--model", str(out / "best"), "Where is money kept?", *choices]) == 0
    (line,) = stdout_jsonl(capsys.readouterr().out)
    assert line["label"] in (0, 1, 2) and len(line["scores"]) == 3


# ---------------------------------------------------------------------------- errors


@pytest.mark.parametrize("case", ["ner_from_sequence_head", "ner_from_backbone", "ner_other_labels",
                                  "squad_from_token_head", "choice_from_qa_head"])
def test_wrong_teacher(case, teachers, tiny_model_dir, tmp_path, capsys):
    from bertkit.model.bert import BertForQuestionAnswering, BertForSequenceClassification, BertForTokenClassification

    teacher = tmp_path / "teacher"
    task, data, expected = {
        "ner_from_sequence_head": ("ner", CONLL, "not a fine-tuned BertForTokenClassification for these labels "
                                                 "(config.json architectures: BertForSequenceClassification)"),
        "ner_from_backbone": ("ner", CONLL, "not a fine-tuned BertForTokenClassification for these labels "
                                            "(config.json architectures: BertModel)"),
        "ner_other_labels": ("ner", CONLL, f"is not in the label map of {teacher}/config.json"),
        "squad_from_token_head": ("squad", SQUAD[2][0], "not a fine-tuned BertForQuestionAnswering"),
        "choice_from_qa_head": ("multiple-choice", CHOICES, "not a fine-tuned BertForMultipleChoice"),
    }[case]
    if case == "ner_from_sequence_head":
        save_random_head(teacher, tiny_model_dir, BertForSequenceClassification, ["0", "1"])
    elif case == "ner_from_backbone":
        teacher = tiny_model_dir
    elif case == "ner_other_labels":
        save_random_head(teacher, tiny_model_dir, BertForTokenClassification, ["O", "B-FOO", "I-FOO"])
    elif case == "squad_from_token_head":
        save_random_head(teacher, tiny_model_dir, BertForTokenClassification, ["O", "B-PER"])
    else:
        save_random_head(teacher, tiny_model_dir, BertForQuestionAnswering)
    out = tmp_path / "run"
    extra = ["--doc-stride", "16", "--max-seq-length", "64"] if task == "squad" else ["--max-seq-length", "32"]
    code = distill("--teacher", str(teacher), "--task", task, "--train", str(data), "--output-dir", str(out), *extra,
                   *QUIET)
    err = capsys.readouterr().err.strip()
    assert code == 1 and len(err.splitlines()) == 1, err
    assert expected in err and str(teacher) in err, err
    if case == "ner_other_labels":
        assert "distil from a teacher fine-tuned on these labels" in err and "reinit_head" not in err
    assert not out.exists()


@pytest.mark.parametrize("args, expected", [
    (["--task", "ner", "--doc-stride", "16"], "--doc-stride applies to task distillation with --task squad"),
    (["--task", "squad", "--tag-column", "1"], "--tag-column applies to task distillation with --task ner"),
    (["--task", "ner", "--data", "somewhere"], "--data applies to general distillation and --task glue"),
    (["--version", "2"], "--version applies to task distillation with --task squad"),
    (["--task", "ner", "--features", "last"], "unrecognized arguments: --features"),
])
def test_flag_errors(args, expected, tmp_path, capsys):
    with pytest.raises(SystemExit) if "--features" in args else contextlib.nullcontext():
        code = distill("--teacher", str(tmp_path), "--train", str(CONLL), "--output-dir", str(tmp_path / "run"),
                       *args, *QUIET)
        assert code == 1
    assert expected in capsys.readouterr().err
