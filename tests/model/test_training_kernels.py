"""The training-speed pieces of the model: the fused MLM decoder loss, the fast dropout
and the explicit attention path, each against the plain PyTorch / transformers result."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
import transformers

from bertkit import BertConfig, BertForPreTraining
from bertkit.model.dropout import Dropout, dropout, dropout_mask
from bertkit.model.heads import decoder_cross_entropy
from bertkit.model.memory import empty_large


def _head_inputs(n=37, hidden=24, vocab=301, seed=0):
    gen = torch.Generator().manual_seed(seed)
    h = torch.randn(n, hidden, generator=gen, requires_grad=True)
    w = (torch.randn(vocab, hidden, generator=gen) * 0.3).requires_grad_()
    b = (torch.randn(vocab, generator=gen) * 0.1).requires_grad_()
    t = torch.randint(0, vocab, (n,), generator=gen)
    return h, w, b, t


def _grads(loss_fn):
    h, w, b, t = _head_inputs()
    loss = loss_fn(h, w, b, t)
    loss.backward()
    return loss.detach(), h.grad, w.grad, b.grad


@pytest.mark.parametrize("use_logits", [False, True])
def test_decoder_cross_entropy_matches_linear_plus_cross_entropy(use_logits):
    """Loss, logits and all three gradients, with an incoming gradient != 1 and, when
    `use_logits`, a second loss on the logits (their gradient must be added)."""

    def plain(h, w, b, t):
        logits = F.linear(h, w, b)
        loss = 2.5 * F.cross_entropy(logits, t)
        return loss + (logits**2).mean() if use_logits else loss

    def fused(h, w, b, t):
        loss, logits = decoder_cross_entropy(h, w, b, t)
        assert torch.allclose(logits, F.linear(h, w, b), atol=1e-6)
        loss = 2.5 * loss
        return loss + (logits**2).mean() if use_logits else loss

    for mine, theirs in zip(_grads(fused), _grads(plain)):
        torch.testing.assert_close(mine, theirs, atol=1e-6, rtol=1e-5)


@pytest.mark.parametrize("bias", ["none", "frozen"])
def test_decoder_cross_entropy_without_a_trained_bias(bias):
    """GPT's and T5's heads (no bias: None) and BART's (a buffer: no gradient), with the
    logits used too: the same loss, logits and gradients as F.linear + F.cross_entropy."""
    h, w, b, t = _head_inputs(n=70, hidden=64, vocab=53, seed=2)
    b = None if bias == "none" else b.detach()
    loss, logits = decoder_cross_entropy(h, w, b, t)
    (2.0 * loss + logits.mean()).backward()
    h2, w2 = (x.detach().clone().requires_grad_() for x in (h, w))
    logits2 = F.linear(h2, w2, b)
    (2.0 * F.cross_entropy(logits2, t) + logits2.mean()).backward()
    torch.testing.assert_close(logits, logits2.detach(), atol=1e-6, rtol=1e-5)
    for mine, theirs in ((h.grad, h2.grad), (w.grad, w2.grad)):
        torch.testing.assert_close(mine, theirs, atol=1e-6, rtol=1e-5)


def test_decoder_cross_entropy_chunks_cover_all_rows():
    """More rows than one chunk (chunks of max(32, H/2) rows) and a row count that does not divide."""
    h, w, b, t = _head_inputs(n=203, hidden=128, vocab=97, seed=1)
    loss, logits = decoder_cross_entropy(h, w, b, t)
    loss.backward()
    h2, w2, b2 = (x.detach().clone().requires_grad_() for x in (h, w, b))
    ref = F.cross_entropy(F.linear(h2, w2, b2), t)
    ref.backward()
    torch.testing.assert_close(loss, ref)
    for mine, theirs in ((h.grad, h2.grad), (w.grad, w2.grad), (b.grad, b2.grad)):
        torch.testing.assert_close(mine, theirs, atol=1e-6, rtol=1e-5)


def test_decoder_cross_entropy_without_grad_and_twice():
    h, w, b, t = _head_inputs()
    with torch.no_grad():
        loss, logits = decoder_cross_entropy(h, w, b, t)
    assert not loss.requires_grad
    torch.testing.assert_close(loss, F.cross_entropy(F.linear(h, w, b), t).detach())
    loss, _ = decoder_cross_entropy(h, w, b, t)
    loss.backward(retain_graph=True)
    with pytest.raises(RuntimeError, match="one backward per forward"):
        loss.backward()


def test_empty_large_is_a_plain_tensor():
    like = torch.zeros(1)
    out = empty_large((3000, 1000), like)  # 12 MB: advised to use huge pages
    out.fill_(2.0)
    assert out.shape == (3000, 1000) and out.dtype == like.dtype and float(out.sum()) == 6e6


def test_dropout_rate_scale_gradient_and_seed():
    x = torch.ones(1000, 1000, requires_grad=True)
    torch.manual_seed(3)
    y = dropout(x, 0.1, training=True)
    kept = y != 0
    # keep rate 0.9 within 5 standard deviations (sd = sqrt(0.09 / 1e6) = 3e-4)
    assert abs(float(kept.float().mean()) - 0.9) < 1.5e-3
    assert torch.allclose(y[kept], torch.full_like(y[kept], 1 / 0.9))
    y.sum().backward()
    assert torch.equal(x.grad, kept.float() / 0.9)
    torch.manual_seed(3)
    assert torch.equal(dropout(x, 0.1, training=True) != 0, kept)  # torch.manual_seed reproduces the mask
    # neighbouring elements are independent: P(both kept) = 0.81
    pairs = (kept[:, :-1] & kept[:, 1:]).float().mean()
    assert abs(float(pairs) - 0.81) < 2e-3


def test_dropout_mask_odd_sizes_and_rates():
    for p in (0.02, 0.5):
        mask = dropout_mask((7, 100_001), p)
        assert mask.shape == (7, 100_001) and mask.dtype == torch.float32
        assert mask.unique().tolist() == [0.0, pytest.approx(1 / (1 - p))]
        kept = (mask != 0).float().mean()
        assert abs(float(kept) - (1 - p)) < 5 * ((p * (1 - p) / mask.numel()) ** 0.5)


def test_dropout_module_is_identity_in_eval_and_at_zero():
    x = torch.randn(4, 5)
    module = Dropout(0.3).eval()
    assert module(x) is x
    assert dropout(x, 0.0, training=True) is x
    assert torch.equal(dropout(x, 1.0, training=True), torch.zeros_like(x))  # F.dropout's edge case


def _hf_pair(cfg: BertConfig):
    torch.manual_seed(0)
    ref = transformers.BertForPreTraining(
        transformers.BertConfig(**{k: v for k, v in cfg.to_dict().items() if k != "pre_layer_norm"},
                                attn_implementation="eager"))
    ours = BertForPreTraining(cfg)
    ours.load_state_dict({k: v for k, v in ref.state_dict().items() if not k.startswith("cls.predictions.decoder")})
    return ours.train(), ref.train()


@pytest.mark.parametrize("explicit_attention", [False, True])
def test_training_step_gradients_match_transformers(tiny_config, explicit_attention):
    """Loss and every parameter's gradient equal HF's (dropout off), through the fused
    MLM loss, with padding; `output_attentions` takes the explicit attention path that
    training with attention dropout uses."""
    cfg = BertConfig.from_dict({**tiny_config.to_dict(), "hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0})
    ours, ref = _hf_pair(cfg)
    gen = torch.Generator().manual_seed(2)
    ids = torch.randint(5, 120, (3, 20), generator=gen)
    mask = torch.ones_like(ids)
    mask[1, 14:] = 0
    types = torch.zeros_like(ids)
    types[:, 10:] = 1
    labels = torch.where(torch.rand(ids.shape, generator=gen) < 0.3, ids, torch.full_like(ids, -100))
    labels[1, 14:] = -100
    nsp = torch.tensor([0, 1, 0])
    a = ours(input_ids=ids, token_type_ids=types, attention_mask=mask, labels=labels, next_sentence_label=nsp, output_attentions=explicit_attention)
    b = ref(input_ids=ids, token_type_ids=types, attention_mask=mask, labels=labels, next_sentence_label=nsp)
    torch.testing.assert_close(a.loss, b.loss, atol=1e-5, rtol=1e-5)
    a.loss.backward()
    b.loss.backward()
    theirs = dict(ref.named_parameters())
    for name, param in ours.named_parameters():
        torch.testing.assert_close(param.grad, theirs[name].grad, atol=1e-5, rtol=1e-4, msg=name)
