"""`bertkit distill` (general distillation) end to end on tiny models: a 2-step run whose
student transformers loads with equal logits, TinyBERT losses with a narrower student
(projection saved), the teacher cache reused by a second run and by --resume, and the
one-line errors on bad input before any training."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from bertkit import BertConfig, BertForPreTraining, BertModel, Tokenizer
from bertkit.cli import main
from bertkit.training.config import EVAL_SEED

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "austen_small.txt"
QUIET = ["--no-progress", "--set", "tensorboard=false"]
STEPS = ["--batch-size", "4", "--lr", "1e-3", "--set", "warmup_steps=1", "--set", "log_steps=1"]


def tiny_config(vocab_size: int, layers: int = 4) -> BertConfig:
    return BertConfig.from_preset("tiny", vocab_size=vocab_size, hidden_size=32, num_hidden_layers=layers,
                                  num_attention_heads=2, intermediate_size=64, max_position_embeddings=64)


@pytest.fixture(scope="module")
def setup(tmp_path_factory) -> dict[str, Path]:
    """Pre-training data (tokenizer of ~300 tokens) and a 4-layer teacher with its tokenizer."""
    root = tmp_path_factory.mktemp("distill")
    tok = root / "tok"
    assert main(["tokenizer", "train", "--algorithm", "wordpiece", "--vocab-size", "300", "--output", str(tok),
                 "--no-progress", str(FIXTURE)]) == 0
    data = root / "data"
    assert main(["data", "build", "--tokenizer", str(tok), "--max-seq-length", "32", "--output", str(data),
                 "--eval-fraction", "0.2", str(FIXTURE)]) == 0
    tokenizer = Tokenizer.from_pretrained(tok)
    torch.manual_seed(0)
    teacher = root / "teacher"
    BertForPreTraining(tiny_config(tokenizer.vocab_size)).save_pretrained(teacher)
    tokenizer.save_pretrained(teacher)
    return {"root": root, "tok": tok, "data": data, "teacher": teacher, "vocab": tokenizer.vocab_size}


def distill(setup, out: Path, *extra: str) -> int:
    return main(["distill", "--teacher", str(setup["teacher"]), "--data", str(setup["data"]), "--output-dir", str(out),
                 *STEPS, *QUIET, *extra])


def records(run: Path) -> list[dict]:
    return [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]


def test_general_distillation_two_steps_loads_in_transformers(setup, tmp_path, capsys):
    out = tmp_path / "run"
    assert distill(setup, out, "--student-layers", "2", "--max-steps", "2", "--set", "eval_steps=2") == 0
    final = out / "final"
    config = json.loads((final / "config.json").read_text())
    assert config["num_hidden_layers"] == 2 and config["architectures"] == ["BertForPreTraining"]
    assert not (final / "distill_projection.safetensors").exists()  # same width: no projection
    logged = records(out)
    train = [r for r in logged if "soft_loss" in r and "loss" in r]
    assert [r["step"] for r in train] == [1, 2]
    assert all(r["soft_loss"] >= 0 and r["cos_loss"] >= 0 and "mlm_accuracy" in r for r in train)
    assert any("eval_soft_loss" in r for r in logged)
    report = (out / "report.md").read_text()
    assert "| student layers from teacher layers | 0, 2 |" in report

    import transformers

    ours = BertForPreTraining.from_pretrained(final)
    theirs = transformers.BertForPreTraining.from_pretrained(final).eval()
    batch = Tokenizer.from_pretrained(final)(["Emma was handsome and clever.", "She walked."], padding=True,
                                             return_tensors="pt")
    inputs = {k: batch[k] for k in ("input_ids", "token_type_ids", "attention_mask")}
    real = inputs["attention_mask"].bool()  # padded positions carry no meaning
    with torch.no_grad():
        torch.testing.assert_close(ours(**inputs).prediction_logits[real], theirs(**inputs).prediction_logits[real],
                                   atol=1e-5, rtol=1e-5)
    # the student learnt from its teacher: it moved away from the copied layers
    teacher = BertForPreTraining.from_pretrained(setup["teacher"])
    assert not torch.equal(ours.bert.encoder.layer[1].output.dense.weight, teacher.bert.encoder.layer[2].output.dense.weight)


def test_tinybert_losses_with_a_narrower_student(setup, tmp_path):
    out = tmp_path / "narrow"
    assert distill(setup, out, "--student-layers", "2", "--max-steps", "2", "--hidden-loss", "--attention-loss",
                   "--set", "student.hidden_size=16", "--set", "student.intermediate_size=32") == 0
    final = out / "final"
    assert json.loads((final / "config.json").read_text())["hidden_size"] == 16
    from safetensors.torch import load_file

    projection = load_file(final / "distill_projection.safetensors")
    assert projection["weight"].shape == (32, 16)  # student H -> teacher H
    train = [r for r in records(out) if "hidden_loss" in r]
    assert train and all(r["hidden_loss"] > 0 and r["attention_loss"] > 0 for r in train)
    assert "none (other width: BERT initialisation)" in (out / "report.md").read_text()


def test_teacher_cache_is_reused_by_a_second_run_and_by_resume(setup, tmp_path):
    out = tmp_path / "cached"
    args = ["--student-layers", "2", "--cache-teacher", "--hidden-loss", "--attention-loss", "--set", "save_steps=2"]
    assert distill(setup, out, *args, "--max-steps", "2") == 0
    files = sorted((out / "teacher-cache").rglob("*.safetensors"))
    assert len(files) == 2 * 4  # 2 steps x batch 4 examples
    first = [r for r in records(out) if "soft_loss" in r and "eval_loss" not in r]
    stamps = {f: f.stat().st_mtime_ns for f in files}
    # the same run again reads every teacher output from the cache: the same losses
    assert distill(setup, out, *args, "--max-steps", "2", "--overwrite") == 0
    again = [r for r in records(out) if "soft_loss" in r and "eval_loss" not in r]
    assert {f: f.stat().st_mtime_ns for f in files} == stamps
    for a, b in zip(first, again, strict=True):
        for key in ("loss", "soft_loss", "cos_loss", "hidden_loss", "attention_loss", "mlm_loss"):
            assert a[key] == pytest.approx(b[key], rel=1e-5, abs=1e-6), key
    # resume to 3 steps: the first two steps' entries stay, step 3 adds its own
    assert main(["distill", "--output-dir", str(out), "--resume", "--set", "max_steps=3", *QUIET]) == 0
    now = sorted((out / "teacher-cache").rglob("*.safetensors"))
    assert len(now) == 3 * 4 and all(f.stat().st_mtime_ns == stamps[f] for f in files)


def test_teacher_without_mlm_head(setup, tmp_path, capsys):
    bare = tmp_path / "bare"
    torch.manual_seed(1)
    BertModel(tiny_config(setup["vocab"])).save_pretrained(bare)
    Tokenizer.from_pretrained(setup["tok"]).save_pretrained(bare)
    out = tmp_path / "bare-run"
    assert main(["distill", "--teacher", str(bare), "--data", str(setup["data"]), "--output-dir", str(out),
                 *STEPS, *QUIET, "--max-steps", "2"]) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert "has no MLM head (cls.predictions)" in err and "--set alpha_soft=0" in err
    assert not out.exists()
    # hidden-state losses only: the student's MLM head starts fresh and trains on the hard loss
    assert main(["distill", "--teacher", str(bare), "--data", str(setup["data"]), "--output-dir", str(out),
                 *STEPS, *QUIET, "--max-steps", "1", "--set", "alpha_soft=0", "--hidden-loss"]) == 0
    assert "cls.predictions.bias" in (out / "report.md").read_text()


@pytest.mark.parametrize("case", ["vocab_size", "tokenizer", "deeper", "wider", "student_vocab", "heads"])
def test_bad_input_fails_in_one_line_before_training(setup, tmp_path, capsys, case):
    teacher = setup["teacher"]
    extra: list[str] = []
    if case == "vocab_size":  # a teacher with another vocabulary size than the data
        teacher = tmp_path / "other"
        BertForPreTraining(tiny_config(setup["vocab"] + 7)).save_pretrained(teacher)
        expected = f"built with a tokenizer of {setup['vocab']} tokens, but the teacher at {teacher} has vocab_size"
    elif case == "tokenizer":  # same size, another vocabulary
        teacher = tmp_path / "shuffled"
        BertForPreTraining(tiny_config(setup["vocab"])).save_pretrained(teacher)
        vocab = Tokenizer.from_pretrained(setup["tok"]).get_vocab()
        tokens = sorted(vocab, key=vocab.__getitem__)
        tokens[-2], tokens[-1] = tokens[-1], tokens[-2]
        Tokenizer.from_wordpiece_vocab(tokens).save_pretrained(teacher)
        expected = "built with another tokenizer than the teacher's"
    elif case == "deeper":
        extra, expected = ["--student-layers", "6"], "the student is deeper than the teacher (4 layers"
    elif case == "wider":
        extra, expected = ["--set", "student.hidden_size=64"], "the student is wider than the teacher (hidden_size 32"
    elif case == "student_vocab":
        extra, expected = ["--set", "student.vocab_size=100"], "must equal the teacher's vocab_size"
    else:
        extra = ["--attention-loss", "--set", "student.num_attention_heads=4"]
        expected = "the student has 4 heads and the teacher 2"
    out = tmp_path / "run"
    code = main(["distill", "--teacher", str(teacher), "--data", str(setup["data"]), "--output-dir", str(out),
                 *STEPS, *QUIET, "--max-steps", "2", *extra])
    err = capsys.readouterr().err.strip()
    assert code == 1 and len(err.splitlines()) == 1 and err.startswith("bertkit: error: "), err
    assert expected in err, err
    assert not out.exists()


@pytest.mark.parametrize("warmup, warned", [(None, False), ("2", True), ("1", False)])
def test_warmup_not_below_max_steps_warns(warmup, warned, setup, tmp_path, capsys):
    """An explicit warm-up as long as `--max-steps 2`: one line says the lr never reaches its peak (the same
    warning as `bertkit pretrain`'s); left unset it is 1% of the run, so the lr peaks. Held-out
    evaluations name their eval seed, the same whatever the run's seed."""
    extra = [] if warmup is None else ["--set", f"warmup_steps={warmup}"]
    run = tmp_path / "run"
    assert main(["distill", "--teacher", str(setup["teacher"]), "--data", str(setup["data"]), "--output-dir",
                 str(run), "--batch-size", "4", "--lr", "1e-3", "--max-steps", "2", "--seed", "7", "--set", "log_steps=1",
                 *QUIET, *extra]) == 0
    lines = [line for line in capsys.readouterr().err.splitlines() if "warmup" in line]
    assert lines == ([f"bertkit: warning: warmup_steps {warmup} >= max_steps 2: the learning rate never reaches "
                      "its peak 0.001 (lower it with --set warmup_steps=N, or leave it unset for warmup_ratio 0.01 "
                      "of the run)"] if warned else [])
    records = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    if warmup is None:
        assert max(r["lr"] for r in records if "lr" in r) == pytest.approx(1e-3)
    assert [r["eval_seed"] for r in records if "eval_loss" in r] == [EVAL_SEED]
    assert f"drawn from eval_seed {EVAL_SEED}" in (run / "report.md").read_text()


@pytest.mark.parametrize("family", ["electra", "roberta", "albert"])
def test_non_bert_teacher_is_refused_in_one_line(family, setup, tmp_path, capsys):
    """General distillation's student is a BertForPreTraining: an ELECTRA discriminator (runs/electra/final),
    a RoBERTa or an ALBERT teacher fails naming the teacher and the model types, not on a config field."""
    from bertkit.model.albert import AlbertConfig, AlbertModel
    from bertkit.model.electra import ElectraConfig, ElectraForPreTraining
    from bertkit.model.roberta import RobertaConfig, RobertaForMaskedLM

    sizes = dict(vocab_size=setup["vocab"], hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                 intermediate_size=64, max_position_embeddings=64)
    model = {"electra": lambda: ElectraForPreTraining(ElectraConfig.from_dict({**sizes, "embedding_size": 16})),
             "roberta": lambda: RobertaForMaskedLM(RobertaConfig.from_dict({**sizes, "pad_token_id": 0})),
             "albert": lambda: AlbertModel(AlbertConfig.from_dict({**sizes, "embedding_size": 16}))}[family]()
    teacher = tmp_path / family
    model.save_pretrained(teacher)
    Tokenizer.from_pretrained(setup["tok"]).save_pretrained(teacher)
    out = tmp_path / "run"
    code = main(["distill", "--teacher", str(teacher), "--data", str(setup["data"]), "--output-dir", str(out),
                 *STEPS, *QUIET, "--max-steps", "2"])
    err = capsys.readouterr().err.strip()
    assert code == 1 and len(err.splitlines()) == 1, err
    assert err == (f"bertkit: error: {teacher}: general distillation takes a teacher of model_type 'bert', got "
                   f"'{family}'; task distillation (--task) takes bert, albert, roberta, electra, t5 teachers "
                   "fine-tuned on the task")
    assert not out.exists()


def test_hugging_face_masked_lm_teacher(setup, tmp_path):
    """A teacher saved by transformers (BertForMaskedLM: MLM head, no pooler, no NSP head)."""
    import transformers

    teacher = tmp_path / "hf-mlm"
    torch.manual_seed(2)
    config = transformers.BertConfig(vocab_size=setup["vocab"], hidden_size=32, num_hidden_layers=4,
                                     num_attention_heads=2, intermediate_size=64, max_position_embeddings=64)
    transformers.BertForMaskedLM(config).save_pretrained(teacher)
    Tokenizer.from_pretrained(setup["tok"]).save_pretrained(teacher)
    out = tmp_path / "from-hf"
    assert main(["distill", "--teacher", str(teacher), "--data", str(setup["data"]), "--output-dir", str(out),
                 *STEPS, *QUIET, "--max-steps", "1"]) == 0
    report = (out / "report.md").read_text()
    assert "| student layers from teacher layers | 0, 2 |" in report
    assert "bert.pooler.dense.bias" in report  # the teacher had no pooler: the student's starts fresh
    student = BertForPreTraining.from_pretrained(out / "final")
    reference = transformers.BertForMaskedLM.from_pretrained(teacher)
    # the MLM head was copied from the teacher (the one step ran at warm-up lr 0, leaving it unchanged)
    torch.testing.assert_close(student.cls.predictions.transform.dense.weight,
                               reference.cls.predictions.transform.dense.weight)
