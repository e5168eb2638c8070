"""BART's building blocks: the scaled token and offset position embeddings, attention with
biases, the post-LN encoder and decoder layers and the two stacks.

Hugging Face attribute names throughout (`embed_positions`, `layernorm_embedding`,
`layers.N.self_attn.{q,k,v,out}_proj`, `self_attn_layer_norm`, `encoder_attn`,
`encoder_attn_layer_norm`, `fc1`, `fc2`, `final_layer_norm`), so checkpoints move both ways
as a load. A layer is post-LN, as BERT's: x = LayerNorm(x + drop(sublayer(x))).

The KV cache of a decoder layer is the shared encoder-decoder shape (bertkit.model.seq2seq.LayerCache):
(self_key, self_value, cross_key, cross_value), each (B, heads, length, head_dim), so the
shared `generate` (bertkit.model.generation) decodes BART as it decodes T5. While autograd
records, q/k/v (and cross-attention's k/v) run as one matmul over the concatenated weights
and biases; without gradients each projection runs alone on oneDNN's packed weights.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from bertkit.model.dropout import Dropout
from bertkit.model.layers import ACTIVATIONS
from bertkit.model.outputs import BertModelOutput
from bertkit.model.packed_linear import linear
from bertkit.model.masks import additive_mask, may_pad, self_attention_keep
from bertkit.model.seq2seq import LayerCache, project

POSITION_OFFSET = 2  # fairseq's: position p reads row p + 2 of the table (rows 0-1 were its padding offset)


class BartScaledWordEmbedding(nn.Embedding):
    """Token embeddings times `embed_scale` (sqrt(d_model) with scale_embedding, else 1)."""

    def __init__(self, num_embeddings: int, embedding_dim: int, padding_idx: int, embed_scale: float = 1.0):
        super().__init__(num_embeddings, embedding_dim, padding_idx)
        self.embed_scale = embed_scale

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        embedded = super().forward(input_ids)
        return embedded if self.embed_scale == 1.0 else embedded * self.embed_scale


class BartLearnedPositionalEmbedding(nn.Embedding):
    """Learned positions with fairseq's offset: max_positions + 2 rows, position p at row p + 2."""

    def __init__(self, num_embeddings: int, embedding_dim: int):
        self.offset = POSITION_OFFSET
        super().__init__(num_embeddings + POSITION_OFFSET, embedding_dim)

    def forward(self, length: int, past_length: int = 0, position_ids: torch.Tensor | None = None) -> torch.Tensor:
        """(length, d_model): positions past_length .. past_length + length - 1; or, given
        `position_ids` (B, length), each row's own positions: (B, length, d_model)."""
        last = past_length + length if position_ids is None else int(position_ids.max()) + 1
        if last > self.num_embeddings - self.offset:
            raise ValueError(f"{last} positions, but the model has "
                             f"max_position_embeddings {self.num_embeddings - self.offset}")
        if position_ids is None:
            position_ids = torch.arange(past_length, past_length + length, device=self.weight.device)
        return super().forward(position_ids + self.offset)


