"""ModernBERT (Warner et al. 2024, "Smarter, Better, Faster, Longer"): the encoder and its heads,
with transformers' class names, forward order and state-dict keys.

What differs from BERT:
- no position table: rotary embeddings (bertkit.model.rotary) on queries and keys, theta
  `global_rope_theta` in the global layers and `local_rope_theta` in the local ones;
- attention alternates: every `global_attn_every_n_layers`-th layer (from layer 0) attends over the
  whole sequence, the others within a sliding window of `local_attention` // 2 positions on either
  side (`layer_types` may name each layer's kind instead);
- pre-LN blocks with LayerNorms without bias (`norm_bias`), the first block's `attn_norm` the identity
  (the embeddings end in a LayerNorm), a `final_norm`; fused `Wqkv`, GeGLU MLP (`Wi` gives input and
  gate, `Wo`), no biases anywhere by default;
- heads: `head` (dense -> `classifier_activation` -> norm) under every task's output layer, the MLM
  `decoder` tied to `tok_embeddings` (its `bias` only is stored), classification on the first token
  or the mean over real tokens (`classifier_pooling`).

Padding: a padded batch runs unpadded (bertkit.model.unpad: packed (N, H) rows for every row-wise
operation, attention on zero-filled (B, heads, T, d) tensors) once `UNPAD_MIN_PADDING` of it is
padding, padded with masks otherwise; both give transformers' numbers at the real positions, and
the unpadded path zeros at padding. Masks are additive with the dtype's minimum (not -inf), so a
padding query whose window holds only padding gets a finite uniform row, never NaN.
Sequences count positions from 0 at the first column (transformers'), so padding goes on the right.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from bertkit.errors import ConfigError
from bertkit.model.dropout import Dropout, dropout
from bertkit.model.heads import SUMMARY_ACTIVATIONS, TiedOutputLayer, labelled_rows
from bertkit.model.layers import mean_over_tokens
from bertkit.model.losses import (
    choice_output,
    flatten_choices,
    problem_type,
    sequence_classification_loss,
    span_loss,
    token_classification_loss,
)
from bertkit.model.masks import additive_mask
from bertkit.model.modernbert.config import ModernBertConfig
from bertkit.model.outputs import (
    BertModelOutput,
    MaskedLMOutput,
    MultipleChoiceModelOutput,
    QuestionAnsweringModelOutput,
    SequenceClassifierOutput,
    TokenClassifierOutput,
)
from bertkit.model.pretrained import PreTrainedModel
from bertkit.model.rotary import apply_rotary, rotary_tables
from bertkit.model.static_shapes import PredictionBudget
from bertkit.model.unpad import Unpadding, UnpadSwitch
from bertkit.model.varlen import packed_attention, use_varlen


class ModernBertEmbeddings(nn.Module):
    """Token embeddings -> LayerNorm (no bias by default) -> dropout: (B, T) ids -> (B, T, H)."""

    def __init__(self, config: ModernBertConfig):
        super().__init__()
        self.tok_embeddings = nn.Embedding(config.vocab_size, config.hidden_size, padding_idx=config.pad_token_id)
        self.norm = nn.LayerNorm(config.hidden_size, eps=config.norm_eps, bias=config.norm_bias)
        self.drop = Dropout(config.embedding_dropout)

    def forward(self, input_ids: torch.Tensor | None = None, inputs_embeds: torch.Tensor | None = None) -> torch.Tensor:
        embeds = self.tok_embeddings(input_ids) if inputs_embeds is None else inputs_embeds
        return self.drop(self.norm(embeds))


class ModernBertMLP(nn.Module):
    """GeGLU: Wo(drop(act(a) * g)) with (a, g) the two halves of Wi(x): (..., H) -> (..., H)."""

    def __init__(self, config: ModernBertConfig):
        super().__init__()
        self.Wi = nn.Linear(config.hidden_size, 2 * config.intermediate_size, bias=config.mlp_bias)
        self.act = SUMMARY_ACTIVATIONS[config.hidden_activation]
        self.drop = Dropout(config.mlp_dropout)
        self.Wo = nn.Linear(config.intermediate_size, config.hidden_size, bias=config.mlp_bias)

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        gated, gate = self.Wi(hidden_states).chunk(2, dim=-1)  # 2 x (..., I)
        return self.Wo(self.drop(self.act(gated) * gate))


class ModernBertAttention(nn.Module):
    """Self-attention with RoPE, global or within the sliding window (the mask it is given says which)."""

    def __init__(self, config: ModernBertConfig, layer_idx: int):
        super().__init__()
        self.num_heads = config.num_attention_heads
        self.head_dim = config.head_dim
        self.local = config.attention_types[layer_idx] == "sliding_attention"
        self.dropout_p = config.attention_dropout
        self.Wqkv = nn.Linear(config.hidden_size, 3 * config.hidden_size, bias=config.attention_bias)
        self.Wo = nn.Linear(config.hidden_size, config.hidden_size, bias=config.attention_bias)
        self.out_drop = Dropout(config.attention_dropout)

    def forward(
        self,
        hidden_states: torch.Tensor,
        rope: tuple[torch.Tensor, torch.Tensor],
        mask: torch.Tensor | None,
        unpadding: Unpadding | None = None,
        output_attentions: bool = False,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """hidden_states (B, T, H), or packed (N, H) rows with `unpadding`; rope: (cos, sin), each
        (T, d) or (B, 1, T, d) (packed rows: (N, 1, d)); mask: additive, (B or 1, 1, T or 1, T), None
        for none. Returns the output in hidden_states' layout and, on request, the probabilities
        (B, heads, T, T)."""
        dropout_p = self.dropout_p if self.training else 0.0
        explicit = output_attentions or (dropout_p > 0.0 and hidden_states.device.type == "cpu")
        qkv = self.Wqkv(hidden_states)  # (B, T, 3H) or (N, 3H)
        if unpadding is not None and not self.local and not explicit and use_varlen(qkv.device):
            # global attention over packed rows (GPU): no padding anywhere (bertkit.model.varlen)
            rows = qkv.shape[0]
            query, key, value = qkv.view(rows, 3, self.num_heads, self.head_dim).unbind(1)  # (N, heads, d)
            # contiguous (N, H) rows: the jagged view needs dense values
            query, key = (apply_rotary(x, *rope).reshape(rows, -1).contiguous() for x in (query, key))
            context = packed_attention(query, key, value.reshape(rows, -1).contiguous(), unpadding.offsets,
                                       self.num_heads, dropout_p)
            return self.out_drop(self.Wo(context)), None
        if unpadding is not None:
            qkv = unpadding.pad(qkv)  # (B, T, 3H), zeros at padding
        batch, seq_len, _ = qkv.shape
        query, key, value = qkv.view(batch, seq_len, 3, self.num_heads, self.head_dim).permute(2, 0, 3, 1, 4)
        cos, sin = rope
        query, key = apply_rotary(query, cos, sin), apply_rotary(key, cos, sin)  # (B, heads, T, d)
        probs = None
        if explicit:
            scores = query @ key.transpose(-1, -2) / math.sqrt(self.head_dim)  # (B, heads, T, T)
            if mask is not None:
                scores = scores + mask
            probs = scores.softmax(dim=-1)
            context = dropout(probs, dropout_p, self.training) @ value
            if not output_attentions:
                probs = None
        else:
            context = F.scaled_dot_product_attention(query, key, value, attn_mask=mask, dropout_p=dropout_p)
        context = context.transpose(1, 2).reshape(batch, seq_len, -1)  # (B, T, H)
        if unpadding is not None:
            context = unpadding.pack(context)  # (N, H)
        return self.out_drop(self.Wo(context)), probs


class ModernBertEncoderLayer(nn.Module):
    """Pre-LN block: x + attn(attn_norm(x)), then + mlp(mlp_norm(x)); layer 0's attn_norm is the identity."""

    def __init__(self, config: ModernBertConfig, layer_idx: int):
        super().__init__()
        self.attn_norm = (nn.Identity() if layer_idx == 0
                          else nn.LayerNorm(config.hidden_size, eps=config.norm_eps, bias=config.norm_bias))
        self.attn = ModernBertAttention(config, layer_idx)
        self.mlp_norm = nn.LayerNorm(config.hidden_size, eps=config.norm_eps, bias=config.norm_bias)
        self.mlp = ModernBertMLP(config)

    def forward(self, hidden_states, rope, mask, unpadding=None, output_attentions=False):
        """(B, T, H) or packed (N, H) -> the same layout, attention probabilities or None."""
        attended, probs = self.attn(self.attn_norm(hidden_states), rope, mask, unpadding, output_attentions)
        hidden_states = hidden_states + attended
        return hidden_states + self.mlp(self.mlp_norm(hidden_states)), probs


