"""Issue 43's new families (DeBERTa-v2/v3, BigBird, ModernBERT) on every contract a user reaches
from the command line: each task family fine-tunes (2 steps), evaluates and predicts; embed,
fill-mask and int8 / bf16 loading; `export onnx` agrees with PyTorch under ONNX Runtime; the
served routes answer; task distillation works. Tiny random checkpoints (hidden 32, 2 layers)
with MiniLM's tokenizer cut to 5,000 entries; experiments/results/new_families_contracts.md lists what tripped."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import httpx
import pytest
import torch

from bertkit.cli import main

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "serving"))
from _serving import running_server  # noqa: E402

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "tasks"
GLUE, CONLL, CHOICES = FIXTURES / "glue", FIXTURES / "conll2003" / "eng.testa", FIXTURES / "commonsenseqa" / "dev.jsonl"
SQUAD_TRAIN, SQUAD_DEV = FIXTURES / "squad_train-v1.1.json", FIXTURES / "squad_dev-v1.1.json"
QUIET = ["--no-progress", "--set", "tensorboard=false"]
STEPS = ["--batch-size", "4", "--max-seq-length", "48", "--seed", "3", "--lr", "1e-3", "--epochs", "1",
         "--set", "max_steps=2", *QUIET]
FAMILIES = ["deberta-v2", "big_bird", "modernbert"]
# task -> (finetune arguments, evaluate arguments, predict inputs, a key of the prediction)
TASKS = {
    "rte": (["glue", "--task", "RTE", "--data", str(GLUE / "RTE"), "--train", str(GLUE / "RTE" / "dev.tsv")],
            ["glue", "--task", "RTE", "--data", str(GLUE / "RTE")], ["A man sleeps.", "A man is awake."], "label"),
    "stsb": (["glue", "--task", "STS-B", "--data", str(GLUE / "STS-B"), "--train", str(GLUE / "STS-B" / "dev.tsv")],
             ["glue", "--task", "STS-B", "--data", str(GLUE / "STS-B")], ["A man sleeps.", "A man naps."], "score"),
    "ner": (["ner", "--train", str(CONLL), "--dev", str(CONLL)], ["ner", "--data", str(CONLL)],
            ["John lives in Paris ."], "entities"),
    "mc": (["multiple-choice", "--train", str(CHOICES), "--dev", str(CHOICES)],
           ["multiple-choice", "--data", str(CHOICES)], ["Where is money kept?", "bank", "library"], "choices"),
    "squad": (["squad", "--train", str(SQUAD_TRAIN), "--dev", str(SQUAD_DEV), "--max-seq-length", "96",
               "--doc-stride", "32"], ["squad", "--data", str(SQUAD_DEV)],
              ["When did it open?", "The railway opened in 1887."], "answer"),
}


def _config(family: str, tokenizer):
    """The family's config at tiny sizes (DeBERTa in v3's layout: no token types, shared key)."""
    ids = dict(vocab_size=tokenizer.vocab_size, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
               intermediate_size=64)
    if family == "deberta-v2":
        from bertkit.model.deberta.config import DebertaV2Config

        return DebertaV2Config.from_dict({**ids, "max_position_embeddings": 128, "pos_att_type": ["p2c", "c2p"],
                                          "position_buckets": 8, "share_att_key": True, "norm_rel_ebd": "layer_norm",
                                          "position_biased_input": False, "type_vocab_size": 0})
    if family == "big_bird":
        from bertkit.model.bigbird.config import BigBirdConfig

        return BigBirdConfig.from_dict({**ids, "max_position_embeddings": 512, "block_size": 8,
                                        "num_random_blocks": 2, "sep_token_id": tokenizer.sep_token_id})
    from bertkit.model.modernbert.config import ModernBertConfig

    return ModernBertConfig.from_dict({**ids, "num_attention_heads": 2, "local_attention": 8,
                                       "max_position_embeddings": 128, "pad_token_id": tokenizer.pad_token_id,
                                       "cls_token_id": tokenizer.cls_token_id, "sep_token_id": tokenizer.sep_token_id,
                                       "bos_token_id": tokenizer.cls_token_id, "eos_token_id": tokenizer.sep_token_id})


@pytest.fixture(scope="module", autouse=True)
def no_curve_plots():
    """The run reports' PNGs (most of a 2-step fine-tune's time) are not what this file checks."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("bertkit.training.reporting.plot_curves", lambda *args, **kwargs: [])
        yield


