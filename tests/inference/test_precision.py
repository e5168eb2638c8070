"""int8 and bf16 inference (bertkit.inference.precision): outputs close to fp32 on tiny
models of every loader and on the real MiniLM checkpoint, float32 results whatever the
precision, the precision recorded, and one-line errors for bad choices."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest
import torch

import bertkit
from bertkit.cli import main
from bertkit.errors import BertkitError
from bertkit.inference.loading import load_encoder, load_finetuned, load_masked_lm
from bertkit.inference.quantization import cpu_has_vnni
from tests.inference._tiny_checkpoints import HEADS, save_tiny

TEXTS = ["The bank raised rates.", "We sat on the river bank.", "A man is playing a guitar.",
         "Stocks fell sharply on Monday after the report.", "Paris is a beautiful city.", "Fine.",
         "The committee will meet again next week to discuss the budget.", "It rained all day."]


def _cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return (a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)


@pytest.fixture(scope="module")
def tiny_encoder_dir(tmp_path_factory, minilm_dir):
    return save_tiny(tmp_path_factory.mktemp("encoder"), "BertModel", minilm_dir)


@pytest.fixture(scope="module")
def tiny_classifier_dir(tmp_path_factory, minilm_dir):
    return save_tiny(tmp_path_factory.mktemp("classifier"), HEADS["classification"][0], minilm_dir,
                     labels=HEADS["classification"][1])


@pytest.mark.parametrize("precision", ["int8", "bf16"])
def test_tiny_encoder_embeddings_close_to_fp32(tiny_encoder_dir, precision):
    reference = bertkit.embed(TEXTS, model=tiny_encoder_dir)
    vectors = bertkit.embed(TEXTS, model=tiny_encoder_dir, precision=precision)
    assert vectors.dtype == np.float32 and vectors.shape == reference.shape
    assert _cosines(vectors, reference).min() >= 0.99
    tokens = bertkit.embed(TEXTS[:2], model=tiny_encoder_dir, precision=precision, pooling="none")
    assert all(t.dtype == np.float32 for t in tokens)


@pytest.mark.parametrize("precision", ["int8", "bf16"])
def test_real_minilm_embeddings_close_to_fp32(minilm_dir, precision):
    """Sentences: cosine >= 0.99 to fp32. A text of one or two words pools a handful of
    vectors, so int8's rounding weighs more: ~0.97 there. On a CPU without VNNI the
    activations keep 7 bits: sentences ~0.97, one or two words ~0.90 (docs/export.md)."""
    short = ["Fine.", "Yes.", "Good morning!"]
    reference = bertkit.embed(TEXTS + short, model=minilm_dir)
    loaded = load_encoder(minilm_dir, precision=precision)
    assert loaded.precision == precision
    vectors = bertkit.embed(TEXTS + short, model=loaded)
    assert vectors.dtype == np.float32
    cosines = _cosines(vectors, reference)
    sentences = [len(text.split()) >= 4 for text in TEXTS + short]
    sentence_floor, text_floor = (0.99, 0.95) if precision == "bf16" or cpu_has_vnni() else (0.96, 0.88)
    assert cosines[sentences].min() >= sentence_floor and cosines.min() >= text_floor


@pytest.mark.parametrize("precision", ["int8", "bf16"])
def test_finetuned_logits_float32_same_argmax_and_precision_recorded(tiny_classifier_dir, precision):
    reference = bertkit.Predictor(load_finetuned(tiny_classifier_dir, device="cpu"))(TEXTS)
    loaded = load_finetuned(tiny_classifier_dir, precision=precision)
    assert loaded.precision == precision
    if precision == "int8":  # int8 stays on the CPU whatever the default device
        assert all(parameter.device.type == "cpu" for parameter in loaded.model.parameters())
    predictions = bertkit.Predictor(loaded)(TEXTS)
    same = sum(p["label"] == r["label"] for p, r in zip(predictions, reference))
    assert same >= len(TEXTS) - 1
    np.testing.assert_allclose([p["scores"]["pos"] for p in predictions], [r["scores"]["pos"] for r in reference],
                               atol=0.05)
    from bertkit.tasks.classification import ClassificationExample

    features = loaded.program_cls.module().encode([ClassificationExample(t, None, None, "<t>") for t in TEXTS],
                                                  loaded.tokenizer, 64, None)
    outputs = loaded.run(features, batch_size=4)
    assert outputs.precision == precision and all(row.dtype == np.float32 for row in outputs.logits)


def test_int8_attention_probabilities_path(tiny_encoder_dir):
    """The explicit-attention path folds the query scale into the weight: an int8 linear
    has no weight tensor to fold, so it scales the query instead."""
    fp32, int8 = load_encoder(tiny_encoder_dir), load_encoder(tiny_encoder_dir, precision="int8")
    batch = fp32.tokenizer(TEXTS[:3], padding=True, return_tensors="pt")
    with torch.inference_mode():
        ref = fp32.model(**batch, output_attentions=True)
        out = int8.model(**batch, output_attentions=True)
    assert (out.attentions[-1] - ref.attentions[-1]).abs().max() < 0.05
    assert (out.last_hidden_state - ref.last_hidden_state).abs().max() < 0.2


@pytest.mark.parametrize("precision", ["int8", "bf16"])
def test_fill_mask_in_precision(tmp_path, minilm_dir, precision):
    directory = save_tiny(tmp_path / "mlm", "BertForPreTraining", minilm_dir)
    reference = bertkit.fill_mask("Paris is a beautiful [MASK].", model=directory, top_k=3)
    predictions = bertkit.fill_mask("Paris is a beautiful [MASK].", model=directory, top_k=3, precision=precision)
    assert predictions[0][0]["token"] == reference[0][0]["token"]
    assert load_masked_lm(directory, precision=precision).precision == precision


def test_bad_precision_choices_are_one_line_errors(tiny_encoder_dir, tiny_classifier_dir):
    with pytest.raises(BertkitError, match=r"^precision: unknown choice 'int4'; choose one of fp32, int8, bf16$"):
        bertkit.embed(TEXTS, model=tiny_encoder_dir, precision="int4")
    with pytest.raises(BertkitError, match="precision: unknown choice 'fp16'"):
        load_finetuned(tiny_classifier_dir, precision="fp16")
    with pytest.raises(BertkitError, match=r"precision int8: runs on the CPU only \(device 'cuda'\)"):
        load_finetuned(tiny_classifier_dir, device="cuda", precision="int8")
    loaded = load_encoder(tiny_encoder_dir)
    with pytest.raises(BertkitError, match="already loaded in fp32"):
        bertkit.embed(TEXTS, model=loaded, precision="int8")


def test_cli_precision_flags(tiny_encoder_dir, tiny_classifier_dir, tmp_path, capsys):
    out = tmp_path / "v.npy"
    assert main(["embed", "--model", str(tiny_encoder_dir), "--precision", "int8", "-o", str(out), *TEXTS]) == 0
    reference = bertkit.embed(TEXTS, model=tiny_encoder_dir)
    assert _cosines(np.load(out), reference).min() >= 0.99
    assert main(["predict", "--model", str(tiny_classifier_dir), "--precision", "bf16", "Fine."]) == 0
    assert '"label"' in capsys.readouterr().out
    proc = subprocess.run([sys.executable, "-m", "bertkit.cli", "embed", "--model", str(tiny_encoder_dir),
                           "--precision", "int4", "hi"], capture_output=True, text=True)
    assert proc.returncode == 2 and "invalid choice: 'int4'" in proc.stderr and "Traceback" not in proc.stderr


def test_evaluate_and_fill_mask_commands_take_precision(tiny_classifier_dir, tmp_path, minilm_dir, capsys):
    dev = tmp_path / "dev.tsv"
    dev.write_text("sentence\tlabel\n" + "".join(f"{t}\t{['neg', 'pos'][i % 2]}\n" for i, t in enumerate(TEXTS)),
                   encoding="utf-8")
    reference = bertkit.evaluate(tiny_classifier_dir, dev, text_column="sentence", label_column="label")
    assert main(["evaluate", "classify", "--model", str(tiny_classifier_dir), "--data", str(dev), "--text-column",
                 "sentence", "--label-column", "label", "--no-progress", "--precision", "int8"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["examples"] == len(TEXTS) and abs(result["accuracy"] - reference["accuracy"]) <= 100 / len(TEXTS)
    mlm = save_tiny(tmp_path / "mlm", "BertForPreTraining", minilm_dir)
    assert main(["fill-mask", "--model", str(mlm), "--precision", "bf16", "--format", "jsonl",
                 "Paris is a beautiful [MASK]."]) == 0
    assert len(json.loads(capsys.readouterr().out)["predictions"][0]) == 5
