"""The unpadded encoder path: padding is not compute.

A padded (B, T) batch with N real tokens costs the padded path B * T rows in every dense
operation (embedding LayerNorm, Q/K/V projections, attention output, FFN, their
LayerNorms and dropouts). The unpadded path gathers the real tokens once into packed
(N, H) rows right after the embedding lookup, runs every row-wise operation on those
rows only, and goes back to (B, heads, T, d_head) only where attention needs the
sequence layout: Q, K and V are scattered into zero-filled padded tensors for
`F.scaled_dot_product_attention` (padding keys masked out as before), and the context
is gathered back into rows (the "remove padding" scheme of FasterTransformer and
MosaicBERT). The backbones (`BertModel` and RoBERTa's, `ElectraModel`, `AlbertModel`:
each an `UnpadSwitch`) pad their outputs back to (B, T, H), with zeros at padding.

`plan_unpadding` decides per batch: the unpadded path pays a scatter of Q/K/V and a
gather of the context per layer, and wins once enough of the batch is padding
(`UNPAD_MIN_PADDING`, measured with bench/bench_unpad_crossover.py).
"""

from __future__ import annotations

import functools
import inspect
from dataclasses import dataclass
from functools import cached_property

import torch

# Fraction of padding positions above which the unpadded path is faster (auto mode).
# Measured on the 2-core development CPU (docs/benchmarks.md, "Unpadded encoder path"):
# the two paths break even at 1-3% padding (MiniLM-L6 inference, BERT-mini training).
UNPAD_MIN_PADDING = 0.03


