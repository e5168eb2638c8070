"""The feature-based approach (BERT Table 7) on a tiny random 4-layer BERT: every layer
choice trains on the shared loop with a finite loss; the cached features are
bertkit.embed's layer choices; the encoder stays frozen; a saved tagger predicts and
evaluates from its folder exactly as it scored during training; bad choices fail in one line."""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
import torch

from bertkit.cli import main
from bertkit.feature_choices import LAYER_CHOICES

from conftest import QUIET, SPECIALS, read_jsonl, stdout_jsonl

STEPS = ["--batch-size", "8", "--max-seq-length", "32", "--seed", "3", *QUIET]


@pytest.fixture(scope="module")
def encoder_dir(tmp_path_factory, fixtures) -> Path:
    """A 4-layer (sum/concat of the last four need four), hidden-32 BertModel with a
    WordPiece vocabulary of the CoNLL fixture's words."""
    from bertkit import BertConfig, BertModel, Tokenizer

    text = (fixtures / "conll2003" / "eng.testa").read_text(encoding="utf-8").lower()
    words = Counter(w for w in re.findall(r"\w+|[^\w\s]", text) if len(w) > 1)
    chars = sorted({c for c in text if not c.isspace()})
    vocab = SPECIALS + chars + [f"##{c}" for c in chars if c.isalnum()]
    vocab += [w for w, _ in words.most_common(300) if w not in vocab]
    directory = tmp_path_factory.mktemp("encoder4")
    torch.manual_seed(0)
    config = BertConfig.from_preset("tiny", vocab_size=len(vocab), num_hidden_layers=4, hidden_size=32,
                                    num_attention_heads=2, intermediate_size=64, max_position_embeddings=64)
    BertModel(config).save_pretrained(directory)
    Tokenizer.from_wordpiece_vocab(vocab).save_pretrained(directory)
    return directory


def config_for(encoder_dir: Path, conll: Path, output_dir: Path, features: str, **values):
    from bertkit.finetuning import build_config

    base = {"family": "tagging", "init_from": str(encoder_dir), "output_dir": str(output_dir),
            "train": str(conll / "eng.testa"), "features": features, "max_seq_length": 32, "batch_size": 8,
            "lr": 1e-3, "lstm_hidden_size": 16, "progress": False, "tensorboard": False, **values}
    return build_config(base, {})


def weights(directory: Path) -> dict[str, torch.Tensor]:
    from safetensors.torch import load_file

    return load_file(directory / "model.safetensors")


@pytest.mark.parametrize("features", LAYER_CHOICES)
def test_each_choice_trains_two_steps_with_a_finite_loss(features, encoder_dir, fixtures, tmp_path):
    from bertkit.finetuning import finetune

    result = finetune(config_for(encoder_dir, fixtures / "conll2003", tmp_path / "run", features, max_steps=2,
                                 log_steps=1))
    records = [r for r in read_jsonl(tmp_path / "run" / "metrics.jsonl") if "loss" in r]
    assert [r["step"] for r in records] == [1, 2]
    assert all(math.isfinite(r["loss"]) and r["loss"] > 0 and math.isfinite(r["grad_norm"]) for r in records)
    final = tmp_path / "run" / "final"
    saved = json.loads((final / "feature_tagger.json").read_text())
    assert saved["features"] == features and saved["encoder"] == str(encoder_dir.resolve())
    assert not (final / "model.safetensors").exists()  # the encoder is referenced, not copied
    assert result.best_dir is None  # no dev set


