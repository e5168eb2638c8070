"""XLNet's relative attention (Transformer-XL's, with two streams), its masks and encodings.

Layout: batch first throughout ((B, T, D) hidden states, (B, n, T, d) heads); only the
memories (`mems`) keep transformers' (mlen, B, D) layout, so they pass between bertkit
and transformers unchanged.

The score of query i and key j (key positions count the mlen memory slots first) is
    ((q_i + r_w_bias) . k_j  +  (q_i + r_r_bias) . kr_{rel(i, j)}  +  (q_i + r_s_bias) . seg_embed[s_ij]) / sqrt(d)
with kr the projected sinusoid encoding of the distance (mlen + pos_i) - j (clamped by
`clamp_len`; `bi_data`: the second half of the batch reads the distances backwards) and
s_ij = 1 when i and j are in different segments (memory counts as segment 0). Masked keys
get -1e30, as transformers (a row with every key masked becomes uniform, never NaN).
The first term is what `F.scaled_dot_product_attention` computes; the other two are its
additive mask. The positional term is one (T, R) product per head (R = klen + qlen
distances) read as a skewed view (`_skew`: no copy) for the content stream, gathered at
the target positions for the query stream.

Two-stream attention: the content stream h runs at every position with `content_mask`
(each position sees itself); the query stream g runs only at the M target rows of
`target_mapping` (position p_m, a one-hot row; an all-zero row gives a zero attention
output, as transformers), with the same weights and keys/values from h, and
`query_mask`'s rows at those positions (a position never sees itself).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from bertkit.model.dropout import Dropout
from bertkit.model.layers import ACTIVATIONS
from bertkit.model.unpad import Unpadding
from bertkit.model.xlnet.config import XLNetConfig

MASKED_SCORE = -1e30  # transformers' (and the original's) score of a masked key
MASKED_SCORE_FP16 = -65500.0


@dataclass
class AttentionInputs:
    """What every layer's attention shares in one forward pass.

    content_mask, query_mask: (B or 1, T, K) bool, True = may not attend (None: no mask);
    segment_diff: (B, T, K) bool, True = i and j in different segments (None: no segment term);
    positions: (R, D) or (B, R, D) sinusoid encodings of the distances klen .. -qlen + 1;
    target_positions: (B, M) long, the query stream's positions; target_weight: (B, 1, M, 1)
    1 for a real target row, 0 for an all-zero row of target_mapping.
    """

    content_mask: torch.Tensor | None
    query_mask: torch.Tensor | None
    segment_diff: torch.Tensor | None
    positions: torch.Tensor
    target_positions: torch.Tensor | None = None
    target_weight: torch.Tensor | None = None


def _project(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """(..., T, D) @ (D, n, d) -> (..., n, T, d)."""
    d_model, n_head, d_head = weight.shape
    out = x @ weight.reshape(d_model, n_head * d_head)
    return out.unflatten(-1, (n_head, d_head)).transpose(-3, -2)


def _skew(scores: torch.Tensor, klen: int) -> torch.Tensor:
    """(B, n, T, R) scores against distances klen, klen - 1, .. (R = klen + T) -> (B, n, T, klen)
    with [i, j] = scores[i, T - i + j] (distance mlen + i - j): a strided view, no copy."""
    batch, heads, qlen, rlen = scores.shape
    scores = scores.contiguous()
    return scores.as_strided((batch, heads, qlen, klen), (heads * qlen * rlen, qlen * rlen, rlen - 1, 1),
                             scores.storage_offset() + qlen)


class XLNetRelativeAttention(nn.Module):
    """HF's `rel_attn`: q, k, v, o, r (D, n, d); r_w_bias, r_r_bias, r_s_bias (n, d);
    seg_embed (2, n, d); post-attention dropout, residual and `layer_norm`."""

    def __init__(self, config: XLNetConfig):
        super().__init__()
        self.n_head, self.d_head, self.d_model = config.n_head, config.d_head, config.d_model
        self.scale = 1 / (config.d_head ** 0.5)
        shape = (config.d_model, config.n_head, config.d_head)
        for name in ("q", "k", "v", "o", "r"):
            setattr(self, name, nn.Parameter(torch.empty(shape)))
        for name in ("r_r_bias", "r_s_bias", "r_w_bias"):
            setattr(self, name, nn.Parameter(torch.empty(config.n_head, config.d_head)))
        self.seg_embed = nn.Parameter(torch.empty(2, config.n_head, config.d_head))
        self.layer_norm = nn.LayerNorm(config.d_model, eps=config.layer_norm_eps)
        self.dropout = Dropout(config.dropout)

    def forward(
        self, h: torch.Tensor, g: torch.Tensor | None, inputs: AttentionInputs, mem: torch.Tensor | None = None,
        output_attentions: bool = False, unpadding: Unpadding | None = None, content: bool = True,
    ) -> tuple[torch.Tensor | None, torch.Tensor | None, tuple | torch.Tensor | None]:
        """h (B, T, D) content stream; g (B, M, D) query stream or None; mem (B, mlen, D) or None.
        -> (h, g, probabilities: (B, n, T, K), or (content, query (B, n, M, K)) with g, or None).
        With `unpadding` (content stream only, no memory): h and the result are packed (N, D)
        rows; only the attention itself runs on the padded (B, n, T, d) layout.
        content=False (with g, no attentions): the content stream's own output is not formed,
        only its keys and values for the query stream (h comes back None)."""
        if unpadding is not None:
            qkv = h @ torch.cat([self.q, self.k, self.v], dim=1).reshape(self.d_model, -1)  # (N, 3 n d)
            q_h, k, v = unpadding.pad_heads(qkv, 3 * self.n_head).split(self.n_head, dim=1)  # (B, n, T, d) each
            vec, _ = self._attend(q_h, k, v, _project(inputs.positions, self.r), inputs.content_mask,
                                  inputs.segment_diff, None, False)
            return self._output(h, unpadding.pack_heads(vec)), None, None
        if not content:
            k, v = _project(h if mem is None else torch.cat([mem, h], dim=1),
                            torch.cat([self.k, self.v], dim=1)).split(self.n_head, dim=1)
        elif mem is None:
            q_h, k, v = _project(h, torch.cat([self.q, self.k, self.v], dim=1)).split(self.n_head, dim=1)
        else:
            cat = torch.cat([mem, h], dim=1)  # (B, K, D)
            q_h, k, v = _project(h, self.q), _project(cat, self.k), _project(cat, self.v)
        k_r = _project(inputs.positions, self.r)  # (1 or B, n, R, d)
        h_out, probs_h = None, None
        if content:
            vec_h, probs_h = self._attend(q_h, k, v, k_r, inputs.content_mask, inputs.segment_diff, None,
                                          output_attentions)
            h_out = self._post_attention(h, vec_h)
        if g is None:
            return h_out, None, probs_h
        positions = inputs.target_positions
        rows = positions[:, :, None].expand(-1, -1, k.shape[2])  # (B, M, K)
        query_mask = None if inputs.query_mask is None else inputs.query_mask.expand(h.shape[0], -1, -1).gather(1, rows)
        diff = None if inputs.segment_diff is None else inputs.segment_diff.gather(1, rows)
        vec_g, probs_g = self._attend(_project(g, self.q), k, v, k_r, query_mask, diff, positions, output_attentions,
                                      qlen=h.shape[1])
        g_out = self._post_attention(g, vec_g * inputs.target_weight)
        return h_out, g_out, ((probs_h, probs_g) if output_attentions else None)

    def forward_at(
        self, h: torch.Tensor, positions: torch.Tensor, inputs: AttentionInputs, unpadding: Unpadding | None = None,
    ) -> torch.Tensor:
        """The content stream at one position per row (the states a sequence head reads):
        h (B, T, D), or packed (N, D) rows with `unpadding`; positions (B,) -> (B, 1, D).
        Keys and values come from every position, the query from those positions only."""
        batch = positions.shape[0]
        kv = h @ torch.cat([self.k, self.v], dim=1).reshape(self.d_model, -1)
        if unpadding is not None:
            k, v = unpadding.pad_heads(kv, 2 * self.n_head).split(self.n_head, dim=1)  # (B, n, T, d) each
            flat = torch.arange(batch, device=h.device) * unpadding.seq_len + positions
            x = h[torch.searchsorted(unpadding.indices, flat)][:, None]  # (B, 1, D)
        else:
            k, v = kv.unflatten(-1, (2 * self.n_head, self.d_head)).transpose(1, 2).split(self.n_head, dim=1)
            x = h[torch.arange(batch, device=h.device), positions][:, None]  # (B, 1, D)
        rows = positions[:, None, None].expand(-1, 1, k.shape[2])  # (B, 1, K)
        mask = None if inputs.content_mask is None else inputs.content_mask.expand(batch, -1, -1).gather(1, rows)
        diff = None if inputs.segment_diff is None else inputs.segment_diff.gather(1, rows)
        vec, _ = self._attend(_project(x, self.q), k, v, _project(inputs.positions, self.r), mask, diff,
                              positions[:, None], False, qlen=k.shape[2])
        return self._post_attention(x, vec)

    def _attend(
        self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, k_r: torch.Tensor, mask: torch.Tensor | None,
        segment_diff: torch.Tensor | None, positions: torch.Tensor | None, output_attentions: bool, qlen: int = 0,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """q (B, n, Tq, d) at positions 0..T-1 (`positions` None) or at `positions` (B, Tq) of
        a segment of `qlen` tokens; k, v (B, n, K, d); k_r (1 or B, n, R, d); mask /
        segment_diff (B, Tq, K) rows of the queries -> (B, n, Tq, d) attention vectors,
        probabilities (B, n, Tq, K) or None."""
        klen = k.shape[2]
        # the two additive terms are scaled through their (small) queries, not over (T, K) scores
        position_scores = ((q + self.r_r_bias[:, None]) * self.scale) @ k_r.transpose(-1, -2)  # (B, n, Tq, R)
        if positions is None:
            bias = _skew(position_scores, klen)
        else:
            # distance mlen + p - j is column qlen - p + j; "uni" has no negative distances (R = klen + 1):
            # the future keys it would need are masked, any column does for them
            index = (qlen - positions)[:, None, :, None] + torch.arange(klen, device=q.device)  # (B, 1, Tq, K)
            index = index.clamp(max=position_scores.shape[-1] - 1)
            bias = position_scores.gather(-1, index.expand(-1, q.shape[1], -1, -1))
        if segment_diff is not None:
            segment_scores = ((q + self.r_s_bias[:, None]) * self.scale) @ self.seg_embed.permute(1, 2, 0)
            bias = bias + torch.where(segment_diff[:, None], segment_scores[..., 1:], segment_scores[..., :1])
        if mask is not None:
            masked = MASKED_SCORE_FP16 if bias.dtype == torch.float16 else MASKED_SCORE
            bias = bias.masked_fill(mask[:, None], masked)
        q = q + self.r_w_bias[:, None]
        dropout = self.dropout.p if self.training else 0.0
        # SDPA fuses everything but attention dropout on CPU (its math path draws with bernoulli_):
        # there the probabilities are formed here and dropped by bertkit's faster Dropout
        if not output_attentions and (dropout == 0.0 or q.device.type != "cpu"):
            return F.scaled_dot_product_attention(q, k, v, attn_mask=bias.to(q.dtype), dropout_p=dropout,
                                                  scale=self.scale), None
        scores = torch.baddbmm(bias.flatten(0, 1), (q * self.scale).flatten(0, 1), k.transpose(-1, -2).flatten(0, 1))
        probs = torch.softmax(scores.view(bias.shape), dim=-1)  # (B, n, Tq, K)
        return self.dropout(probs) @ v, (probs if output_attentions else None)

    def _post_attention(self, x: torch.Tensor, vec: torch.Tensor) -> torch.Tensor:
        """x (B, T, D), vec (B, n, T, d) -> LayerNorm(x + dropout(vec @ o))."""
        return self._output(x, vec.transpose(1, 2).flatten(2))

    def _output(self, x: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
        """x (..., D), attention vectors (..., n d) -> LayerNorm(x + dropout(rows @ o))."""
        return self.layer_norm(x + self.dropout(rows @ self.o.reshape(self.d_model, -1).t()))


class XLNetFeedForward(nn.Module):
    """HF's `ff`: LayerNorm(x + dropout(layer_2(dropout(act(layer_1(x))))))."""

    def __init__(self, config: XLNetConfig):
        super().__init__()
        self.layer_norm = nn.LayerNorm(config.d_model, eps=config.layer_norm_eps)
        self.layer_1 = nn.Linear(config.d_model, config.d_inner)
        self.layer_2 = nn.Linear(config.d_inner, config.d_model)
        self.dropout = Dropout(config.dropout)
        self.activation = ACTIVATIONS[config.ff_activation]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.dropout(self.activation(self.layer_1(x)))
        return self.layer_norm(x + self.dropout(self.layer_2(out)))