def window_keep(seq_len: int, half_window: int, device: torch.device) -> torch.Tensor:
    """(T, T) bool: key k visible to query q when |q - k| <= half_window (transformers' sliding window)."""
    positions = torch.arange(seq_len, device=device)
    return (positions[:, None] - positions[None, :]).abs() <= half_window


class ModernBertPreTrainedModel(PreTrainedModel):
    """ModernBERT's config, its encoder attribute `model` (transformers' base_model_prefix) and init:
    truncated normal weights (cut at `initializer_cutoff_factor` std), std `initializer_range` for the
    embeddings and input projections, / sqrt(2 L) for the output projections and heads' dense layer,
    hidden_size^-0.5 for task classifiers; zero biases, unit norms."""

    config_class = ModernBertConfig
    base_model_prefix = "model"
    derived_keys = ("decoder.weight",)  # the MLM decoder is the token embedding matrix

    def _init_module(self, module: nn.Module) -> None:
        config = self.config
        stds = {"in": config.initializer_range,
                "out": config.initializer_range / math.sqrt(2.0 * config.num_hidden_layers),
                "final_out": config.hidden_size ** -0.5}
        targets: list[tuple[nn.Module, float]] = []
        if isinstance(module, ModernBertEmbeddings):
            targets = [(module.tok_embeddings, stds["in"])]
        elif isinstance(module, (ModernBertMLP, ModernBertAttention)):
            targets = [(module.Wi if isinstance(module, ModernBertMLP) else module.Wqkv, stds["in"]),
                       (module.Wo, stds["out"])]
        elif isinstance(module, ModernBertPredictionHead):
            targets = [(module.dense, stds["out"])]
        elif isinstance(module, ModernBertTaskModel) and isinstance(getattr(module, "classifier", None), nn.Linear):
            targets = [(module.classifier, stds["final_out"])]
        elif isinstance(module, nn.LayerNorm):
            nn.init.ones_(module.weight)
            if module.bias is not None:
                nn.init.zeros_(module.bias)
        cutoff = config.initializer_cutoff_factor or 3.0
        for layer, std in targets:
            nn.init.trunc_normal_(layer.weight, 0.0, std, -cutoff * std, cutoff * std)
            if getattr(layer, "bias", None) is not None:
                nn.init.zeros_(layer.bias)


