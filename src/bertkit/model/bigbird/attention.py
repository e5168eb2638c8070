"""BigBird's self-attention: BERT's full attention, or block-sparse attention (Zaheer et al., 2020, ITC).

Block-sparse, over a sequence of n blocks of `block_size` tokens (T a multiple of it; the model pads):
- the first and the last query blocks are global: they attend to every key;
- every other query block i (1 <= i <= n-2) attends to the global key blocks 0 and n-1, its window
  i-1, i, i+1, and `num_random_blocks` random blocks: 5 + r key blocks (4 + r for blocks 1 and n-2,
  whose window holds a global block already). Its scores are one batched product over those gathered
  blocks (B, heads, n-2, block, (5 + r) * block): memory grows linearly with T.
What transformers' BigBirdBlockSparseAttention computes is matched (a padding key gets the additive
-10000 penalty, a padding query's context is zero, no attention dropout in this mode), including the
random blocks: in eval mode transformers draws none and every random slot points at block 0 (the
first global block, so a middle block's queries read it 1 + r times in their softmax); so do we. In
training the random blocks are drawn afresh each forward from torch's generator, among the blocks
outside the query's window and the global ones (transformers draws them with numpy, seeded by the
layer index, from a per-length "plan": the same pattern on every step).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn

from bertkit.model.attention import BertSelfAttention

MASK_PENALTY = -10000.0  # the additive score of a padding key (BigBird's, not the dtype's minimum)
KEYS_PER_CHUNK = 8192  # gathered keys per (sequence, head) at once: middle query blocks run in chunks of rows


@dataclass(frozen=True)
class BlockSparseMask:
    """One forward's padding mask for block-sparse attention: `keep` (B, T) float, 1 = real token, with
    T a multiple of `block_size`. The encoder passes it to every layer where BERT passes its mask."""

    keep: torch.Tensor
    block_size: int

    @property
    def blocked(self) -> torch.Tensor:
        """(B, n, block) the mask per block."""
        batch, length = self.keep.shape
        return self.keep.view(batch, length // self.block_size, self.block_size)


def key_block_indices(num_blocks: int, random_blocks: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The key blocks of query blocks 1..n-2: (heads, n-2, 5 + r) block ids, laid out [0, i-1, i, i+1,
    n-1, random...], and (n-2, 5 + r) bool, the slots that repeat a global block in the window (block 1's
    i-1 = 0, block n-2's i+1 = n-1) and take no part. random_blocks: (heads, n-2, r) block ids."""
    heads = random_blocks.shape[0]
    device = random_blocks.device
    rows = torch.arange(1, num_blocks - 1, device=device)  # (n-2,)
    fixed = torch.stack([torch.zeros_like(rows), rows - 1, rows, rows + 1, torch.full_like(rows, num_blocks - 1)], -1)
    indices = torch.cat([fixed.expand(heads, -1, -1), random_blocks], dim=-1)  # (heads, n-2, 5 + r)
    repeated = torch.zeros(indices.shape[1:], dtype=torch.bool, device=device)
    repeated[0, 1] = True  # block 1's left neighbour is global block 0
    repeated[-1, 3] = True  # block n-2's right neighbour is global block n-1
    return indices, repeated


