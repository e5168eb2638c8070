"""`classifier_pooling: mean`: a sequence classifier on the mean of the last layer over the
real tokens (no pooler). Checked against transformers' own encoder (AutoModel reads the
saved backbone exactly) and the saved classifier layer, through finetune / ONNX export /
evaluate / predict."""

from __future__ import annotations

import json

import pytest
import torch
import transformers
from safetensors.torch import load_file

from bertkit import BertConfig, BertForSequenceClassification
from bertkit.cli import main
from bertkit.errors import ConfigError
from bertkit.inference.loading import load_finetuned
from bertkit.model.roberta import RobertaConfig, RobertaForSequenceClassification

from conftest import stdout_jsonl
from test_finetune_cli import STEPS, finetune


def _tiny(**fields) -> BertConfig:
    return BertConfig(vocab_size=100, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                      intermediate_size=64, id2label={0: "a", 1: "b", 2: "c"}, **fields)


def test_the_mean_reads_every_real_token_and_ignores_padding():
    torch.manual_seed(0)
    model = BertForSequenceClassification(_tiny(classifier_pooling="mean")).eval()
    assert model.bert.pooler is None
    ids = torch.randint(5, 100, (1, 7))
    padded = torch.cat([ids, torch.zeros(1, 5, dtype=torch.long)], 1)
    mask = torch.cat([torch.ones(1, 7, dtype=torch.long), torch.zeros(1, 5, dtype=torch.long)], 1)
    with torch.no_grad():
        alone = model(ids).logits
        with_padding = model(padded, attention_mask=mask).logits
        hidden = model.bert(ids).last_hidden_state  # (1, 7, H)
        by_hand = model.classifier(hidden.mean(1))
        moved = model(ids.flip(1)).logits  # a mean has no first token: only the positions change it
    torch.testing.assert_close(with_padding, alone, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(alone, by_hand, atol=1e-5, rtol=1e-5)
    assert not torch.allclose(moved, alone)


def test_config_field_checks_and_round_trip(tmp_path):
    with pytest.raises(ConfigError, match="classifier_pooling"):
        _tiny(classifier_pooling="max").validate()
    assert "classifier_pooling" not in _tiny().to_dict()  # the default keeps BERT configs transformers' own
    _tiny(classifier_pooling="mean").save_pretrained(tmp_path)
    assert BertConfig.from_pretrained(tmp_path).classifier_pooling == "mean"
    roberta = RobertaConfig(vocab_size=100, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                            intermediate_size=64, classifier_pooling="mean")
    with pytest.raises(ConfigError, match="classifier_pooling"):
        RobertaForSequenceClassification(roberta)  # its head reads <s>


def test_finetune_with_mean_pooling_from_a_pre_ln_checkpoint(tiny_pre_ln_dir, fixtures, tmp_path, capsys):
    mrpc = fixtures / "glue" / "MRPC"
    best = finetune(capsys, "glue", "--task", "MRPC", "--model", str(tiny_pre_ln_dir), "--data", str(mrpc),
                    "--train", str(mrpc / "dev.tsv"), "--output-dir", str(tmp_path / "mrpc"), "--epochs", "1",
                    "--set", "model.classifier_pooling=mean", *STEPS)
    config = json.loads((best / "config.json").read_text())
    assert config["classifier_pooling"] == "mean"
    state = load_file(best / "model.safetensors")
    assert not any("pooler" in key or key.startswith("classifier.dense") for key in state)

    tokenizer = transformers.AutoTokenizer.from_pretrained(best)
    inputs = tokenizer(["The cat sat.", "Shares rose 5 % on Monday ."], ["A cat was sitting.", "Stocks fell ."],
                       padding=True, return_tensors="pt")
    encoder = transformers.AutoModel.from_pretrained(best).eval()  # the backbone, in transformers' own layout
    with torch.no_grad():
        hidden = encoder(**inputs).last_hidden_state
        weights = inputs["attention_mask"].unsqueeze(-1).float()
        pooled = (hidden * weights).sum(1) / weights.sum(1)
        reference = pooled @ state["classifier.out_proj.weight"].T + state["classifier.out_proj.bias"]
        ours = load_finetuned(best, device="cpu").model
        mine = ours(input_ids=inputs["input_ids"], token_type_ids=inputs["token_type_ids"], attention_mask=inputs["attention_mask"]).logits
    torch.testing.assert_close(mine, reference, atol=1e-4, rtol=1e-4)

    pytest.importorskip("onnxruntime")
    from bertkit.inference.onnx_export import export_onnx

    exported = export_onnx(best, tmp_path / "onnx" / "model.onnx")  # checked against PyTorch on other shapes
    assert exported.task == "classification" and max(exported.max_abs_diff.values()) <= 1e-4

    assert main(["evaluate", "glue", "--model", str(best), "--data", str(mrpc), "--no-progress"]) == 0
    assert set(json.loads(capsys.readouterr().out)) >= {"f1", "accuracy"}
    assert main(["predict", "--model", str(best), "The cat sat.", "A cat was sitting."]) == 0
    (line,) = stdout_jsonl(capsys.readouterr().out)
    assert line["label"] in ("not_equivalent", "equivalent")  # GLUE names


def test_a_bad_pooling_name_is_one_line_naming_the_field(tiny_pre_ln_dir, fixtures, tmp_path, capsys):
    mrpc = fixtures / "glue" / "MRPC"
    code = main(["finetune", "glue", "--task", "MRPC", "--model", str(tiny_pre_ln_dir), "--data", str(mrpc),
                 "--train", str(mrpc / "dev.tsv"), "--output-dir", str(tmp_path / "bad"),
                 "--set", "model.classifier_pooling=max", *STEPS])
    err = capsys.readouterr().err
    assert code != 0 and "classifier_pooling" in err and "Traceback" not in err
