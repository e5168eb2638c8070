"""`bertkit generate`, `bertkit predict` on a text-to-text model, and the inference layer
under them (bertkit.inference.generation), on a tiny random T5 with a T5-like tokenizer."""

from __future__ import annotations

import json
import re

import pytest
import torch
from _t5_checkpoint import build_t5_checkpoint

from bertkit.cli import main
from bertkit.inference.generation import generate, load_generator, run_generation, visible_text

TEXTS = ["The <extra_id_0> walks in <extra_id_1> park.", "A cat sat.", "Rain fell on the quiet town all day long."]


@pytest.fixture(scope="module")
def t5_dir(tmp_path_factory):
    return build_t5_checkpoint(tmp_path_factory.mktemp("t5"))


@pytest.fixture(scope="module")
def loaded(t5_dir):
    return load_generator(t5_dir, device="cpu")


def _one_by_one(loaded, texts, **options):
    """Each text alone through model.generate, decoded: what a batched run must give."""
    results = []
    for text in texts:
        ids = torch.tensor([loaded.tokenizer(text)["input_ids"]])
        out = loaded.model.generate(input_ids=ids, **options)
        results.extend(visible_text(loaded, row) for row in out.tolist())
    return results


@pytest.mark.parametrize("options", [dict(max_new_tokens=8), dict(max_new_tokens=6, num_beams=3),
                                     dict(max_new_tokens=6, num_beams=3, num_return_sequences=2)])
def test_batched_generation_in_input_order_equals_one_text_at_a_time(loaded, options):
    assert generate(loaded, TEXTS, batch_size=2, **options) == _one_by_one(loaded, TEXTS, **options)


def test_sequences_fill_inference_outputs(loaded):
    outputs = run_generation(loaded, TEXTS, max_new_tokens=5)
    assert outputs.logits == [] and len(outputs.sequences) == 3
    assert all(row[0] == 0 and 2 <= len(row) <= 6 for row in outputs.sequences)


def test_visible_text_keeps_sentinels_and_drops_the_other_special_tokens(loaded):
    tok = loaded.tokenizer
    ids = [0, *tok.convert_tokens_to_ids(["<extra_id_0>", "▁park", "<extra_id_1>", "▁The", "</s>", "<pad>"])]
    assert visible_text(loaded, ids) == "<extra_id_0> park<extra_id_1> The"


def test_generate_command_prints_one_text_a_line(t5_dir, loaded, capsys):
    assert main(["generate", "--model", str(t5_dir), "--max-new-tokens", "8", "--device", "cpu", *TEXTS]) == 0
    assert capsys.readouterr().out.splitlines() == _one_by_one(loaded, TEXTS, max_new_tokens=8)


def test_generate_command_repetition_penalty(t5_dir, loaded, capsys):
    assert main(["generate", "--model", str(t5_dir), "--max-new-tokens", "8", "--repetition-penalty", "1.8",
                 "--device", "cpu", *TEXTS]) == 0
    assert capsys.readouterr().out.splitlines() == _one_by_one(loaded, TEXTS, max_new_tokens=8, repetition_penalty=1.8)


