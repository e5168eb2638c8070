"""`bertkit export onnx` (bertkit.inference.onnx_export): every task family's head and the
bare encoder exported, with optimum's dynamic axis names, checked by ONNX Runtime against
PyTorch on other batch shapes (fp32 within 1e-4, int8 the same argmax); the sidecar
folder runs the docs' example with onnxruntime and tokenizers alone."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import bertkit
from bertkit.cli import main
from bertkit.errors import BertkitError
from bertkit.inference.onnx_export import export_onnx
from tests.inference._tiny_checkpoints import HEADS, save_tiny

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

DOCS = Path(__file__).resolve().parents[2] / "docs" / "export.md"
EXPECTED = {  # family -> (outputs, axes of input_ids)
    "classification": (["logits"], ["batch_size", "sequence_length"]),
    "tagging": (["logits"], ["batch_size", "sequence_length"]),
    "qa": (["start_logits", "end_logits"], ["batch_size", "sequence_length"]),
    "multiple_choice": (["logits"], ["batch_size", "num_choices", "sequence_length"]),
}


@pytest.fixture(scope="module")
def tiny_heads(tmp_path_factory, minilm_dir):
    root = tmp_path_factory.mktemp("heads")
    return {family: save_tiny(root / family, cls, minilm_dir, labels=labels, decisive=True)
            for family, (cls, labels) in HEADS.items()}


def _graph_axes(path: Path) -> dict[str, list]:
    graph = onnx.load(str(path)).graph
    return {value.name: [d.dim_param or d.dim_value for d in value.type.tensor_type.shape.dim]
            for value in list(graph.input) + list(graph.output)}


@pytest.mark.parametrize("family", list(HEADS))
@pytest.mark.parametrize("precision", ["fp32", "int8"])
def test_each_task_family_exports_with_its_head(tiny_heads, tmp_path, family, precision):
    report = export_onnx(tiny_heads[family], tmp_path / "model.onnx", precision=precision)
    outputs, axes = EXPECTED[family]
    assert report.task == family and report.outputs == outputs and report.input_axes == axes
    graph_axes = _graph_axes(report.path)
    assert graph_axes["input_ids"] == axes and graph_axes["attention_mask"] == axes
    assert graph_axes[outputs[0]][0] == "batch_size"
    assert onnx.load(str(report.path)).opset_import[0].version >= 14
    if precision == "fp32":
        assert max(report.max_abs_diff.values()) <= 1e-4
    assert report.argmax_agreement == 1.0
    meta = json.loads((tmp_path / "onnx_config.json").read_text())
    assert meta["outputs"] == outputs and meta["precision"] == precision and meta["task"] == family
    assert {"tokenizer.json", "config.json", "onnx_config.json"} <= {p.name for p in tmp_path.iterdir()}
    if family in ("classification", "tagging"):
        assert meta["labels"] == HEADS[family][1]


def test_real_minilm_encoder_matches_embed(minilm_dir, tmp_path):
    report = export_onnx(minilm_dir, tmp_path / "model.onnx")
    assert report.task == "encoder" and report.outputs == ["last_hidden_state", "sentence_embedding", "pooler_output"]
    assert max(report.max_abs_diff.values()) <= 1e-4 and report.min_cosine > 0.9999
    assert _graph_axes(report.path)["last_hidden_state"][:2] == ["batch_size", "sequence_length"]
    texts = ["The bank raised rates.", "We sat on the river bank.", "A man is playing a guitar in the park today."]
    from bertkit.tokenization import Tokenizer

    encoded = Tokenizer.from_pretrained(tmp_path)(texts, padding=True, return_tensors="np")
    session = ort.InferenceSession(str(report.path), providers=["CPUExecutionProvider"])
    feed = {name: np.asarray(encoded[name], dtype=np.int64) for name in ("input_ids", "attention_mask", "token_type_ids")}
    (vectors,) = session.run(["sentence_embedding"], feed)
    np.testing.assert_allclose(vectors, bertkit.embed(texts, model=minilm_dir), atol=1e-4)
    int8 = export_onnx(minilm_dir, tmp_path / "int8" / "model.onnx", precision="int8")
    assert int8.min_cosine >= 0.95


def _docs_example() -> str:
    text = DOCS.read_text(encoding="utf-8")
    section = text[text.index("### Running the ONNX model without bertkit"):]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


def test_docs_example_runs_without_bertkit(tiny_heads, tmp_path):
    export_onnx(tiny_heads["classification"], tmp_path / "model.onnx")
    blocked = "import sys\nsys.modules['bertkit'] = None\nsys.modules['torch'] = None\n"  # importing either fails
    proc = subprocess.run([sys.executable, "-c", blocked + _docs_example()], cwd=tmp_path, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    results = [json.loads(line) for line in proc.stdout.splitlines()]
    expected = bertkit.predict(tiny_heads["classification"], [
        ("The cat sat on the mat.", "A cat was sitting on the mat."),
        ("It rained all day.", "The sun was out from morning to night.")])
    assert [r["label"] for r in results] == [e["label"] for e in expected]
    np.testing.assert_allclose([r["score"] for r in results], [e["score"] for e in expected], atol=1e-3)


def test_cli_export_and_one_line_errors(tiny_heads, tmp_path, capsys):
    out = tmp_path / "cli" / "model.onnx"
    assert main(["export", "onnx", "--model", str(tiny_heads["qa"]), "--output", str(out), "--opset", "14"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["task"] == "qa" and summary["opset"] == 14 and out.is_file()
    assert main(["export", "onnx", "--model", str(tiny_heads["qa"]), "--output", str(tmp_path / "m.onnx"),
                 "--opset", "12"]) == 1
    assert capsys.readouterr().err.strip() == "bertkit: error: opset: must be >= 14, got 12"
    assert main(["export", "onnx", "--model", str(tiny_heads["qa"]), "--output", str(tmp_path / "m.bin")]) == 1
    assert "expected a .onnx file name" in capsys.readouterr().err
    with pytest.raises(BertkitError, match="export onnx writes fp32 or int8, got 'bf16'"):
        export_onnx(tiny_heads["qa"], tmp_path / "m.onnx", precision="bf16")
    proc = subprocess.run([sys.executable, "-m", "bertkit.cli", "export", "onnx", "--model", str(tmp_path / "none"),
                           "--output", str(tmp_path / "m.onnx")], capture_output=True, text=True)
    assert proc.returncode == 1 and len(proc.stderr.strip().splitlines()) == 1 and "Traceback" not in proc.stderr