class BigBirdSelfAttention(BertSelfAttention):
    """BERT's self-attention (query / key / value, transformers' names) that runs block-sparse when the
    model passes a `BlockSparseMask`, BERT's full attention otherwise (short inputs, "original_full").
    `use_bias` False: the three projections have no bias (transformers' config field)."""

    def __init__(self, config):
        super().__init__(config)
        if not config.use_bias:
            for name in ("query", "key", "value"):
                setattr(self, name, nn.Linear(config.hidden_size, config.hidden_size, bias=False))
        self.block_size = config.block_size
        self.num_random_blocks = config.num_random_blocks

    def forward(self, hidden_states, attention_mask, output_attentions=False, unpadding=None, query_rows=None):
        """As `BertSelfAttention.forward`; with a `BlockSparseMask`, block-sparse attention over
        hidden_states (B, T, H) -> context (B, T, H) and, on request, the (B, heads, T, T) probabilities
        (zero outside the pattern; a key read in two slots sums both)."""
        if isinstance(attention_mask, BlockSparseMask):
            return self.block_sparse(hidden_states, attention_mask, output_attentions)
        return super().forward(hidden_states, attention_mask, output_attentions, unpadding, query_rows)

    def random_blocks(self, num_blocks: int, device: torch.device) -> torch.Tensor:
        """(heads, n-2, r) random key blocks of query blocks 1..n-2: all block 0 in eval mode
        (transformers'), else r distinct blocks outside the window and the global blocks."""
        shape = (self.num_heads, num_blocks - 2, self.num_random_blocks)
        if not self.training or self.num_random_blocks == 0:
            return torch.zeros(shape, dtype=torch.long, device=device)
        rows = torch.arange(1, num_blocks - 1, device=device)[:, None]  # (n-2, 1)
        columns = torch.arange(num_blocks, device=device)[None, :]  # (1, n)
        allowed = (columns > 0) & (columns < num_blocks - 1) & ((columns - rows).abs() > 1)  # (n-2, n)
        scores = torch.rand(self.num_heads, num_blocks - 2, num_blocks, device=device).masked_fill(~allowed, -1.0)
        return scores.topk(self.num_random_blocks, dim=-1).indices  # (heads, n-2, r)

    def block_sparse(self, hidden_states: torch.Tensor, mask: BlockSparseMask, output_attentions: bool):
        batch, length, _ = hidden_states.shape
        block, heads, head_dim = mask.block_size, self.num_heads, self.head_dim
        blocks = length // block
        query, key, value = self._project(hidden_states, 1.0)  # (B, heads, T, d_head) each
        scale = 1.0 / math.sqrt(head_dim)
        keep = mask.keep.to(query.dtype)  # (B, T)
        penalty = (1.0 - keep)[:, None, None, :] * MASK_PENALTY  # (B, 1, 1, T)

        # global query blocks 0 and n-1: every key
        global_queries = torch.cat([query[:, :, :block], query[:, :, -block:]], dim=2)  # (B, heads, 2 block, d)
        global_scores = torch.matmul(global_queries, key.transpose(-1, -2)) * scale + penalty  # (B, heads, 2 block, T)
        global_probs = global_scores.softmax(dim=-1)
        global_context = torch.matmul(global_probs, value)  # (B, heads, 2 block, d)

        # query blocks 1..n-2: their 5 + r gathered key blocks, a chunk of rows at a time (bounded memory)
        indices, repeated = key_block_indices(blocks, self.random_blocks(blocks, query.device))  # (heads, n-2, S)
        rows = max(1, KEYS_PER_CHUNK // (indices.shape[-1] * block))
        middle_queries = query.view(batch, heads, blocks, block, head_dim)[:, :, 1:-1] * scale  # (B, h, n-2, block, d)
        parts = [self.middle_rows(middle_queries[:, :, first:first + rows], key, value, mask,
                                  indices[:, first:first + rows], repeated[first:first + rows], output_attentions)
                 for first in range(0, blocks - 2, rows)]
        middle_context = torch.cat([context for context, _ in parts], dim=2)  # (B, heads, n-2, block, d)

        context = torch.cat([global_context[:, :, :block], middle_context.reshape(batch, heads, -1, head_dim),
                             global_context[:, :, block:]], dim=2)  # (B, heads, T, d)
        context = context * keep[:, None, :, None]  # a padding query reads nothing
        context = context.transpose(1, 2).reshape(batch, length, heads * head_dim)  # (B, T, H)
        probs = None
        if output_attentions:
            probs = dense_probabilities(global_probs, torch.cat([p for _, p in parts], dim=2), indices, block, length)
        return context, probs

    def middle_rows(self, queries: torch.Tensor, key: torch.Tensor, value: torch.Tensor, mask: BlockSparseMask,
                    indices: torch.Tensor, repeated: torch.Tensor,
                    keep_probs: bool = False) -> tuple[torch.Tensor, torch.Tensor | None]:
        """queries (B, heads, m, block, d), already scaled, of m middle query blocks; key, value (B, heads, T, d);
        indices (heads, m, S) their key blocks, repeated (m, S) the slots that take no part ->
        context (B, heads, m, block, d), probabilities (B, heads, m, block, S block) with `keep_probs` (else None)."""
        batch, heads, count, block, head_dim = queries.shape
        slots = indices.shape[-1]
        head = torch.arange(heads, device=queries.device)[:, None, None]  # (heads, 1, 1)
        gathered_keys, gathered_values = (  # (B, heads, m, S block, d)
            x.view(batch, heads, -1, block, head_dim)[:, head, indices].view(batch, heads, count, slots * block, head_dim)
            for x in (key, value))
        key_keep = mask.blocked.to(queries.dtype)[:, indices]  # (B, heads, m, S, block)
        unused = repeated[:, :, None].expand(-1, -1, block).reshape(count, 1, slots * block)  # (m, 1, S block)
        penalty = ((1.0 - key_keep) * MASK_PENALTY).view(batch, heads, count, 1, slots * block)
        penalty = penalty.masked_fill(unused, float("-inf"))  # a repeated global slot takes no part
        probs = (torch.matmul(queries, gathered_keys.transpose(-1, -2)) + penalty).softmax(dim=-1)
        return torch.matmul(probs, gathered_values), probs if keep_probs else None


def dense_probabilities(global_probs: torch.Tensor, middle_probs: torch.Tensor, indices: torch.Tensor, block: int,
                        length: int) -> torch.Tensor:
    """The block-sparse probabilities as a (B, heads, T, T) matrix: global_probs (B, heads, 2 block, T),
    middle_probs (B, heads, n-2, block, S block) over the key blocks `indices` (heads, n-2, S); a key block
    read in two slots (the eval-mode random slots at block 0) gets the sum of both."""
    batch, heads, middle, _, _ = middle_probs.shape
    columns = (indices[..., None] * block + torch.arange(block, device=indices.device)).flatten(-2)  # (heads, n-2, S block)
    columns = columns[None, :, :, None, :].expand(batch, -1, -1, block, -1)
    dense = middle_probs.new_zeros(batch, heads, middle, block, length).scatter_add_(-1, columns, middle_probs)
    return torch.cat([global_probs[:, :, :block], dense.reshape(batch, heads, -1, length), global_probs[:, :, block:]],
                     dim=2)
