"""`bertkit pretrain --objective albert` end to end on a tiny model: MLM + SOP on `sop`
data, a final AlbertForPreTraining checkpoint that transformers loads with equal
outputs, fine-tuning from it, and one-line errors before training on bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from bertkit.cli import main

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "austen_small.txt"
TINY = ["--set", "model.hidden_size=32", "--set", "model.num_hidden_layers=2", "--set", "model.num_attention_heads=2",
        "--set", "model.intermediate_size=64", "--set", "model.max_position_embeddings=64"]
QUIET = ["--set", "progress=false", "--set", "tensorboard=false"]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("albert")
    tok = root / "tok"
    assert main(["tokenizer", "train", "--algorithm", "wordpiece", "--vocab-size", "400", "--output", str(tok),
                 "--no-progress", str(FIXTURE)]) == 0
    dirs = {}
    for fmt in ("sop", "nsp", "packed"):
        dirs[fmt] = root / f"data-{fmt}"
        assert main(["data", "build", "--tokenizer", str(tok), "--max-seq-length", "64", "--format", fmt,
                     "--output", str(dirs[fmt]), "--eval-fraction", "0.2", str(FIXTURE)]) == 0
    return dirs


def albert_args(data: Path, out: Path, *extra: str) -> list[str]:
    return ["pretrain", "--objective", "albert", "--preset", "tiny", "--data", str(data), "--output-dir", str(out),
            *TINY, *QUIET, "--set", "batch_size=8", "--set", "warmup_steps=1", "--set", "lr=1e-3", *extra]


@pytest.fixture(scope="module")
def albert_run(corpus, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("albert-run") / "run"
    assert main(albert_args(corpus["sop"], out, "--embedding-size", "16", "--share-layers", "attention",
                            "--set", "max_steps=2", "--set", "log_steps=1", "--set", "eval_steps=2")) == 0
    return out


def test_albert_pretrains_and_transformers_loads_the_checkpoint(albert_run):
    out = albert_run
    records = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert {"loss", "mlm_accuracy", "sop_accuracy", "sop_loss"} <= set(records[0])
    assert any("eval_sop_accuracy" in r for r in records)
    final = out / "final"
    saved = json.loads((final / "config.json").read_text())
    assert saved["model_type"] == "albert" and saved["architectures"] == ["AlbertForPreTraining"]
    assert saved["embedding_size"] == 16 and saved["share_layers"] == "attention" and saved["num_hidden_groups"] == 2

    import transformers

    from bertkit import Tokenizer
    from bertkit.model.albert import AlbertForPreTraining

    theirs = transformers.AlbertForPreTraining.from_pretrained(final).eval()
    ours = AlbertForPreTraining.from_pretrained(final)
    shared = ours.albert.encoder.albert_layer_groups
    assert shared[0].albert_layers[0].attention is shared[1].albert_layers[0].attention
    batch = Tokenizer.from_pretrained(final)(["Emma was handsome and clever.", "She walked in."], padding=True,
                                             return_tensors="pt")
    with torch.no_grad():
        ref = theirs(**{k: batch[k] for k in ("input_ids", "token_type_ids", "attention_mask")})
        mine = ours(input_ids=batch["input_ids"], token_type_ids=batch["token_type_ids"], attention_mask=batch["attention_mask"])
    real = batch["attention_mask"].bool()  # padding positions are zeros on bertkit's unpadded path
    torch.testing.assert_close(mine.prediction_logits[real], ref.prediction_logits[real], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(mine.sop_logits, ref.sop_logits, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("fmt", ["nsp", "packed"])
def test_albert_refuses_data_without_sentence_order(corpus, tmp_path, capsys, fmt):
    assert main(albert_args(corpus[fmt], tmp_path / "run", "--set", "max_steps=2")) != 0
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert f"built as '{fmt}' instances, but objective 'albert' needs 'sop'" in err
    assert not (tmp_path / "run" / "metrics.jsonl").exists()


def test_albert_flags_are_checked_before_any_work(corpus, tmp_path, capsys):
    args = ["pretrain", "--objective", "mlm_nsp", "--data", str(corpus["nsp"]), "--output-dir", str(tmp_path / "r"),
            "--embedding-size", "16"]
    assert main(args) != 0
    assert "field 'embedding_size' applies to objective 'albert' only" in capsys.readouterr().err
    assert main(albert_args(corpus["sop"], tmp_path / "r", "--set", "share_layers=some")) != 0
    assert "field 'share_layers' must be one of all, none, attention, ffn" in capsys.readouterr().err
    assert main(albert_args(corpus["sop"], tmp_path / "r", "--set", "model.num_hidden_groups=5")) != 0
    assert "must not exceed num_hidden_layers" in capsys.readouterr().err
    assert not (tmp_path / "r").exists()


def test_albert_checkpoint_fine_tunes_as_a_classifier(albert_run, tmp_path, capsys):
    import csv

    import transformers

    from bertkit.inference.loading import load_finetuned

    cola = Path(__file__).resolve().parents[1] / "fixtures" / "tasks" / "glue" / "CoLA" / "dev.tsv"
    data = tmp_path / "cola.csv"
    with data.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["sentence", "label"])
        for line in cola.read_text(encoding="utf-8").splitlines():
            fields = line.split("\t")
            writer.writerow([fields[3], "good" if fields[1] == "1" else "bad"])
    assert main(["finetune", "classify", "--model", str(albert_run / "final"), "--train", str(data), "--dev", str(data),
                 "--text-column", "sentence", "--label-column", "label", "--output-dir", str(tmp_path / "cls"),
                 "--batch-size", "4", "--max-seq-length", "32", "--epochs", "1", "--set", "max_steps=2",
                 "--no-progress", "--set", "tensorboard=false"]) == 0
    out = capsys.readouterr()
    assert "initialised fresh: classifier.bias, classifier.weight" in out.err
    best = Path(out.out.split(" model: ")[1].split()[0])
    saved = json.loads((best / "config.json").read_text())
    assert saved["architectures"] == ["AlbertForSequenceClassification"] and saved["share_layers"] == "attention"
    ours = load_finetuned(best, device="cpu").model
    assert type(ours).__name__ == "AlbertForSequenceClassification"
    theirs = transformers.AlbertForSequenceClassification.from_pretrained(best).eval()
    ids = torch.tensor([[2, 40, 41, 42, 3, 0], [2, 50, 51, 52, 53, 3]])
    types, mask = torch.zeros_like(ids), (ids != 0).long()
    with torch.no_grad():
        mine = ours(input_ids=ids, token_type_ids=types, attention_mask=mask).logits
        ref = theirs(input_ids=ids, token_type_ids=types, attention_mask=mask).logits
    torch.testing.assert_close(mine, ref, atol=1e-5, rtol=1e-5)


def test_albert_resumes_with_shared_layers(corpus, tmp_path):
    out = tmp_path / "run"
    args = albert_args(corpus["sop"], out, "--share-layers", "ffn", "--set", "save_steps=1", "--set", "eval_steps=100")
    assert main([*args, "--set", "max_steps=1"]) == 0
    assert main(["pretrain", "--output-dir", str(out), "--resume", "--set", "max_steps=2"]) == 0
    from bertkit.model.albert import AlbertForPreTraining

    model = AlbertForPreTraining.from_pretrained(out / "final")
    groups = model.albert.encoder.albert_layer_groups
    assert model.config.sharing == "ffn" and groups[0].albert_layers[0].ffn is groups[1].albert_layers[0].ffn
    assert (out / "checkpoint-0000002").is_dir()


def test_albert_refuses_a_bert_checkpoint(corpus, tmp_path, capsys):
    from bertkit import BertConfig, BertForPreTraining

    bert = tmp_path / "bert"
    BertForPreTraining(BertConfig.from_preset("tiny", vocab_size=400, hidden_size=32, num_attention_heads=2,
                                              intermediate_size=64)).save_pretrained(bert)
    assert main(albert_args(corpus["sop"], tmp_path / "run", "--init-from", str(bert), "--set", "max_steps=1")) != 0
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "config.json: field 'model_type' must be 'albert', got 'bert'" in err


def test_two_process_fsdp_with_attention_sharing_matches_one_process(corpus, tmp_path):
    import os
    import subprocess
    import sys

    from bertkit.model.albert import AlbertForPreTraining

    common = ["--share-layers", "attention", "--set", "max_steps=3", "--set", "log_steps=1", "--set", "save_steps=100",
              "--set", "eval_steps=100", "--set", "model.classifier_dropout_prob=0"]  # no dropout anywhere
    assert main(albert_args(corpus["sop"], tmp_path / "single", *common)) == 0
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2", "--master-port", "29531", "-m",
           "bertkit", *albert_args(corpus["sop"], tmp_path / "fsdp", *common, "--set", "parallel=fsdp")]
    done = subprocess.run(cmd, env={**os.environ, "OMP_NUM_THREADS": "1"}, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]

    def losses(run: Path) -> list[float]:
        return [json.loads(line)["loss"] for line in (run / "metrics.jsonl").read_text().splitlines() if '"loss"' in line]

    assert len(losses(tmp_path / "single")) == 3
    assert losses(tmp_path / "fsdp") == pytest.approx(losses(tmp_path / "single"), rel=1e-5)
    one = AlbertForPreTraining.from_pretrained(tmp_path / "single" / "final").state_dict()
    two = AlbertForPreTraining.from_pretrained(tmp_path / "fsdp" / "final").state_dict()  # copies equal: re-tied
    for key in one:
        torch.testing.assert_close(two[key], one[key], atol=1e-5, rtol=1e-4)


def test_one_layer_model_takes_either_spelling_of_no_sharing(corpus, tmp_path):
    for share in ("none", "all"):  # with L = 1 both mean one group
        out = tmp_path / share
        assert main(albert_args(corpus["sop"], out, "--share-layers", share, "--set", "model.num_hidden_layers=1",
                                "--set", "max_steps=1")) == 0
        assert json.loads((out / "final" / "config.json").read_text())["num_hidden_groups"] == 1


def test_init_from_keeps_the_checkpoint_sharing(albert_run, corpus, tmp_path, capsys):
    args = albert_args(corpus["sop"], tmp_path / "run", "--init-from", str(albert_run / "final"), "--set", "max_steps=1")
    assert main([*args, "--share-layers", "all"]) != 0
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "share_layers 'all' does not match the model's 'attention'" in err
    assert main(args) == 0  # continued pre-training keeps attention sharing
    assert json.loads((tmp_path / "run" / "final" / "config.json").read_text())["share_layers"] == "attention"