class ModernBertModel(UnpadSwitch, ModernBertPreTrainedModel):
    """Embeddings -> L blocks (global / local attention, RoPE) -> final_norm; no pooler."""

    def __init__(self, config: ModernBertConfig):
        super().__init__(config)
        self.embeddings = ModernBertEmbeddings(config)
        self.layers = nn.ModuleList(ModernBertEncoderLayer(config, i) for i in range(config.num_hidden_layers))
        self.final_norm = nn.LayerNorm(config.hidden_size, eps=config.norm_eps, bias=config.norm_bias)
        self.init_weights()

    def get_input_embeddings(self) -> nn.Embedding:
        return self.embeddings.tok_embeddings

    def _rope(self, position_ids: torch.Tensor, unpadding: Unpadding | None) -> dict[bool, tuple[torch.Tensor, ...]]:
        """local? -> (cos, sin) for position_ids (T,) -> (T, d) or (B, T) -> (B, 1, T, d); packed rows
        (N, 1, d) besides, under key "rows", when a global layer may run packed (the GPU route)."""
        config = self.config
        tables = {}
        for local, theta in ((False, config.global_rope_theta), (True, config.local_rope_theta)):
            cos, sin = rotary_tables(position_ids, config.head_dim, theta)
            if unpadding is not None and not local and use_varlen(position_ids.device):
                rows = position_ids.expand(unpadding.batch_size, -1).reshape(-1)[unpadding.indices]  # (N,)
                tables["rows"] = tuple(t[:, None] for t in rotary_tables(rows, config.head_dim, theta))
            tables[local] = (cos, sin) if position_ids.dim() == 1 else (cos[:, None], sin[:, None])
        return tables

    def _masks(self, attention_mask: torch.Tensor | None, seq_len: int, dtype: torch.dtype,
               device: torch.device) -> dict[bool, torch.Tensor | None]:
        """local? -> the additive mask of that kind of layer: padding keys (B, 1, 1, T) in the global
        ones (None without padding), the window and padding (B or 1, 1, T, T) in the local ones."""
        padding = None
        if attention_mask is not None and not (not torch.compiler.is_compiling() and bool(attention_mask.all())):
            padding = attention_mask.bool()[:, None, None, :]  # (B, 1, 1, T)
        masks: dict[bool, torch.Tensor | None] = {False: None if padding is None else additive_mask(padding, dtype)}
        if seq_len - 1 <= self.config.sliding_window:  # the window spans the sequence: as global
            masks[True] = masks[False]
        else:
            keep = window_keep(seq_len, self.config.sliding_window, device)[None, None]  # (1, 1, T, T)
            masks[True] = additive_mask(keep if padding is None else keep & padding, dtype)
        return masks

    def forward(
        self,
        input_ids: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        position_ids: torch.Tensor | None = None,
        inputs_embeds: torch.Tensor | None = None,
        output_hidden_states: bool = False,
        output_attentions: bool = False,
        unpad: bool | None = None,
    ) -> BertModelOutput:
        """input_ids (B, T) int64 (or inputs_embeds (B, T, H)); attention_mask (B, T) 1 = real token;
        position_ids (B, T) or None (0 .. T-1). Returns last_hidden_state (B, T, H) after final_norm;
        hidden_states: the embeddings and each block's output, the last one after final_norm
        (transformers'); attentions: (B, heads, T, T) per block."""
        if (input_ids is None) == (inputs_embeds is None):
            raise ConfigError("ModernBertModel: give exactly one of input_ids and inputs_embeds")
        hidden_states = self.embeddings(input_ids, inputs_embeds)  # (B, T, H)
        batch, seq_len, _ = hidden_states.shape
        device = hidden_states.device
        unpadding = self.unpadding_for(attention_mask, unpad, output_attentions)
        if position_ids is None:
            position_ids = torch.arange(seq_len, device=device)  # (T,)
        rope = self._rope(position_ids, unpadding)
        masks = self._masks(attention_mask, seq_len, hidden_states.dtype, device)
        if unpadding is not None:
            hidden_states = unpadding.pack(hidden_states)  # (N, H)
        all_hidden = [hidden_states] if output_hidden_states else None
        all_attentions = [] if output_attentions else None
        for layer in self.layers:
            local = layer.attn.local
            layer_rope = rope.get("rows", rope[local]) if not local else rope[local]
            hidden_states, probs = layer(hidden_states, layer_rope, masks[local], unpadding, output_attentions)
            if all_hidden is not None:
                all_hidden.append(hidden_states)
            if all_attentions is not None:
                all_attentions.append(probs)
        hidden_states = self.final_norm(hidden_states)
        hidden = None
        if all_hidden is not None:
            hidden = tuple(all_hidden[:-1]) + (hidden_states,)
        if unpadding is not None:
            hidden_states, hidden = unpadding.pad_encoder_outputs(hidden_states, hidden)
        return BertModelOutput(hidden_states, None, hidden, None if all_attentions is None else tuple(all_attentions))