class XLNetLayer(nn.Module):
    """Relative attention, then the feed-forward block, on both streams (shared weights)."""

    def __init__(self, config: XLNetConfig):
        super().__init__()
        self.rel_attn = XLNetRelativeAttention(config)
        self.ff = XLNetFeedForward(config)

    def forward(self, h, g, inputs: AttentionInputs, mem=None, output_attentions: bool = False, unpadding=None,
                content: bool = True):
        """content=False: the query stream only (h read for keys and values, None returned)."""
        h, g, probs = self.rel_attn(h, g, inputs, mem, output_attentions, unpadding, content)
        return (self.ff(h) if h is not None else None), (self.ff(g) if g is not None else None), probs

    def forward_at(self, h, positions: torch.Tensor, inputs: AttentionInputs, unpadding=None) -> torch.Tensor:
        """The layer's content-stream output at one position per row: (B, 1, D)."""
        return self.ff(self.rel_attn.forward_at(h, positions, inputs, unpadding))


# ---- the per-forward inputs ---------------------------------------------------------------

def sinusoid_positions(config: XLNetConfig, qlen: int, klen: int, batch: int, device) -> torch.Tensor:
    """Encodings of the distances klen, klen - 1, .. (down to -qlen + 1 for "bi", to 0 for
    "uni"): (R, D), or (B, R, D) with `bi_data` (the second half of the batch backwards).
    Computed with transformers' operations, so the values are the same bit for bit."""
    freq = torch.arange(0, config.d_model, 2.0, dtype=torch.int64, device=device).float()
    inv_freq = 1 / torch.pow(10000, (freq / config.d_model))
    end = -qlen if config.attn_type == "bi" else -1

    def encode(start: int, stop: int, step: float) -> torch.Tensor:
        seq = torch.arange(start, stop, step, dtype=torch.int64, device=device).float()
        if config.clamp_len > 0:
            seq = seq.clamp(-config.clamp_len, config.clamp_len)
        angles = seq[:, None] * inv_freq
        return torch.cat([torch.sin(angles), torch.cos(angles)], dim=-1)  # (R, D)

    forward = encode(klen, end, -1.0)
    if not config.bi_data:
        return forward
    if batch % 2:
        raise ValueError(f"bi_data needs an even batch size (forward and backward halves), got {batch}")
    backward = encode(-klen, -end, 1.0)
    half = batch // 2
    return torch.cat([forward.expand(half, -1, -1), backward.expand(half, -1, -1)], dim=0)