def test_generate_command_beam_search_jsonl_from_a_file(t5_dir, loaded, tmp_path, capsys):
    source = tmp_path / "texts.jsonl"
    source.write_text("".join(json.dumps({"input": t}) + "\n" for t in TEXTS), encoding="utf-8")
    assert main(["generate", "--model", str(t5_dir), "--file", str(source), "--text-field", "input", "--num-beams", "4",
                 "--max-new-tokens", "6", "--no-repeat-ngram-size", "2", "--format", "jsonl", "--device", "cpu"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    expected = _one_by_one(loaded, TEXTS, max_new_tokens=6, num_beams=4, no_repeat_ngram_size=2)
    assert rows == [{"text": t, "generated_text": g} for t, g in zip(TEXTS, expected)]


def test_generate_command_sampling_is_seeded(t5_dir, capsys):
    args = ["generate", "--model", str(t5_dir), "--do-sample", "--top-p", "0.9", "--top-k", "20", "--temperature",
            "1.3", "--max-new-tokens", "10", "--device", "cpu", *TEXTS]
    runs = []
    for seed in ("1", "1", "2"):
        assert main([*args, "--seed", seed]) == 0
        runs.append(capsys.readouterr().out)
    assert runs[0] == runs[1] and runs[0] != runs[2]


def test_predict_on_a_text_to_text_model_prints_generated_text_as_jsonl(t5_dir, loaded, capsys):
    assert main(["predict", "--model", str(t5_dir), "--max-new-tokens", "7", "--device", "cpu", *TEXTS[:2]]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    expected = _one_by_one(loaded, TEXTS[:2], max_new_tokens=7)
    assert rows == [{"text": t, "generated_text": g} for t, g in zip(TEXTS[:2], expected)]


def _one_line_error(capsys, pattern: str) -> None:
    err = capsys.readouterr().err
    assert err.startswith("bertkit: error: ") and len(err.strip().splitlines()) == 1, err
    assert re.search(pattern, err), err


def test_a_model_that_cannot_generate_is_one_line_naming_the_directory(tmp_path, tiny_config, capsys):
    from bertkit import BertForPreTraining

    BertForPreTraining(tiny_config).save_pretrained(tmp_path / "bert")
    assert main(["generate", "--model", str(tmp_path / "bert"), "some text"]) == 1
    _one_line_error(capsys, re.escape(str(tmp_path / "bert")) + r": bert models cannot generate text")


@pytest.mark.parametrize("command", ["generate", "predict"])
def test_empty_text_is_one_line_naming_it(t5_dir, tmp_path, capsys, command):
    assert main([command, "--model", str(t5_dir), "fine", "  "]) == 1
    _one_line_error(capsys, r"TEXT 2: empty text")
    source = tmp_path / "texts.txt"
    source.write_text("fine\n\nalso fine\n", encoding="utf-8")
    assert main([command, "--model", str(t5_dir), "--file", str(source)]) == 1
    _one_line_error(capsys, re.escape(f"{source}:2: empty text"))


@pytest.mark.parametrize("command", ["generate", "predict"])
def test_non_utf8_file_is_one_line_naming_file_and_line(t5_dir, tmp_path, capsys, command):
    source = tmp_path / "texts.txt"
    source.write_bytes(b"fine\n\xff\xfe broken\n")
    assert main([command, "--model", str(t5_dir), "--file", str(source)]) == 1
    _one_line_error(capsys, re.escape(f"{source}:2: not valid UTF-8"))


def test_bad_generation_option_is_one_line_naming_it(t5_dir, capsys):
    assert main(["generate", "--model", str(t5_dir), "--num-beams", "0", "text"]) == 1
    _one_line_error(capsys, r"num_beams: must be >= 1")


def test_predict_on_a_t5_classification_checkpoint_classifies_rather_than_generates(t5_dir, tmp_path):
    import shutil

    from bertkit.inference.prediction import Predictor
    from bertkit.model.t5 import T5Config, T5EncoderForSequenceClassification

    config = T5Config.from_dict({**T5Config.from_pretrained(t5_dir).to_dict(), "num_labels": 2})
    T5EncoderForSequenceClassification(config).save_pretrained(tmp_path)  # no task file: its architecture says
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(t5_dir / name, tmp_path)
    predictor = Predictor.from_pretrained(tmp_path, device="cpu")
    assert not predictor.loaded.generates and predictor.family == "classification"
    assert set(predictor(["A cat sat."])[0]) >= {"label", "score"}


@pytest.mark.parametrize("precision", ["int8", "bf16"])
def test_generate_and_predict_take_a_precision(t5_dir, capsys, precision):
    """The generating model loads in int8 / bf16 like every other loader; greedy text is
    produced for each input (not necessarily fp32's: rounding may change a token)."""
    generator = load_generator(t5_dir, device="cpu", precision=precision)
    assert generator.precision == precision
    if precision == "int8":
        from bertkit.inference.quantization import Int8Linear, RowwiseInt8Linear

        assert any(isinstance(m, (Int8Linear, RowwiseInt8Linear)) for m in generator.model.modules())
    else:
        assert next(generator.model.parameters()).dtype == torch.bfloat16
    assert main(["generate", "--model", str(t5_dir), "--max-new-tokens", "4", "--precision", precision, *TEXTS[:2]]) == 0
    assert len(capsys.readouterr().out.splitlines()) == 2
    assert main(["predict", "--model", str(t5_dir), "--max-new-tokens", "4", "--precision", precision, TEXTS[1]]) == 0
    assert "generated_text" in json.loads(capsys.readouterr().out)