class ModernBertPredictionHead(nn.Module):
    """dense -> `classifier_activation` -> norm: (..., H) -> (..., H), under every ModernBERT head."""

    def __init__(self, config: ModernBertConfig):
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.hidden_size, bias=config.classifier_bias)
        self.act = SUMMARY_ACTIVATIONS[config.classifier_activation]
        self.norm = nn.LayerNorm(config.hidden_size, eps=config.norm_eps, bias=config.norm_bias)

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        return self.norm(self.act(self.dense(hidden_states)))


class ModernBertForMaskedLM(PredictionBudget, ModernBertPreTrainedModel):
    """transformers' `ModernBertForMaskedLM`: head -> decoder tied to `tok_embeddings` (+ `decoder.bias`)."""

    backbone_prefix = "model."
    optional_prefixes = ("head.", "decoder.")

    def __init__(self, config: ModernBertConfig):
        super().__init__(config)
        if config.extra.get("tie_word_embeddings", True) is False:
            raise ConfigError("field 'tie_word_embeddings': bertkit's ModernBertForMaskedLM ties its decoder "
                              "to the token embeddings (false is not supported)")
        self.model = ModernBertModel(config)
        self.head = ModernBertPredictionHead(config)
        self.decoder = TiedOutputLayer(config.vocab_size, bias=config.decoder_bias)
        self.init_weights()

    def forward(
        self,
        input_ids: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        position_ids: torch.Tensor | None = None,
        inputs_embeds: torch.Tensor | None = None,
        labels: torch.Tensor | None = None,
        output_hidden_states: bool = False,
        output_attentions: bool = False,
    ) -> MaskedLMOutput:
        """Without labels: logits (B, T, V). With labels (B, T) (-100 = no prediction): the mean
        cross-entropy over the labelled positions and their logits only, (N, V) in row-major order
        (`masked_positions` (N, 2)); transformers' `sparse_prediction`, always on with labels."""
        out = self.model(input_ids, attention_mask, position_ids, inputs_embeds,
                         output_hidden_states=output_hidden_states, output_attentions=output_attentions)
        word_embeddings = self.model.embeddings.tok_embeddings.weight  # (V, H)
        if labels is None:
            logits = self.decoder(self.head(out.last_hidden_state), word_embeddings)  # (B, T, V)
            return MaskedLMOutput(None, logits, None, out.hidden_states, out.attentions)
        positions, selected, targets = labelled_rows(out.last_hidden_state, labels, self.static_budget())
        loss, logits = self.decoder.loss_and_logits(self.head(selected), word_embeddings, targets)
        return MaskedLMOutput(loss, logits, positions, out.hidden_states, out.attentions)


