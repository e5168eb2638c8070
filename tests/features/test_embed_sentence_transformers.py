"""embed on sentence-transformers folders against SentenceTransformer.encode (the reference):
the real MiniLM folder (mean pooling, Normalize, max_seq_length 256), variants of its
modules.json (cls pooling, no Normalize, the new `pooling_mode` key), and one-line errors
for modules embed does not implement."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from sentence_transformers import SentenceTransformer

import bertkit
from bertkit.cli import main
from bertkit.errors import BertkitError

TEXTS = [
    "A short one.",
    "The bank raised interest rates, and markets fell sharply in early trading on Tuesday.",
    "",
    "Sentence embeddings are compared by cosine similarity. " * 40,  # over max_seq_length (256 tokens): truncated
]
MODEL_FILES = ("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json", "vocab.txt",
               "special_tokens_map.json")


def _reference(directory: Path, texts=TEXTS) -> np.ndarray:
    return SentenceTransformer(str(directory), device="cpu").encode(texts, batch_size=2)


def _variant(root: Path, minilm_dir: Path, modules: list[dict], pooling: dict | None,
             sentence_config: dict | None = None) -> Path:
    """A folder with MiniLM's weights (links) and the given modules.json / 1_Pooling/config.json."""
    root.mkdir()
    for name in MODEL_FILES:
        (root / name).symlink_to(minilm_dir / name)
    (root / "modules.json").write_text(json.dumps(modules))
    if pooling is not None:
        (root / "1_Pooling").mkdir()
        (root / "1_Pooling" / "config.json").write_text(json.dumps({"word_embedding_dimension": 384, **pooling}))
    (root / "sentence_bert_config.json").write_text(json.dumps(sentence_config or {"max_seq_length": 256}))
    return root


def _module(index: int, kind: str, path: str) -> dict:
    return {"idx": index, "name": str(index), "path": path, "type": f"sentence_transformers.models.{kind}"}


TRANSFORMER, POOLING, NORMALIZE = _module(0, "Transformer", ""), _module(1, "Pooling", "1_Pooling"), \
    _module(2, "Normalize", "2_Normalize")


def _assert_same(got: np.ndarray, expected: np.ndarray) -> None:
    assert got.shape == expected.shape and got.dtype == np.float32
    cosine = (got * expected).sum(1) / (np.linalg.norm(got, axis=1) * np.linalg.norm(expected, axis=1))
    np.testing.assert_allclose(cosine, 1.0, atol=1e-5)
    np.testing.assert_allclose(np.linalg.norm(got, axis=1), np.linalg.norm(expected, axis=1), atol=1e-5)
    np.testing.assert_allclose(got, expected, atol=1e-5)


def test_minilm_folder_gives_what_encode_gives(minilm_dir):
    expected = _reference(minilm_dir)
    np.testing.assert_allclose(np.linalg.norm(expected, axis=1), 1.0, atol=1e-5)  # its Normalize module
    _assert_same(bertkit.embed(TEXTS, model=minilm_dir, batch_size=3), expected)


def test_no_normalize_gives_the_raw_pooled_vectors(minilm_dir):
    raw = bertkit.embed(TEXTS, model=minilm_dir, normalize=False)
    assert np.linalg.norm(raw, axis=1).min() > 2  # MiniLM's raw mean-pooled norms are about 5-6
    expected = _reference(minilm_dir)
    np.testing.assert_allclose(raw / np.linalg.norm(raw, axis=1, keepdims=True), expected, atol=1e-5)


@pytest.mark.parametrize("pooling", [{"pooling_mode_cls_token": True, "pooling_mode_mean_tokens": False},
                                     {"pooling_mode": "cls"}, {"pooling_mode": ["mean"]}])
def test_pooling_from_the_folder_without_normalize(tmp_path, minilm_dir, pooling):
    folder = _variant(tmp_path / "st", minilm_dir, [TRANSFORMER, POOLING], pooling)
    got = bertkit.embed(TEXTS, model=folder)
    _assert_same(got, _reference(folder))
    assert np.linalg.norm(got, axis=1).min() > 2  # no Normalize module: raw vectors


def test_lowercasing_and_truncation_from_sentence_bert_config(tmp_path, minilm_dir):
    folder = _variant(tmp_path / "st", minilm_dir, [TRANSFORMER, POOLING, NORMALIZE], {"pooling_mode": "mean"},
                      {"max_seq_length": 12, "do_lower_case": True})
    texts = ["ÉCOLE Normale Supérieure", TEXTS[1], TEXTS[3]]
    _assert_same(bertkit.embed(texts, model=folder), _reference(folder, texts))


def test_cli_default_is_unit_vectors_and_no_normalize_is_raw(minilm_dir, capsys):
    assert main(["embed", "--model", str(minilm_dir), "A short one."]) == 0
    default = np.array(json.loads(capsys.readouterr().out)["embedding"])
    assert abs(np.linalg.norm(default) - 1) < 1e-5
    assert main(["embed", "--model", str(minilm_dir), "--no-normalize", "A short one."]) == 0
    raw = np.array(json.loads(capsys.readouterr().out)["embedding"])
    assert np.linalg.norm(raw) > 2
    np.testing.assert_allclose(raw / np.linalg.norm(raw), default, atol=1e-5)


def test_help_names_the_normalize_default(capsys):
    with pytest.raises(SystemExit):
        main(["embed", "--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    assert "--no-normalize gives the raw vectors" in help_text and "modules.json" in help_text


@pytest.mark.parametrize("modules, pooling, message", [
    ([TRANSFORMER, POOLING, _module(2, "Dense", "2_Dense"), NORMALIZE], {"pooling_mode": "mean"},
     r"modules\.json: module 2 \(Dense\) is not supported by embed \(it runs Transformer -> Pooling"),
    ([TRANSFORMER, POOLING], {"pooling_mode": "max"}, r"pooling mode 'max' is not supported by embed"),
    ([TRANSFORMER, POOLING], {"pooling_mode_cls_token": True, "pooling_mode_mean_tokens": True},
     r"pooling mode 'cls\+mean' is not supported"),
    ([_module(0, "Transformer", "0_BERT"), POOLING], {"pooling_mode": "mean"}, r"lives in 0_BERT/; .*pass --model"),
    ([TRANSFORMER], None, r"no Pooling module"),
])
def test_unsupported_pipelines_are_one_line_errors(tmp_path, minilm_dir, capsys, modules, pooling, message):
    folder = _variant(tmp_path / "st", minilm_dir, modules, pooling)
    with pytest.raises(BertkitError, match=message) as caught:
        bertkit.embed(["x"], model=folder)
    assert "\n" not in str(caught.value)
    assert main(["embed", "--model", str(folder), "x"]) == 1
    assert capsys.readouterr().err.count("\n") == 1