@pytest.mark.parametrize("features", LAYER_CHOICES)
def test_cached_features_are_embeds_layer_choices(features, encoder_dir, fixtures, tmp_path):
    from bertkit import embed
    from bertkit.finetuning import prepare
    from bertkit import ScalarMix

    prepared = prepare(config_for(encoder_dir, fixtures / "conll2003", tmp_path / "run", features,
                                  feature_cache_dtype="float32", max_seq_length=64))
    windows = prepared.train.features
    whole = [f for f in windows if sum(g["example_index"] == f["example_index"] for g in windows) == 1]
    assert len(whole) >= 8
    texts = [" ".join(prepared.train.examples[f["example_index"]].words) for f in whole]
    expected = embed(texts, model=str(encoder_dir), pooling="none", layers=features)
    for feature, text, reference in zip(whole, texts, expected):
        assert feature["input_ids"].tolist() == prepared.tokenizer([text])["input_ids"][0]
        hidden = torch.from_numpy(np.asarray(feature["hidden"]))  # (T, D) or (T, L+1, H)
        if features in ("weighted_sum", "scalar_mix"):
            assert hidden.shape[1:] == (5, 32)
            hidden = ScalarMix(5)(hidden[None], layer_dim=2)[0]  # at the start: uniform weights = embed's default
        assert hidden.shape == reference.shape
        torch.testing.assert_close(hidden, torch.from_numpy(reference), atol=1e-5, rtol=1e-5)
    assert prepared.feature_cache.nbytes == sum(np.asarray(f["hidden"]).nbytes for f in windows)


def test_float16_cache_rounds_the_float32_features(encoder_dir, fixtures, tmp_path):
    from bertkit.finetuning import prepare

    conll = fixtures / "conll2003"
    full = prepare(config_for(encoder_dir, conll, tmp_path / "a", "concat_last_four", feature_cache_dtype="float32"))
    half = prepare(config_for(encoder_dir, conll, tmp_path / "b", "concat_last_four", feature_cache="disk"))
    assert half.feature_cache.directory == tmp_path / "b" / "feature_cache"
    for a, b in zip(full.train.features, half.train.features):
        assert isinstance(b["hidden"], np.memmap) and b["hidden"].dtype == np.float16
        np.testing.assert_allclose(b["hidden"].astype(np.float32), a["hidden"], rtol=1e-3, atol=1e-3)