class BartAttention(nn.Module):
    """Multi-head attention with biases, scores scaled by head_dim^-0.5 (self or cross)."""

    def __init__(self, embed_dim: int, num_heads: int, dropout: float = 0.0):
        super().__init__()
        self.embed_dim, self.num_heads, self.head_dim = embed_dim, num_heads, embed_dim // num_heads
        self.dropout = dropout
        self.k_proj = nn.Linear(embed_dim, embed_dim)
        self.v_proj = nn.Linear(embed_dim, embed_dim)
        self.q_proj = nn.Linear(embed_dim, embed_dim)
        self.out_proj = nn.Linear(embed_dim, embed_dim)

    def _heads(self, x: torch.Tensor) -> torch.Tensor:
        """(B, T, d_model) -> (B, heads, T, head_dim)."""
        return x.view(x.shape[0], x.shape[1], self.num_heads, self.head_dim).transpose(1, 2)

    def forward(self, hidden_states: torch.Tensor, mask: torch.Tensor | None, is_causal: bool = False,
                key_value_states: torch.Tensor | None = None,
                past: tuple[torch.Tensor, torch.Tensor] | None = None,
                ) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
        """hidden_states (B, Tq, d_model); mask: additive float (B or 1, 1, Tq, Tk) or None
        (`is_causal`: SDPA's own causal mask instead). Self-attention: `past` = (key, value)
        (B, heads, Tp, head_dim) of earlier positions, extended by this call's.
        Cross-attention (`key_value_states` (B, S, d_model)): `past` = the encoder's (key,
        value), reused. Returns (B, Tq, d_model) and the (key, value) to cache."""
        if key_value_states is None:
            query, key, value = (self._heads(x) for x in project(hidden_states, self.q_proj, self.k_proj, self.v_proj))
            if past is not None:
                key, value = torch.cat([past[0], key], dim=2), torch.cat([past[1], value], dim=2)
        else:
            query = self._heads(linear(hidden_states, self.q_proj))
            if past is not None:
                key, value = past
            else:
                key, value = (self._heads(x) for x in project(key_value_states, self.k_proj, self.v_proj))
        context = F.scaled_dot_product_attention(
            query, key, value, attn_mask=mask, is_causal=is_causal and mask is None,
            dropout_p=self.dropout if self.training else 0.0)  # (B, heads, Tq, head_dim), scale head_dim^-0.5
        context = context.transpose(1, 2).reshape(hidden_states.shape[0], hidden_states.shape[1], self.embed_dim)
        return linear(context, self.out_proj), (key, value)


class _FeedForward(nn.Module):
    """fc1 -> act -> drop(activation_dropout) -> fc2 (a mixin of the two layers' shared part)."""

    def feed_forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        return linear(self.activation_dropout(self.activation_fn(linear(hidden_states, self.fc1))), self.fc2)


