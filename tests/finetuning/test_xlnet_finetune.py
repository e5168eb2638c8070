"""`bertkit finetune` and `predict` on a tiny random XLNet with a Unigram tokenizer in XLNet's
layout (`A <sep> B <sep> <cls>`, left padding in transformers): every task family runs, and
the checkpoint it saves computes in transformers' class, on transformers' left-padded
batches, what bertkit computes on its right-padded ones (the heads read <cls>, the last
real token; QA's "no answer" is the <cls> position)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
import transformers

from bertkit.cli import main
from bertkit.inference.loading import load_finetuned
from bertkit.tasks import qa

from conftest import FIXTURES, QUIET, _fixture_text, stdout_jsonl

STEPS = ["--batch-size", "8", "--max-seq-length", "48", "--seed", "3", "--lr", "1e-3", *QUIET]


@pytest.fixture(scope="module")
def xlnet_dir(tmp_path_factory) -> Path:
    """A 2-layer XLNetLMHeadModel (as pre-training saves it) + a Unigram tokenizer trained on the fixtures."""
    from bertkit import XLNetLMHeadModel
    from bertkit.model.xlnet.config import XLNetConfig
    from bertkit.tokenization import Tokenizer
    from bertkit.tokenization.train import TrainOptions, train_tokenizer

    root = tmp_path_factory.mktemp("tiny-xlnet")
    corpus = root / "corpus.txt"
    corpus.write_text(_fixture_text(), encoding="utf-8")
    train_tokenizer([corpus], root / "tok", TrainOptions(algorithm="unigram", vocab_size=700, show_progress=False,
                                                          workers=1))
    tokenizer = Tokenizer.from_pretrained(root / "tok")
    torch.manual_seed(0)
    config = XLNetConfig.from_preset("tiny", vocab_size=tokenizer.vocab_size, d_model=32, n_head=2, d_inner=64,
                                     pad_token_id=tokenizer.pad_token_id, mem_len=None)
    model_dir = root / "model"
    XLNetLMHeadModel(config).save_pretrained(model_dir)
    tokenizer.save_pretrained(model_dir)
    return model_dir


def finetune(capsys, *args: str) -> Path:
    assert main(["finetune", *args]) == 0
    out = capsys.readouterr()
    return Path(out.out.split(" model: ")[1].split()[0])


def assert_transformers_agrees(best: Path, hf_class, inputs: dict, keys=("logits",)) -> None:
    """transformers' class on its own tokenizer's left-padded batch = bertkit on the same rows right-padded."""
    assert transformers.AutoTokenizer.from_pretrained(best).padding_side == "left"
    mask = inputs["attention_mask"]
    assert bool((mask[..., 0] == 0).any())  # the batch really is left-padded
    order = torch.argsort(1 - mask, dim=-1, stable=True)  # the same rows with their padding at the end
    right = {k: v.gather(-1, order) for k, v in inputs.items()}
    ours = load_finetuned(best, device="cpu").model
    theirs = hf_class.from_pretrained(best).eval()
    with torch.no_grad():
        got, expected = ours(**right), theirs(**inputs)
    for key in keys:
        a, b = getattr(got, key), getattr(expected, key)
        if a.shape[: mask.dim()] == mask.shape:  # per token: the real positions, in order
            a, b = a[right["attention_mask"].bool()], b[mask.bool()]
        torch.testing.assert_close(a, b, atol=1e-4, rtol=1e-4)


def test_glue_mrpc_and_predict(xlnet_dir, tmp_path, capsys):
    mrpc = FIXTURES / "glue" / "MRPC"
    best = finetune(capsys, "glue", "--task", "MRPC", "--model", str(xlnet_dir), "--data", str(mrpc),
                    "--train", str(mrpc / "dev.tsv"), "--output-dir", str(tmp_path / "mrpc"), "--epochs", "1", *STEPS)
    assert json.loads((best / "config.json").read_text())["architectures"] == ["XLNetForSequenceClassification"]
    tokenizer = transformers.AutoTokenizer.from_pretrained(best)
    enc = tokenizer(["The cat sat.", "Hi"], ["A cat was sitting on the mat.", "there"], padding=True,
                    return_tensors="pt")
    assert_transformers_agrees(best, transformers.XLNetForSequenceClassification, dict(enc))
    assert main(["predict", "--model", str(best), "The cat sat.", "A cat was sitting."]) == 0
    (line,) = stdout_jsonl(capsys.readouterr().out)
    assert line["label"] in ("not_equivalent", "equivalent") and sum(line["scores"].values()) == pytest.approx(1.0)


def test_ner(xlnet_dir, tmp_path, capsys):
    conll = FIXTURES / "conll2003"
    best = finetune(capsys, "ner", "--train", str(conll / "eng.testa"), "--dev", str(conll / "eng.testa"),
                    "--model", str(xlnet_dir), "--output-dir", str(tmp_path / "ner"), "--epochs", "1", *STEPS)
    tokenizer = transformers.AutoTokenizer.from_pretrained(best)
    enc = tokenizer([["EU", "rejects", "German", "call"], ["Peter"]], is_split_into_words=True, padding=True,
                    return_tensors="pt")
    assert_transformers_agrees(best, transformers.XLNetForTokenClassification, dict(enc))
    assert main(["predict", "--model", str(best), "John Smith lives in Paris."]) == 0
    (line,) = stdout_jsonl(capsys.readouterr().out)
    assert line["words"] == ["John", "Smith", "lives", "in", "Paris", "."] and len(line["tags"]) == 6


def test_multiple_choice(xlnet_dir, tmp_path, capsys):
    data = FIXTURES / "commonsenseqa" / "dev.jsonl"
    best = finetune(capsys, "multiple-choice", "--train", str(data), "--dev", str(data), "--model", str(xlnet_dir),
                    "--output-dir", str(tmp_path / "mc"), "--epochs", "1", *STEPS)
    tokenizer = transformers.AutoTokenizer.from_pretrained(best)
    choices = ["bank", "the public library", "mall"]
    enc = tokenizer(["Where is money kept?"] * 3, choices, padding=True, return_tensors="pt")
    assert_transformers_agrees(best, transformers.XLNetForMultipleChoice, {k: v[None] for k, v in enc.items()})
    assert main(["predict", "--model", str(best), "Where is money kept?", *choices]) == 0
    (line,) = stdout_jsonl(capsys.readouterr().out)
    assert line["label"] in (0, 1, 2) and sum(line["scores"]) == pytest.approx(1.0)


def test_squad_v2_scores_no_answer_at_cls(xlnet_dir, tmp_path, capsys):
    from bertkit.tokenization import Tokenizer

    data = FIXTURES / "squad_v2-handmade.json"
    tokenizer = Tokenizer.from_pretrained(xlnet_dir)
    examples = qa.read_examples(data, version=2)
    train = qa.encode(examples, tokenizer, 48, doc_stride=16, max_query_length=16, training=True)
    evaluation = qa.encode(examples, tokenizer, 48, doc_stride=16, max_query_length=16)
    for feature in train:  # every window ends in <cls>: "no answer" points there
        cls = len(feature["input_ids"]) - 1
        assert feature["input_ids"][cls] == tokenizer.cls_token_id
        if feature["start_positions"] == feature["end_positions"] and feature["start_positions"] in (0, cls):
            assert feature["start_positions"] == cls
    assert any(f["start_positions"] == len(f["input_ids"]) - 1 for f in train)
    assert all(f["_null_index"] == len(f["input_ids"]) - 1 for f in evaluation)
    # the null answer is read at <cls>: make it the best score there and nowhere else
    starts = [np.full(len(f["input_ids"]), -5.0) for f in evaluation]
    for s, f in zip(starts, evaluation, strict=True):
        s[f["_null_index"]] = 5.0
    answers = qa.postprocess(examples, evaluation, starts, starts, version=2)
    assert set(answers.predictions.values()) == {""}

    best = finetune(capsys, "squad", "--version", "2", "--train", str(data), "--dev", str(data), "--model",
                    str(xlnet_dir), "--output-dir", str(tmp_path / "squad"), "--epochs", "1", "--doc-stride", "16",
                    "--max-query-length", "16", *STEPS)
    hf_tokenizer = transformers.AutoTokenizer.from_pretrained(best)
    enc = hf_tokenizer(["Who?", "Where is it?"], ["Ann wrote it in Paris.", "In Rome."], padding=True,
                       return_tensors="pt")
    assert_transformers_agrees(best, transformers.XLNetForQuestionAnsweringSimple, dict(enc),
                               keys=("start_logits", "end_logits"))


def test_embed_pools_at_cls_and_keeps_real_tokens_with_left_padding(xlnet_dir):
    """`embed` on XLNet: its tokenizer pads on the left; "cls" pooling reads <cls> (the last
    token), "none" returns each text's real tokens, both equal to transformers' XLNetModel."""
    import bertkit

    texts = ["It is a truth universally acknowledged.", "Hi"]
    theirs = transformers.XLNetModel.from_pretrained(xlnet_dir).eval()
    enc = transformers.AutoTokenizer.from_pretrained(xlnet_dir)(texts, padding=True, return_tensors="pt")
    with torch.no_grad():
        hidden = theirs(**enc).last_hidden_state  # (B, T, D), left-padded: <cls> last
    cls = bertkit.embed(texts, model=xlnet_dir, pooling="cls", normalize=False)
    np.testing.assert_allclose(cls, hidden[:, -1].numpy(), atol=1e-5, rtol=1e-5)
    tokens = bertkit.embed(texts, model=xlnet_dir, pooling="none", normalize=False)
    for row, real in enumerate(enc["attention_mask"].bool()):
        np.testing.assert_allclose(tokens[row], hidden[row][real].numpy(), atol=1e-5, rtol=1e-5)


def test_distillation_refuses_an_xlnet_teacher_in_one_line(xlnet_dir):
    """Task distillation builds its student by copying BERT-shaped layers: XLNet is refused
    up front (the registry's `distillable`), and general distillation's hint does not offer it."""
    from bertkit.distillation.teacher import check_general_teacher, check_task_teacher
    from bertkit.errors import BertkitError

    with pytest.raises(BertkitError, match=r"task distillation takes teachers of model_type bert, .*got 'xlnet'"):
        check_task_teacher(xlnet_dir)
    with pytest.raises(BertkitError) as error:
        check_general_teacher(xlnet_dir)
    assert "got 'xlnet'" in str(error.value) and "electra" in str(error.value) and "teachers fine-tuned" in str(error.value)
    assert "xlnet teachers" not in str(error.value) and "\n" not in str(error.value)
