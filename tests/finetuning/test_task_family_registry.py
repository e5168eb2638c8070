"""Task families live in one place (bertkit.tasks.registry, issue 15 item 5).

- No code outside the registries compares a family's name with a string (`family ==
  "qa"`, `spec.family in ("qa", ...)`), and "multiple_choice" is spelled only there.
- A toy task family defined in this file — its module-level functions and program, plus
  one `register(TaskFamily(...))` — fine-tunes, evaluates and predicts through the
  public API with nothing else added.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

import bertkit
from bertkit.tasks import classification
from bertkit.tasks.programs import TaskData, TaskProgram
from bertkit.tasks.scoring import softmax
from bertkit.tasks.registry import CLASSIFICATION, TaskFamily, get_task_family, register, unregister

PACKAGE = Path(bertkit.__file__).parent
REGISTRIES = {"tasks/registry.py", "model/families.py"}


def _names_a_family(node: ast.AST) -> bool:
    name = node.attr if isinstance(node, ast.Attribute) else node.id if isinstance(node, ast.Name) else ""
    return "family" in name.lower()


def _is_string_or_strings(node: ast.AST) -> bool:
    if isinstance(node, ast.Constant):
        return isinstance(node.value, str)
    return isinstance(node, (ast.Tuple, ast.List, ast.Set)) and any(
        isinstance(e, ast.Constant) and isinstance(e.value, str) for e in node.elts)


def family_comparisons(source: str) -> list[int]:
    """Lines comparing something named *family* with a string (==, !=, in, not in)."""
    lines = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
            if any(_names_a_family(o) for o in operands) and any(_is_string_or_strings(o) for o in operands):
                lines.append(node.lineno)
    return lines


def test_the_check_sees_each_form_of_comparison():
    assert family_comparisons('if spec.family == "qa": pass') == [1]
    assert family_comparisons('x = family != "tagging"') == [1]
    assert family_comparisons('ok = prepared.spec.family in ("multiple_choice", "qa")') == [1]
    assert family_comparisons('same = loaded.spec.family != args.family\nname = "qa"') == []


def test_no_family_name_comparisons_outside_the_registries():
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(PACKAGE).as_posix()
        if relative in REGISTRIES:
            continue
        found += [f"{relative}:{line}" for line in family_comparisons(path.read_text(encoding="utf-8"))]
    assert found == []


def test_multiple_choice_is_spelled_only_in_the_registries():
    spelled = sorted({path.relative_to(PACKAGE).as_posix() for path in PACKAGE.rglob("*.py")
                      for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
                      if isinstance(node, ast.Constant) and node.value == "multiple_choice"})
    assert set(spelled) <= REGISTRIES and "tasks/registry.py" in spelled


# ---------------------------------------------------------------------------- a toy task family
# "word parity": is the number of words even or odd? Everything it needs is below.

TOY = "word_parity"
LABELS = ["even", "odd"]


@dataclass
class ParityExample:
    text: str
    label: str | None
    source: str


def read_examples(path: str) -> list[ParityExample]:
    """One text a line; the label is computed, so every file is labelled."""
    lines = Path(path).read_text(encoding="utf-8").splitlines()
    return [ParityExample(line, LABELS[len(line.split()) % 2], f"{path}:{n}") for n, line in enumerate(lines, 1)]


def encode(examples, tokenizer, max_seq_length, label_map, show_progress=False):
    as_classification = [classification.ClassificationExample(ex.text, None, ex.label, ex.source) for ex in examples]
    return classification.encode(as_classification, tokenizer, max_seq_length, label_map)


collate = classification.collate
model_class = classification.model_class


def metrics(spec, data, outputs, id2label):
    predicted = np.stack(outputs).argmax(-1)
    gold = np.asarray([f["labels"] for f in data.features])
    return {"accuracy": 100.0 * float((predicted == gold).mean())}


def describe(spec) -> str:
    return "word parity (toy)"


def predict(loaded, batch, max_seq_length, batch_size, progress):
    examples = [ParityExample(text, None, f"<input>:{i}") for i, text in enumerate(batch, 1)]
    logits = np.stack(loaded.outputs(encode(examples, loaded.tokenizer, max_seq_length, None), batch_size, progress))
    return [{"label": loaded.id2label[int(p.argmax())], "score": float(p.max())} for p in softmax(logits)]


class ParityProgram(TaskProgram):
    family = TOY

    @classmethod
    def read(cls, path, spec, labels_path=None, training=False):
        return read_examples(path)

    @classmethod
    def label_names(cls, spec, train, dev, checkpoint_label2id, origin, train_path):
        return list(LABELS)

    @classmethod
    def encode(cls, data_path, examples, tokenizer, spec, label2id, progress=False, training=False):
        return TaskData(data_path, examples, encode(examples, tokenizer, spec.max_seq_length, label2id))


@pytest.fixture()
def toy_family():
    # the one registry line (a family of the package adds it in bertkit.tasks.registry)
    entry = register(TaskFamily(TOY, __name__, f"{__name__}:ParityProgram", head=CLASSIFICATION))
    yield entry
    unregister(TOY)


def test_a_toy_family_finetunes_evaluates_and_predicts_with_one_registry_line(toy_family, tiny_model_dir, tmp_path):
    from bertkit.finetuning import build_config, finetune

    words = ["the", "cat", "sat", "on", "mat", "a", "dog", "ran"]
    rng = np.random.default_rng(0)
    texts = [" ".join(rng.choice(words, size=rng.integers(1, 7))) for _ in range(24)]
    (tmp_path / "train.txt").write_text("\n".join(texts) + "\n", encoding="utf-8")
    (tmp_path / "dev.txt").write_text("\n".join(texts[:8]) + "\n", encoding="utf-8")
    config = build_config({"family": TOY, "init_from": str(tiny_model_dir), "output_dir": str(tmp_path / "run"),
                           "train": str(tmp_path / "train.txt"), "dev": str(tmp_path / "dev.txt"), "epochs": 1,
                           "batch_size": 8, "max_seq_length": 16, "progress": False, "tensorboard": False}, {})
    result = finetune(config)
    assert result.metric == "accuracy" and result.best_dir is not None
    assert "word parity (toy)" in (tmp_path / "run" / "report.md").read_text(encoding="utf-8")
    assert get_task_family("word-parity") is toy_family

    scores = bertkit.evaluate(result.best_dir, tmp_path / "dev.txt")
    assert scores["examples"] == 8 and 0.0 <= scores["accuracy"] <= 100.0
    assert scores["accuracy"] == pytest.approx(result.best_metric)
    predictions = bertkit.predict(result.best_dir, ["the cat", "a dog ran"], device="cpu")
    assert [set(p) for p in predictions] == [{"label", "score"}] * 2
    assert {p["label"] for p in predictions} <= set(LABELS)


def test_an_unknown_family_names_the_registered_ones(toy_family):
    from bertkit.errors import ConfigError

    with pytest.raises(ConfigError, match="word_parity"):
        get_task_family("no-such-task")
