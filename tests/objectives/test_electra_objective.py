"""ELECTRA's objective: replaced-token labels on a hand-made batch, sampling rates, no
gradient through sampling, the combined loss, and `bertkit pretrain --objective electra`
end to end (checkpoints that transformers loads, resume, one-line errors)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from _successor_data import build_data
from safetensors.torch import load_file

from bertkit.cli import main
from bertkit.model.electra.config import generator_config
from bertkit.model.electra import ElectraConfig, ElectraForMaskedLM, ElectraForPreTraining
from bertkit.objectives.electra import ElectraPretrainingModel, replace_tokens, sample_tokens

TINY = ["--set", "model.hidden_size=32", "--set", "model.num_hidden_layers=2", "--set", "model.num_attention_heads=2",
        "--set", "model.intermediate_size=64", "--set", "model.max_position_embeddings=64",
        "--set", "model.embedding_size=16"]
QUIET = ["--set", "progress=false", "--set", "tensorboard=false"]
CLS, SEP, MASK, PAD = 2, 3, 4, 0


def test_replace_tokens_labels_a_hand_made_batch():
    # row 0: [CLS] 10 [MASK] 12 [MASK] [SEP] [PAD]; masked positions 2 (orig 11) and 4 (orig 13)
    # row 1: [CLS] 20 21 [SEP] [PAD] [PAD] [PAD]; position 2 selected but kept unchanged (orig 21)
    input_ids = torch.tensor([[CLS, 10, MASK, 12, MASK, SEP, PAD], [CLS, 20, 21, SEP, PAD, PAD, PAD]])
    labels = torch.full_like(input_ids, -100)
    labels[0, 2], labels[0, 4], labels[1, 2] = 11, 13, 21
    mask = (input_ids != PAD).long()
    sampled = torch.tensor([11, 50, 60])  # row-major: (0,2) equals the original, (0,4) and (1,2) do not
    replaced, targets = replace_tokens(input_ids, labels, sampled, mask)
    assert replaced.tolist() == [[CLS, 10, 11, 12, 50, SEP, PAD], [CLS, 20, 60, SEP, PAD, PAD, PAD]]
    assert targets.tolist() == [[0, 0, 0, 0, 1, 0, -100], [0, 0, 1, 0, -100, -100, -100]]
    # a kept (unmasked) position sampled back to its own token is original too
    _, targets = replace_tokens(input_ids, labels, torch.tensor([11, 13, 21]), mask)
    assert targets[mask.bool()].sum() == 0


def test_sampling_follows_the_softmax_and_is_reproducible():
    probs = torch.tensor([0.5, 0.3, 0.15, 0.05])
    logits = probs.log().expand(40_000, 4).clone()
    draws = sample_tokens(logits, torch.Generator().manual_seed(0))
    counts = torch.bincount(draws, minlength=4).double()
    expected = probs.double() * draws.numel()
    chi2 = float(((counts - expected) ** 2 / expected).sum())
    assert chi2 < 16.27  # chi-square, 3 degrees of freedom, p = 0.001
    again = sample_tokens(logits, torch.Generator().manual_seed(0))
    assert torch.equal(draws, again)
    assert sample_tokens(logits[:0]).shape == (0,)


def test_sampling_over_a_wide_vocabulary_matches_softmax_and_skips_impossible_tokens():
    gen = torch.Generator().manual_seed(1)
    row = torch.randn(200, generator=gen)
    row[[0, 57, 199]] = float("-inf")  # probability 0: never drawn
    draws = sample_tokens(row.expand(60_000, 200).clone(), torch.Generator().manual_seed(2))
    counts = torch.bincount(draws, minlength=200).double()
    assert counts[[0, 57, 199]].sum() == 0
    expected = torch.softmax(row.double(), 0) * draws.numel()
    possible = expected > 0
    chi2 = float(((counts[possible] - expected[possible]) ** 2 / expected[possible]).sum())
    assert chi2 < 262.0  # chi-square, 196 degrees of freedom, p = 0.001


def _tiny_model(size: float = 0.5) -> ElectraPretrainingModel:
    config = ElectraConfig.from_dict(dict(vocab_size=60, embedding_size=16, hidden_size=32, num_hidden_layers=2,
                                          num_attention_heads=4, intermediate_size=64, max_position_embeddings=32))
    torch.manual_seed(0)
    return ElectraPretrainingModel(ElectraForPreTraining(config), ElectraForMaskedLM(generator_config(config, size)))


def _batch():
    gen = torch.Generator().manual_seed(1)
    ids = torch.randint(5, 60, (4, 12), generator=gen)
    mask = torch.ones_like(ids)
    mask[2:, 9:] = 0
    labels = torch.full_like(ids, -100)
    chosen = torch.rand(4, 12, generator=gen) < 0.3
    chosen &= mask.bool()
    labels[chosen] = ids[chosen]
    ids = ids.masked_fill(chosen, MASK)
    return ids, torch.zeros_like(ids), mask, labels


def test_embeddings_are_shared_and_no_gradient_flows_through_sampling():
    model = _tiny_model()
    assert model.generator.electra.embeddings is model.discriminator.electra.embeddings
    ids, types, mask, labels = _batch()
    out = model(ids, types, mask, labels, torch.Generator().manual_seed(0))
    assert not out.replaced_ids.requires_grad
    active = out.disc_labels != -100
    disc_loss = torch.nn.functional.binary_cross_entropy_with_logits(out.disc_logits[active], out.disc_labels[active].float())
    disc_loss.backward()
    for name, param in model.generator.named_parameters():
        if name.startswith("electra.embeddings."):
            continue  # shared: the discriminator's loss trains them
        assert param.grad is None, name
    assert model.discriminator.electra.embeddings.word_embeddings.weight.grad is not None
    model.zero_grad(set_to_none=True)
    out = model(ids, types, mask, labels, torch.Generator().manual_seed(0))
    out.mlm_loss.backward()  # the generator's loss does not reach the discriminator's own weights
    for name, param in model.discriminator.named_parameters():
        if not name.startswith("electra.embeddings."):
            assert param.grad is None, name


def test_discriminator_labels_match_the_sampled_replacements():
    model = _tiny_model().eval()
    ids, types, mask, labels = _batch()
    with torch.no_grad():
        out = model(ids, types, mask, labels, torch.Generator().manual_seed(3))
    original = torch.where(labels != -100, labels, ids)
    real = mask.bool()
    assert torch.equal(out.disc_labels[real], (out.replaced_ids != original)[real].long())
    assert (out.disc_labels[~real] == -100).all()
    unmasked = real & (labels == -100)
    assert torch.equal(out.replaced_ids[unmasked], ids[unmasked]) and (out.disc_labels[unmasked] == 0).all()
    assert out.mlm_logits.shape == (int((labels != -100).sum()), 60)


# ---- the command line -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory) -> Path:
    return build_data(tmp_path_factory.mktemp("electra"), "wordpiece", "nsp")


def electra_args(data: Path, out: Path, *extra: str) -> list[str]:
    return ["pretrain", "--objective", "electra", "--preset", "tiny", "--data", str(data), "--output-dir", str(out),
            *TINY, *QUIET, "--set", "batch_size=8", "--set", "warmup_steps=1", "--set", "lr=1e-3", *extra]


def test_pretrain_electra_end_to_end_loads_in_transformers(data_dir, tmp_path):
    import transformers

    from bertkit import Tokenizer

    out = tmp_path / "run"
    assert main(electra_args(data_dir, out, "--generator-size", "0.5", "--set", "max_steps=2",
                             "--set", "log_steps=1", "--set", "eval_steps=2")) == 0
    records = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    train = [r for r in records if "loss" in r]
    assert [r["step"] for r in train] == [1, 2]
    assert {"mlm_accuracy", "disc_accuracy", "disc_loss", "replaced_fraction"} <= set(train[0])
    assert any("eval_disc_accuracy" in r and "eval_mlm_accuracy" in r for r in records)
    final = out / "final"
    disc_cfg = json.loads((final / "config.json").read_text())
    gen_cfg = json.loads((final / "generator" / "config.json").read_text())
    assert disc_cfg["architectures"] == ["ElectraForPreTraining"] and gen_cfg["architectures"] == ["ElectraForMaskedLM"]
    assert (disc_cfg["hidden_size"], gen_cfg["hidden_size"], gen_cfg["embedding_size"]) == (32, 16, 16)
    disc_state, gen_state = load_file(final / "model.safetensors"), load_file(final / "generator" / "model.safetensors")
    shared = "electra.embeddings.word_embeddings.weight"
    assert torch.equal(disc_state[shared], gen_state[shared])

    batch = Tokenizer.from_pretrained(final)(["Emma was handsome and clever.", "She walked in."], padding=True,
                                             return_tensors="pt")
    inputs = {k: batch[k] for k in ("input_ids", "token_type_ids", "attention_mask")}
    real = batch["attention_mask"].bool()
    for hf_cls, ours_cls, folder in ((transformers.ElectraForPreTraining, ElectraForPreTraining, final),
                                     (transformers.ElectraForMaskedLM, ElectraForMaskedLM, final / "generator")):
        ref, info = hf_cls.from_pretrained(folder, output_loading_info=True)
        assert not info["missing_keys"] and not info["unexpected_keys"]
        ours = ours_cls.from_pretrained(folder)
        with torch.no_grad():
            torch.testing.assert_close(ours(**inputs).logits[real], ref.eval()(**inputs).logits[real],
                                       atol=1e-5, rtol=1e-5)
    report = (out / "report.md").read_text()
    assert "electra" in report


def test_resumed_electra_run_ends_with_the_same_weights(data_dir, tmp_path):
    import shutil

    straight, resumed = tmp_path / "straight", tmp_path / "resumed"
    assert main(electra_args(data_dir, straight, "--set", "max_steps=4", "--set", "eval_steps=100",
                             "--set", "save_steps=2")) == 0
    shutil.copytree(straight, resumed)  # the same run, stopped after its step-2 checkpoint
    shutil.rmtree(resumed / "final")
    shutil.rmtree(resumed / "checkpoint-0000004")
    (resumed / "run_config.json").write_text(
        (straight / "run_config.json").read_text().replace(str(straight), str(resumed)))
    assert main(["pretrain", "--output-dir", str(resumed), "--resume"]) == 0
    for part in ("model.safetensors", "generator/model.safetensors"):
        a, b = load_file(straight / "final" / part), load_file(resumed / "final" / part)
        assert a.keys() == b.keys()
        for key in a:
            assert torch.equal(a[key], b[key]), (part, key)


@pytest.mark.parametrize("extra,message", [
    (["--generator-size", "1.5"], "generator_size"),
    (["--generator-size", "0"], "generator_size"),
    (["--set", "generator_size=-0.25"], "generator_size"),
    (["--set", "disc_weight=0"], "disc_weight"),
])
def test_bad_generator_settings_fail_in_one_line_before_training(data_dir, tmp_path, capsys, extra, message):
    out = tmp_path / "run"
    assert main(electra_args(data_dir, out, *extra)) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and f"field {message!r}" in err, err
    assert "larger than the discriminator" in err or message == "disc_weight"
    assert not out.exists() or not any(out.iterdir())


def test_electra_from_a_bert_checkpoint_fails_in_one_line(data_dir, tmp_path, capsys):
    from bertkit import BertConfig, BertForPreTraining

    bert = tmp_path / "bert"
    BertForPreTraining(BertConfig.from_preset("tiny", vocab_size=400, hidden_size=32, num_attention_heads=2,
                                              intermediate_size=64)).save_pretrained(bert)
    out = tmp_path / "run"
    assert main(electra_args(data_dir, out, "--init-from", str(bert))) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "a bert checkpoint" in err and "generator/" in err


def test_loss_is_generator_mlm_plus_weighted_discriminator_bce():
    from bertkit.objectives.electra import electra_loss

    model = _tiny_model().eval()
    ids, types, mask, labels = _batch()
    with torch.no_grad():
        out = model(ids, types, mask, labels, torch.Generator().manual_seed(3))
    masked, real = int((labels != -100).sum()), int(mask.sum())
    loss, stats = electra_loss(out, labels, masked, real, 50.0)
    gen_logits = model.generator.mlm_logits(model.generator.electra(input_ids=ids, token_type_ids=types, attention_mask=mask).last_hidden_state)
    mlm = torch.nn.functional.cross_entropy(gen_logits[labels != -100], labels[labels != -100])
    active = mask.bool()
    disc = torch.nn.functional.binary_cross_entropy_with_logits(out.disc_logits[active], out.disc_labels[active].float())
    torch.testing.assert_close(loss, mlm + 50.0 * disc, atol=1e-5, rtol=1e-5)
    assert stats["disc_count"] == real and stats["mlm_count"] == masked
    assert stats["disc_replaced"] == int(out.disc_labels[active].sum())
    # halves of the batch, each normalised by the whole batch's counts, sum to the whole
    half = [electra_loss(out.__class__(out.mlm_loss, out.mlm_logits, out.disc_logits[rows], out.disc_labels[rows],
                                       out.replaced_ids[rows]), labels, masked, real, 50.0)[0]
            for rows in (slice(0, 2), slice(2, 4))]
    disc_only = sum(h - out.mlm_loss * 1.0 for h in half)  # the generator term is counted per call
    torch.testing.assert_close(disc_only, 50.0 * disc, atol=1e-5, rtol=1e-5)
