"""`bertkit generate` and the inference layer (bertkit.inference.generation) on tiny random
GPT-2 and GPT-1 checkpoints with a GPT-2-like tokenizer: the issue's command line as
written, batches in input order, the prompt echoed or not, the bad inputs."""

from __future__ import annotations

import json

import pytest
import torch
from _gpt_checkpoint import build_gpt_checkpoint

from bertkit.cli import main
from bertkit.inference.generation import generate, load_generator, run_generation, visible_text

TEXTS = ["It is a truth universally acknowledged", "A cat", "Rain fell on the quiet town all day long and"]


@pytest.fixture(scope="module", params=["gpt2", "openai-gpt"])
def gpt_dir(request, tmp_path_factory):
    return build_gpt_checkpoint(tmp_path_factory.mktemp(request.param), request.param)


@pytest.fixture(scope="module")
def loaded(gpt_dir):
    return load_generator(gpt_dir, device="cpu")


def _one_by_one(loaded, texts, **options):
    """Each prompt alone through model.generate: the continuation's text."""
    results = []
    for text in texts:
        ids = torch.tensor([loaded.tokenizer(text, add_special_tokens=False)["input_ids"]])
        out = loaded.model.generate(input_ids=ids, **options)
        results.extend(visible_text(loaded, row[ids.shape[1]:], strip=False) for row in out.tolist())
    return results


@pytest.mark.parametrize("options", [dict(max_new_tokens=8), dict(max_new_tokens=6, num_beams=3),
                                     dict(max_new_tokens=6, num_beams=3, num_return_sequences=2),
                                     dict(max_new_tokens=8, repetition_penalty=1.3, no_repeat_ngram_size=2)])
def test_batched_generation_in_input_order_equals_one_prompt_at_a_time(loaded, options):
    alone = _one_by_one(loaded, TEXTS, **options)
    assert generate(loaded, TEXTS, batch_size=2, return_full_text=False, **options) == alone
    per_text = options.get("num_return_sequences", 1)
    full = generate(loaded, TEXTS, batch_size=2, **options)  # the default echoes the prompt
    assert full == [TEXTS[i // per_text] + text for i, text in enumerate(alone)]


def test_sequences_hold_the_new_tokens_only(loaded):
    outputs = run_generation(loaded, TEXTS, max_new_tokens=5, eos_token_id=None)
    assert outputs.logits == [] and [len(row) for row in outputs.sequences] == [5, 5, 5]


def test_the_issue_s_command_line_works_as_written(gpt_dir, capsys):
    argv = ["generate", "--model", str(gpt_dir), "It is a truth universally acknowledged", "--max-new-tokens", "40",
            "--do-sample", "--top-p", "0.9", "--repetition-penalty", "1.2"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert out.startswith("It is a truth universally acknowledged")
    runs = []
    for _ in range(2):  # seeded: the same text twice
        assert main([*argv, "--seed", "3"]) == 0
        runs.append(capsys.readouterr().out)
    assert runs[0] == runs[1] and runs[0].startswith("It is a truth universally acknowledged")


def test_jsonl_without_the_prompt(gpt_dir, loaded, capsys):
    assert main(["generate", "--model", str(gpt_dir), "--max-new-tokens", "6", "--no-return-full-text",
                 "--format", "jsonl", *TEXTS[:2]]) == 0
    records = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [r["text"] for r in records] == TEXTS[:2]
    assert [r["generated_text"] for r in records] == _one_by_one(loaded, TEXTS[:2], max_new_tokens=6)


def test_a_prompt_longer_than_the_context_is_cut_with_a_one_line_warning(gpt_dir, capsys):
    assert main(["generate", "--model", str(gpt_dir), "a cat " * 40, "--max-new-tokens", "10"]) == 0
    err = capsys.readouterr().err
    assert err.startswith("bertkit: warning: prompt of ") and "cut to its last 54" in err and err.count("\n") == 1


@pytest.mark.parametrize("argv,message", [
    (["--repetition-penalty", "0", "a cat"], "bertkit: error: repetition_penalty: must be > 0"),
    (["  "], "bertkit: error: TEXT 1: empty text"),
    (["--max-new-tokens", "64", "a cat"], "bertkit: error: max_new_tokens: 64 leaves no room for a prompt"),
    (["--num-beams", "2", "--stop", "x", "a cat"], "bertkit: error: stop_strings:"),
])
def test_bad_input_is_one_line_naming_the_field(gpt_dir, capsys, argv, message):
    assert main(["generate", "--model", str(gpt_dir), *argv]) == 1
    err = capsys.readouterr().err
    assert err.startswith(message) and err.count("\n") == 1


def test_stop_strings_end_the_text(loaded):
    free = generate(loaded, TEXTS[0], max_new_tokens=12, eos_token_id=None, return_full_text=False)[0]
    stop = free[2:4]
    stopped = generate(loaded, TEXTS[0], max_new_tokens=12, eos_token_id=None, return_full_text=False,
                       stop_strings=[stop])[0]
    assert stop in stopped and free.startswith(stopped) and len(stopped) < len(free)


def test_predict_on_a_pretrained_gpt_generates(gpt_dir, capsys):
    assert main(["predict", "--model", str(gpt_dir), "--max-new-tokens", "4", "A cat"]) == 0
    record = json.loads(capsys.readouterr().out.splitlines()[0])
    assert record["generated_text"].startswith("A cat")


def test_the_python_api_takes_inputs_then_model(gpt_dir, loaded):
    """One order for every function (`embed(texts, model=...)`): generate(texts, model=DIR) as the
    issue wrote it, the model by position, and an older generate(model, texts) call all agree."""
    import bertkit

    options = dict(max_new_tokens=5, return_full_text=False)
    expected = generate(TEXTS[:2], loaded, **options)
    assert bertkit.generate(TEXTS[:2], model=str(gpt_dir), **options) == expected
    assert bertkit.generate(TEXTS[:2], str(gpt_dir), **options) == expected
    assert bertkit.generate(str(gpt_dir), TEXTS[:2], **options) == expected  # the older order
    assert generate(loaded, TEXTS[:2], **options) == expected
    with pytest.raises(bertkit.BertkitError, match=r"no model given; call generate\(inputs, model=DIR\)"):
        bertkit.generate(TEXTS[:2])


def test_skip_bad_lines_skips_a_jsonl_line_without_the_field(gpt_dir, tmp_path, capsys):
    """A JSONL line without --text-field is a bad line: named without --skip-bad-lines, skipped and
    counted in one warning with it."""
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text('{"prompt": "A cat"}\n{"prompt": "Rain fell"}\n{"text": "no prompt here"}\n', encoding="utf-8")
    common = ["generate", "--model", str(gpt_dir), "--file", str(prompts), "--text-field", "prompt",
              "--max-new-tokens", "3"]
    assert main(common) == 1
    assert f"{prompts}:3: no field 'prompt'" in capsys.readouterr().err
    assert main([*common, "--skip-bad-lines"]) == 0
    captured = capsys.readouterr()
    assert len(captured.out.strip().splitlines()) == 2
    assert "skipped 1 undecodable or malformed line" in captured.err and "line 3" in captured.err


def test_a_run_folder_given_as_the_model_names_its_final_folder(gpt_dir, tmp_path, capsys):
    """`generate --model runs/gpt` (the run folder, not its final/): the error names runs/gpt/final."""
    import shutil

    run = tmp_path / "run"
    shutil.copytree(gpt_dir, run / "final")
    assert main(["generate", "--model", str(run), "A cat", "--max-new-tokens", "2"]) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and f"{run} is a run folder, its model is {run / 'final'}" in err
