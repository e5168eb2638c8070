"""The task programs and the run driver: loss normalised by global counts (one batch ==
accumulated micro-batches), training order (random by default, or length-grouped), metrics
against scikit-learn and seqeval, the grid search, and a run from the real MiniLM checkpoint."""

from __future__ import annotations

import json
from itertools import product

import numpy as np
import pytest
import torch
import transformers

import bertkit
from bertkit.cli import build_parser, main
from bertkit.finetuning import (
    PAPER_GRID_EPOCHS,
    PAPER_GRID_LRS,
    FinetuneConfig,
    build_config,
    load_task_model,
    prepare,
    task_model_config,
)
from bertkit.tasks.classification import classification_metrics
from bertkit.tasks.programs import TaggingProgram
from bertkit.tasks.scoring import cross_entropy
from bertkit.tasks.tagging import tagging_metrics

from conftest import QUIET, read_jsonl


def tagging_setup(tiny_model_dir, fixtures):
    config = FinetuneConfig(family="tagging", init_from=str(tiny_model_dir), output_dir="unused",
                            train=str(fixtures / "conll2003" / "eng.testa"), max_seq_length=24, progress=False,
                            model={"hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0})
    prepared = prepare(config)
    torch.manual_seed(0)
    model, fresh = load_task_model(prepared.program_cls.model_class(), tiny_model_dir, task_model_config(prepared),
                                   prepared.keep_head)
    program = TaggingProgram(model, prepared.tokenizer, prepared.spec, prepared.train.features, prepared.train,
                             dict(enumerate(prepared.labels)), progress=False)
    return prepared, model, program, fresh


def test_loss_is_normalised_by_global_counts(tiny_model_dir, fixtures):
    prepared, model, program, fresh = tagging_setup(tiny_model_dir, fixtures)
    assert fresh == ["classifier.bias", "classifier.weight"]
    features = prepared.train.features[:8]
    full = program.collate(features)
    loss, stats = program.compute_loss(model, full, program.loss_counts(full))
    reference = model(input_ids=full["input_ids"], token_type_ids=full["token_type_ids"], attention_mask=full["attention_mask"],
                      labels=full["labels"]).loss
    torch.testing.assert_close(loss, reference)  # one micro-batch: the model's own mean
    loss.backward()
    whole = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    parts = [program.collate(features[:3]), program.collate(features[3:])]  # uneven tagged-token counts
    counts = [program.loss_counts(p)["task"] for p in parts]
    assert counts[0] != counts[1] and sum(counts) == stats["task_count"]
    for part in parts:
        part_loss, _ = program.compute_loss(model, part, {"task": sum(counts)})
        part_loss.backward()
    for a, p in zip(whole, model.parameters(), strict=True):
        torch.testing.assert_close(p.grad, a, atol=1e-6, rtol=1e-5)


def test_default_order_is_random(tiny_model_dir, fixtures):
    """Length-grouped batches cost ~2 points of CoNLL F1 against transformers' random order
    (docs/benchmarks.md): fine-tuning and task distillation default to the plain permutation."""
    from bertkit.distillation import TaskDistillConfig

    prepared, _, program, _ = tagging_setup(tiny_model_dir, fixtures)
    permutation = np.random.default_rng(0).permutation(len(prepared.train.features))
    assert np.array_equal(program.epoch_order(permutation, 0, 1), permutation)
    assert FinetuneConfig().group_by_length is False
    assert TaskDistillConfig.__dataclass_fields__["group_by_length"].default is False


def test_length_grouped_order(tiny_model_dir, fixtures):
    prepared, _, program, _ = tagging_setup(tiny_model_dir, fixtures)
    program.group_by_length = True
    n = len(prepared.train.features)
    permutation = np.random.default_rng(0).permutation(n)
    lengths = np.asarray([len(f["input_ids"]) for f in prepared.train.features])
    grouped = program.epoch_order(permutation, 0, global_batch=1)  # chunks of 50 examples
    assert sorted(grouped) == list(range(n))
    for start in range(0, n, 50):
        chunk = lengths[grouped[start:start + 50]]
        assert (np.diff(chunk) <= 0).all() and set(grouped[start:start + 50]) == set(permutation[start:start + 50])
    program.group_by_length = False
    assert np.array_equal(program.epoch_order(permutation, 0, 32), permutation)


def test_metrics_match_references(tiny_model_dir, fixtures):
    import seqeval.metrics
    from sklearn.metrics import accuracy_score, f1_score

    from bertkit.tasks.programs import TaskSpec
    from bertkit.tasks.tagging import predictions_to_tags

    rng = np.random.default_rng(1)
    logits, labels = rng.normal(size=(40, 3)), rng.integers(0, 3, size=40)
    spec = TaskSpec(family="classification", text_column="text")
    ours = classification_metrics(spec, logits, labels)
    assert ours["accuracy"] == pytest.approx(100 * accuracy_score(labels, logits.argmax(-1)))  # percent scale
    assert ours["f1_macro"] == pytest.approx(100 * f1_score(labels, logits.argmax(-1), average="macro"))
    assert ours["loss"] == pytest.approx(float(torch.nn.functional.cross_entropy(torch.tensor(logits),
                                                                                 torch.tensor(labels))))
    binary = classification_metrics(TaskSpec(family="classification", glue_task="mrpc"), logits[:, :2], labels % 2)
    assert binary["f1"] == pytest.approx(100 * f1_score(labels % 2, logits[:, :2].argmax(-1)))

    prepared, _, program, _ = tagging_setup(tiny_model_dir, fixtures)
    outputs = [rng.normal(size=(len(f["input_ids"]), len(prepared.labels))) for f in prepared.train.features]
    outputs[0][:, prepared.labels.index("I-ORG")] += 5  # some entities that match, some that do not
    ours = tagging_metrics(prepared.train, outputs, program.id2label)
    predicted = predictions_to_tags(prepared.train.examples, prepared.train.features,
                                    [o.argmax(-1) for o in outputs], program.id2label, "IOB1")
    gold = [ex.tags for ex in prepared.train.examples]
    assert ours["f1"] == pytest.approx(100 * seqeval.metrics.f1_score(gold, predicted))
    assert ours["precision"] == pytest.approx(100 * seqeval.metrics.precision_score(gold, predicted))
    assert ours["recall"] == pytest.approx(100 * seqeval.metrics.recall_score(gold, predicted))
    assert ours["accuracy"] == pytest.approx(100 * seqeval.metrics.accuracy_score(gold, predicted))
    assert cross_entropy(np.zeros((4, 5)), np.arange(4)) == pytest.approx(np.log(5))


def test_grid_flag_is_the_papers_grid(tiny_model_dir):
    args = build_parser().parse_args(["finetune", "classify", "--train", "t.csv", "--text-column", "text", "--model",
                                      str(tiny_model_dir), "--output-dir", "out", "--grid"])
    from bertkit.commands.finetune import config_values

    config = build_config(config_values(args), {})
    assert config.grid == list(product(PAPER_GRID_LRS, PAPER_GRID_EPOCHS))
    assert (config.lr, config.epochs, config.batch_size, config.warmup_ratio, config.weight_decay) == (
        3e-5, 3, 32, 0.1, 0.01)
    assert config.training_fields(steps_per_epoch=10, metric_for_best="f1").warmup_steps == 3  # 10% of 30
    tuned = build_config(config_values(args), {"model.hidden_dropout_prob": "0.2", "lr": "5e-5"})
    assert tuned.model == {"hidden_dropout_prob": 0.2} and tuned.lr == 5e-5


def test_grid_search_keeps_the_best_run(tiny_model_dir, fixtures, tmp_path, capsys):
    mrpc = fixtures / "glue" / "MRPC" / "dev.tsv"
    out = tmp_path / "grid"
    assert main(["finetune", "glue", "--task", "mrpc", "--model", str(tiny_model_dir), "--train", str(mrpc),
                 "--dev", str(mrpc), "--output-dir", str(out), "--grid-lrs", "1e-3,1e-4", "--epochs", "1",
                 "--batch-size", "8", "--max-seq-length", "32", *QUIET]) == 0
    assert "grid run 2/2: lr 0.0001, 1 epochs" in capsys.readouterr().err
    runs = read_jsonl(out / "grid.jsonl")
    assert [(r["lr"], r["epochs"]) for r in runs] == [(1e-3, 1), (1e-4, 1)]
    best = json.loads((out / "best" / "best_metrics.json").read_text())
    assert best["eval_f1"] == max(r["best"] for r in runs)
    assert not list(out.glob("grid/*/best")) and not list(out.glob("grid/*/final"))
    assert all((out / "grid" / name / "report.md").is_file() for name in ("lr0.001_epochs1", "lr0.0001_epochs1"))
    report = (out / "report.md").read_text()
    assert "## Grid search" in report and "**winner**" in report and (out / "dev_f1.png").is_file()
    assert (out / "confusion_matrix.png").is_file()


def test_from_the_real_minilm_checkpoint(minilm_dir, fixtures, tmp_path, capsys):
    cola = fixtures / "glue" / "CoLA" / "dev.tsv"
    out = tmp_path / "cola"
    assert main(["finetune", "glue", "--task", "cola", "--model", str(minilm_dir), "--train", str(cola), "--dev",
                 str(cola), "--output-dir", str(out), "--batch-size", "4", "--max-seq-length", "32",
                 "--set", "max_steps=1", *QUIET]) == 0
    assert f"from {minilm_dir}: initialised fresh: classifier.bias, classifier.weight" in capsys.readouterr().err
    best = out / "best"
    sentences = ["The sailors rode the breeze clear of the rocks.", "Rocks the of clear."]
    tokenizer = transformers.AutoTokenizer.from_pretrained(best)
    inputs = dict(tokenizer(sentences, padding=True, return_tensors="pt"))
    reference = transformers.BertForSequenceClassification.from_pretrained(best).eval()
    with torch.no_grad():
        expected = reference(**inputs).logits.softmax(-1)
    predictions = bertkit.predict(best, sentences, device="cpu")
    got = torch.tensor([[p["scores"]["unacceptable"], p["scores"]["acceptable"]] for p in predictions],  # GLUE names
                       dtype=torch.float32)
    torch.testing.assert_close(got, expected, atol=1e-4, rtol=1e-4)
    assert bertkit.predict(best, "One sentence.", device="cpu")[0]["label"] in ("unacceptable", "acceptable")  # GLUE names
    assert (out / "report.md").read_text().count("classifier.bias, classifier.weight") == 1
