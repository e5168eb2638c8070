"""`bertkit pretrain --objective roberta`: byte-level BPE + packed data -> a checkpoint that
transformers loads as RobertaForMaskedLM and that `bertkit finetune` fine-tunes as RoBERTa;
Adam beta2 0.98 by default (overridable); one-line errors on data it cannot use."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
import transformers
from _successor_data import build_data, pretrain

from bertkit.data.dataset import PretrainingDataset
from bertkit.model.roberta import RobertaForMaskedLM
from bertkit.pretraining import build_config


@pytest.fixture(scope="module")
def data_root(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("roberta")


@pytest.fixture(scope="module")
def packed_bbpe(data_root) -> Path:
    return build_data(data_root, "bbpe", "packed")


def test_bbpe_packed_data_uses_roberta_specials(packed_bbpe):
    data = PretrainingDataset.open(packed_bbpe, "train")
    tok = data.tokenizer()
    assert (tok.cls_token, tok.sep_token, tok.pad_token, tok.mask_token) == ("<s>", "</s>", "<pad>", "<mask>")
    example = data[0]["input_ids"]
    assert example[0] == tok.cls_token_id and example[-1] == tok.sep_token_id
    assert tok.pad_token_id not in example.tolist()


@pytest.fixture(scope="module")
def roberta_run(packed_bbpe, data_root) -> Path:
    out = data_root / "run"
    assert pretrain("roberta", packed_bbpe, out) == 0
    return out


def test_pretrain_roberta_checkpoint_loads_in_transformers(roberta_run):
    out = roberta_run
    run_config = json.loads((out / "run_config.json").read_text())
    assert run_config["adam_beta2"] == 0.98 and run_config["model"]["type_vocab_size"] == 1
    config = json.loads((out / "final" / "config.json").read_text())
    assert config["model_type"] == "roberta" and config["architectures"] == ["RobertaForMaskedLM"]
    assert config["pad_token_id"] == 1 and config["type_vocab_size"] == 1
    records = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert any("eval_mlm_accuracy" in r for r in records) and all("nsp_accuracy" not in r for r in records)

    ref, info = transformers.RobertaForMaskedLM.from_pretrained(out / "final", output_loading_info=True)
    assert not info["missing_keys"] and not info["unexpected_keys"]
    ours = RobertaForMaskedLM.from_pretrained(out / "final")
    hf_tok = transformers.AutoTokenizer.from_pretrained(out / "final")
    batch = hf_tok(["Emma Woodhouse, handsome, clever, and rich.", "She was the youngest."], padding=True,
                   return_tensors="pt")
    real = batch["attention_mask"].bool()
    with torch.no_grad():
        expected = ref.eval()(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits
        got = ours(batch["input_ids"], attention_mask=batch["attention_mask"]).logits
    torch.testing.assert_close(got[real], expected[real], atol=1e-5, rtol=1e-5)


def test_objective_defaults_yield_to_the_user(tmp_path):
    values = {"data": "d", "output_dir": "o", "objective": "roberta"}
    assert build_config(values, {}).adam_beta2 == 0.98
    assert build_config(values, {"adam_beta2": "0.999"}).adam_beta2 == 0.999
    assert build_config({**values, "adam_beta2": 0.95}, {}).adam_beta2 == 0.95
    config = build_config({**values, "model": {"layer_norm_eps": 1e-12}}, {"model.type_vocab_size": "2"})
    assert config.model == {"type_vocab_size": 2, "layer_norm_eps": 1e-12, "max_position_embeddings": 514}
    assert build_config({**values, "objective": "mlm"}, {}).adam_beta2 == 0.999  # BERT's
    assert build_config({"data": "d", "output_dir": "o"}, {"objective": "roberta"}).adam_beta2 == 0.98


def test_roberta_refuses_paired_data_before_training(data_root, tmp_path, capsys):
    nsp = build_data(data_root, "bbpe", "nsp")
    capsys.readouterr()
    assert pretrain("roberta", nsp, tmp_path / "run") == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert "built as 'nsp' instances, but objective 'roberta' needs 'packed'" in err
    assert "its bertkit data build command with --format packed" in err  # the format named, no ellipsis
    assert not (tmp_path / "run").exists()


def test_roberta_checkpoint_finetunes_on_sentence_pairs(roberta_run, tmp_path, capsys):
    from bertkit.cli import main
    from bertkit.inference.loading import load_finetuned

    mrpc = Path(__file__).resolve().parents[1] / "fixtures" / "tasks" / "glue" / "MRPC"
    capsys.readouterr()
    assert main(["finetune", "glue", "--task", "MRPC", "--model", str(roberta_run / "final"), "--data", str(mrpc),
                 "--train", str(mrpc / "dev.tsv"), "--output-dir", str(tmp_path / "mrpc"), "--epochs", "1",
                 "--batch-size", "4", "--max-seq-length", "48", "--set", "max_steps=2", "--no-progress",
                 "--set", "tensorboard=false"]) == 0
    out = capsys.readouterr()
    assert "classifier.dense.weight" in out.err and "classifier.out_proj.weight" in out.err  # the fresh head
    best = Path(out.out.split(" model: ")[1].split()[0])
    saved = json.loads((best / "config.json").read_text())
    assert saved["architectures"] == ["RobertaForSequenceClassification"] and saved["model_type"] == "roberta"
    ours = load_finetuned(best, device="cpu").model
    assert type(ours).__name__ == "RobertaForSequenceClassification"
    theirs = transformers.RobertaForSequenceClassification.from_pretrained(best).eval()
    tok = transformers.AutoTokenizer.from_pretrained(best)
    batch = tok(["The cat sat.", "A dog"], ["A cat was sitting.", "ran fast"], padding=True, return_tensors="pt")
    assert "token_type_ids" not in batch  # a RoBERTa tokenizer gives none (model_input_names), as transformers'
    with torch.no_grad():
        mine = ours(**batch).logits
        ref = theirs(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits
    torch.testing.assert_close(mine, ref, atol=1e-5, rtol=1e-5)
