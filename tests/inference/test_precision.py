"""int8 and bf16 inference (bertkit.inference.precision): outputs close to fp32 on tiny
models of every loader and on the real MiniLM checkpoint, float32 results whatever the
precision, the precision recorded, and one-line errors for bad choices. int8 by CPU class
(bertkit.inference.quantization): the class read from the CPU's flags, the per-token
scheme of CPUs without VNNI (no 16-bit saturation, MiniLM's sentences at cosine >= 0.99),
and the one line int8 says at load where a class misses a target."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

import bertkit
from bertkit.cli import main
from bertkit.errors import BertkitError
from bertkit.inference.loading import load_encoder, load_finetuned, load_masked_lm
from bertkit.inference import precision as precision_module
from bertkit.inference import quantization
from bertkit.inference.quantization import RowwiseInt8Linear, cpu_class, int8_scheme, quantize_linear_layers
from tests.inference._tiny_checkpoints import HEADS, save_tiny

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
from bench_precision import ONE_WORD_TEXTS, wikitext_sentences  # noqa: E402

WIKITEXT = Path(__file__).resolve().parents[1] / "fixtures" / "wikitext_small.raw"
needs_onednn_int8 = pytest.mark.skipif(int8_scheme("avx2") != "rowwise", reason="torch without oneDNN's int8 kernels")

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
    """Sentences: cosine >= 0.99 to fp32 on every CPU class with VNNI or oneDNN's int8. A
    text of one or two words pools a handful of vectors, so int8's rounding weighs more:
    ~0.97-0.98 there. torch's dynamic linear without VNNI (no oneDNN) keeps 7-bit
    activations: sentences ~0.97, one or two words ~0.90 (docs/export.md)."""
    short = ["Fine.", "Yes.", "Good morning!"]
    reference = bertkit.embed(TEXTS + short, model=minilm_dir)
    loaded = load_encoder(minilm_dir, precision=precision)
    assert loaded.precision == precision
    vectors = bertkit.embed(TEXTS + short, model=loaded)
    assert vectors.dtype == np.float32
    cosines = _cosines(vectors, reference)
    sentences = [len(text.split()) >= 4 for text in TEXTS + short]
    weak = precision == "int8" and cpu_class() != "vnni" and int8_scheme() == "dynamic"
    sentence_floor, text_floor = (0.96, 0.88) if weak else (0.99, 0.95)
    assert cosines[sentences].min() >= sentence_floor and cosines.min() >= text_floor


def test_cpu_class_from_flags():
    assert cpu_class({"fpu", "sse4_2", "avx", "avx2", "fma"}) == "avx2"
    assert cpu_class({"avx2", "avx512f", "avx512bw"}) == "avx512"
    assert cpu_class({"avx2", "avx512f", "avx512bw", "avx512_vnni"}) == "vnni"
    assert cpu_class({"avx2", "avx_vnni"}) == "vnni"  # Alder Lake and later: VNNI on 256-bit registers
    assert cpu_class(set()) == cpu_class({"neon", "asimd"}) == "other"
    assert cpu_class() in quantization.CPU_CLASSES
    assert int8_scheme("vnni") == int8_scheme("other") == "dynamic"


@needs_onednn_int8
def test_rowwise_int8_linear_close_to_float_and_never_saturates():
    """7-bit weights: two u8 x s7 products sum below 2^15, so AVX2's 16-bit pair sums cannot
    saturate even where every activation and weight is at its extreme (8-bit weights would)."""
    torch.manual_seed(0)
    extreme = torch.nn.Linear(64, 8)
    with torch.no_grad():
        extreme.weight.fill_(0.5)
    x = torch.full((3, 64), 4.0)
    np.testing.assert_allclose(RowwiseInt8Linear(extreme)(x), extreme(x).detach(), rtol=1e-4)

    linear = torch.nn.Linear(48, 24, bias=False)
    rows = torch.randn(2, 5, 48) * torch.tensor([1.0, 30.0])[:, None, None]  # two rows' scales far apart
    rows[0, 1] = 0.0  # a padding row stays exact
    out = RowwiseInt8Linear(linear)(rows)
    assert out.shape == (2, 5, 24) and out.dtype == torch.float32 and out[0, 1].abs().max() == 0
    expected = linear(rows).detach()
    assert ((out - expected).norm(dim=-1) / expected.norm(dim=-1).clamp_min(1e-6))[:, [0, 2, 3, 4]].max() < 0.03
    assert RowwiseInt8Linear(linear)(torch.zeros(0, 48)).shape == (0, 24)
    assert RowwiseInt8Linear(linear).weight().shape == (24, 48)


@needs_onednn_int8
def test_rowwise_scheme_keeps_minilm_sentences_at_cosine_099(minilm_dir):
    """The scheme of CPUs without VNNI on WikiText-2 sentences (tests/fixtures): the 5th
    percentile of their cosine to fp32 >= 0.99 (0.997 measured); one word >= 0.97 (0.98)."""
    sentences = wikitext_sentences(WIKITEXT.read_text(encoding="utf-8"), 120)
    assert len(sentences) >= 90
    texts = sentences + ONE_WORD_TEXTS
    reference = bertkit.embed(texts, model=minilm_dir)
    loaded = load_encoder(minilm_dir)
    quantize_linear_layers(loaded.model, "rowwise")
    assert isinstance(loaded.model.encoder.layer[0].output.dense, RowwiseInt8Linear)
    cosines = _cosines(bertkit.embed(texts, model=loaded), reference)
    assert np.percentile(cosines[: len(sentences)], 5) >= 0.99 and cosines[len(sentences):].min() >= 0.97


@pytest.mark.parametrize("cls", ["avx2", "vnni"])
def test_int8_load_says_a_missed_target_once(tiny_encoder_dir, monkeypatch, capsys, cls):
    """On a class whose measured figures miss a target (AVX2: speed) int8 says so at load,
    in one line with the figure, once per process; the CLI shows it; VNNI says nothing."""
    monkeypatch.setattr(quantization, "cpu_class", lambda flags=None: cls)
    monkeypatch.setattr(precision_module, "_SAID", set())
    capsys.readouterr()
    load_encoder(tiny_encoder_dir, precision="int8")
    assert main(["embed", "--model", str(tiny_encoder_dir), "--precision", "int8", "-o",
                 str(tiny_encoder_dir.parent / "v.npy"), "Fine."]) == 0
    lines = capsys.readouterr().err.splitlines()
    said = [line for line in lines if line.startswith("bertkit: int8 on this CPU")]
    if cls == "vnni":
        assert said == [] and precision_module.int8_notice("vnni") is None
    else:
        assert said == [f"bertkit: {precision_module.int8_notice('avx2')}"]
        assert re.search(r"AVX2, no VNNI\): embed .*\d\.\d\dx fp32's speed.*short of the 1\.8x target.*"
                         r"sentences' cosine to fp32 0\.99\d", said[0])


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
