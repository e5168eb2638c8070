"""BigBird: parity with transformers both ways (eval mode, fp32) for block-sparse and full attention on
padded batches, every head; the block-sparse pattern itself; config and presets."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
import transformers

import bertkit
from bertkit.errors import ConfigError
from bertkit.model.bigbird.attention import BlockSparseMask, key_block_indices
from bertkit.model.bigbird.config import BigBirdConfig
from bertkit.model.bigbird.modeling import (
    BigBirdForMaskedLM,
    BigBirdForMultipleChoice,
    BigBirdForQuestionAnswering,
    BigBirdForSequenceClassification,
    BigBirdForTokenClassification,
    BigBirdModel,
)
from bertkit.model.families import MODEL_FAMILIES

SEP = 3
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "tasks"


def _config(**overrides) -> BigBirdConfig:
    # block 8, 2 random blocks: inputs above (5 + 2 * 2) * 8 = 72 tokens run block-sparse
    values = dict(vocab_size=99, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=37,
                  max_position_embeddings=1024, block_size=8, num_random_blocks=2, sep_token_id=SEP)
    return BigBirdConfig.from_dict({**values, **overrides})


def _inputs(length: int, batch: int = 3, seed: int = 0):
    """A padded batch: row 1 half padding, row 2 a few padding tokens (id 0, mask 0); [SEP] after a question."""
    gen = torch.Generator().manual_seed(seed)
    ids = torch.randint(5, 99, (batch, length), generator=gen)
    ids[:, 0], ids[:, 6] = 2, SEP
    mask = torch.ones_like(ids)
    ids[1, length // 2:], mask[1, length // 2:] = 0, 0
    ids[-1, length - 5:], mask[-1, length - 5:] = 0, 0
    return ids, mask


def _hf(cls_name: str, config: BigBirdConfig, directory=None):
    """A fresh transformers model (its switch to full attention on a short input is for good: never reused)."""
    cls = getattr(transformers, cls_name)
    if directory is not None:
        return cls.from_pretrained(directory).eval()
    return cls(transformers.BigBirdConfig(**config.to_dict())).eval()


def _close(got, expected, real=None):
    """Equal within 1e-5; at the `real` (B, T) positions only when given and the tensors are per position."""
    if real is not None and got.shape[:2] == real.shape:
        got, expected = got[real], expected[real]
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("length, attention_type", [(100, "block_sparse"), (40, "block_sparse"),
                                                    (100, "original_full")])
def test_encoder_matches_transformers_both_ways(tmp_path, length, attention_type):
    """Block-sparse (100 tokens, padded inside to 104), a short input (full attention) and
    original_full: hidden states and the pooler at every position, padding included."""
    config = _config(attention_type=attention_type)
    torch.manual_seed(0)
    ref = _hf("BigBirdModel", config)
    ref.save_pretrained(tmp_path / "hf")
    ours, info = BigBirdModel.from_pretrained(tmp_path / "hf", output_loading_info=True)
    assert info == {"missing_keys": [], "unexpected_keys": []}
    assert ours.uses_sparse_attention(length) == (attention_type == "block_sparse" and length > 72)
    ids, mask = _inputs(length)
    with torch.no_grad():
        expected = ref(input_ids=ids, attention_mask=mask)
        got = ours(ids, mask)
    _close(got.last_hidden_state, expected.last_hidden_state)
    _close(got.pooler_output, expected.pooler_output)
    ours.save_pretrained(tmp_path / "ours")  # and back: transformers reads bertkit's checkpoint
    back = _hf("BigBirdModel", config, tmp_path / "ours")
    with torch.no_grad():
        _close(back(input_ids=ids, attention_mask=mask).last_hidden_state, got.last_hidden_state)


def test_options_and_the_1024_token_plan_match_transformers():
    """use_bias False, rescale_embeddings True, token types, 1,024 tokens (transformers' other random-block
    plan, also all block 0 in eval mode)."""
    config = _config(use_bias=False, rescale_embeddings=True, block_size=32)
    torch.manual_seed(1)
    ref = _hf("BigBirdModel", config)
    ours = BigBirdModel(config).eval()
    assert ours.load_state_dict(ref.state_dict()) is not None and ours.encoder.layer[0].attention.self.query.bias is None
    ids, mask = _inputs(1024, batch=2, seed=1)
    types = torch.zeros_like(ids)
    types[:, 300:] = 1
    with torch.no_grad():
        expected = ref(input_ids=ids, attention_mask=mask, token_type_ids=types).last_hidden_state
        got = ours(ids, mask, types).last_hidden_state
    _close(got, expected)


@pytest.mark.parametrize("cls, hf_name", [
    (BigBirdForSequenceClassification, "BigBirdForSequenceClassification"),
    (BigBirdForTokenClassification, "BigBirdForTokenClassification"),
    (BigBirdForQuestionAnswering, "BigBirdForQuestionAnswering"),
    (BigBirdForMaskedLM, "BigBirdForMaskedLM"),
])
def test_heads_match_transformers_both_ways(tmp_path, cls, hf_name):
    config = _config(num_labels=3) if cls is not BigBirdForQuestionAnswering else _config()
    torch.manual_seed(2)
    ref = _hf(hf_name, config)
    ref.save_pretrained(tmp_path / "hf")
    ours, info = cls.from_pretrained(tmp_path / "hf", output_loading_info=True)
    assert info == {"missing_keys": [], "unexpected_keys": []}
    ids, mask = _inputs(100)
    real = mask.bool()
    fields = ("start_logits", "end_logits") if cls is BigBirdForQuestionAnswering else ("logits",)
    with torch.no_grad():
        expected = ref(input_ids=ids, attention_mask=mask)
        got = ours(ids, mask)
    for name in fields:  # QA: padding positions are never answers here (finfo.min), real ones compared
        _close(getattr(got, name), getattr(expected, name), real)
    if cls is BigBirdForQuestionAnswering:  # the question (up to the first [SEP]) is out of the answers
        assert (got.start_logits[:, 1:7] < -1e5).all() and (got.start_logits[:, 7:10] > -1e5).all()
        starts, ends = torch.tensor([8, 9, 20]), torch.tensor([9, 12, 21])
        with torch.no_grad():
            loss = ours(ids, mask, start_positions=starts, end_positions=ends).loss
            ref_loss = ref(input_ids=ids, attention_mask=mask, start_positions=starts, end_positions=ends).loss
        assert loss.item() < ref_loss.item() + 1e-5  # transformers' softmax also spreads over padding
    if cls is BigBirdForMaskedLM:  # labels: the loss, logits at the labelled positions
        labels = torch.full_like(ids, -100)
        labels[0, 3], labels[1, 2], labels[2, 90] = 11, 12, 13
        with torch.no_grad():
            out = ours(ids, mask, labels=labels)
            ref_loss = ref(input_ids=ids, attention_mask=mask, labels=labels).loss
        _close(out.logits, expected.logits[labels != -100])
        _close(out.loss, ref_loss)
    ours.save_pretrained(tmp_path / "ours")
    back = _hf(hf_name, config, tmp_path / "ours")
    with torch.no_grad():
        again = back(input_ids=ids, attention_mask=mask)
    for name in fields:
        _close(getattr(again, name), getattr(expected, name), real)


def test_multiple_choice_matches_transformers_both_ways(tmp_path):
    config = _config()
    torch.manual_seed(3)
    ref = _hf("BigBirdForMultipleChoice", config)
    ref.save_pretrained(tmp_path / "hf")
    ours = BigBirdForMultipleChoice.from_pretrained(tmp_path / "hf")
    ids, mask = _inputs(90, batch=4)
    ids, mask = ids.view(2, 2, 90), mask.view(2, 2, 90)
    labels = torch.tensor([1, 0])
    with torch.no_grad():
        expected = ref(input_ids=ids, attention_mask=mask, labels=labels)
        got = ours(ids, mask, labels=labels)
    _close(got.logits, expected.logits)
    _close(got.loss, expected.loss)
    ours.save_pretrained(tmp_path / "ours")
    with torch.no_grad():
        _close(_hf("BigBirdForMultipleChoice", config, tmp_path / "ours")(input_ids=ids, attention_mask=mask).logits,
               got.logits)


def test_block_sparse_pattern_and_attentions():
    """Each middle query block reads global blocks 0 and n-1, its window and (eval) block 0 as its random
    blocks; the returned probabilities sum to one on real rows and are zero off the pattern."""
    indices, repeated = key_block_indices(6, torch.zeros(1, 4, 2, dtype=torch.long))
    assert indices[0].tolist() == [[0, 0, 1, 2, 5, 0, 0], [0, 1, 2, 3, 5, 0, 0], [0, 2, 3, 4, 5, 0, 0],
                                   [0, 3, 4, 5, 5, 0, 0]]
    assert repeated.nonzero().tolist() == [[0, 1], [3, 3]]
    config = _config()
    torch.manual_seed(4)
    model = BigBirdModel(config).eval()
    ids, mask = _inputs(96, batch=2)
    with torch.no_grad():
        out = model(ids, mask, output_attentions=True, output_hidden_states=True)
    probs = out.attentions[0]  # (B, heads, T, T)
    assert probs.shape == (2, 4, 96, 96) and len(out.hidden_states) == 3
    real = mask.bool()
    sums = probs.sum(-1)  # (B, heads, T)
    for row in range(2):
        torch.testing.assert_close(sums[row][:, real[row]], torch.ones(4, int(real[row].sum())))
    block = 8
    row = 5 * block  # query block 5 of 12: keys in blocks 0, 4, 5, 6, 11 only
    seen = probs[0, :, row].view(4, 12, block).sum(-1).gt(0).any(0).nonzero().flatten().tolist()
    assert seen == [0, 4, 5, 6, 11]
    assert (probs[1, :, :, 48:] == 0).all()  # row 1's padding keys get nothing


def test_middle_blocks_in_chunks_compute_the_same(monkeypatch):
    """The middle query blocks run a chunk of rows at a time (KEYS_PER_CHUNK): 1 or 3 rows per chunk give
    the outputs and attentions of one chunk."""
    from bertkit.model.bigbird import attention

    torch.manual_seed(8)
    model = BigBirdModel(_config()).eval()
    ids, mask = _inputs(100, batch=2)
    with torch.no_grad():
        whole = model(ids, mask, output_attentions=True)
        for rows in (1, 3):
            monkeypatch.setattr(attention, "KEYS_PER_CHUNK", rows * 7 * 8)  # 7 key blocks of 8 per row
            chunked = model(ids, mask, output_attentions=True)
            _close(chunked.last_hidden_state, whole.last_hidden_state)
            _close(chunked.attentions[1], whole.attentions[1])


def test_training_draws_random_blocks_outside_the_window():
    config = _config(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    torch.manual_seed(5)
    model = BigBirdModel(config).train()
    attention = model.encoder.layer[0].attention.self
    blocks = attention.random_blocks(20, torch.device("cpu"))  # (heads, 18, 2)
    assert blocks.shape == (4, 18, 2)
    rows = torch.arange(1, 19)[None, :, None]
    assert ((blocks - rows).abs() > 1).all() and (blocks > 0).all() and (blocks < 19).all()
    assert (blocks[..., 0] != blocks[..., 1]).all() and blocks.unique().numel() > 5
    ids, mask = _inputs(160, batch=2)
    out = model(ids, mask).last_hidden_state
    out.sum().backward()
    assert torch.isfinite(out).all() and model.encoder.layer[0].attention.self.query.weight.grad.abs().sum() > 0
    with torch.no_grad():
        assert not torch.allclose(out, model.eval()(ids, mask).last_hidden_state)  # random blocks != block 0


def test_short_inputs_run_full_attention_per_call():
    """transformers switches a block-sparse model to full attention for good on a short input; here each call
    decides: a short input computes what original_full does, a long one stays block-sparse."""
    config = _config()
    torch.manual_seed(6)
    sparse = BigBirdModel(config).eval()
    full = BigBirdModel(_config(attention_type="original_full")).eval()
    full.load_state_dict(sparse.state_dict())
    short, short_mask = _inputs(50)
    long, long_mask = _inputs(120)
    with torch.no_grad():
        _close(sparse(short, short_mask).last_hidden_state, full(short, short_mask).last_hidden_state)
        assert not torch.allclose(sparse(long, long_mask).last_hidden_state, full(long, long_mask).last_hidden_state)
    assert BlockSparseMask(long_mask[:, :120], 8).blocked.shape == (3, 15, 8)


def test_config_presets_registry_and_errors(tmp_path):
    config = _config()
    config.save_pretrained(tmp_path)
    values = BigBirdConfig.from_pretrained(tmp_path).to_dict()
    assert values == config.to_dict() and "position_embedding_type" not in values and values["model_type"] == "big_bird"
    assert transformers.BigBirdConfig(**values).block_size == 8
    ko = BigBirdConfig.from_preset("kobigbird-base")
    assert (ko.vocab_size, ko.max_position_embeddings, ko.hidden_size, ko.sep_token_id) == (32500, 4096, 768, 3)
    assert ko.extra["eos_token_id"] == 6
    for name in ("bigbird-tiny", "bigbird-mini"):
        preset = BigBirdConfig.from_preset(name)
        assert preset.max_position_embeddings == 4096 and preset.sparse_threshold < 512
    assert BigBirdConfig.from_preset("bigbird-base").to_dict()["vocab_size"] == 50358
    for field, value in (("attention_type", "sparse"), ("block_size", 0), ("num_random_blocks", -1),
                         ("use_bias", "yes"), ("pre_layer_norm", True)):
        with pytest.raises(ConfigError, match=field):
            _config(**{field: value})
    family = MODEL_FAMILIES["big_bird"]
    assert family.built_on == "bert" and family.can_fill_mask
    assert set(family.task_families) == {"classification", "tagging", "multiple_choice", "qa"}
    assert bertkit.BigBirdForQuestionAnswering is BigBirdForQuestionAnswering


def test_a_long_document_is_one_sequence_for_qa(tmp_path, minilm_dir):
    """SQuAD's task encoding takes a ~1,300-token document whole at max_seq_length 4096 (no doc-stride
    windows), and a bigbird-tiny QA model reads it block-sparse; at 384 tokens it takes several windows."""
    from bertkit import Tokenizer
    from bertkit.tasks import qa

    fixture = json.loads((FIXTURES / "squad_dev-v1.1.json").read_text(encoding="utf-8"))
    context, questions = "", []
    for article in fixture["data"]:
        for paragraph in article["paragraphs"]:
            offset = len(context) + (1 if context else 0)
            context = f"{context} {paragraph['context']}" if context else paragraph["context"]
            questions += [{**q, "answers": [{**a, "answer_start": a["answer_start"] + offset} for a in q["answers"]]}
                          for q in paragraph["qas"]]
    path = tmp_path / "long.json"
    path.write_text(json.dumps({"version": "1.1", "data": [
        {"title": "all", "paragraphs": [{"context": context, "qas": questions[:4]}]}]}), encoding="utf-8")
    examples = qa.read_examples(path, training=True)
    tokenizer = Tokenizer.from_pretrained(minilm_dir)
    whole = qa.encode(examples, tokenizer, 4096, training=True)
    assert len(whole) == len(examples) == 4 and 1200 < len(whole[0]["input_ids"]) <= 4096
    assert len(qa.encode(examples, tokenizer, 384, training=True)) > 3 * len(examples)
    config = BigBirdConfig.from_preset("bigbird-tiny", vocab_size=tokenizer.vocab_size, sep_token_id=tokenizer.sep_token_id)
    torch.manual_seed(7)
    model = BigBirdForQuestionAnswering(config).eval()
    batch = qa.collate(whole[:2], tokenizer.pad_token_id)
    assert model.bert.uses_sparse_attention(batch["input_ids"].shape[1])
    with torch.no_grad():
        out = model(batch["input_ids"], batch["attention_mask"], token_type_ids=batch["token_type_ids"],
                    start_positions=batch["start_positions"], end_positions=batch["end_positions"])
    assert out.start_logits.shape == batch["input_ids"].shape and torch.isfinite(out.loss)


def test_recipes_from_the_registry(minilm_dir):
    """Pre-training defaults per bigbird preset; fine-tuning gives the QA head the tokenizer's [SEP]."""
    from bertkit import Tokenizer

    family = MODEL_FAMILIES["big_bird"]
    assert family.pretraining_recipe("default").values("bigbird-tiny")["lr"] > family.pretraining_recipe(
        "default").values("bigbird-mini")["lr"]
    assert family.pretraining_recipe("budget").values(None)["preset"] == "bigbird-tiny"
    tokenizer = Tokenizer.from_pretrained(minilm_dir)
    _, config = family.finetuning_recipe().prepare(tokenizer, BigBirdConfig.from_preset("bigbird-tiny"), "here")
    assert config.sep_token_id == tokenizer.sep_token_id == 102
