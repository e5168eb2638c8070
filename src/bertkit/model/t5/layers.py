"""T5's building blocks: RMS LayerNorm, attention with relative position buckets, the
feed-forward sub-layers, one block and the stack of blocks (encoder or decoder).

Hugging Face attribute names throughout (`block.N.layer.0.SelfAttention.{q,k,v,o}`,
`layer.0.layer_norm`, `layer.1.EncDecAttention`, `layer.-1.DenseReluDense.{wi,wo}` or
`{wi_0,wi_1,wo}`, `final_layer_norm`), so checkpoints move both ways as a load.

T5's attention does not scale the scores by d_kv^-0.5 (the init folds it into `q`) and
adds a learned bias per (head, relative-position bucket). Only the first block of each
stack owns `relative_attention_bias`; the stack computes the bias once, adds the padding
(and, in the decoder, causal) mask to it, and every block uses that one additive mask
in `F.scaled_dot_product_attention`. While autograd records (training), the projections
are fused where the result is the same: q, k and v in one matmul for self-attention, k
and v for cross-attention, wi_0 and wi_1 for the gated feed-forward (one matmul and one
weight gradient instead of three). Without gradients (inference, every generation step)
they run as separate matmuls: fusing would copy the weights on every call, which costs
as much as the decoding step's matmuls read.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from bertkit.model.dropout import Dropout, dropout
from bertkit.model.layers import ACTIVATIONS
from bertkit.model.masks import additive_mask, may_pad, self_attention_keep
from bertkit.model.packed_linear import linear
from bertkit.model.seq2seq import LayerCache, project

class T5LayerNorm(nn.Module):
    """RMS norm: weight * x / sqrt(mean(x^2) + eps); no bias, no mean subtraction, the
    mean square taken in float32 (half-precision inputs included). (..., d) -> (..., d)."""

    def __init__(self, hidden_size: int, eps: float = 1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden_size))
        self.variance_epsilon = eps

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        # one fused kernel, output float32 as T5's; not under an ONNX trace (opset 17 has no RMS norm op)
        if self.weight.dtype == torch.float32 and not torch.jit.is_tracing():
            return F.rms_norm(hidden_states.float(), (hidden_states.shape[-1],), self.weight, self.variance_epsilon)
        variance = hidden_states.float().pow(2).mean(-1, keepdim=True)
        hidden_states = (hidden_states * torch.rsqrt(variance + self.variance_epsilon)).to(self.weight.dtype)
        return self.weight * hidden_states


def relative_position_bucket(relative_position: torch.Tensor, bidirectional: bool, num_buckets: int,
                             max_distance: int) -> torch.Tensor:
    """Mesh TensorFlow's buckets of (key position - query position), any shape of int64.

    Bidirectional: half the buckets for keys after the query, half for keys before it;
    causal: only distances to earlier keys (later keys share bucket 0). Of each half,
    the first half are exact distances 0..max_exact-1, the rest logarithmically wider
    bins up to `max_distance`; farther keys share the last bucket."""
    buckets = torch.zeros_like(relative_position)
    if bidirectional:
        num_buckets //= 2
        buckets = buckets + (relative_position > 0).long() * num_buckets
        distance = relative_position.abs()
    else:
        distance = (-relative_position).clamp(min=0)
    max_exact = num_buckets // 2
    is_small = distance < max_exact
    large = max_exact + (
        torch.log(distance.float() / max_exact) / math.log(max_distance / max_exact) * (num_buckets - max_exact)
    ).long()
    large = large.clamp(max=num_buckets - 1)
    return buckets + torch.where(is_small, distance, large)


class T5Attention(nn.Module):
    """Multi-head attention without score scaling (self- or cross-attention): q, k, v, o
    are bias-free (d_model -> heads * d_kv); the first self-attention of a stack also owns
    `relative_attention_bias` (buckets -> one bias per head)."""

    def __init__(self, config, has_relative_attention_bias: bool = False, is_decoder: bool = False):
        super().__init__()
        self.n_heads = config.num_heads
        self.key_value_proj_dim = config.d_kv
        self.inner_dim = config.num_heads * config.d_kv
        self.dropout = config.dropout_rate
        self.is_decoder = is_decoder
        self.relative_attention_num_buckets = config.relative_attention_num_buckets
        self.relative_attention_max_distance = config.relative_attention_max_distance
        self.q = nn.Linear(config.d_model, self.inner_dim, bias=False)
        self.k = nn.Linear(config.d_model, self.inner_dim, bias=False)
        self.v = nn.Linear(config.d_model, self.inner_dim, bias=False)
        self.o = nn.Linear(self.inner_dim, config.d_model, bias=False)
        self.has_relative_attention_bias = has_relative_attention_bias
        if has_relative_attention_bias:
            self.relative_attention_bias = nn.Embedding(config.relative_attention_num_buckets, config.num_heads)

    def compute_bias(self, query_length: int, key_length: int, query_offset: int = 0) -> torch.Tensor:
        """(1, heads, Tq, Tk) bias for queries at positions offset..offset+Tq-1 (a decoder
        step with a cache) over keys 0..Tk-1; bidirectional buckets in the encoder."""
        device = self.relative_attention_bias.weight.device
        queries = torch.arange(query_offset, query_offset + query_length, device=device)[:, None]
        keys = torch.arange(key_length, device=device)[None, :]
        buckets = relative_position_bucket(keys - queries, not self.is_decoder, self.relative_attention_num_buckets,
                                           self.relative_attention_max_distance)  # (Tq, Tk)
        return self.relative_attention_bias(buckets).permute(2, 0, 1).unsqueeze(0)  # (1, heads, Tq, Tk)

    def _heads(self, x: torch.Tensor) -> torch.Tensor:
        """(B, T, heads * d_kv) -> (B, heads, T, d_kv)."""
        return x.view(x.shape[0], x.shape[1], self.n_heads, self.key_value_proj_dim).transpose(1, 2)

    def forward(
        self, hidden_states: torch.Tensor, mask: torch.Tensor | None,
        key_value_states: torch.Tensor | None = None,
        past: tuple[torch.Tensor, torch.Tensor] | None = None,
    ) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
        """hidden_states (B, Tq, d_model); mask: additive float (B or 1, heads or 1, Tq, Tk)
        holding the position bias and the -inf-like padding/causal entries, or None.
        Self-attention: `past` = (key, value) (B, heads, Tp, d_kv) of earlier positions,
        extended by this call's. Cross-attention (`key_value_states` (B, S, d_model)):
        `past` = the encoder's (key, value), reused as they are.
        Returns (B, Tq, d_model) and the (key, value) to cache."""
        if key_value_states is None:  # self-attention
            query, key, value = project(hidden_states, self.q, self.k, self.v)
            query, key, value = self._heads(query), self._heads(key), self._heads(value)  # (B, heads, T, d_kv)
            if past is not None:
                key, value = torch.cat([past[0], key], dim=2), torch.cat([past[1], value], dim=2)
        else:
            query = self._heads(linear(hidden_states, self.q))
            if past is not None:
                key, value = past
            else:
                key, value = project(key_value_states, self.k, self.v)
                key, value = self._heads(key), self._heads(value)  # (B, heads, S, d_kv)
        if self.training and self.dropout > 0.0 and query.device.type == "cpu":
            # SDPA would fall back to its math path and draw the mask with bernoulli_: the same
            # steps here, with bertkit's fast dropout mask
            scores = query @ key.transpose(-1, -2)  # (B, heads, Tq, Tk), unscaled
            probs = torch.softmax(scores if mask is None else scores + mask, dim=-1)
            context = dropout(probs, self.dropout, True) @ value
        else:
            context = F.scaled_dot_product_attention(
                query, key, value, attn_mask=mask, dropout_p=self.dropout if self.training else 0.0, scale=1.0,
            )  # (B, heads, Tq, d_kv)
        context = context.transpose(1, 2).reshape(hidden_states.shape[0], hidden_states.shape[1], self.inner_dim)
        return linear(context, self.o), (key, value)


class T5LayerSelfAttention(nn.Module):
    """Pre-norm residual self-attention: x + drop(SelfAttention(layer_norm(x)))."""

    def __init__(self, config, has_relative_attention_bias: bool = False, is_decoder: bool = False):
        super().__init__()
        self.SelfAttention = T5Attention(config, has_relative_attention_bias, is_decoder)
        self.layer_norm = T5LayerNorm(config.d_model, eps=config.layer_norm_epsilon)
        self.dropout = Dropout(config.dropout_rate)

    def forward(self, hidden_states, mask, past=None):
        output, cache = self.SelfAttention(self.layer_norm(hidden_states), mask, past=past)
        return hidden_states + self.dropout(output), cache


class T5LayerCrossAttention(nn.Module):
    """Pre-norm residual attention over the encoder's output: x + drop(EncDecAttention(layer_norm(x), enc))."""

    def __init__(self, config):
        super().__init__()
        self.EncDecAttention = T5Attention(config, has_relative_attention_bias=False, is_decoder=True)
        self.layer_norm = T5LayerNorm(config.d_model, eps=config.layer_norm_epsilon)
        self.dropout = Dropout(config.dropout_rate)

    def forward(self, hidden_states, encoder_hidden_states, mask, past=None):
        output, cache = self.EncDecAttention(self.layer_norm(hidden_states), mask, encoder_hidden_states, past)
        return hidden_states + self.dropout(output), cache


