"""What one cached T5 decoding step does beyond its matmuls (bench/bench_generate.py's
profile): no weight copies (the fused projections are for training only) and no causal
mask for a single new position; the fused and separate projections agree."""

from __future__ import annotations

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from bertkit.model.t5 import T5Config, T5ForConditionalGeneration
from bertkit.model.seq2seq import project


class _Ops(TorchDispatchMode):
    """Records the aten operators called (and cat's input shapes)."""

    def __init__(self):
        super().__init__()
        self.names: list[str] = []
        self.cat_inputs: list[list[tuple[int, ...]]] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.names.append(func.__name__)
        if func is torch.ops.aten.cat.default:
            self.cat_inputs.append([tuple(t.shape) for t in args[0]])
        return func(*args, **(kwargs or {}))


def _model(feed_forward_proj: str) -> T5ForConditionalGeneration:
    torch.manual_seed(0)
    config = T5Config(vocab_size=40, d_model=16, d_kv=4, d_ff=24, num_layers=2, num_decoder_layers=2, num_heads=4,
                      feed_forward_proj=feed_forward_proj, dropout_rate=0.0, decoder_start_token_id=0)
    return T5ForConditionalGeneration(config).eval()


def test_a_cached_decoding_step_copies_no_weights_and_builds_no_causal_mask():
    for proj in ("relu", "gated-gelu"):
        model = _model(proj)
        ids = torch.randint(2, 40, (3, 7))
        with torch.inference_mode():
            encoder_outputs = model.get_encoder()(input_ids=ids)
            first = model(encoder_outputs=encoder_outputs, decoder_input_ids=torch.zeros(3, 1, dtype=torch.long),
                          use_cache=True)
            with _Ops() as ops:
                model(encoder_outputs=encoder_outputs, decoder_input_ids=torch.ones(3, 1, dtype=torch.long),
                      past_key_values=first.past_key_values, use_cache=True)
        cache_shape = (3, 4, 1, 4)  # (B, heads, past length, d_kv): the self-attention keys and values grow
        assert ops.cat_inputs == [[cache_shape, (3, 4, 1, 4)]] * 4, (proj, ops.cat_inputs)
        assert "le.Tensor" not in ops.names and "masked_fill.Scalar" not in ops.names, (proj, ops.names)


def test_fused_and_separate_projections_agree():
    model = _model("gated-gelu")
    attention = model.decoder.block[0].layer[0].SelfAttention
    hidden = torch.randn(2, 5, 16)
    fused = project(hidden, attention.q, attention.k, attention.v)  # grad enabled: one matmul
    assert fused[0].grad_fn is not None
    with torch.no_grad():
        separate = project(hidden, attention.q, attention.k, attention.v)
    for a, b in zip(fused, separate):
        torch.testing.assert_close(a.detach(), b, atol=1e-6, rtol=1e-6)


def test_padding_is_checked_on_the_cpu_and_assumed_elsewhere():
    from bertkit.model.masks import may_pad

    assert not may_pad(torch.ones(2, 3, dtype=torch.long))
    assert may_pad(torch.tensor([[1, 1, 0]]))
    # off the CPU the check would wait for the device: no data is read (a meta tensor has none)
    assert may_pad(torch.ones(2, 3, dtype=torch.long, device="meta"))




def test_generate_runs_its_steps_on_packed_weights_made_for_the_call():
    """Inside `packed_weights()` (generate's steps) the head and the layers multiply by
    oneDNN's packed copies of their weights: F.linear's values up to rounding, one copy per
    weight, dropped at the end; outside it, and while autograd records, F.linear itself;
    an int8 layer keeps its own kernel. A model trained between two generate calls (fused
    AdamW does not bump the version counter) generates from its new weights."""
    import torch.nn.functional as F

    from bertkit.inference.quantization import quantize_linear_layers
    from bertkit.model import packed_linear
    from bertkit.model.packed_linear import linear, packed_matmul, packed_weights

    calls = []
    real = torch.ops.mkldnn._linear_pointwise
    x, weight = torch.randn(5, 16), torch.randn(40, 16)
    with torch.no_grad():
        assert torch.equal(packed_matmul(x, weight), F.linear(x, weight))  # outside: F.linear itself
        with packed_weights():
            assert torch.equal(packed_matmul(x, weight), F.linear(x, weight))  # first use: plain, nothing packed
            assert packed_linear._STATE.cache[id(weight)][1] is None
            second = packed_matmul(x, weight)  # second use: packed
            packed = packed_linear._STATE.cache[id(weight)][1]
            assert packed is not None
            packed_matmul(x, weight)
            assert len(packed_linear._STATE.cache) == 1 and packed_linear._STATE.cache[id(weight)][1] is packed
            torch.testing.assert_close(second, F.linear(x, weight), rtol=1e-6, atol=1e-6)
            layer = torch.nn.Linear(16, 8)
            for _ in range(2):  # plain, then packed
                torch.testing.assert_close(linear(x, layer), layer(x), rtol=1e-6, atol=1e-6)  # with its bias
            quantized = quantize_linear_layers(torch.nn.Sequential(torch.nn.Linear(16, 8)))[0]
            torch.testing.assert_close(linear(x, quantized), quantized(x))
        assert packed_linear._STATE.cache is None
    with packed_weights():
        trained = torch.nn.Linear(16, 8)
        out = linear(x, trained)  # autograd records: F.linear, gradients flow
        out.sum().backward()
        assert trained.weight.grad is not None and not packed_linear._STATE.cache

    model = _model("gated-gelu")
    ids = torch.randint(2, 40, (2, 5))
    try:
        torch.ops.mkldnn._linear_pointwise = lambda *a: calls.append(1) or real(*a)
        model.generate(input_ids=ids, max_new_tokens=3)
    finally:
        torch.ops.mkldnn._linear_pointwise = real
    assert calls  # the fast path ran on this build
    optimizer = torch.optim.AdamW(model.parameters(), lr=0.5, fused=True)
    before = model.generate(input_ids=ids, max_new_tokens=6, min_new_tokens=6)
    for _ in range(3):
        model(input_ids=ids, labels=torch.randint(2, 40, (2, 4))).loss.backward()
        optimizer.step()
        optimizer.zero_grad()
    with torch.no_grad():
        scores = model(input_ids=ids, decoder_input_ids=before[:, :1]).logits[:, -1]
    after = model.generate(input_ids=ids, max_new_tokens=1, min_new_tokens=1)
    assert torch.equal(after[:, 1], scores.argmax(-1))  # the new weights', not stale copies
