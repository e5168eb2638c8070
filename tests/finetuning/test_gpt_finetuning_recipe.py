"""GPT-1's fine-tuning recipe on decoder-only checkpoints (bertkit.model.gpt.finetuning, registered as the GPT families' FINETUNING): the
<start>/<delim>/<extract> template and new embedding rows, the paper's defaults (each
overridable), the auxiliary LM loss, the saved folder loading in transformers'
*ForSequenceClassification with the same logits, `predict`, a KoGPT2-shaped folder, bad input;
multiple choice (one sequence per choice, saved as transformers' *DoubleHeadsModel) and similarity
(each pair in both orders, the two scores added) in training, evaluate and predict."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
import transformers
from safetensors.torch import load_file

from bertkit.cli import main

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
AUSTEN = FIXTURES / "austen_small.txt"
RTE = FIXTURES / "tasks" / "glue" / "RTE"
STSB = FIXTURES / "tasks" / "glue" / "STS-B"
COLA = FIXTURES / "tasks" / "glue" / "CoLA"
CSQA = FIXTURES / "tasks" / "commonsenseqa" / "dev.jsonl"
NSMC = FIXTURES / "nsmc_reviews_50.txt"
QUIET = ["--no-progress", "--set", "tensorboard=false"]
TINY = {"gpt2": ["--set", "model.n_embd=32", "--set", "model.n_layer=2", "--set", "model.n_head=2",
                 "--set", "model.n_positions=64"]}
TINY["openai-gpt"] = TINY["gpt2"]
PRESETS = {"gpt2": "gpt-tiny", "openai-gpt": "gpt1-mini"}
CLASSIFIERS = {"gpt2": "GPT2ForSequenceClassification", "openai-gpt": "OpenAIGPTForSequenceClassification"}
DOUBLE_HEADS = {"gpt2": "GPT2DoubleHeadsModel", "openai-gpt": "OpenAIGPTDoubleHeadsModel"}


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
    assert "| weight decay, dropout | 0.01, 0.1 |" in (out / "report.md").read_text()  # the recipe's, not nan
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


@pytest.mark.parametrize("pretrained", ["gpt2"], indirect=True)  # one family is enough
def test_every_default_is_overridable_and_lm_coef_zero_drops_the_lm_loss(pretrained, tmp_path):
    family, model = pretrained
    out = tmp_path / "rte"
    assert _finetune_rte(model, out, "--lr", "1e-4", "--set", "lm_coef=0", "--set", "warmup_ratio=0.1",
                         "--set", "classifier_dropout=0") == 0
    run_config = json.loads((out / "run_config.json").read_text())
    assert (run_config["lr"], run_config["lm_coef"], run_config["warmup_ratio"], run_config["classifier_dropout"]) == (
        1e-4, 0.0, 0.1, 0.0)
    records = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert not any("lm_loss" in r for r in records)


def _finetune_choices(model: Path, out: Path, data: Path = CSQA, *extra: str) -> int:
    return main(["finetune", "multiple-choice", "--train", str(data), "--dev", str(data), "--model", str(model),
                 "--output-dir", str(out), "--epochs", "1", "--batch-size", "4", "--max-seq-length", "64",
                 "--set", "max_steps=2", *QUIET, *extra])


def _finetune_stsb(model: Path, out: Path, *extra: str) -> int:
    return main(["finetune", "glue", "--task", "stsb", "--model", str(model), "--data", str(STSB), "--train",
                 str(STSB / "dev.tsv"), "--output-dir", str(out), "--epochs", "1", "--batch-size", "4",
                 "--max-seq-length", "64", "--set", "max_steps=2", *QUIET, *extra])


def test_multiple_choice_by_gpt1_recipe_saves_a_double_heads_model(pretrained, tmp_path, capsys):
    """One `<start> context <delim> answer <extract>` sequence per choice, the auxiliary LM loss
    beside the choice loss; best/ loads in transformers' *DoubleHeadsModel, whose mc_logits at
    each choice's <extract> (mc_token_ids) give what `predict` and `evaluate` give."""
    family, model = pretrained
    out = tmp_path / "mc"
    assert _finetune_choices(model, out) == 0
    run_config = json.loads((out / "run_config.json").read_text())
    assert (run_config["lm_coef"], run_config["classifier_dropout"]) == (0.5, 0.1)
    records = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert any({"lm_loss", "task_loss", "accuracy"} <= set(r) for r in records)
    best = out / "best"
    config = json.loads((best / "config.json").read_text())
    assert config["architectures"] == [DOUBLE_HEADS[family]] and config["summary_first_dropout"] == 0.1

    tok = transformers.AutoTokenizer.from_pretrained(best)
    ref = getattr(transformers, DOUBLE_HEADS[family]).from_pretrained(best).eval()
    context, choices = "Where would you keep the milk?", ["fridge", "a very large public library", "oven"]
    enc = tok([context] * len(choices), choices, padding=True, return_tensors="pt")
    for row, mask in zip(enc["input_ids"], enc["attention_mask"]):
        tokens = tok.convert_ids_to_tokens(row[mask.bool()])
        assert tokens[0] == "<start>" and tokens[-1] == "<extract>" and tokens.count("<delim>") == 1
    mc_token_ids = enc["attention_mask"].sum(-1) - 1  # each choice's <extract> (right padding)
    with torch.no_grad():  # no mask: transformers' GPT-1 takes none for (B, C, T); causal, right-padded
        expected = torch.softmax(ref(input_ids=enc["input_ids"][None], mc_token_ids=mc_token_ids[None]).mc_logits, -1)[0]
    capsys.readouterr()
    assert main(["predict", "--model", str(best), context, *choices]) == 0
    result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert result["scores"] == pytest.approx(expected.tolist(), abs=1e-5)

    assert main(["evaluate", "multiple-choice", "--model", str(best), "--data", str(CSQA), "--no-progress"]) == 0
    evaluated = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    best_metrics = json.loads((best / "best_metrics.json").read_text())
    assert evaluated["accuracy"] == pytest.approx(best_metrics["eval_accuracy"])
    assert evaluated["loss"] == pytest.approx(best_metrics["eval_loss"], abs=1e-5)

    if family == "gpt2":  # ONNX: the head's scores (mc_logits), mc_token_ids derived from the mask in the graph
        pytest.importorskip("onnxruntime")
        assert main(["export", "onnx", "--model", str(best), "--output", str(tmp_path / "onnx" / "mc.onnx")]) == 0
        exported = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
        assert exported["outputs"] == ["mc_logits"] and exported["max_abs_diff"]["mc_logits"] <= 1e-4