class T5DenseActDense(nn.Module):
    """T5 v1.0's feed-forward: wo(drop(act(wi(x)))), bias-free."""

    def __init__(self, config):
        super().__init__()
        self.wi = nn.Linear(config.d_model, config.d_ff, bias=False)
        self.wo = nn.Linear(config.d_ff, config.d_model, bias=False)
        self.dropout = Dropout(config.dropout_rate)
        self.act = ACTIVATIONS[config.dense_act_fn]

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        return linear(self.dropout(self.act(linear(hidden_states, self.wi))), self.wo)


class T5DenseGatedActDense(nn.Module):
    """T5 v1.1's gated feed-forward: wo(drop(act(wi_0(x)) * wi_1(x))) (wi_0 and wi_1 fused: `project`)."""

    def __init__(self, config):
        super().__init__()
        self.wi_0 = nn.Linear(config.d_model, config.d_ff, bias=False)
        self.wi_1 = nn.Linear(config.d_model, config.d_ff, bias=False)
        self.wo = nn.Linear(config.d_ff, config.d_model, bias=False)
        self.dropout = Dropout(config.dropout_rate)
        self.act = ACTIVATIONS[config.dense_act_fn]

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        gate, up = project(hidden_states, self.wi_0, self.wi_1)
        return linear(self.dropout(self.act(gate) * up), self.wo)