def causal_mask(config: XLNetConfig, qlen: int, mlen: int, device) -> torch.Tensor:
    """attn_type "uni": (T, K) bool, True = the future (and, with same_length, keys beyond a
    fixed window), transformers' create_mask."""
    mask = torch.ones((qlen, qlen + mlen), device=device)
    future = mask.triu(mlen + 1)
    if config.same_length:
        future[:, :qlen] += mask[:, :qlen].tril(-1)
    return future > 0


def attention_masks(
    config: XLNetConfig, input_mask: torch.Tensor | None, perm_mask: torch.Tensor | None, qlen: int, mlen: int,
    device,
) -> tuple[torch.Tensor | None, torch.Tensor | None]:
    """(content_mask, query_mask), each (B or 1, T, K) bool (True = blocked) or None.

    input_mask (B, T): 1 = padding (a key nobody sees); perm_mask (B, T, T): 1 = i may not
    see j. Memory slots are visible to all. The query stream's mask is their union (with the
    causal mask for "uni"); the content stream's is the same but always sees itself."""
    blocked = None
    if input_mask is not None:
        blocked = (input_mask > 0)[:, None, :]  # (B, 1, T)
    if perm_mask is not None:
        blocked = perm_mask > 0 if blocked is None else blocked | (perm_mask > 0)
    if blocked is not None and mlen > 0:
        blocked = F.pad(blocked, (mlen, 0), value=False)  # (B, T or 1, K)
    if config.attn_type == "uni":
        causal = causal_mask(config, qlen, mlen, device)[None]
        blocked = causal if blocked is None else blocked | causal
    if blocked is None:
        return None, None
    blocked = blocked.expand(-1, qlen, -1)
    content = blocked & ~_self_positions(qlen, mlen, device)[None]
    return content, blocked


def _self_positions(qlen: int, mlen: int, device) -> torch.Tensor:
    """(T, K) bool, True at (i, mlen + i): each position's own key."""
    return torch.eye(qlen, qlen + mlen, dtype=torch.bool, device=device).roll(mlen, dims=1)


def segment_difference(token_type_ids: torch.Tensor, mlen: int) -> torch.Tensor:
    """(B, T) segment ids -> (B, T, K) bool: query and key in different segments (memory
    slots are segment 0)."""
    keys = F.pad(token_type_ids, (mlen, 0), value=0)
    return token_type_ids[:, :, None] != keys[:, None, :]
