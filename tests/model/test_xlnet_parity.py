"""XLNet against transformers' classes: checkpoints both ways, every head, both streams.

Random tiny models (weights drawn wider than the 0.02 init and LayerNorms moved off (1, 0),
so a misplaced term shows), saved by one side and loaded by the other; outputs must agree
within 1e-5 on left-padded pair batches (XLNet's layout: `A <sep> B <sep> <cls>`, padding
first) with token_type_ids, with perm_mask / target_mapping (the query stream), with
memories over two segments, and for every attention variant transformers has (bi / uni,
same_length, bi_data, clamp_len).
"""

from __future__ import annotations

import json

import pytest
import torch
import transformers

import bertkit
from bertkit.model.families import family_of, load_config, model_inputs
from bertkit.model.xlnet.modeling import (
    XLNetForMultipleChoice,
    XLNetForQuestionAnsweringSimple,
    XLNetForSequenceClassification,
    XLNetForTokenClassification,
    XLNetLMHeadModel,
    XLNetModel,
)
from bertkit.model.xlnet.config import XLNetConfig

TOLERANCE = 1e-5
VOCAB, PAD = 60, 5
SIZES = dict(vocab_size=VOCAB, d_model=32, n_layer=2, n_head=4, d_inner=48, initializer_range=0.3, dropout=0.0,
             summary_last_dropout=0.0, mem_len=None)
CLASSES = (XLNetModel, XLNetLMHeadModel, XLNetForSequenceClassification, XLNetForTokenClassification,
           XLNetForQuestionAnsweringSimple, XLNetForMultipleChoice)
OUTPUTS = ("last_hidden_state", "logits", "start_logits", "end_logits", "loss")


def _perturb(model: torch.nn.Module, seed: int) -> torch.nn.Module:
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, param in model.named_parameters():
            if "layer_norm" in name:
                param.copy_((1.0 if name.endswith("weight") else 0.0) + 0.3 * torch.randn(param.shape, generator=gen))
            elif name.endswith("bias"):  # biases start at zero: move them too
                param.copy_(0.2 * torch.randn(param.shape, generator=gen))
    return model.eval()


