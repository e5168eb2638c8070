"""Tiny pre-training data for the RoBERTa / SpanBERT / left-to-right objective tests (built once per module)."""

from __future__ import annotations

import json
from pathlib import Path

from bertkit.cli import main

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "austen_small.txt"
# a tiny model; 72 positions hold RoBERTa's 64 tokens past padding_idx
TINY = ["--set", "model.hidden_size=32", "--set", "model.num_hidden_layers=2", "--set", "model.num_attention_heads=2",
        "--set", "model.intermediate_size=64", "--set", "model.max_position_embeddings=72"]
QUIET = ["--set", "progress=false", "--set", "tensorboard=false"]


def build_data(root: Path, algorithm: str, instance_format: str) -> Path:
    """Train a small `algorithm` tokenizer on the Austen fixture and build 64-token `instance_format` data."""
    tok = root / f"tok-{algorithm}"
    if not tok.exists():
        assert main(["tokenizer", "train", "--algorithm", algorithm, "--vocab-size", "400", "--output", str(tok),
                     "--no-progress", str(FIXTURE)]) == 0
    data = root / f"data-{algorithm}-{instance_format}"
    assert main(["data", "build", "--tokenizer", str(tok), "--max-seq-length", "64", "--format", instance_format,
                 "--output", str(data), "--eval-fraction", "0.2", str(FIXTURE)]) == 0
    return data


def pretrain(objective: str, data: Path, out: Path, *extra: str) -> int:
    return main(["pretrain", "--objective", objective, "--preset", "tiny", "--data", str(data), "--output-dir", str(out),
                 *TINY, *QUIET, "--set", "batch_size=8", "--set", "warmup_steps=1", "--set", "lr=1e-3",
                 "--set", "max_steps=2", "--set", "eval_steps=2", *extra])


def finetune_mrpc(model: Path, out: Path) -> int:
    """Two steps of `bertkit finetune glue --task MRPC` on the MRPC fixture from `model`."""
    mrpc = Path(__file__).resolve().parents[1] / "fixtures" / "tasks" / "glue" / "MRPC"
    return main(["finetune", "glue", "--task", "MRPC", "--model", str(model), "--data", str(mrpc),
                 "--train", str(mrpc / "dev.tsv"), "--output-dir", str(out), "--epochs", "1", "--batch-size", "4",
                 "--max-seq-length", "48", "--set", "max_steps=2", "--no-progress", "--set", "tensorboard=false"])


def check_finetunes_as_bert(objective: str, data: Path, run: Path, architecture: str, capsys) -> None:
    """Pre-train with `objective` (its final/ saved as `architecture`), fine-tune MRPC from it:
    the best model is a BertForSequenceClassification that transformers loads whole."""
    import transformers

    assert pretrain(objective, data, run / "pre") == 0
    assert json.loads((run / "pre" / "final" / "config.json").read_text())["architectures"] == [architecture]
    capsys.readouterr()
    assert finetune_mrpc(run / "pre" / "final", run / "mrpc") == 0
    best = Path(capsys.readouterr().out.split(" model: ")[1].split()[0])
    assert json.loads((best / "config.json").read_text())["architectures"] == ["BertForSequenceClassification"]
    _, info = transformers.BertForSequenceClassification.from_pretrained(best, output_loading_info=True)
    assert not info["missing_keys"]


TINY_FIELDS = {"model.hidden_size": "32", "model.num_hidden_layers": "2", "model.num_attention_heads": "2",
               "model.intermediate_size": "64", "model.max_position_embeddings": "72"}
# the same size in XLNet's config names (relative positions: no position table)
TINY_XLNET_FIELDS = {"model.d_model": "32", "model.n_layer": "2", "model.n_head": "2", "model.d_inner": "64"}


def tiny_fields(config_class) -> dict[str, str]:
    """TINY_FIELDS in the field names of `config_class`."""
    import dataclasses

    return TINY_FIELDS if "hidden_size" in {f.name for f in dataclasses.fields(config_class)} else TINY_XLNET_FIELDS


def make_objective(name: str, data: Path, seed: int, fields: dict[str, str] | None = None, preset: str = "tiny"):
    """Objective `name` of a tiny run with `seed` (and `--set` `fields`) on `data`, constructed as a
    pre-training run does, with weights that do not depend on `seed`. The BERT preset "tiny" is
    shrunk further (TINY_FIELDS); another family's preset is taken as it is."""
    import torch

    from bertkit.data.dataset import PretrainingDataset
    from bertkit.objectives import get_objective
    from bertkit.pretraining import build_config

    cls = get_objective(name)
    config = build_config({"data": str(data), "output_dir": "unused", "objective": name, "preset": preset,
                           "seed": seed}, {**(tiny_fields(cls.config_class) if preset == "tiny" else {}), **(fields or {})})
    train, eval_data = PretrainingDataset.open(data, "train"), PretrainingDataset.open(data, "eval")
    options = cls.run_options(config)
    torch.manual_seed(0)
    model = cls.build_model(cls.model_config(config.preset, train, config.model, **options), **options)
    return cls(model, train, eval_data, config.masking_config(), config.seed, eval_seed=config.eval_seed, **options)
