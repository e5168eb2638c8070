"""Packed attention without padding (bertkit.model.varlen): the same outputs and gradients
as the padded path, run on the CPU through the route the GPU takes (and on a GPU when there
is one, within bf16 tolerance)."""

from __future__ import annotations

import pytest
import torch

from bertkit import BertConfig, BertModel
from bertkit.model.unpad import Unpadding
from bertkit.model.varlen import packed_attention, use_varlen, varlen_route


def tiny_model(dropout: float = 0.0) -> BertModel:
    torch.manual_seed(0)
    config = BertConfig(vocab_size=100, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=64, max_position_embeddings=64, hidden_dropout_prob=dropout,
                        attention_probs_dropout_prob=dropout)
    return BertModel(config)


def padded_batch(device="cpu"):
    lengths = torch.tensor([9, 4, 16, 1])
    mask = (torch.arange(16)[None, :] < lengths[:, None]).long()
    ids = torch.randint(5, 100, (4, 16), generator=torch.Generator().manual_seed(1)) * mask
    return ids.to(device), mask.to(device)


def test_offsets_count_each_rows_real_tokens():
    _, mask = padded_batch()
    assert Unpadding.from_attention_mask(mask).offsets.tolist() == [0, 9, 13, 29, 30]
    assert Unpadding.from_attention_mask(torch.ones(2, 3)).offsets.tolist() == [0, 3, 6]


def test_packed_attention_is_attention_within_each_sequence():
    torch.manual_seed(0)
    offsets = torch.tensor([0, 3, 8])
    q, k, v = (torch.randn(8, 4 * 2) for _ in range(3))
    out = packed_attention(q, k, v, offsets, num_heads=2)
    for start, end in ((0, 3), (3, 8)):
        heads = [x[start:end].view(end - start, 2, 4).transpose(0, 1) for x in (q, k, v)]
        expected = torch.nn.functional.scaled_dot_product_attention(*heads).transpose(0, 1).reshape(end - start, 8)
        torch.testing.assert_close(out[start:end], expected)


def test_the_route_is_the_gpus_and_can_be_turned_on_for_the_cpu():
    assert not use_varlen(torch.device("cpu"))
    with varlen_route(True):
        assert use_varlen(torch.device("cpu"))
    assert not use_varlen(torch.device("cpu"))


def test_outputs_and_gradients_equal_the_padded_path():
    model = tiny_model()
    ids, mask = padded_batch()
    real = mask.bool()
    padded = model(ids, attention_mask=mask, unpad=False).last_hidden_state
    padded[real].sum().backward()
    expected_grads = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
    model.zero_grad()
    with varlen_route(True):
        packed = model(ids, attention_mask=mask, unpad=True).last_hidden_state
    torch.testing.assert_close(packed[real], padded[real], rtol=1e-5, atol=1e-5)
    packed[real].sum().backward()
    for name, grad in expected_grads.items():
        torch.testing.assert_close(model.get_parameter(name).grad, grad, rtol=1e-4, atol=1e-5, msg=name)


def test_attention_dropout_goes_through_the_kernel():
    torch.manual_seed(0)
    offsets = torch.tensor([0, 3, 8])
    q, k, v = (torch.randn(8, 8, requires_grad=True) for _ in range(3))
    out = packed_attention(q, k, v, offsets, num_heads=2, dropout_p=0.5)
    assert out.shape == (8, 8) and torch.isfinite(out).all()
    assert not torch.allclose(out, packed_attention(q, k, v, offsets, num_heads=2))
    out.sum().backward()
    assert torch.isfinite(q.grad).all()


@pytest.mark.skipif(not torch.cuda.is_available(), reason="the flash / efficient kernels need a GPU")
def test_on_the_gpu_bf16_within_tolerance():  # pragma: no cover - GPU only
    model = tiny_model(dropout=0.1).cuda()
    ids, mask = padded_batch("cuda")
    real = mask.bool()
    model.eval()
    with torch.autocast("cuda", dtype=torch.bfloat16):
        padded = model(ids, attention_mask=mask, unpad=False).last_hidden_state
        packed = model(ids, attention_mask=mask, unpad=True).last_hidden_state  # the jagged route: CUDA's default
    torch.testing.assert_close(packed[real].float(), padded[real].float(), rtol=2e-2, atol=2e-2)
    model.train()
    with torch.autocast("cuda", dtype=torch.bfloat16):
        out = model(ids, attention_mask=mask, unpad=True).last_hidden_state
    out[real].float().sum().backward()
    assert all(torch.isfinite(p.grad).all() for p in model.parameters() if p.grad is not None)