class ModernBertTaskModel(ModernBertPreTrainedModel):
    """What the task heads share: the encoder `model`, `head`, `drop` and a linear `classifier` with
    `outputs` outputs (transformers' layout for every ModernBERT task)."""

    backbone_prefix = "model."
    optional_prefixes = ("head.", "classifier.")

    def __init__(self, config: ModernBertConfig, outputs: int):
        super().__init__(config)
        self.num_labels = config.num_labels
        self.model = ModernBertModel(config)
        self.head = ModernBertPredictionHead(config)
        self.drop = Dropout(config.classifier_dropout)
        self.classifier = nn.Linear(config.hidden_size, outputs)
        self.init_weights()

    @property
    def backbone(self) -> ModernBertModel:
        return self.model

    def scores(self, hidden_states: torch.Tensor) -> torch.Tensor:
        """(..., H) -> (..., outputs): head, dropout, classifier."""
        return self.classifier(self.drop(self.head(hidden_states)))

    def pool(self, hidden_states: torch.Tensor, attention_mask: torch.Tensor | None) -> torch.Tensor:
        """(B, T, H) -> (B, H): the first real token ("cls": the first column unless the batch is left
        padded) or the mean over the real tokens ("mean"), by `classifier_pooling`."""
        if self.config.classifier_pooling == "mean":
            return mean_over_tokens(hidden_states, attention_mask)
        first = 0 if attention_mask is None else attention_mask.argmax(-1)  # (B,): the first real token
        return hidden_states[torch.arange(hidden_states.shape[0], device=hidden_states.device), first]


