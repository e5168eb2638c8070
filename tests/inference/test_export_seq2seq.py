"""embed and export onnx on encoder-decoders and ELMo (issue 42's journey re-run): a T5's embed stopped
with a TypeError (its bare model needs decoder inputs) and now pools its encoder's states, as sentence-T5
does (the family's registry `embedder`); export onnx of a pre-trained or text-to-text T5 or BART exports
that encoder (T5's RMS norm traced without the fused op, which opset 17 lacks; no token types passed to
models that take none), and an ELMo checkpoint is refused in one line instead of a TypeError."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from _bart_checkpoint import build_bart_checkpoint
from _t5_checkpoint import build_t5_checkpoint

from bertkit.cli import main
from bertkit.inference.embedding import embed

TEXTS = ["The cute dog walks in the green park.", "A cat sat."]


@pytest.fixture(scope="module")
def t5_dir(tmp_path_factory):
    return build_t5_checkpoint(tmp_path_factory.mktemp("t5"))


def test_embed_t5_is_the_mean_of_its_encoder_states(t5_dir):
    from bertkit.model.t5 import T5ForConditionalGeneration
    from bertkit.tokenization import Tokenizer

    vectors = embed(TEXTS, model=t5_dir)
    tok, model = Tokenizer.from_pretrained(t5_dir), T5ForConditionalGeneration.from_pretrained(t5_dir).eval()
    with torch.no_grad():
        direct = [model.encoder(input_ids=torch.tensor([tok.encode(t)])).last_hidden_state[0].mean(0).numpy()
                  for t in TEXTS]
    np.testing.assert_allclose(vectors, np.stack(direct), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("family", ["t5", "bart"])
def test_export_onnx_of_a_generator_is_its_encoder(family, t5_dir, tmp_path, capsys):
    pytest.importorskip("onnxruntime")
    directory = t5_dir if family == "t5" else build_bart_checkpoint(tmp_path / "bart")
    assert main(["export", "onnx", "--model", str(directory), "--output", str(tmp_path / "onnx/model.onnx")]) == 0
    report = capsys.readouterr().out
    assert '"task": "encoder"' in report and '"sentence_embedding"' in report
    import json

    import onnxruntime

    from bertkit.tokenization import Tokenizer

    sidecar = json.loads((tmp_path / "onnx/onnx_config.json").read_text())
    assert "token_type_ids" not in sidecar["inputs"]
    tok = Tokenizer.from_pretrained(tmp_path / "onnx")
    encoded = tok(TEXTS[:1], return_tensors="np")
    session = onnxruntime.InferenceSession(str(tmp_path / "onnx/model.onnx"))
    outputs = session.run(None, {name: encoded[name].astype(np.int64) for name in sidecar["inputs"]})
    names = [o.name for o in session.get_outputs()]
    np.testing.assert_allclose(outputs[names.index("sentence_embedding")], embed(TEXTS[:1], model=directory),
                               atol=1e-4)


def test_export_onnx_refuses_elmo_in_one_line(t5_dir, tmp_path, capsys):
    pytest.importorskip("onnxruntime")
    from bertkit.model.elmo import ElmoBiLM, ElmoConfig
    from bertkit.tokenization import Tokenizer

    ElmoBiLM(ElmoConfig.from_preset("elmo-tiny")).save_pretrained(tmp_path / "elmo")
    Tokenizer.from_pretrained(t5_dir).save_pretrained(tmp_path / "elmo")  # ELMo's words come from any tokenizer
    assert main(["export", "onnx", "--model", str(tmp_path / "elmo"), "--output", str(tmp_path / "m.onnx")]) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "reads words' characters" in err, err