class BartEncoderLayer(_FeedForward):
    """x = LN(x + drop(self_attn(x))); x = LN(x + drop(fc2(act(fc1(x)))))."""

    def __init__(self, config):
        super().__init__()
        d = config.d_model
        self.self_attn = BartAttention(d, config.encoder_attention_heads, config.attention_dropout)
        self.self_attn_layer_norm = nn.LayerNorm(d)
        self.dropout = Dropout(config.dropout)
        self.activation_fn = ACTIVATIONS[config.activation_function]
        self.activation_dropout = Dropout(config.activation_dropout)
        self.fc1 = nn.Linear(d, config.encoder_ffn_dim)
        self.fc2 = nn.Linear(config.encoder_ffn_dim, d)
        self.final_layer_norm = nn.LayerNorm(d)

    def forward(self, hidden_states: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
        attended, _ = self.self_attn(hidden_states, mask)
        hidden_states = self.self_attn_layer_norm(hidden_states + self.dropout(attended))
        return self.final_layer_norm(hidden_states + self.dropout(self.feed_forward(hidden_states)))


class BartDecoderLayer(_FeedForward):
    """Causal self-attention, cross-attention over the encoder, feed-forward: each post-LN."""

    def __init__(self, config):
        super().__init__()
        d = config.d_model
        self.self_attn = BartAttention(d, config.decoder_attention_heads, config.attention_dropout)
        self.dropout = Dropout(config.dropout)
        self.activation_fn = ACTIVATIONS[config.activation_function]
        self.activation_dropout = Dropout(config.activation_dropout)
        self.self_attn_layer_norm = nn.LayerNorm(d)
        self.encoder_attn = BartAttention(d, config.decoder_attention_heads, config.attention_dropout)
        self.encoder_attn_layer_norm = nn.LayerNorm(d)
        self.fc1 = nn.Linear(d, config.decoder_ffn_dim)
        self.fc2 = nn.Linear(config.decoder_ffn_dim, d)
        self.final_layer_norm = nn.LayerNorm(d)

    def forward(self, hidden_states, mask, is_causal, encoder_hidden_states, encoder_mask,
                past: LayerCache | None = None) -> tuple[torch.Tensor, LayerCache]:
        """(B, T, d_model) -> (B, T, d_model) and this layer's cache."""
        attended, (self_key, self_value) = self.self_attn(hidden_states, mask, is_causal,
                                                          past=None if past is None else past[:2])
        hidden_states = self.self_attn_layer_norm(hidden_states + self.dropout(attended))
        attended, (cross_key, cross_value) = self.encoder_attn(
            hidden_states, encoder_mask, key_value_states=encoder_hidden_states, past=None if past is None else past[2:])
        hidden_states = self.encoder_attn_layer_norm(hidden_states + self.dropout(attended))
        hidden_states = self.final_layer_norm(hidden_states + self.dropout(self.feed_forward(hidden_states)))
        return hidden_states, (self_key, self_value, cross_key, cross_value)


def _mask_dtype(embeds: torch.Tensor) -> torch.dtype:
    if torch.is_autocast_enabled(embeds.device.type):
        return torch.get_autocast_dtype(embeds.device.type)
    return embeds.dtype


def _layers_to_run(layers: nn.ModuleList, layerdrop: float, training: bool):
    """The layers of this forward: each skipped with probability `layerdrop` while training (LayerDrop)."""
    if not training or layerdrop == 0.0:
        return list(layers)
    return [layer for layer in layers if float(torch.rand([])) >= layerdrop]


class _Stack(nn.Module):
    """What both stacks share: the token embeddings, `embed_positions`, `layernorm_embedding`,
    dropout. With tied embeddings (every published BART) `embed_tokens` is the model's
    `shared`, held by reference and not a state-dict entry of the stack; untied
    (tie_word_embeddings false, as transformers builds it) each stack owns its table."""

    def __init__(self, config, embed_tokens: nn.Embedding, layers: list[nn.Module], layerdrop: float):
        super().__init__()
        if config.tie_word_embeddings:
            self.__dict__["_shared_embeddings"] = embed_tokens  # not registered: the model owns `shared`
        else:
            self.embed_tokens = BartScaledWordEmbedding(config.vocab_size, config.d_model, config.pad_token_id,
                                                        embed_tokens.embed_scale)
        self.embed_positions = BartLearnedPositionalEmbedding(config.max_position_embeddings, config.d_model)
        self.layers = nn.ModuleList(layers)
        self.layernorm_embedding = nn.LayerNorm(config.d_model)
        self.dropout = Dropout(config.dropout)
        self.layerdrop = layerdrop

    def __getattr__(self, name: str):
        if name == "embed_tokens" and "_shared_embeddings" in self.__dict__:
            return self.__dict__["_shared_embeddings"]
        return super().__getattr__(name)

    def embed(self, input_ids: torch.Tensor | None, inputs_embeds: torch.Tensor | None,
              past_length: int = 0, position_ids: torch.Tensor | None = None) -> torch.Tensor:
        """dropout(layernorm_embedding(tokens * scale + positions)): (B, T, d_model); the
        positions follow the cache (past_length) unless `position_ids` (B, T) are given."""
        if inputs_embeds is None:
            if input_ids is None:
                raise ValueError("input_ids or inputs_embeds is required")
            inputs_embeds = self.embed_tokens(input_ids)
        positions = self.embed_positions(inputs_embeds.shape[1], past_length, position_ids)  # (T or B, T, d_model)
        return self.dropout(self.layernorm_embedding(inputs_embeds + positions))


class BartEncoder(_Stack):
    """Bidirectional: (input_ids, attention_mask) -> output with last_hidden_state (B, S, d_model)."""

    def __init__(self, config, embed_tokens: nn.Embedding):
        super().__init__(config, embed_tokens, [BartEncoderLayer(config) for _ in range(config.encoder_layers)],
                         config.encoder_layerdrop)

    def forward(self, input_ids: torch.Tensor | None = None, attention_mask: torch.Tensor | None = None,
                inputs_embeds: torch.Tensor | None = None, output_hidden_states: bool = False,
                return_dict: bool = True) -> BertModelOutput:
        """-> BertModelOutput: last_hidden_state (B, S, d_model); hidden_states when asked: the
        embeddings' output, then each layer's (L + 1 tensors)."""
        hidden_states = self.embed(input_ids, inputs_embeds)
        mask = None
        if attention_mask is not None and may_pad(attention_mask):
            mask = additive_mask(attention_mask.bool()[:, None, None, :], _mask_dtype(hidden_states))  # (B, 1, 1, S)
        all_hidden = [hidden_states] if output_hidden_states else None
        for layer in _layers_to_run(self.layers, self.layerdrop, self.training):
            hidden_states = layer(hidden_states, mask)
            if all_hidden is not None:
                all_hidden.append(hidden_states)
        return BertModelOutput(last_hidden_state=hidden_states,
                               hidden_states=tuple(all_hidden) if all_hidden is not None else None)


class BartDecoder(_Stack):
    """Causal, with cross-attention over the encoder's states and a KV cache."""

    def __init__(self, config, embed_tokens: nn.Embedding):
        super().__init__(config, embed_tokens, [BartDecoderLayer(config) for _ in range(config.decoder_layers)],
                         config.decoder_layerdrop)

    @staticmethod
    def self_attention_mask(attention_mask: torch.Tensor | None, query_length: int, past_length: int,
                            dtype: torch.dtype, device: torch.device) -> tuple[torch.Tensor | None, bool]:
        """(additive mask (B or 1, 1, Tq, Tp + Tq) or None, is_causal): causal over the cached and
        new positions, and padding where `attention_mask` (B, Tp + Tq) or (B, Tq) has 0s.
        No padding and no cache: (None, True), SDPA's own causal kernel."""
        padded = attention_mask is not None and may_pad(attention_mask)
        if not padded and past_length == 0 and query_length > 1:
            return None, True
        keep = self_attention_keep(attention_mask if padded else None, query_length, past_length, device, causal=True)
        return (None if keep is None else additive_mask(keep, dtype)), False

    def forward(self, input_ids: torch.Tensor | None = None, attention_mask: torch.Tensor | None = None,
                encoder_hidden_states: torch.Tensor | None = None, encoder_attention_mask: torch.Tensor | None = None,
                past_key_values: tuple[LayerCache, ...] | None = None, use_cache: bool = False,
                output_hidden_states: bool = False, inputs_embeds: torch.Tensor | None = None,
                position_ids: torch.Tensor | None = None,
                ) -> tuple[torch.Tensor, tuple[LayerCache, ...] | None, tuple[torch.Tensor, ...] | None]:
        """input_ids (B, T) (or inputs_embeds); attention_mask (B, Tp + T) or (B, T), 1 = real;
        encoder_hidden_states (B, S, d_model) and encoder_attention_mask (B, S); position_ids
        (B, T): the new tokens' positions (default: Tp .. Tp + T - 1; rows whose caches are
        left-padded to a common length give their own). Returns (B, T, d_model), the cache
        (use_cache) and, when asked, the hidden states: the embeddings' output, then each
        layer's (L + 1 tensors)."""
        past_length = past_key_values[0][0].shape[2] if past_key_values is not None else 0
        hidden_states = self.embed(input_ids, inputs_embeds, past_length, position_ids)
        dtype = _mask_dtype(hidden_states)
        mask, is_causal = self.self_attention_mask(attention_mask, hidden_states.shape[1], past_length, dtype,
                                                   hidden_states.device)
        encoder_mask = None
        if encoder_attention_mask is not None and may_pad(encoder_attention_mask):
            encoder_mask = additive_mask(encoder_attention_mask.bool()[:, None, None, :], dtype)  # (B, 1, 1, S)
        all_hidden = [hidden_states] if output_hidden_states else None
        cache = [] if use_cache else None
        layers = list(self.layers) if use_cache or past_key_values is not None else \
            _layers_to_run(self.layers, self.layerdrop, self.training)
        for i, layer in enumerate(layers):
            past = past_key_values[i] if past_key_values is not None else None
            hidden_states, layer_cache = layer(hidden_states, mask, is_causal, encoder_hidden_states, encoder_mask, past)
            if cache is not None:
                cache.append(layer_cache)
            if all_hidden is not None:
                all_hidden.append(hidden_states)
        return hidden_states, (tuple(cache) if cache is not None else None), (
            tuple(all_hidden) if all_hidden is not None else None)
