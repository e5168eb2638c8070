"""GPT's blocks: causal self-attention with a KV cache, the MLP, the block (pre- or
post-LN) and the causal mask, with transformers' parameter names (`attn.c_attn`,
`attn.c_proj`, `mlp.c_fc`, `mlp.c_proj`, `ln_1`, `ln_2`).

The four projections are `nn.Linear`s, (out, in) as PyTorch holds them; transformers'
GPT stores them as `Conv1D` weights, (in, out). The files stay transformers': the
transposition happens in one place, `conv1d_layout`, on load and on save (modeling.py).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import torch
import torch.nn.functional as F
from torch import nn

from bertkit.model.dropout import Dropout, dropout
from bertkit.model.gpt.config import GPT2_ACTIVATIONS
from bertkit.model.heads import SequenceSummary
from bertkit.model.masks import causal_keep
from bertkit.model.packed_linear import linear

if TYPE_CHECKING:
    from bertkit.model.gpt.config import _GPTConfig  # noqa: F401

LayerCache = tuple[torch.Tensor, torch.Tensor]  # (key, value), each (B, heads, length, d_head)

# the Conv1D weights of transformers' GPT checkpoints, by key suffix: (in, out) there, (out, in) here
CONV1D_WEIGHTS = ("attn.c_attn.weight", "attn.c_proj.weight", "mlp.c_fc.weight", "mlp.c_proj.weight")


def conv1d_layout(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The state dict with every Conv1D weight transposed: transformers' (in, out) <-> ours
    (out, in). Its own inverse, so load and save both call it — the only place the two
    layouts meet."""
    return {k: (v.t().contiguous() if k.endswith(CONV1D_WEIGHTS) else v) for k, v in state.items()}


class CausalMask:
    """Which keys each query may see, built once per forward for every layer.

    `attn_mask` (B, 1, T, K) bool (True = attend) or None; `is_causal`: SDPA's own
    causal masking applies (no padding, no cache, T > 1). A query at key position
    past + t sees keys 0..past + t that are real tokens, and always itself, so that a
    padding query has one key and no row is all -inf (NaN would reach the real rows
    through the values)."""

    def __init__(self, attention_mask: torch.Tensor | None, query_length: int, past_length: int,
                 device: torch.device):
        self.is_causal = False
        self.attn_mask = None
        key_length = past_length + query_length
        padded = attention_mask is not None and not bool(attention_mask[:, -key_length:].all())
        if not padded:
            if past_length == 0:
                self.is_causal = query_length > 1
            elif query_length > 1:
                self.attn_mask = causal_keep(query_length, past_length, device)[None, None]
            return
        keys = attention_mask[:, -key_length:].bool()  # (B, K)
        causal = causal_keep(query_length, past_length, device)  # (T, K)
        own = torch.arange(key_length, device=device)[None, :] == \
            torch.arange(past_length, key_length, device=device)[:, None]  # (T, K): the query's own key
        self.attn_mask = (causal[None] & (keys[:, None, :] | own[None]))[:, None]  # (B, 1, T, K)

    def explicit(self, query_length: int, key_length: int, device: torch.device) -> torch.Tensor | None:
        """The mask as a tensor (for the explicit softmax path); None when nothing is masked."""
        if self.is_causal:
            return causal_keep(query_length, key_length - query_length, device)[None, None]
        return self.attn_mask