class T5LayerFF(nn.Module):
    """Pre-norm residual feed-forward: x + drop(DenseReluDense(layer_norm(x)))."""

    def __init__(self, config):
        super().__init__()
        self.DenseReluDense = T5DenseGatedActDense(config) if config.is_gated_act else T5DenseActDense(config)
        self.layer_norm = T5LayerNorm(config.d_model, eps=config.layer_norm_epsilon)
        self.dropout = Dropout(config.dropout_rate)

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        return hidden_states + self.dropout(self.DenseReluDense(self.layer_norm(hidden_states)))


class T5Block(nn.Module):
    """layer.0 self-attention, (decoder) layer.1 cross-attention, layer.-1 feed-forward."""

    def __init__(self, config, has_relative_attention_bias: bool, is_decoder: bool):
        super().__init__()
        self.is_decoder = is_decoder
        self.layer = nn.ModuleList([T5LayerSelfAttention(config, has_relative_attention_bias, is_decoder)])
        if is_decoder:
            self.layer.append(T5LayerCrossAttention(config))
        self.layer.append(T5LayerFF(config))

    def forward(self, hidden_states, mask, encoder_hidden_states=None, encoder_mask=None,
                past: LayerCache | None = None) -> tuple[torch.Tensor, LayerCache | None]:
        """(B, T, d_model) -> (B, T, d_model) and, in the decoder, this layer's cache."""
        hidden_states, (self_key, self_value) = self.layer[0](hidden_states, mask, None if past is None else past[:2])
        if not self.is_decoder:
            return self.layer[-1](hidden_states), None
        hidden_states, (cross_key, cross_value) = self.layer[1](
            hidden_states, encoder_hidden_states, encoder_mask, None if past is None else past[2:])
        return self.layer[-1](hidden_states), (self_key, self_value, cross_key, cross_value)