@pytest.fixture(scope="module")
def tokenizer(minilm_dir):
    """MiniLM's WordPiece vocabulary cut to its first ~5,000 real entries (characters, the
    commonest words): the same tokens, a 6x smaller vocabulary to train and save."""
    from bertkit import Tokenizer

    lines = (minilm_dir / "vocab.txt").read_text(encoding="utf-8").splitlines()[:6000]
    return Tokenizer.from_wordpiece_vocab([token for token in lines if not token.startswith("[unused")])


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory, tokenizer) -> dict[str, Path]:
    """family -> a tiny seeded masked-LM checkpoint with the cut MiniLM tokenizer."""
    from bertkit.model.families import MODEL_FAMILIES

    made = {}
    for family in FAMILIES:
        torch.manual_seed(0)
        directory = tmp_path_factory.mktemp(family) / "mlm"
        MODEL_FAMILIES[family].mlm.model_class()(_config(family, tokenizer)).save_pretrained(directory)
        tokenizer.save_pretrained(directory)
        made[family] = directory
    return made


@pytest.fixture(scope="module")
def classifiers(checkpoints, tmp_path_factory) -> dict[str, Path]:
    """family -> best/ of a 2-step RTE fine-tune (shared by the ONNX, serving, precision and distillation checks)."""
    made = {}
    for family, mlm in checkpoints.items():
        out = tmp_path_factory.mktemp(f"{family}-rte")
        command, *data = TASKS["rte"][0]
        assert main(["finetune", command, *STEPS, *data, "--model", str(mlm), "--output-dir", str(out)]) == 0
        made[family] = out / "best"
    return made


def _lines(text: str) -> list[dict]:
    return [json.loads(line) for line in text.splitlines() if line.strip()]


@pytest.mark.parametrize("task", ["stsb", "ner", "mc", "squad"])
@pytest.mark.parametrize("family", FAMILIES)
def test_task_family_finetunes_evaluates_and_predicts(family, task, checkpoints, tmp_path, capsys):
    """(RTE runs in the `classifiers` fixture.) The head the registry names, with its labels, and
    the metrics `finetune` reported are what `evaluate` recomputes from best/."""
    from bertkit.model.families import MODEL_FAMILIES

    tune, score, inputs, key = TASKS[task]
    command, *data = tune  # the subcommand, then its flags
    assert main(["finetune", command, *STEPS, *data, "--model", str(checkpoints[family]), "--output-dir",
                 str(tmp_path)]) == 0
    capsys.readouterr()
    config = json.loads((tmp_path / "best" / "config.json").read_text())
    head = {"stsb": "classification", "ner": "tagging", "mc": "multiple_choice", "squad": "qa"}[task]
    assert config["model_type"] == family
    assert MODEL_FAMILIES[family].tasks[head].endswith(":" + config["architectures"][0])
    if task == "stsb":
        assert len(config["id2label"]) == 1 and config.get("problem_type") == "regression"
    assert main(["evaluate", *score, "--model", str(tmp_path / "best"), "--no-progress"]) == 0
    (result,) = _lines(capsys.readouterr().out)
    assert {"stsb": "pearson", "ner": "f1", "mc": "accuracy", "squad": "f1"}[task] in result
    assert main(["predict", "--model", str(tmp_path / "best"), *inputs]) == 0
    (line,) = _lines(capsys.readouterr().out)
    assert key in line


@pytest.mark.parametrize("family", FAMILIES)
def test_classifier_predicts_at_every_precision_and_inspects(family, classifiers, tmp_path, capsys):
    scores = {}
    for precision in ("fp32", "int8", "bf16"):
        assert main(["predict", "--model", str(classifiers[family]), "--precision", precision,
                     "A man sleeps.", "A man is awake."]) == 0
        (line,) = _lines(capsys.readouterr().out)
        scores[precision] = line["scores"]
    for precision in ("int8", "bf16"):  # the same model rounded: probabilities within rounding of fp32's
        assert all(abs(scores[precision][k] - p) < 0.02 for k, p in scores["fp32"].items()), (precision, scores)
    page = tmp_path / "inspect.html"
    assert main(["inspect", "--model", str(classifiers[family]), "--output", str(page), "A man sleeps."]) == 0
    assert page.stat().st_size > 1000


@pytest.mark.parametrize("family", FAMILIES)
def test_embed_and_fill_mask(family, checkpoints, capsys):
    vectors = {}
    for precision in ("fp32", "int8", "bf16"):
        assert main(["embed", "--model", str(checkpoints[family]), "--precision", precision, "--no-progress",
                     "hello world", "a longer sentence than that"]) == 0
        vectors[precision] = torch.tensor([row["embedding"] for row in _lines(capsys.readouterr().out)])
    assert vectors["fp32"].shape == (2, 32)
    for precision in ("int8", "bf16"):
        assert torch.nn.functional.cosine_similarity(vectors["fp32"], vectors[precision]).min() > 0.99
    assert main(["fill-mask", "--model", str(checkpoints[family]), "the [MASK] sat on the mat ."]) == 0
    assert len(capsys.readouterr().out.strip().splitlines()) == 5