@dataclass(frozen=True, eq=False)
class Unpadding:
    """Where the real tokens of a padded (B, T) batch are.

    indices: (N,) int64 flat positions b * T + t of the real tokens, row-major (so the
    packed rows of one sequence are consecutive, in order); batch_index, position: (N,)
    their row b and column t; key_mask: (B, 1, 1, T) bool, True = real token (the
    attention mask of the padded path), or None when no position is padding.
    """

    indices: torch.Tensor
    batch_index: torch.Tensor
    position: torch.Tensor
    key_mask: torch.Tensor | None
    batch_size: int
    seq_len: int

    @classmethod
    def from_attention_mask(cls, attention_mask: torch.Tensor) -> Unpadding:
        """attention_mask: (B, T) int / bool / float, nonzero = real token."""
        real = attention_mask.bool()
        batch_size, seq_len = real.shape
        indices = real.reshape(-1).nonzero().squeeze(1)  # (N,)
        key_mask = None if indices.numel() == real.numel() else real[:, None, None, :]  # (B, 1, 1, T)
        return cls(indices, indices // seq_len, indices % seq_len, key_mask, batch_size, seq_len)

    @cached_property
    def offsets(self) -> torch.Tensor:
        """(B + 1,) int64: sequence b's packed rows are [offsets[b], offsets[b + 1]) (the
        cumulative sequence lengths of variable-length attention kernels)."""
        if self.key_mask is None:  # no padding: every row full
            lengths = self.indices.new_full((self.batch_size,), self.seq_len)
        else:  # counted on the device: no read of the lengths
            lengths = self.key_mask.view(self.batch_size, self.seq_len).sum(1)
        return torch.cat([lengths.new_zeros(1), lengths.cumsum(0)])

    @property
    def num_tokens(self) -> int:
        return self.indices.numel()

    def pack(self, x: torch.Tensor) -> torch.Tensor:
        """(B, T, ...) -> (N, ...): the real positions, row-major."""
        return x.reshape(self.batch_size * self.seq_len, *x.shape[2:]).index_select(0, self.indices)

    def pad(self, x: torch.Tensor) -> torch.Tensor:
        """(N, ...) -> (B, T, ...): rows back at their positions, zeros at padding."""
        out = x.new_zeros(self.batch_size * self.seq_len, *x.shape[1:])
        out[self.indices] = x  # index_put_: ~2x faster than index_copy on CPU
        return out.view(self.batch_size, self.seq_len, *x.shape[1:])

    def pad_heads(self, x: torch.Tensor, num_heads: int) -> torch.Tensor:
        """(N, heads * d_head) packed projections -> (B, heads, T, d_head), zeros at padding."""
        head_dim = x.shape[-1] // num_heads
        padded = self.pad(x).view(self.batch_size, self.seq_len, num_heads, head_dim)  # (B, T, heads, d_head)
        return padded.transpose(1, 2)  # (B, heads, T, d_head)

    def pack_heads(self, x: torch.Tensor) -> torch.Tensor:
        """(B, heads, T, d_head) attention context -> (N, heads * d_head) packed rows."""
        batch, heads, seq_len, head_dim = x.shape
        rows = x.transpose(1, 2).reshape(batch * seq_len, heads * head_dim)  # (B * T, H)
        return rows.index_select(0, self.indices)  # (N, H); 2.5x faster than indexing the strided view

    def pad_encoder_outputs(
        self, last: torch.Tensor, hidden_states: tuple[torch.Tensor, ...] | None
    ) -> tuple[torch.Tensor, tuple[torch.Tensor, ...] | None]:
        """An encoder's packed outputs back to the batch: last (N, H) -> (B, T, H) and each
        hidden state (N, H) -> (B, T, H), zeros at padding; the last hidden state (the
        encoder's `last` itself) is the padded `last`."""
        last = self.pad(last)
        if hidden_states is not None:
            hidden_states = tuple(self.pad(h) for h in hidden_states[:-1]) + (last,)
        return last, hidden_states


def plan_unpadding(attention_mask: torch.Tensor | None, unpad: bool | None) -> Unpadding | None:
    """The unpadding of a batch, or None for the padded path.

    unpad: True = always (when the batch has a (B, T) attention mask), False = never,
    None = automatic: when at least `UNPAD_MIN_PADDING` of the positions are padding.
    Never under `torch.compile` nor a trace (`torch.onnx.export`): the packed row count is
    data-dependent, and a trace would freeze it.
    """
    if (unpad is False or attention_mask is None or attention_mask.dim() != 2 or torch.compiler.is_compiling()
            or torch.jit.is_tracing()):
        return None
    if unpad is None:
        total = attention_mask.numel()
        padding = total - int(attention_mask.count_nonzero())
        if padding == 0 or padding < UNPAD_MIN_PADDING * total:
            return None
    return Unpadding.from_attention_mask(attention_mask)


@functools.cache
def _accepts_unpadding(forward) -> bool:
    return "unpadding" in inspect.signature(forward).parameters


def accepts_unpadding(module: torch.nn.Module) -> bool:
    """Whether `module.forward` takes an `unpadding` argument (subclasses that override
    forward without it, e.g. another model family's embeddings, run padded)."""
    return _accepts_unpadding(type(module).forward)


class UnpadSwitch:
    """Mixin of a backbone with the unpadded path (it has `embeddings` and an `encoder` that
    take `unpadding`): the switch `unpad` -- None = automatic by the batch's padding, True /
    False = always / never; set on every backbone of a model by `bertkit.model.bert.set_unpad`
    -- and the choice for one call (`unpadding_for`)."""

    unpad: bool | None = None

    def unpadding_for(
        self, attention_mask: torch.Tensor | None, unpad: bool | None, output_attentions: bool = False
    ) -> Unpadding | None:
        """This call's unpadding, or None for the padded path. `unpad` (the call's argument)
        overrides the attribute when not None. Never with output_attentions (the padded path
        computes the probabilities) nor for an encoder without the packed path."""
        encoder = getattr(self, "encoder", None)  # a backbone without one (ModernBERT's `layers`) packs itself
        if output_attentions or torch.compiler.is_compiling() or (encoder is not None and not accepts_unpadding(encoder)):
            return None
        return plan_unpadding(attention_mask, self.unpad if unpad is None else unpad)