def test_cli_run_saves_a_tagger_that_predicts_and_evaluates(encoder_dir, fixtures, tmp_path, capsys):
    from bertkit.inference.loading import load_finetuned
    from bertkit.tasks.feature_tagger import build_feature_cache, run_cached
    from bertkit.tasks.programs import TaggingProgram

    conll = fixtures / "conll2003"
    before = weights(encoder_dir)
    run = tmp_path / "ner"
    assert main(["finetune", "ner", "--train", str(conll / "eng.testa"), "--dev", str(conll / "eng.testa"),
                 "--model", str(encoder_dir), "--output-dir", str(run), "--features", "weighted_sum",
                 "--lstm-hidden-size", "16", "--epochs", "2", "--set", "feature_cache=disk", *STEPS]) == 0
    out = capsys.readouterr()
    assert "initialised fresh: the whole tagger (scalar mix + 2-layer BiLSTM 16 + linear" in out.err
    best = Path(out.out.split("best model: ")[1].split()[0])
    for name in ("feature_tagger.json", "feature_tagger.safetensors", "vocab.txt", "bertkit_task.json",
                 "best_metrics.json"):
        assert (best / name).is_file(), name
    for name in ("report.md", "loss.png", "dev_f1.png", "metrics.jsonl"):
        assert (run / name).is_file(), name
    assert not (run / "feature_cache").exists()  # the disk cache goes when the run ends
    report = (run / "report.md").read_text()
    assert "| feature-based (frozen encoder) | weighted_sum -> 2-layer BiLSTM (hidden 16 per direction)" in report
    assert "memmap in" in report
    assert json.loads((run / "run_config.json").read_text())["lr"] == 1e-3  # the feature-based default

    # frozen: the checkpoint is untouched and the saved tagger holds no encoder weight
    after = weights(encoder_dir)
    assert before.keys() == after.keys() and all(torch.equal(before[k], after[k]) for k in before)
    from safetensors.torch import load_file

    keys = load_file(best / "feature_tagger.safetensors").keys()
    assert all(k.split(".")[0] in ("scalar_mix", "lstm", "classifier") for k in keys), sorted(keys)
    loaded = load_finetuned(best, device="cpu")
    assert not any(p.requires_grad for p in loaded.model.bert.parameters())
    assert all(torch.equal(v, before[k]) for k, v in loaded.model.bert.state_dict().items() if k in before)

    # the joined model (encoder -> tagger) gives the logits the tagger gave on cached features
    spec = loaded.spec
    examples = TaggingProgram.read(str(conll / "eng.testa"), spec)
    data = TaggingProgram.encode("dev", examples, loaded.tokenizer, spec, dict(loaded.config.label2id))
    joined = loaded.outputs(data.features, batch_size=8)
    build_feature_cache(encoder_dir, loaded.model.bert.config, loaded.tokenizer, "weighted_sum", {"dev": data},
                        device="cpu")
    with torch.no_grad():
        cached = run_cached(loaded.model.tagger, data.features, lambda rows: TaggingProgram.module().collate(rows, 0), 8)
    for a, b in zip(joined, cached):
        np.testing.assert_allclose(a, b, atol=1e-4, rtol=1e-4)

    summary = json.loads((best / "best_metrics.json").read_text())
    assert main(["evaluate", "ner", "--model", str(best), "--data", str(conll / "eng.testa"), "--no-progress"]) == 0
    (result,) = stdout_jsonl(capsys.readouterr().out)
    assert result["f1"] == pytest.approx(summary["eval_f1"]) and result["examples"] == len(examples)
    iob2 = conll / "iob2" / "valid.txt"
    assert main(["evaluate", "ner", "--model", str(best), "--data", str(iob2), "--no-progress"]) == 0
    assert stdout_jsonl(capsys.readouterr().out)[0]["f1"] == pytest.approx(result["f1"])

    text = "John Smith lives in Paris."
    assert main(["predict", "--model", str(best), text]) == 0
    (line,) = stdout_jsonl(capsys.readouterr().out)
    assert line["words"] == ["John", "Smith", "lives", "in", "Paris", "."] and len(line["tags"]) == 6
    assert all(tag in loaded.config.label2id or tag.replace("B-", "I-") in loaded.config.label2id
               for tag in line["tags"])
    for entity in line["entities"]:
        assert text[entity["start"]:entity["end"]] == entity["text"]


def test_a_changed_encoder_is_refused(encoder_dir, fixtures, tmp_path):
    import shutil

    from bertkit.errors import BertkitError
    from bertkit.finetuning import finetune
    from bertkit.inference.loading import load_finetuned

    copy = tmp_path / "encoder"
    shutil.copytree(encoder_dir, copy)
    finetune(config_for(copy, fixtures / "conll2003", tmp_path / "run", "last", max_steps=1))
    from safetensors.torch import save_file

    state = weights(copy)
    state["embeddings.word_embeddings.weight"] = state["embeddings.word_embeddings.weight"] + 1
    save_file(state, str(copy / "model.safetensors"))
    with pytest.raises(BertkitError, match="has changed since the tagger was trained"):
        load_finetuned(tmp_path / "run" / "final", device="cpu")


def test_bad_feature_choices_fail_in_one_line(encoder_dir, tiny_model_dir, fixtures, tmp_path, capsys):
    conll = fixtures / "conll2003"
    common = ["--train", str(conll / "eng.testa"), *STEPS]
    assert main(["finetune", "ner", *common, "--model", str(encoder_dir), "--output-dir", str(tmp_path / "a"),
                 "--features", "last_five"]) == 1
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and err.startswith("bertkit: error: ")
    assert err.endswith("field 'features' must be one of " + ", ".join(LAYER_CHOICES) + ", got 'last_five'")
    assert main(["finetune", "ner", *common, "--model", str(tiny_model_dir), "--output-dir", str(tmp_path / "b"),
                 "--features", "concat_last_four"]) == 1  # the 2-layer model has no last four
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "concat_last_four needs an encoder with at least 4 layers" in err and "has 2" in err
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()