@pytest.mark.parametrize("family", FAMILIES)
def test_export_onnx_agrees_with_pytorch(family, checkpoints, classifiers, tmp_path):
    """The classifier and the bare encoder; DeBERTa-v3 (type_vocab_size 0) has no token-type input."""
    from bertkit.inference.onnx_export import export_onnx

    for name, source in (("head", classifiers[family]), ("encoder", checkpoints[family])):
        report = export_onnx(source, tmp_path / name / "model.onnx")
        assert max(report.max_abs_diff.values()) <= 1e-4, (name, report.max_abs_diff)
        sidecar = json.loads((tmp_path / name / "onnx_config.json").read_text())
        inputs = sidecar["inputs"]
        if family == "big_bird" and name == "encoder":  # the graph holds full attention: inputs capped where it ends
            assert sidecar["max_sequence_length"] == (5 + 2 * 2) * 8 < 512
        assert inputs == {"deberta-v2": ["input_ids", "attention_mask"], "big_bird": [
            "input_ids", "attention_mask", "token_type_ids"], "modernbert": ["input_ids", "attention_mask"]}[family]


@pytest.mark.parametrize("family", FAMILIES)
def test_served_routes(family, checkpoints, classifiers):
    with running_server(classifiers[family]) as (base, _):
        info = httpx.get(base + "/info").json()
        assert info["model_type"] == family and "POST /predict" in info["routes"]
        answer = httpx.post(base + "/predict", json={"inputs": [["A man sleeps.", "A man is awake."]]}, timeout=60)
        assert answer.status_code == 200 and answer.json()[0][0]["label"] in ("entailment", "not_entailment")
    with running_server(checkpoints[family]) as (base, _):
        assert "POST /fill-mask" in httpx.get(base + "/info").json()["routes"]
        vectors = httpx.post(base + "/embed", json={"inputs": ["hello world", "hi"]}, timeout=60).json()
        assert len(vectors) == 2 and len(vectors[0]) == 32
        openai = httpx.post(base + "/v1/embeddings", json={"input": ["hello world"], "model": "any"}, timeout=60)
        assert len(openai.json()["data"][0]["embedding"]) == 32
        masks = httpx.post(base + "/fill-mask", json={"inputs": "the [MASK] sat .", "top_k": 3}, timeout=60)
        assert masks.status_code == 200 and len(masks.json()[0][0]) == 3  # per text, per mask


@pytest.mark.parametrize("family", FAMILIES)
def test_task_distillation(family, classifiers, tmp_path, capsys):
    from bertkit.model.families import MODEL_FAMILIES

    assert MODEL_FAMILIES[family].distillable
    assert main(["distill", "--teacher", str(classifiers[family]), "--task", "glue", "--glue-task", "RTE",
                 "--data", str(GLUE / "RTE"), "--train", str(GLUE / "RTE" / "dev.tsv"), "--output-dir",
                 str(tmp_path), "--student-layers", "1", "--max-seq-length", "48", "--batch-size", "4",
                 "--max-steps", "2", *QUIET]) == 0
    assert "every weight copied" in capsys.readouterr().err
    student = json.loads((tmp_path / "best" / "config.json").read_text())
    assert student["model_type"] == family and student["num_hidden_layers"] == 1
    assert main(["predict", "--model", str(tmp_path / "best"), "A man sleeps.", "A man is awake."]) == 0
    assert "label" in _lines(capsys.readouterr().out)[0]


def test_modernbert_student_takes_the_teacher_layers_and_their_kinds(tokenizer):
    """ModernBERT's `layers.N` map as BERT's `encoder.layer.N` do (student layer i <- teacher layer
    2i), and explicit `layer_types` follow the copied layers."""
    from bertkit.distillation.student import init_student_from_teacher, student_config, student_layer_sources
    from bertkit.model.modernbert.modeling import ModernBertForSequenceClassification

    kinds = ["full_attention", "sliding_attention", "sliding_attention", "full_attention"]
    base = _config("modernbert", tokenizer)
    config = type(base).from_dict({**base.to_dict(), "num_hidden_layers": 4, "layer_types": kinds})
    torch.manual_seed(0)
    teacher = ModernBertForSequenceClassification(config)
    s_config = student_config(config, 2, {}, "teacher")
    assert s_config.layer_types == ["full_attention", "sliding_attention"]  # teacher layers 0 and 2
    student = ModernBertForSequenceClassification(s_config)
    assert init_student_from_teacher(student, teacher, student_layer_sources(4, 2)) == []
    for i, source in enumerate((0, 2)):
        assert torch.equal(student.model.layers[i].attn.Wqkv.weight, teacher.model.layers[source].attn.Wqkv.weight)