class T5Stack(nn.Module):
    """The encoder (bidirectional) or the decoder (causal, with cross-attention and a cache):
    dropout(embeddings) -> blocks -> final_layer_norm -> dropout. The token embeddings are
    the model's `shared` table, held by reference (not a state-dict entry of the stack)."""

    def __init__(self, config, embed_tokens: nn.Embedding, is_decoder: bool):
        super().__init__()
        self._embed_tokens = (embed_tokens,)  # a tuple: not registered, the model owns `shared`
        self.is_decoder = is_decoder
        num_layers = config.num_decoder_layers if is_decoder else config.num_layers
        self.block = nn.ModuleList([T5Block(config, i == 0, is_decoder) for i in range(num_layers)])
        self.final_layer_norm = T5LayerNorm(config.d_model, eps=config.layer_norm_epsilon)
        self.dropout = Dropout(config.dropout_rate)

    @property
    def embed_tokens(self) -> nn.Embedding:
        return self._embed_tokens[0]

    def self_attention_mask(self, attention_mask: torch.Tensor | None, query_length: int, past_length: int,
                            dtype: torch.dtype, batch_size: int) -> torch.Tensor:
        """The position bias (first block's) plus the padding and, in the decoder, causal
        mask: (B or 1, heads, Tq, Tp + Tq) float, shared by every block."""
        key_length = past_length + query_length
        bias = self.block[0].layer[0].SelfAttention.compute_bias(query_length, key_length, past_length).to(dtype)
        padding = attention_mask if attention_mask is not None and may_pad(attention_mask) else None
        keep = self_attention_keep(padding, query_length, past_length, bias.device, self.is_decoder)
        return bias if keep is None else bias + additive_mask(keep, dtype)  # no padding: the bias broadcasts

    def forward(
        self, input_ids: torch.Tensor | None = None, attention_mask: torch.Tensor | None = None,
        encoder_hidden_states: torch.Tensor | None = None, encoder_attention_mask: torch.Tensor | None = None,
        past_key_values: tuple[LayerCache, ...] | None = None, use_cache: bool = False,
        output_hidden_states: bool = False, inputs_embeds: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, tuple[LayerCache, ...] | None, tuple[torch.Tensor, ...] | None]:
        """input_ids (B, T) (or inputs_embeds (B, T, d_model)); attention_mask (B, T) 1 = real
        token (decoder with a cache: (B, Tp + T) or (B, T)); encoder_hidden_states (B, S,
        d_model) and encoder_attention_mask (B, S) for the decoder.
        Returns (B, T, d_model), the cache (decoder with use_cache) and, when asked, the
        hidden states: each block's input, then the final output (L + 1 tensors)."""
        if inputs_embeds is None:
            inputs_embeds = self.embed_tokens(input_ids)
        batch_size, length = inputs_embeds.shape[:2]
        past_length = past_key_values[0][0].shape[2] if past_key_values is not None else 0
        dtype = inputs_embeds.dtype if inputs_embeds.is_floating_point() else torch.float32
        if torch.is_autocast_enabled(inputs_embeds.device.type):
            dtype = torch.get_autocast_dtype(inputs_embeds.device.type)
        mask = self.self_attention_mask(attention_mask, length, past_length, dtype, batch_size)
        encoder_mask = None
        if self.is_decoder and encoder_attention_mask is not None and may_pad(encoder_attention_mask):
            encoder_mask = additive_mask(encoder_attention_mask.bool()[:, None, None, :], dtype)  # (B, 1, 1, S)

        hidden_states = self.dropout(inputs_embeds)
        all_hidden = [] if output_hidden_states else None
        cache = [] if use_cache and self.is_decoder else None
        for i, block in enumerate(self.block):
            if all_hidden is not None:
                all_hidden.append(hidden_states)
            past = past_key_values[i] if past_key_values is not None else None
            hidden_states, layer_cache = block(hidden_states, mask, encoder_hidden_states, encoder_mask, past)
            if cache is not None:
                cache.append(layer_cache)
        hidden_states = self.dropout(self.final_layer_norm(hidden_states))
        if all_hidden is not None:
            all_hidden.append(hidden_states)
        return hidden_states, (tuple(cache) if cache is not None else None), (
            tuple(all_hidden) if all_hidden is not None else None)
