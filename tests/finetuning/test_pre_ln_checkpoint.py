"""A pre-LN checkpoint (saved in transformers' roberta-prelayernorm layout) works with every
command that reads one: fill-mask and embed agree with transformers, and `finetune` from it
writes a classifier that transformers computes identically and `evaluate` / `predict` read."""

from __future__ import annotations

import json

import torch
import transformers

from bertkit import BertForPreTraining, Tokenizer
from bertkit.cli import main
from bertkit.inference.loading import load_mlm_model

from conftest import stdout_jsonl
from test_finetune_cli import STEPS, assert_hf_logits_equal, finetune


def test_fill_mask_and_embed_read_it_as_transformers_does(tiny_pre_ln_dir, capsys):
    assert json.loads((tiny_pre_ln_dir / "config.json").read_text())["model_type"] == "roberta-prelayernorm"
    text = "the cat sat on the [MASK] ."
    assert main(["fill-mask", "--model", str(tiny_pre_ln_dir), "--top-k", "3", text]) == 0
    printed = capsys.readouterr().out
    assert printed.strip()

    tokenizer = Tokenizer.from_pretrained(tiny_pre_ln_dir)
    ids = torch.tensor([tokenizer.encode(text)])
    theirs = transformers.AutoModelForMaskedLM.from_pretrained(tiny_pre_ln_dir).eval()
    ours = BertForPreTraining.from_pretrained(tiny_pre_ln_dir)
    with torch.no_grad():
        torch.testing.assert_close(ours(ids).prediction_logits, theirs(input_ids=ids).logits, atol=1e-4, rtol=1e-4)
    assert type(load_mlm_model(tiny_pre_ln_dir)) is BertForPreTraining

    assert main(["embed", "--model", str(tiny_pre_ln_dir), "--pooling", "cls", "the cat sat ."]) == 0
    (row,) = stdout_jsonl(capsys.readouterr().out)
    backbone = transformers.AutoModel.from_pretrained(tiny_pre_ln_dir).eval()
    with torch.no_grad():
        cls = backbone(input_ids=torch.tensor([tokenizer.encode("the cat sat .")])).last_hidden_state[0, 0]
    torch.testing.assert_close(torch.tensor(row["embedding"]), cls, atol=1e-4, rtol=1e-4)


def test_finetune_from_it_saves_what_transformers_computes(tiny_pre_ln_dir, fixtures, tmp_path, capsys):
    mrpc = fixtures / "glue" / "MRPC"
    best = finetune(capsys, "glue", "--task", "MRPC", "--model", str(tiny_pre_ln_dir), "--data", str(mrpc),
                    "--train", str(mrpc / "dev.tsv"), "--output-dir", str(tmp_path / "mrpc"), "--epochs", "1", *STEPS)
    config = json.loads((best / "config.json").read_text())
    assert config["architectures"] == ["RobertaPreLayerNormForSequenceClassification"]
    assert config["bertkit"] == {"model_type": "bert", "architectures": ["BertForSequenceClassification"]}
    tokenizer = transformers.AutoTokenizer.from_pretrained(best)
    inputs = tokenizer(["The cat sat.", "Shares rose 5 % on Monday ."], ["A cat was sitting.", "Stocks fell ."],
                       padding=True, return_tensors="pt")
    assert_hf_logits_equal(best, transformers.RobertaPreLayerNormForSequenceClassification, dict(inputs))

    assert main(["evaluate", "glue", "--model", str(best), "--data", str(mrpc), "--no-progress"]) == 0
    assert set(json.loads(capsys.readouterr().out)) >= {"f1", "accuracy"}
    assert main(["predict", "--model", str(best), "The cat sat.", "A cat was sitting."]) == 0
    (line,) = stdout_jsonl(capsys.readouterr().out)
    assert line["label"] in ("not_equivalent", "equivalent")  # GLUE names
