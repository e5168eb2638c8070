"""GPT-1's fine-tuning recipe on decoder-only checkpoints (bertkit.tasks.gpt1_recipe): the
<start>/<delim>/<extract> template and new embedding rows, the paper's defaults (each
overridable), the auxiliary LM loss, the saved folder loading in transformers'
*ForSequenceClassification with the same logits, `predict`, a KoGPT2-shaped folder, bad input."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch
import transformers
from safetensors.torch import load_file

from bertkit.cli import main

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
AUSTEN = FIXTURES / "austen_small.txt"
RTE = FIXTURES / "tasks" / "glue" / "RTE"
NSMC = FIXTURES / "nsmc_reviews_50.txt"
QUIET = ["--no-progress", "--set", "tensorboard=false"]
TINY = {"gpt2": ["--set", "model.n_embd=32", "--set", "model.n_layer=2", "--set", "model.n_head=2",
                 "--set", "model.n_positions=64"]}
TINY["openai-gpt"] = TINY["gpt2"]
PRESETS = {"gpt2": "gpt-tiny", "openai-gpt": "gpt1-mini"}
CLASSIFIERS = {"gpt2": "GPT2ForSequenceClassification", "openai-gpt": "OpenAIGPTForSequenceClassification"}


def _pretrain(root: Path, family: str, tokenizer_flags: tuple[str, ...] = ()) -> Path:
    tok, data, run = root / "tok", root / "data", root / "run"
    if not tok.exists():
        assert main(["tokenizer", "train", "--algorithm", "bbpe", "--layout", "gpt2", "--vocab-size", "500",
                     *tokenizer_flags, "--output", str(tok), "--no-progress", str(AUSTEN)]) == 0
        assert main(["data", "build", "--tokenizer", str(tok), "--format", "packed", "--max-seq-length", "64",
                     "--output", str(data), "--no-progress", str(AUSTEN)]) == 0
    assert main(["pretrain", "--objective", "clm", "--preset", PRESETS[family], "--data", str(data),
                 "--output-dir", str(run), *TINY[family], "--set", "progress=false", "--set", "tensorboard=false",
                 "--set", "batch_size=8", "--set", "max_steps=2", "--set", "eval_steps=2", "--set",
                 "eval_batches=1", "--overwrite"]) == 0
    return run / "final"


@pytest.fixture(scope="module", params=["gpt2", "openai-gpt"])
def pretrained(request, tmp_path_factory) -> tuple[str, Path]:
    return request.param, _pretrain(tmp_path_factory.mktemp(request.param), request.param)


def _finetune_rte(model: Path, out: Path, *extra: str) -> int:
    return main(["finetune", "glue", "--task", "rte", "--model", str(model), "--data", str(RTE), "--train",
                 str(RTE / "dev.tsv"), "--output-dir", str(out), "--epochs", "1", "--batch-size", "4",
                 "--max-seq-length", "64", "--set", "max_steps=2", *QUIET, *extra])


def test_rte_by_gpt1_recipe_saves_what_transformers_loads(pretrained, tmp_path, capsys):
    family, model = pretrained
    out = tmp_path / "rte"
    assert _finetune_rte(model, out) == 0
    run_config = json.loads((out / "run_config.json").read_text())
    assert {k: run_config[k] for k in ("lr", "warmup_ratio", "lm_coef", "classifier_dropout", "batch_size")} == {
        "lr": 6.25e-5, "warmup_ratio": 0.002, "lm_coef": 0.5, "classifier_dropout": 0.1, "batch_size": 4}
    records = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert any("lm_loss" in r and "task_loss" in r for r in records)
    best = out / "best"
    config = json.loads((best / "config.json").read_text())
    assert config["architectures"] == [CLASSIFIERS[family]] and config["vocab_size"] == 503
    # the trained rows are the pre-trained ones; three new rows, drawn as the model draws embeddings
    before = load_file(model / "model.safetensors")
    after = load_file(best / "model.safetensors")
    key = next(k for k in before if k.endswith(("wte.weight", "tokens_embed.weight")))
    assert before[key].shape[0] == 500 and after[key].shape[0] == 503
    new_rows = after[key][500:]
    assert new_rows.abs().sum() > 0 and new_rows.std() < 0.1

    tok = transformers.AutoTokenizer.from_pretrained(best)
    ref = getattr(transformers, CLASSIFIERS[family]).from_pretrained(best).eval()
    pairs = (["A man is playing.", "It rains."], ["Someone plays.", "The weather is wet and grey today."])
    enc = tok(*pairs, padding=True, return_tensors="pt")
    tokens = tok.convert_ids_to_tokens(enc["input_ids"][0][enc["attention_mask"][0].bool()])
    assert tokens[0] == "<start>" and tokens[-1] == "<extract>" and tokens.count("<delim>") == 1
    with torch.no_grad():
        expected = torch.softmax(ref(**enc).logits, -1)[:, 1]
    capsys.readouterr()
    assert main(["predict", "--model", str(best), pairs[0][0], pairs[1][0]]) == 0
    result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert result["scores"]["not_entailment"] == pytest.approx(float(expected[0]), abs=1e-5)


def test_every_default_is_overridable_and_lm_coef_zero_drops_the_lm_loss(pretrained, tmp_path):
    family, model = pretrained
    if family != "gpt2":
        pytest.skip("one family is enough")
    out = tmp_path / "rte"
    assert _finetune_rte(model, out, "--lr", "1e-4", "--set", "lm_coef=0", "--set", "warmup_ratio=0.1",
                         "--set", "classifier_dropout=0") == 0
    run_config = json.loads((out / "run_config.json").read_text())
    assert (run_config["lr"], run_config["lm_coef"], run_config["warmup_ratio"], run_config["classifier_dropout"]) == (
        1e-4, 0.0, 0.1, 0.0)
    records = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert not any("lm_loss" in r for r in records)


def test_gpt1_tokens_already_in_the_vocabulary_is_one_line(tmp_path, capsys):
    model = _pretrain(tmp_path, "gpt2", ("--extra-special-tokens", "<start>"))
    capsys.readouterr()
    assert _finetune_rte(model, tmp_path / "rte") != 0
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and str(model / "tokenizer.json") in err and "<start>" in err


def test_lm_coef_on_an_encoder_is_one_line(tmp_path, capsys):
    from bertkit import BertConfig, BertForPreTraining
    from bertkit.tokenization import Tokenizer

    encoder = tmp_path / "bert"
    BertForPreTraining(BertConfig.from_preset("tiny", vocab_size=64, hidden_size=32, num_attention_heads=2,
                                              intermediate_size=64)).save_pretrained(encoder)
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *"abcdefghijklmnopqrstuvwxyz.,"]
    Tokenizer.from_wordpiece_vocab(vocab).save_pretrained(encoder)
    capsys.readouterr()
    assert _finetune_rte(encoder, tmp_path / "rte", "--set", "lm_coef=0.5") != 0
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "field 'lm_coef'" in err


def test_a_kogpt2_shaped_folder_loads_generates_and_fine_tunes(tmp_path, capsys):
    """A random GPT-2 with KoGPT2's config shape (51,200 tokens, 1024 positions; tiny width) and a
    tokenizer.json of KoGPT2's kind written by tokenizers/transformers."""
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tokenization"))
    from test_decoder_layouts import kogpt2_kind_folder

    from bertkit.model.families import family_of

    folder = tmp_path / "kogpt2"
    kogpt2_kind_folder(folder)
    config = transformers.GPT2Config(vocab_size=51200, n_positions=1024, n_embd=32, n_layer=2, n_head=2,
                                     bos_token_id=0, eos_token_id=1, pad_token_id=3)
    torch.manual_seed(0)
    transformers.GPT2LMHeadModel(config).save_pretrained(folder)
    model = family_of(folder).generator_class().from_pretrained(folder).eval()
    tok = transformers.AutoTokenizer.from_pretrained(folder)
    ids = tok("이 영화 정말", return_tensors="pt")["input_ids"]
    generated = model.generate(input_ids=ids, max_new_tokens=4, do_sample=False)
    assert generated.shape[1] == ids.shape[1] + 4
    table = tmp_path / "nsmc.tsv"
    lines = [line for line in NSMC.read_text(encoding="utf-8").splitlines() if line.strip()][:24]
    table.write_text("document\tlabel\n" + "".join(f"{t}\t{i % 2}\n" for i, t in enumerate(lines)), encoding="utf-8")
    out = tmp_path / "nsmc"
    assert main(["finetune", "classify", "--train", str(table), "--dev", str(table), "--text-column", "document",
                 "--label-column", "label", "--model", str(folder), "--output-dir", str(out), "--epochs", "1",
                 "--batch-size", "8", "--max-seq-length", "64", "--set", "max_steps=2", *QUIET]) == 0
    best = out / "best"
    ref = transformers.GPT2ForSequenceClassification.from_pretrained(best).eval()
    enc = transformers.AutoTokenizer.from_pretrained(best)(lines[:3], padding=True, truncation=True, max_length=64,
                                                          return_tensors="pt")  # as the model was fine-tuned
    assert json.loads((best / "config.json").read_text())["vocab_size"] == 51200  # the markers fit in the table
    capsys.readouterr()
    assert main(["predict", "--model", str(best), lines[0]]) == 0
    result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    with torch.no_grad():
        expected = torch.softmax(ref(**enc).logits, -1)[0]
    assert result["scores"]["1"] == pytest.approx(float(expected[1]), abs=1e-5)
    shutil.rmtree(out)