def test_similarity_reads_each_pair_in_both_orders(pretrained, tmp_path, capsys):
    """STS-B: training, evaluate and predict add the two orders' scores (`score` has no bias: the
    classifier on the sum of the two extract states); best/ is transformers' *ForSequenceClassification
    with `both_orders` in bertkit_task.json."""
    from bertkit.evaluation import metrics as m
    from bertkit.inference.evaluation import evaluate
    from bertkit.tasks.classification import read_examples

    family, model = pretrained
    out = tmp_path / "stsb"
    assert _finetune_stsb(model, out) == 0
    best = out / "best"
    spec = json.loads((best / "bertkit_task.json").read_text())
    assert (spec["both_orders"], spec["regression"], spec["has_pairs"]) == (True, True, True)
    assert json.loads((best / "config.json").read_text())["architectures"] == [CLASSIFIERS[family]]

    tok = transformers.AutoTokenizer.from_pretrained(best)
    ref = getattr(transformers, CLASSIFIERS[family]).from_pretrained(best).eval()

    def both_orders(a: list[str], b: list[str]) -> torch.Tensor:
        with torch.no_grad():
            forward = ref(**tok(a, b, padding=True, truncation=True, max_length=64, return_tensors="pt")).logits
            backward = ref(**tok(b, a, padding=True, truncation=True, max_length=64, return_tensors="pt")).logits
        return (forward + backward)[:, 0]

    a, b = "A man is playing.", "Someone plays a guitar very loudly."
    capsys.readouterr()
    assert main(["predict", "--model", str(best), a, b, b, a]) == 0
    results = [json.loads(line) for line in capsys.readouterr().out.strip().splitlines()[-2:]]
    expected = float(both_orders([a], [b])[0])
    assert [r["score"] for r in results] == pytest.approx([expected, expected], abs=1e-5)

    examples = read_examples(STSB / "dev.tsv", glue_task="stsb")
    scores = both_orders([ex.text for ex in examples], [ex.pair for ex in examples]).numpy()
    gold = [ex.label for ex in examples]
    evaluated = evaluate(best, STSB / "dev.tsv")
    assert evaluated["pearson"] == pytest.approx(100 * m.pearson(scores, gold), abs=1e-3)
    best_metrics = json.loads((best / "best_metrics.json").read_text())  # the training run's dev evaluation
    assert evaluated["pearson"] == pytest.approx(best_metrics["eval_pearson"], abs=1e-3)


