"""What one cached T5 decoding step does beyond its matmuls (bench/bench_generate.py's
profile): no weight copies (the fused projections are for training only) and no causal
mask for a single new position; the fused and separate projections agree."""

from __future__ import annotations

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from bertkit.model.t5 import T5Config, T5ForConditionalGeneration
from bertkit.model.t5_layers import project


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
    from bertkit.model.t5_layers import may_pad

    assert not may_pad(torch.ones(2, 3, dtype=torch.long))
    assert may_pad(torch.tensor([[1, 1, 0]]))
    # off the CPU the check would wait for the device: no data is read (a meta tensor has none)
    assert may_pad(torch.ones(2, 3, dtype=torch.long, device="meta"))


def test_the_inference_head_reads_a_transposed_copy_that_follows_the_weight():
    """Without autograd the vocabulary head multiplies by a cached (d, V) copy: the logits
    are F.linear's, the copy is made once, and an in-place update (an optimizer step) or a
    new weight makes it anew; with autograd the head is F.linear with a gradient."""
    import torch.nn.functional as F

    from bertkit.model.heads import inference_vocabulary_logits

    for proj in ("relu", "gated-gelu"):  # v1.0 tied (rescaled), v1.1 its own lm_head
        model = _model(proj)
        hidden = torch.randn(3, 2, 16)
        weight = model.output_embeddings()
        scale = 16**-0.5 if model.config.scale_decoder_outputs else 1.0
        with torch.no_grad():
            first = model.vocabulary_logits(hidden)
            copy = model.__dict__["_vocabulary_columns"][1]
            assert copy.shape == (16, 40) and copy.is_contiguous()
            torch.testing.assert_close(first, F.linear(hidden * scale, weight), rtol=0, atol=1e-6)
            model.vocabulary_logits(hidden)
            assert model.__dict__["_vocabulary_columns"][1] is copy  # reused
            weight.mul_(2.0)  # in place, as an optimizer step
            torch.testing.assert_close(model.vocabulary_logits(hidden), 2 * first, rtol=1e-6, atol=1e-6)
            assert model.__dict__["_vocabulary_columns"][1] is not copy
        hidden.requires_grad_(True)
        logits = model.vocabulary_logits(hidden)
        logits.sum().backward()
        assert weight.grad is not None and hidden.grad is not None
    other = torch.randn(40, 16)
    owner = torch.nn.Module()
    x = torch.randn(5, 16)
    torch.testing.assert_close(inference_vocabulary_logits(x, other, owner), F.linear(x, other), rtol=0, atol=1e-6)
    replaced = torch.randn(40, 16)  # a new tensor (e.g. a loaded checkpoint): a new copy
    torch.testing.assert_close(inference_vocabulary_logits(x, replaced, owner), F.linear(x, replaced), rtol=0,
                               atol=1e-6)