def _batch(choices: int | None = None, batch: int = 3, length: int = 9):
    """Left-padded pairs (real lengths 9, 6, 3): segment 0, then 1, the final <cls> in segment 2."""
    gen = torch.Generator().manual_seed(7)
    shape = (batch, choices, length) if choices else (batch, length)
    ids = torch.randint(6, VOCAB, shape, generator=gen)
    mask = torch.ones_like(ids)
    if batch > 1:
        mask[1, ..., :3] = 0
    if batch > 2:
        mask[2, ..., :6] = 0
    ids[mask == 0] = PAD
    types = torch.zeros_like(ids)
    types[..., length // 2:] = 1
    types[..., -1] = 2
    types[mask == 0] = 3  # transformers' XLNet tokenizer: pad segment id 4 (any id: only equality counts)
    return ids, types, mask


def _permutation_inputs(batch: int, length: int, targets: int = 3, seed: int = 3):
    """A random factorization order per row: perm_mask[b, i, j] = 1 when j comes after i; the
    last `targets` tokens of the order are predicted (target_mapping one-hot rows; the last
    row of the final example is all zero, as padding rows of a pre-training batch)."""
    gen = torch.Generator().manual_seed(seed)
    perm_mask = torch.zeros(batch, length, length)
    target_mapping = torch.zeros(batch, targets, length)
    for b in range(batch):
        order = torch.randperm(length, generator=gen)
        rank = torch.empty(length, dtype=torch.long)
        rank[order] = torch.arange(length)
        perm_mask[b] = (rank[None, :] >= rank[:, None]).float()  # i cannot see j at or after itself
        for m, position in enumerate(order[-targets:].tolist()):
            target_mapping[b, m, position] = 1.0
    target_mapping[-1, -1] = 0.0
    return perm_mask, target_mapping


def _hf(cls):
    return getattr(transformers, cls.__name__)


def _compare(ours, theirs, where: str, mask: torch.Tensor | None = None) -> int:
    """Outputs both sides have within TOLERANCE; with a padding mask, per-token outputs and
    memories only at the real positions (bertkit's unpadded path leaves zeros at padding)."""
    rows = None if mask is None or bool(mask.all()) else mask.reshape(-1, mask.shape[-1]).bool()  # (B', T)
    compared = 0
    for key in OUTPUTS:
        a, b = getattr(ours, key, None), getattr(theirs, key, None)
        if a is None or b is None:
            continue
        if rows is not None:
            if key == "loss" and hasattr(ours, "start_logits"):
                continue  # bertkit's QA heads floor padding logits: the softmax differs there
            if a.dim() >= 2 and a.shape[:2] == rows.shape:
                a, b = a[rows], b[rows]
        torch.testing.assert_close(a, b, atol=TOLERANCE, rtol=TOLERANCE, msg=lambda m: f"{where} {key}: {m}")
        compared += 1
    if getattr(theirs, "mems", None) is not None:
        for a, b in zip(ours.mems, theirs.mems, strict=True):  # (mlen, B', D)
            if rows is not None and a.shape[:2] == rows.t().shape:
                a, b = a[rows.t()], b[rows.t()]
            torch.testing.assert_close(a, b, atol=TOLERANCE, rtol=TOLERANCE, msg=lambda m: f"{where} mems: {m}")
    return compared


def _labels_for(cls, batch_size: int, length: int, targets: int | None):
    gen = torch.Generator().manual_seed(11)
    if cls is XLNetLMHeadModel:
        labels = torch.randint(0, VOCAB, (batch_size, targets or length), generator=gen)
        labels[0, 0] = -100
        return {"labels": labels}
    if cls is XLNetForTokenClassification:
        labels = torch.randint(0, 2, (batch_size, length), generator=gen)
        labels[:, :2] = -100
        return {"labels": labels}
    if cls is XLNetForQuestionAnsweringSimple:
        return {"start_positions": torch.tensor([8, 4, 7]), "end_positions": torch.tensor([8, 6, 8])}
    if cls in (XLNetForSequenceClassification, XLNetForMultipleChoice):
        return {"labels": torch.tensor([1, 0, 1])}
    return {}


def _unlabel_padding(labels: dict, mask: torch.Tensor | None) -> dict:
    """Per-token labels are -100 at padding (what every collate gives)."""
    if mask is None or "labels" not in labels or labels["labels"].shape != mask.shape:
        return labels
    return {**labels, "labels": labels["labels"].masked_fill(mask == 0, -100)}


VARIANTS = {
    "default": {},
    "untie_r-false": {"untie_r": False},
    "uni": {"attn_type": "uni"},
    "uni-same_length": {"attn_type": "uni", "same_length": True},
    "clamp_len": {"clamp_len": 3},
    "bi_data": {"bi_data": True},
    "relu-no-summary-proj": {"ff_activation": "relu", "summary_use_proj": False, "summary_activation": "gelu"},
}


@pytest.mark.parametrize("variant", list(VARIANTS))
@pytest.mark.parametrize("cls", CLASSES, ids=[c.__name__ for c in CLASSES])
def test_transformers_checkpoint_loads_and_computes_the_same(tmp_path, cls, variant):
    torch.manual_seed(0)
    hf_config = transformers.XLNetConfig(**SIZES, **VARIANTS[variant])
    theirs = _perturb(_hf(cls)(hf_config), seed=1)
    theirs.save_pretrained(tmp_path)
    ours, info = cls.from_pretrained(tmp_path, output_loading_info=True)
    assert info == {"missing_keys": [], "unexpected_keys": []}
    assert family_of(tmp_path).model_type == "xlnet" and isinstance(load_config(tmp_path), XLNetConfig)
    choices = 2 if cls is XLNetForMultipleChoice else None
    batch = 4 if variant == "bi_data" else 3  # bi_data: forward and backward halves
    ids, types, mask = _batch(choices, batch=batch)
    cases = [dict(input_ids=ids), dict(input_ids=ids, attention_mask=mask, token_type_ids=types)]
    if hf_config.attn_type == "uni":  # transformers fails on a causal mask plus padding or perm_mask (in-place +=)
        cases = [dict(input_ids=ids), dict(input_ids=ids, token_type_ids=types)]
        if choices is None:  # the query stream under the causal mask alone
            cases.append(dict(input_ids=ids, token_type_ids=types,
                              target_mapping=_permutation_inputs(batch, ids.shape[-1])[1]))
    elif choices is None:
        perm_mask, target_mapping = _permutation_inputs(batch, ids.shape[-1])
        cases += [dict(input_ids=ids, perm_mask=perm_mask, token_type_ids=types, attention_mask=mask),
                  dict(input_ids=ids, perm_mask=perm_mask, target_mapping=target_mapping, token_type_ids=types,
                       attention_mask=mask)]
    for inputs in cases:
        targets = inputs["target_mapping"].shape[1] if "target_mapping" in inputs else None
        if cls in (XLNetForTokenClassification, XLNetForQuestionAnsweringSimple) and targets:
            continue  # per-position heads on the query stream's M rows: not a meaningful call
        extra = _labels_for(cls, batch, ids.shape[-1], targets) if batch == 3 or cls is XLNetLMHeadModel else {}
        extra = _unlabel_padding(extra, inputs.get("attention_mask"))
        with torch.no_grad():
            a, b = ours(**inputs, **extra), theirs(**inputs, **extra)
        where = f"{cls.__name__} {variant} {sorted(inputs)}"
        assert _compare(a, b, where, inputs.get("attention_mask")) >= 1


PRESETS = {"tiny": {}, "mini": {}, "base": {"n_layer": 1}}  # as tests/interop/test_transformers_matrix.py


@pytest.mark.parametrize("preset", list(PRESETS))
@pytest.mark.parametrize("cls", CLASSES, ids=[c.__name__ for c in CLASSES])
def test_bertkit_checkpoint_loads_in_transformers_and_computes_the_same(tmp_path, cls, preset):
    torch.manual_seed(0)
    config = XLNetConfig.from_preset(preset, **PRESETS[preset], vocab_size=VOCAB, dropout=0.0,
                                     summary_last_dropout=0.0, initializer_range=0.1 if preset == "tiny" else 0.02)
    ours = _perturb(cls(config), seed=2)
    ours.save_pretrained(tmp_path)
    saved = json.loads((tmp_path / "config.json").read_text())
    assert saved["architectures"] == [cls.__name__] and saved["model_type"] == "xlnet"
    theirs, info = _hf(cls).from_pretrained(tmp_path, output_loading_info=True)
    theirs.eval()
    assert not info["missing_keys"] and not info["unexpected_keys"], info
    choices = 2 if cls is XLNetForMultipleChoice else None
    ids, types, mask = _batch(choices)
    labels = _unlabel_padding(_labels_for(cls, 3, 9, None), mask)
    with torch.no_grad():
        a = ours(input_ids=ids, token_type_ids=types, attention_mask=mask, **labels)
        b = theirs(input_ids=ids, token_type_ids=types, attention_mask=mask, **labels)
    assert _compare(a, b, f"{cls.__name__} in transformers", mask) >= 1
    reloaded = cls.from_pretrained(tmp_path)
    assert load_config(tmp_path).to_dict() == {**config.to_dict(), "architectures": [cls.__name__]}
    for (key, value), (key_back, value_back) in zip(ours.state_dict().items(), reloaded.state_dict().items()):
        assert key == key_back and torch.equal(value, value_back), key


def test_memories_over_two_segments_match_transformers(tmp_path):
    torch.manual_seed(0)
    hf_config = transformers.XLNetConfig(**{**SIZES, "mem_len": 6}, reuse_len=None)
    theirs = _perturb(transformers.XLNetLMHeadModel(hf_config), seed=4)
    theirs.save_pretrained(tmp_path)
    ours = XLNetLMHeadModel.from_pretrained(tmp_path)
    ids, types, _ = _batch(length=8)
    first, second = ids[:, :5], ids[:, 5:]
    perm_mask, target_mapping = _permutation_inputs(3, 3, targets=2)
    with torch.no_grad():
        a1, b1 = ours(first, token_type_ids=types[:, :5], use_mems=True), theirs(first, token_type_ids=types[:, :5],
                                                                                 use_mems=True)
        _compare(a1, b1, "segment 1")
        assert len(a1.mems) == 2 and a1.mems[0].shape == (5, 3, 32)
        a2 = ours(second, mems=a1.mems, token_type_ids=types[:, 5:], perm_mask=perm_mask,
                  target_mapping=target_mapping, use_mems=True)
        b2 = theirs(second, mems=b1.mems, token_type_ids=types[:, 5:], perm_mask=perm_mask,
                    target_mapping=target_mapping, use_mems=True)
        _compare(a2, b2, "segment 2 with memory")
        assert a2.mems[0].shape == (6, 3, 32)  # mem_len keeps the last 6 positions
        a3, b3 = ours(second, mems=b1.mems, use_mems=False), theirs(second, mems=a1.mems, use_mems=False)
        _compare(a3, b3, "memories swapped between the implementations")
        assert a3.mems is None


def test_eval_mode_returns_memories_as_transformers_and_training_does_not():
    model = XLNetModel(XLNetConfig.from_preset("tiny", vocab_size=VOCAB, mem_len=None))
    ids = torch.randint(6, VOCAB, (2, 5))
    assert model.eval()(ids).mems[0].shape == (5, 2, 128)
    assert model.train()(ids).mems is None


def test_gradients_match_transformers_in_training_mode(tmp_path):
    """The training path (two streams, SDPA's backward) against transformers' gradients, dropout off."""
    torch.manual_seed(0)
    theirs = _perturb(transformers.XLNetLMHeadModel(transformers.XLNetConfig(**SIZES)), seed=5)
    theirs.save_pretrained(tmp_path)
    ours = XLNetLMHeadModel.from_pretrained(tmp_path)
    ids, types, mask = _batch()
    perm_mask, target_mapping = _permutation_inputs(3, 9)
    labels = _labels_for(XLNetLMHeadModel, 3, 9, 3)["labels"]
    inputs = dict(input_ids=ids, token_type_ids=types, attention_mask=mask, perm_mask=perm_mask,
                  target_mapping=target_mapping, labels=labels)
    ours.train()(**inputs).loss.backward()
    theirs.train()(**inputs).loss.backward()
    hf_params = dict(theirs.named_parameters())
    for name, param in ours.named_parameters():
        other = hf_params[name].grad
        torch.testing.assert_close(param.grad, other, atol=TOLERANCE, rtol=1e-4, msg=lambda m: f"{name}: {m}")


def test_family_registry_and_top_level_exports():
    assert bertkit.XLNetModel is XLNetModel and bertkit.XLNetLMHeadModel is XLNetLMHeadModel
    assert bertkit.XLNetForSequenceClassification is XLNetForSequenceClassification
    family = bertkit.model.families.get_model_family("xlnet")
    assert family.backbone_attribute == "transformer" and family.backbone_class() is XLNetModel
    assert family.task_class("qa") is XLNetForQuestionAnsweringSimple
    model = XLNetForSequenceClassification(XLNetConfig.from_preset("tiny", vocab_size=VOCAB))
    batch = {"input_ids": torch.ones(1, 4, dtype=torch.long), "attention_mask": torch.ones(1, 4), "labels": None,
             "perm_mask": None}
    assert sorted(model_inputs(model, batch)) == ["attention_mask", "input_ids"]


def test_presets_and_config_round_trip():
    base = XLNetConfig.from_preset("base")
    assert (base.d_model, base.n_layer, base.n_head, base.d_inner, base.d_head) == (768, 12, 12, 3072, 64)
    assert (base.hidden_size, base.num_hidden_layers, base.num_attention_heads) == (768, 12, 12)
    tiny = XLNetConfig.from_preset("tiny", vocab_size=100)
    assert XLNetConfig.from_dict(tiny.to_dict()) == tiny
    old = {"model_type": "xlnet", "n_token": 77, "d_model": 64, "n_head": 2, "untie_r": False}
    assert XLNetConfig.from_dict(old).vocab_size == 77


@pytest.mark.parametrize("values,field", [
    ({"d_model": 30, "n_head": 4}, "d_model"),
    ({"d_head": 7}, "d_head"),
    ({"attn_type": "both"}, "attn_type"),
    ({"summary_type": "attn"}, "summary_type"),
    ({"dropout": 1.5}, "dropout"),
    ({"mem_len": -1}, "mem_len"),
])
def test_bad_config_fields_are_named(values, field):
    with pytest.raises(bertkit.errors.ConfigError, match=f"'{field}'"):
        XLNetConfig.from_dict({"d_model": 32, "n_head": 4, "d_inner": 64, **values})


def test_attention_probabilities_and_hidden_states_match_transformers(tmp_path):
    torch.manual_seed(0)
    theirs = _perturb(transformers.XLNetModel(transformers.XLNetConfig(**SIZES)), seed=6)
    theirs.save_pretrained(tmp_path)
    ours = XLNetModel.from_pretrained(tmp_path)
    ids, types, mask = _batch()
    perm_mask, target_mapping = _permutation_inputs(3, 9)
    options = dict(output_attentions=True, output_hidden_states=True)
    with torch.no_grad():
        a = ours(ids, attention_mask=mask, token_type_ids=types, perm_mask=perm_mask, **options)
        b = theirs(ids, attention_mask=mask, token_type_ids=types, perm_mask=perm_mask, **options)
        two = ours(ids, attention_mask=mask, perm_mask=perm_mask, target_mapping=target_mapping, **options)
    for ours_probs, theirs_probs in zip(a.attentions, b.attentions, strict=True):
        torch.testing.assert_close(ours_probs, theirs_probs, atol=TOLERANCE, rtol=TOLERANCE)
    for ours_state, theirs_state in zip(a.hidden_states, b.hidden_states, strict=True):
        torch.testing.assert_close(ours_state, theirs_state, atol=TOLERANCE, rtol=TOLERANCE)
    assert len(two.hidden_states) == 2 * 3 and two.hidden_states[1].shape == (3, 3, 32)  # (h, g) per layer input
    content, query = two.attentions[0]
    assert content.shape == (3, 4, 9, 9) and query.shape == (3, 4, 3, 9)
    positions = target_mapping.argmax(-1)
    for b_index in range(2):  # a target never sees itself in the query stream
        for m, position in enumerate(positions[b_index].tolist()):
            assert query[b_index, :, m, position].abs().max() == 0


def test_training_mode_dropout_is_reproducible_from_the_seed():
    model = XLNetLMHeadModel(XLNetConfig.from_preset("tiny", vocab_size=VOCAB, dropout=0.3)).train()
    ids, types, mask = _batch()
    perm_mask, target_mapping = _permutation_inputs(3, 9)
    losses = []
    for _ in range(2):
        torch.manual_seed(5)
        losses.append(model(ids, attention_mask=mask, token_type_ids=types, perm_mask=perm_mask,
                            target_mapping=target_mapping, labels=torch.ones(3, 3, dtype=torch.long)).loss)
    assert torch.isfinite(losses[0]) and torch.equal(losses[0], losses[1])
    with torch.no_grad():
        model.eval()
        evaluated = model(ids, attention_mask=mask, token_type_ids=types, perm_mask=perm_mask,
                          target_mapping=target_mapping, labels=torch.ones(3, 3, dtype=torch.long)).loss
    assert not torch.equal(evaluated, losses[0])


def _right_padded(ids, types, mask):
    """The same rows with their padding moved to the end (bertkit's collate pads on the right)."""
    order = torch.argsort(1 - mask, dim=-1, stable=True)  # real tokens first, in order
    return ids.gather(-1, order), types.gather(-1, order), mask.gather(-1, order)


@pytest.mark.parametrize("cls", [XLNetForSequenceClassification, XLNetForMultipleChoice, XLNetForTokenClassification,
                                 XLNetForQuestionAnsweringSimple], ids=lambda c: c.__name__)
def test_right_padding_gives_transformers_left_padded_result(tmp_path, cls):
    """The heads read XLNet's <cls> at the last real token, so bertkit's right-padded batches
    score as transformers' left-padded ones (the relative encodings ignore where padding is)."""
    torch.manual_seed(0)
    theirs = _perturb(_hf(cls)(transformers.XLNetConfig(**SIZES)), seed=8)
    theirs.save_pretrained(tmp_path)
    ours = cls.from_pretrained(tmp_path)
    ids, types, mask = _batch(2 if cls is XLNetForMultipleChoice else None)
    right = _right_padded(ids, types, mask)
    with torch.no_grad():
        expected = theirs(input_ids=ids, token_type_ids=types, attention_mask=mask)
        got = ours(input_ids=right[0], token_type_ids=right[1], attention_mask=right[2])
    for key in ("logits", "start_logits", "end_logits"):
        if getattr(got, key, None) is None:
            continue
        a, b = getattr(got, key), getattr(expected, key)
        if a.shape[: mask.dim()] == mask.shape:  # per token: compare the real positions, in order
            a, b = a[right[2].bool()], b[mask.bool()]
        torch.testing.assert_close(a, b, atol=TOLERANCE, rtol=TOLERANCE, msg=lambda m: f"{cls.__name__} {key}: {m}")


def test_unpadded_path_equals_the_padded_one_with_zeros_at_padding():
    from bertkit.model.bert.modeling import set_unpad

    torch.manual_seed(0)
    config = XLNetConfig.from_preset("tiny", vocab_size=VOCAB, mem_len=None, dropout=0.0)
    model = _perturb(XLNetForTokenClassification(config), 9)
    ids, types, mask = _batch()
    labels = _unlabel_padding({"labels": torch.randint(0, 2, ids.shape)}, mask)["labels"]
    outputs = {}
    for unpad in (True, False):
        set_unpad(model, unpad)
        model.zero_grad()
        model.train()
        loss = model(ids, attention_mask=mask, token_type_ids=types, labels=labels).loss
        loss.backward()
        grads = {name: p.grad.clone() for name, p in model.named_parameters() if p.grad is not None}
        with torch.no_grad():
            out = model.eval()(ids, attention_mask=mask, token_type_ids=types, output_hidden_states=True)
        outputs[unpad] = (loss, grads, out)
    (loss_u, grads_u, out_u), (loss_p, grads_p, out_p) = outputs[True], outputs[False]
    real = mask.bool()
    torch.testing.assert_close(out_u.logits[real], out_p.logits[real], atol=TOLERANCE, rtol=TOLERANCE)
    assert out_u.hidden_states[-1][~real].abs().max() == 0  # zeros at padding on the unpadded path
    torch.testing.assert_close(out_u.mems[0][real.t()], out_p.mems[0][real.t()], atol=0, rtol=0)  # the embeddings
    torch.testing.assert_close(loss_u, loss_p, atol=TOLERANCE, rtol=TOLERANCE)
    assert grads_u.keys() == grads_p.keys() and len(grads_u) > 10
    for name, grad in grads_u.items():
        torch.testing.assert_close(grad, grads_p[name], atol=TOLERANCE, rtol=1e-4, msg=lambda m: f"{name}: {m}")


@pytest.mark.parametrize("unpad", [True, False])
def test_sequence_heads_run_the_last_layer_at_cls_only(unpad):
    """The sequence heads pass `read_positions` (<cls>, the last real token): same logits as the
    full last layer (forced by output_hidden_states), states elsewhere zero."""
    from bertkit.model.bert.modeling import set_unpad

    torch.manual_seed(0)
    model = set_unpad(_perturb(XLNetForSequenceClassification(XLNetConfig.from_preset("tiny", vocab_size=VOCAB)), 3),
                      unpad)
    ids, types, mask = _batch()
    with torch.no_grad():
        sparse = model(ids, attention_mask=mask, token_type_ids=types)
        full = model(ids, attention_mask=mask, token_type_ids=types, output_hidden_states=True)
        states = model.transformer(ids, attention_mask=mask, token_type_ids=types,
                                   read_positions=torch.tensor([8, 8, 8])).last_hidden_state
    torch.testing.assert_close(sparse.logits, full.logits, atol=TOLERANCE, rtol=TOLERANCE)
    assert states[:, :8].abs().max() == 0
    torch.testing.assert_close(states[:, 8], full.hidden_states[-1][:, 8], atol=TOLERANCE, rtol=TOLERANCE)


@pytest.mark.parametrize("cls", CLASSES[2:], ids=[c.__name__ for c in CLASSES[2:]])
def test_task_heads_train_every_trainable_parameter(cls):
    """Every parameter that requires a gradient gets one from the task loss (DDP's rule);
    the query stream's mask_emb is frozen under a task head and still saved."""
    model = cls(XLNetConfig.from_preset("tiny", vocab_size=VOCAB)).train()
    choices = 2 if cls is XLNetForMultipleChoice else None
    ids, types, mask = _batch(choices)
    labels = _unlabel_padding(_labels_for(cls, 3, 9, None), mask)
    model(input_ids=ids, token_type_ids=types, attention_mask=mask, **labels).loss.backward()
    untouched = [name for name, p in model.named_parameters() if p.requires_grad and p.grad is None]
    assert untouched == [] and not model.transformer.mask_emb.requires_grad
    assert "transformer.mask_emb" in model.state_dict()