def test_training_runs_the_model_on_both_orders_and_adds_the_extract_states(pretrained):
    """The program's loss: the model sees (a, b) and (b, a) as rows 2i and 2i + 1; the loss is the
    MSE of score(h_ab + h_ba), the paper's rule, and --set both_orders=false turns it off."""
    from bertkit.finetuning import build_config, prepare, task_model_config
    from bertkit.model.gpt.modeling import GPTPreTrainedModel  # noqa: F401  (family loaded)

    family, model = pretrained
    values = {"family": "classification", "glue_task": "stsb", "init_from": str(model), "output_dir": "unused",
              "train": str(STSB / "dev.tsv"), "max_seq_length": 64, "progress": False}
    prepared = prepare(build_config(values, {}))
    assert prepared.spec.both_orders
    features = prepared.train.features[:3]
    tok = prepared.tokenizer
    first = tok.convert_ids_to_tokens([int(i) for i in features[0]["input_ids"][0, : features[0]["lengths"][0]]])
    second = tok.convert_ids_to_tokens([int(i) for i in features[0]["input_ids"][1, : features[0]["lengths"][1]]])
    assert first[0] == second[0] == "<start>" and first[-1] == second[-1] == "<extract>"
    a, b = first.index("<delim>"), second.index("<delim>")
    assert first[1:a] == second[b + 1:-1] and first[a + 1:-1] == second[1:b]  # the two orders

    torch.manual_seed(0)
    net = prepared.program_cls.model_class(prepared.base_config)(task_model_config(prepared)).eval()
    program = prepared.program_cls(net, tok, prepared.spec, prepared.train.features, None, None,
                                   auxiliary_loss=prepared.recipe.auxiliary_loss(SimpleNamespace(lm_coef=0.5)))
    batch = program.collate(features)
    assert batch["input_ids"].shape[:2] == (3, 2)
    seen = []  # the token ids the embedding table is asked for
    net.get_input_embeddings().register_forward_pre_hook(lambda module, args: seen.append(args[0]))
    loss, stats = program.compute_loss(net, batch, {"task": 3.0})
    flat = batch["input_ids"].flatten(0, 1)  # (2B, T): rows 2i, 2i + 1 are pair i's two orders
    assert torch.equal(seen[0], flat)
    with torch.no_grad():
        hidden = net.transformer(input_ids=flat, attention_mask=batch["attention_mask"].flatten(0, 1)).last_hidden_state
        last = batch["attention_mask"].flatten(0, 1).sum(-1) - 1
        summed = hidden[torch.arange(6), last].view(3, 2, -1).sum(1)  # h_ab + h_ba
        expected = torch.nn.functional.mse_loss(net.score(summed)[:, 0], batch["labels"])
    assert stats["task_loss_sum"] / stats["task_count"] == pytest.approx(float(expected), abs=1e-5)
    assert stats["lm_count"] > 0 and loss.requires_grad

    assert not prepare(build_config(values, {"both_orders": "false"})).spec.both_orders