class ModernBertForSequenceClassification(ModernBertTaskModel):
    """transformers' `ModernBertForSequenceClassification`: pooled state -> head -> drop -> classifier;
    losses by `problem_type` (regression, single- or multi-label)."""

    def __init__(self, config: ModernBertConfig):
        super().__init__(config, config.num_labels)

    def forward(self, input_ids=None, attention_mask=None, position_ids=None, inputs_embeds=None, labels=None,
                output_hidden_states: bool = False, output_attentions: bool = False) -> SequenceClassifierOutput:
        """input_ids, attention_mask: (B, T); labels: (B,) int64 ids, (B,) float targets (regression)
        or (B, K) float (multi-label) -> logits (B, K)."""
        out = self.model(input_ids, attention_mask, position_ids, inputs_embeds,
                         output_hidden_states=output_hidden_states, output_attentions=output_attentions)
        logits = self.scores(self.pool(out.last_hidden_state, attention_mask))  # (B, K)
        loss = None if labels is None else sequence_classification_loss(logits, labels, problem_type(self.config, labels))
        return SequenceClassifierOutput(loss, logits, out.hidden_states, out.attentions)


class ModernBertForTokenClassification(ModernBertTaskModel):
    """transformers' `ModernBertForTokenClassification`: every token -> head -> drop -> classifier."""

    def __init__(self, config: ModernBertConfig):
        super().__init__(config, config.num_labels)

    def forward(self, input_ids=None, attention_mask=None, position_ids=None, inputs_embeds=None, labels=None,
                output_hidden_states: bool = False, output_attentions: bool = False) -> TokenClassifierOutput:
        """labels: (B, T) int64, -100 where no loss is taken -> logits (B, T, K)."""
        out = self.model(input_ids, attention_mask, position_ids, inputs_embeds,
                         output_hidden_states=output_hidden_states, output_attentions=output_attentions)
        logits = self.scores(out.last_hidden_state)  # (B, T, K)
        loss = None if labels is None else token_classification_loss(logits, labels)
        return TokenClassifierOutput(loss, logits, out.hidden_states, out.attentions)


class ModernBertForQuestionAnswering(ModernBertTaskModel):
    """transformers' `ModernBertForQuestionAnswering`: every token -> head -> drop -> classifier (start,
    end). Padding positions get the dtype's minimum (bertkit's QA heads: never an answer)."""

    def __init__(self, config: ModernBertConfig):
        if config.num_labels != 2:
            raise ConfigError(f"ModernBertForQuestionAnswering needs num_labels 2 (start, end), "
                              f"the config has {config.num_labels}")
        super().__init__(config, config.num_labels)

    def forward(self, input_ids=None, attention_mask=None, position_ids=None, start_positions=None,
                end_positions=None, output_hidden_states: bool = False,
                output_attentions: bool = False) -> QuestionAnsweringModelOutput:
        """start_positions, end_positions: (B,) int64 (outside [0, T): ignored) -> (B, T) logits each."""
        out = self.model(input_ids, attention_mask, position_ids,
                         output_hidden_states=output_hidden_states, output_attentions=output_attentions)
        logits = self.scores(out.last_hidden_state)  # (B, T, 2)
        start_logits, end_logits, loss = span_loss(logits, attention_mask, start_positions, end_positions)
        return QuestionAnsweringModelOutput(loss, start_logits, end_logits, out.hidden_states, out.attentions)


class ModernBertForMultipleChoice(ModernBertTaskModel):
    """transformers' `ModernBertForMultipleChoice`: each (context, choice) row pooled -> one score."""

    def __init__(self, config: ModernBertConfig):
        super().__init__(config, 1)

    def forward(self, input_ids=None, attention_mask=None, position_ids=None, inputs_embeds=None, labels=None,
                output_hidden_states: bool = False, output_attentions: bool = False) -> MultipleChoiceModelOutput:
        """input_ids, attention_mask: (B, C, T); labels: (B,) the right choice -> logits (B, C)."""
        num_choices = (input_ids if input_ids is not None else inputs_embeds).shape[1]
        ids, mask, positions = flatten_choices(input_ids, attention_mask, position_ids)
        embeds = None if inputs_embeds is None else inputs_embeds.reshape(-1, *inputs_embeds.shape[-2:])
        out = self.model(ids, mask, positions, embeds, output_hidden_states=output_hidden_states,
                         output_attentions=output_attentions)
        scores = self.scores(self.pool(out.last_hidden_state, mask))  # (B * C, 1)
        return choice_output(scores, num_choices, labels, out)