class GPTAttention(nn.Module):
    """Masked multi-head self-attention: `c_attn` (H -> 3H: query, key, value), softmax over
    the visible keys, `c_proj` (H -> H), residual dropout. Scores are scaled by
    1/sqrt(d_head) (GPT-2's `scale_attn_weights`, GPT-1's `scale`), and by 1/(layer + 1)
    with GPT-2's `scale_attn_by_inverse_layer_idx`."""

    def __init__(self, config: _GPTConfig, layer_index: int):
        super().__init__()
        self.num_heads, self.head_dim = config.n_head, config.head_dim
        self.c_attn = nn.Linear(config.n_embd, 3 * config.n_embd)
        self.c_proj = nn.Linear(config.n_embd, config.n_embd)
        self.dropout_p = config.attn_pdrop
        self.resid_dropout = Dropout(config.resid_pdrop)
        self.scale = 1.0 / math.sqrt(self.head_dim) if getattr(config, "scale_attn_weights", True) else 1.0
        if getattr(config, "scale_attn_by_inverse_layer_idx", False):
            self.scale /= float(layer_index + 1)

    def forward(self, hidden_states: torch.Tensor, mask: CausalMask, past: LayerCache | None = None,
                use_cache: bool = False, output_attentions: bool = False,
                ) -> tuple[torch.Tensor, LayerCache | None, torch.Tensor | None]:
        """hidden_states (B, T, H); past: the earlier positions' (key, value) (B, heads, P, d_head).

        -> output (B, T, H), the cache (key, value) over P + T positions when use_cache,
        and the attention probabilities (B, heads, T, P + T) when output_attentions."""
        batch, length, _ = hidden_states.shape
        qkv = linear(hidden_states, self.c_attn).view(batch, length, 3, self.num_heads, self.head_dim)
        query, key, value = qkv.permute(2, 0, 3, 1, 4).unbind(0)  # 3 x (B, heads, T, d_head)
        if past is not None:
            key, value = torch.cat((past[0], key), dim=2), torch.cat((past[1], value), dim=2)
        present = (key, value) if use_cache else None
        dropout_p = self.dropout_p if self.training else 0.0
        probs = None
        if output_attentions or (dropout_p > 0.0 and hidden_states.device.type == "cpu"):
            # explicit: the probabilities are asked for, or SDPA's CPU dropout path is slower (bertkit.model.attention)
            scores = (query * self.scale) @ key.transpose(-1, -2)  # (B, heads, T, K)
            allowed = mask.explicit(length, key.shape[2], scores.device)
            if allowed is not None:
                scores = scores.masked_fill(~allowed, torch.finfo(scores.dtype).min)
            probs = scores.softmax(dim=-1)
            context = dropout(probs, dropout_p, self.training) @ value
            if not output_attentions:
                probs = None
        else:
            context = F.scaled_dot_product_attention(query, key, value, attn_mask=mask.attn_mask, dropout_p=dropout_p,
                                                     is_causal=mask.is_causal, scale=self.scale)
        context = context.transpose(1, 2).reshape(batch, length, self.num_heads * self.head_dim)  # (B, T, H)
        return self.resid_dropout(linear(context, self.c_proj)), present, probs


class GPTMLP(nn.Module):
    """c_fc (H -> I), activation, c_proj (I -> H), residual dropout."""

    def __init__(self, config: _GPTConfig):
        super().__init__()
        self.c_fc = nn.Linear(config.n_embd, config.intermediate_size)
        self.c_proj = nn.Linear(config.intermediate_size, config.n_embd)
        self.act = config.activation
        self.dropout = Dropout(config.resid_pdrop)

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        return self.dropout(linear(self.act(linear(hidden_states, self.c_fc)), self.c_proj))


class GPTBlock(nn.Module):
    """One decoder layer.

    GPT-2 (pre-LN):  x = x + attn(ln_1(x));  x = x + mlp(ln_2(x))
    GPT-1 (post-LN): x = ln_1(x + attn(x));  x = ln_2(x + mlp(x))"""

    def __init__(self, config: _GPTConfig, layer_index: int):
        super().__init__()
        self.pre_layer_norm = config.pre_layer_norm
        self.ln_1 = nn.LayerNorm(config.n_embd, eps=config.layer_norm_epsilon)
        self.attn = GPTAttention(config, layer_index)
        self.ln_2 = nn.LayerNorm(config.n_embd, eps=config.layer_norm_epsilon)
        self.mlp = GPTMLP(config)

    def forward(self, hidden_states: torch.Tensor, mask: CausalMask, past: LayerCache | None = None,
                use_cache: bool = False, output_attentions: bool = False,
                ) -> tuple[torch.Tensor, LayerCache | None, torch.Tensor | None]:
        if self.pre_layer_norm:
            attended, present, probs = self.attn(self.ln_1(hidden_states), mask, past, use_cache, output_attentions)
            hidden_states = hidden_states + attended
            return hidden_states + self.mlp(self.ln_2(hidden_states)), present, probs
        attended, present, probs = self.attn(hidden_states, mask, past, use_cache, output_attentions)
        hidden_states = self.ln_1(hidden_states + attended)
        return self.ln_2(hidden_states + self.mlp(hidden_states)), present, probs


class GPTSequenceSummary(SequenceSummary):
    """transformers' GPT sequence summary (the double-heads model's multiple-choice head) from the
    config's summary_* fields: `summary` H -> num_labels with summary_proj_to_labels, else H -> H."""

    def __init__(self, config: _GPTConfig):
        out = None
        if config.summary_use_proj:
            out = config.num_labels if config.summary_proj_to_labels and config.num_labels > 0 else config.n_embd
        super().__init__(config.n_embd, out, config.summary_type, config.summary_activation,
                         config.summary_first_dropout, float(config.extra.get("summary_last_dropout", 0.0)))