def test_gpt1_tokens_already_in_the_vocabulary_is_one_line(tmp_path, capsys):
    model = _pretrain(tmp_path, "gpt2", ("--extra-special-tokens", "<start>"))
    for command in (_finetune_rte, _finetune_choices):
        capsys.readouterr()
        assert command(model, tmp_path / "out") != 0
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and str(model / "tokenizer.json") in err and "<start>" in err


@pytest.mark.parametrize("pretrained", ["gpt2"], indirect=True)  # one family is enough
def test_bad_multiple_choice_and_similarity_input_is_one_line(pretrained, tmp_path, capsys):
    family, model = pretrained
    varying = tmp_path / "varying.jsonl"
    varying.write_text(json.dumps({"question": "q one?", "choices": ["a", "b", "c"], "label": 0}) + "\n"
                       + json.dumps({"question": "q two?", "choices": ["a", "b"], "label": 1}) + "\n")
    capsys.readouterr()
    assert _finetune_choices(model, tmp_path / "mc", varying) != 0
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and f"{varying}:2" in err and "2 choices" in err
    cola = ["finetune", "glue", "--task", "cola", "--model", str(model), "--data", str(COLA), "--train",
            str(COLA / "dev.tsv"), "--output-dir", str(tmp_path / "cola"), "--max-seq-length", "64", "--set",
            "both_orders=true", *QUIET]
    assert main(cola) != 0
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "field 'both_orders'" in err


@pytest.mark.parametrize("setting", ["lm_coef=0.5", "both_orders=true"])
def test_gpt1_settings_on_an_encoder_are_one_line(setting, tmp_path, capsys):
    from bertkit import BertConfig, BertForPreTraining
    from bertkit.tokenization import Tokenizer

    encoder = tmp_path / "bert"
    BertForPreTraining(BertConfig.from_preset("tiny", vocab_size=64, hidden_size=32, num_attention_heads=2,
                                              intermediate_size=64)).save_pretrained(encoder)
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *"abcdefghijklmnopqrstuvwxyz.,"]
    Tokenizer.from_wordpiece_vocab(vocab).save_pretrained(encoder)
    capsys.readouterr()
    assert _finetune_rte(encoder, tmp_path / "rte", "--set", setting) != 0
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and f"field {setting.split('=')[0]!r}" in err


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


def test_auxiliary_lm_loss_is_the_next_token_cross_entropy_over_real_tokens():
    """The fused head + loss equals logits through the tied embeddings and F.cross_entropy
    over the unpadded next tokens, in value and in its gradient to the final states."""
    import torch.nn.functional as F

    from bertkit import GPT2Config, GPT2ForSequenceClassification
    from bertkit.model.gpt.finetuning import auxiliary_lm_loss

    torch.manual_seed(0)
    model = GPT2ForSequenceClassification(GPT2Config(vocab_size=97, n_embd=32, n_layer=1, n_head=2, n_positions=16))
    ids = torch.randint(0, 97, (3, 9))
    mask = torch.ones_like(ids)
    mask[1, 6:] = 0
    states = torch.randn(3, 9, 32, requires_grad=True)
    loss, count = auxiliary_lm_loss(model, states, ids, mask)
    loss.backward()
    reference_states = states.detach().clone().requires_grad_()
    logits = reference_states[:, :-1] @ model.get_input_embeddings().weight.t()
    targets = ids[:, 1:].masked_fill(mask[:, 1:] == 0, -100)
    reference = F.cross_entropy(logits.reshape(-1, 97), targets.reshape(-1))
    reference.backward()
    assert count == 3 * 8 - 3
    torch.testing.assert_close(loss, reference)
    torch.testing.assert_close(states.grad, reference_states.grad, atol=1e-6, rtol=1e-5)
