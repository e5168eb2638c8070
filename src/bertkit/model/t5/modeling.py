"""T5 (Raffel et al. 2020): the encoder-decoder of text-to-text transfer.

`T5Config` has transformers' field names and defaults; `T5Model` (encoder + decoder),
`T5ForConditionalGeneration` (+ the vocabulary head, loss with `labels`) and
`T5EncoderModel` (the encoder alone) have transformers' parameter names (`shared`,
`encoder.block.N.layer.0.SelfAttention.q`, `decoder.block.N.layer.1.EncDecAttention.k`,
`encoder.final_layer_norm`, `lm_head`, ...), so state dicts load both ways. The blocks
live in bertkit.model.t5.layers.

The two published variants:
- v1.0 (`feed_forward_proj="relu"`, `tie_word_embeddings=True`): the vocabulary head is
  the `shared` embedding matrix and the decoder output is scaled by d_model^-0.5 first;
- v1.1 (`"gated-gelu"`, `tie_word_embeddings=False`): a separate `lm_head`, no rescale.
`scale_decoder_outputs` (transformers 5's name) says whether the rescale applies; None
means "as tie_word_embeddings". transformers 5 ties the head in every T5 it builds and
writes `scale_decoder_outputs` to say which variant it is; it unties the head when a
checkpoint holds an `lm_head.weight` that differs from `shared.weight`, which is how
bertkit saves an untied model.

The KV cache (`past_key_values`): a tuple over decoder layers of (self_key, self_value,
cross_key, cross_value), each (B, heads, length, d_kv), batch first so beams reorder with
`index_select(0, idx)`. With a cache the decoder takes only the new `decoder_input_ids`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from torch import nn

from bertkit.model.generation import GenerationMixin
from bertkit.model.heads import decoder_cross_entropy
from bertkit.model.layers import mean_over_tokens
from bertkit.model.outputs import BertModelOutput, SequenceClassifierOutput
from bertkit.model.packed_linear import packed_matmul
from bertkit.model.pretrained import PreTrainedModel
from bertkit.model.seq2seq import LayerCache, Seq2SeqLMOutput, Seq2SeqModelOutput, lm_output, read_encoder_output
from bertkit.model.t5.layers import (
    T5Attention,
    T5DenseActDense,
    T5DenseGatedActDense,
    T5LayerNorm,
    T5Stack,
)
from bertkit.model.heads import DenseTanhClassificationHead
from bertkit.model.losses import IGNORE_INDEX, problem_type, sequence_classification_loss
from bertkit.model.t5.config import T5Config


class T5Encoder(T5Stack):
    """The encoder stack as a module of its own: `encoder(input_ids=..., attention_mask=...)`
    -> an output with `last_hidden_state` (B, S, d_model) (and `hidden_states` when asked)."""

    def __init__(self, config: T5Config, embed_tokens: nn.Embedding):
        super().__init__(config, embed_tokens, is_decoder=False)

    def forward(self, input_ids: torch.Tensor | None = None, attention_mask: torch.Tensor | None = None,
                output_hidden_states: bool = False, inputs_embeds: torch.Tensor | None = None,
                return_dict: bool = True) -> BertModelOutput:
        hidden, _, all_hidden = super().forward(input_ids, attention_mask, output_hidden_states=output_hidden_states,
                                                inputs_embeds=inputs_embeds)
        return BertModelOutput(last_hidden_state=hidden, hidden_states=all_hidden)


class T5PreTrainedModel(PreTrainedModel):
    """Config, transformers' init and the checkpoint layout shared by the T5 models."""

    config_class = T5Config
    base_model_prefix = "transformer"  # transformers' (never a prefix of T5 checkpoints' keys)
    optional_prefixes = ("lm_head.",)
    # the stacks' `embed_tokens` are `shared` itself; transformers may store the copies
    derived_keys = ("encoder.embed_tokens.weight", "decoder.embed_tokens.weight")

    def _init_module(self, module: nn.Module) -> None:
        """transformers' T5 init (`initializer_factor` scales every std)."""
        factor = self.config.initializer_factor
        d_model, d_kv, d_ff, heads = self.config.d_model, self.config.d_kv, self.config.d_ff, self.config.num_heads
        if isinstance(module, T5LayerNorm):
            nn.init.constant_(module.weight, factor)
        elif isinstance(module, T5PreTrainedModel):
            nn.init.normal_(module.shared.weight, 0.0, factor)
            if isinstance(getattr(module, "lm_head", None), nn.Linear):
                nn.init.normal_(module.lm_head.weight, 0.0, factor)
        elif isinstance(module, T5DenseActDense):
            nn.init.normal_(module.wi.weight, 0.0, factor * d_model**-0.5)
            nn.init.normal_(module.wo.weight, 0.0, factor * d_ff**-0.5)
        elif isinstance(module, T5DenseGatedActDense):
            nn.init.normal_(module.wi_0.weight, 0.0, factor * d_model**-0.5)
            nn.init.normal_(module.wi_1.weight, 0.0, factor * d_model**-0.5)
            nn.init.normal_(module.wo.weight, 0.0, factor * d_ff**-0.5)
        elif isinstance(module, T5Attention):
            nn.init.normal_(module.q.weight, 0.0, factor * (d_model * d_kv) ** -0.5)
            nn.init.normal_(module.k.weight, 0.0, factor * d_model**-0.5)
            nn.init.normal_(module.v.weight, 0.0, factor * d_model**-0.5)
            nn.init.normal_(module.o.weight, 0.0, factor * (heads * d_kv) ** -0.5)
            if module.has_relative_attention_bias:
                nn.init.normal_(module.relative_attention_bias.weight, 0.0, factor * d_model**-0.5)

    def state_from_checkpoint(self, state: dict[str, torch.Tensor], path: Path) -> dict[str, torch.Tensor]:
        """Drop what carries no state here: a tied head's copy of `shared` (older
        transformers wrote it) and the decoder's cross-attention bias transformers ignores."""
        dropped = ["decoder.block.0.layer.1.EncDecAttention.relative_attention_bias.weight"]
        if not isinstance(getattr(self, "lm_head", None), nn.Linear):
            dropped.append("lm_head.weight")
        return {k: v for k, v in state.items() if k not in dropped}

    def get_input_embeddings(self) -> nn.Embedding:
        return self.shared

    def get_encoder(self) -> T5Encoder:
        return self.encoder


class T5Model(T5PreTrainedModel):
    """The bare encoder-decoder: (input_ids, decoder_input_ids) -> the decoder's hidden states."""

    def __init__(self, config: T5Config):
        super().__init__(config)
        self.shared = nn.Embedding(config.vocab_size, config.d_model)
        self.encoder = T5Encoder(config, self.shared)
        self.decoder = T5Stack(config, self.shared, is_decoder=True)
        self.init_weights()

    def shift_right(self, labels: torch.Tensor) -> torch.Tensor:
        """Decoder inputs for `labels` (B, T): decoder_start_token_id, then labels[:, :-1],
        -100 replaced by the pad id (transformers' `_shift_right`)."""
        shifted = torch.full_like(labels, self.config.decoder_start_token_id)
        shifted[:, 1:] = labels[:, :-1]
        return shifted.masked_fill(shifted == IGNORE_INDEX, self.config.pad_token_id)

    _shift_right = shift_right  # transformers' name

    def encode_and_decode(
        self, input_ids, attention_mask, decoder_input_ids, decoder_attention_mask, encoder_outputs,
        past_key_values, use_cache, output_hidden_states,
    ) -> Seq2SeqModelOutput:
        if encoder_outputs is None:
            encoder_outputs = self.encoder(input_ids=input_ids, attention_mask=attention_mask,
                                           output_hidden_states=output_hidden_states)
        encoder_hidden, encoder_all = read_encoder_output(encoder_outputs)
        hidden, cache, decoder_all = self.decoder(
            decoder_input_ids, decoder_attention_mask, encoder_hidden, attention_mask, past_key_values,
            use_cache=bool(use_cache), output_hidden_states=output_hidden_states,
        )
        return Seq2SeqModelOutput(last_hidden_state=hidden, past_key_values=cache, decoder_hidden_states=decoder_all,
                                  encoder_last_hidden_state=encoder_hidden, encoder_hidden_states=encoder_all)

    def forward(
        self, input_ids: torch.Tensor | None = None, attention_mask: torch.Tensor | None = None,
        decoder_input_ids: torch.Tensor | None = None, decoder_attention_mask: torch.Tensor | None = None,
        encoder_outputs: Any = None, past_key_values: tuple[LayerCache, ...] | None = None,
        use_cache: bool | None = None, output_hidden_states: bool = False, return_dict: bool = True,
    ) -> Seq2SeqModelOutput:
        """input_ids / attention_mask (B, S); decoder_input_ids / decoder_attention_mask (B, T)
        (1 = real token); `encoder_outputs` skips the encoder. -> Seq2SeqModelOutput."""
        return self.encode_and_decode(input_ids, attention_mask, decoder_input_ids, decoder_attention_mask,
                                      encoder_outputs, past_key_values, use_cache, output_hidden_states)


class T5ForConditionalGeneration(T5Model, GenerationMixin):
    """T5Model + the vocabulary head: tied to `shared` with the d_model^-0.5 rescale (v1.0)
    or its own `lm_head` (v1.1). `labels` (B, T) give the loss and, when no
    decoder_input_ids are given, the decoder inputs (labels shifted right)."""

    merges_decode_steps = True  # relative position bias: left-padded caches keep every row's positions

    def __init__(self, config: T5Config):
        T5PreTrainedModel.__init__(self, config)  # not T5Model's: the head must exist before init_weights
        self.shared = nn.Embedding(config.vocab_size, config.d_model)
        self.encoder = T5Encoder(config, self.shared)
        self.decoder = T5Stack(config, self.shared, is_decoder=True)
        if not config.tie_word_embeddings:
            self.lm_head = nn.Linear(config.d_model, config.vocab_size, bias=False)
        self.init_weights()

    def output_embeddings(self) -> torch.Tensor:
        """The (V, d_model) vocabulary matrix: `lm_head`'s or, tied, `shared`'s."""
        head = getattr(self, "lm_head", None)
        return head.weight if head is not None else self.shared.weight

    def vocabulary_logits(self, decoder_hidden: torch.Tensor) -> torch.Tensor:
        """(..., d_model) decoder output -> (..., V) logits."""
        if self.config.scale_decoder_outputs:
            decoder_hidden = decoder_hidden * self.config.d_model**-0.5
        return packed_matmul(decoder_hidden, self.output_embeddings())  # F.linear outside generate

    def loss_and_logits(self, decoder_hidden: torch.Tensor, labels: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """decoder_hidden (B, T, d_model), labels (B, T) all real targets (span corruption's
        fixed-length ones) -> (mean CE, logits (B, T, V)): the head and the loss fused
        (bertkit.model.heads.decoder_cross_entropy), the logits' values unchanged."""
        if self.config.scale_decoder_outputs:
            decoder_hidden = decoder_hidden * self.config.d_model**-0.5
        weight = self.output_embeddings()
        loss, logits = decoder_cross_entropy(decoder_hidden.reshape(-1, decoder_hidden.shape[-1]), weight, None,
                                             labels.reshape(-1))  # T5's head has no bias
        return loss, logits.view(*labels.shape, -1)

    def forward(
        self, input_ids: torch.Tensor | None = None, attention_mask: torch.Tensor | None = None,
        decoder_input_ids: torch.Tensor | None = None, decoder_attention_mask: torch.Tensor | None = None,
        encoder_outputs: Any = None, past_key_values: tuple[LayerCache, ...] | None = None,
        use_cache: bool | None = None, labels: torch.Tensor | None = None, output_hidden_states: bool = False,
        return_dict: bool = True,
    ) -> Seq2SeqLMOutput:
        """As T5Model.forward, plus labels (B, T) target ids (-100 = ignored) -> loss.
        logits: (B, T, V) float."""
        if labels is not None and decoder_input_ids is None:
            decoder_input_ids = self.shift_right(labels)
        out = self.encode_and_decode(input_ids, attention_mask, decoder_input_ids, decoder_attention_mask,
                                     encoder_outputs, past_key_values, use_cache, output_hidden_states)
        return lm_output(self, out, labels)


class T5EncoderModel(T5PreTrainedModel):
    """The encoder alone: (input_ids, attention_mask) -> last_hidden_state (B, S, d_model)."""

    def __init__(self, config: T5Config):
        super().__init__(config)
        self.shared = nn.Embedding(config.vocab_size, config.d_model)
        self.encoder = T5Encoder(config, self.shared)
        self.init_weights()

    def forward(self, input_ids: torch.Tensor | None = None, attention_mask: torch.Tensor | None = None,
                output_hidden_states: bool = False, return_dict: bool = True) -> BertModelOutput:
        return self.encoder(input_ids=input_ids, attention_mask=attention_mask,
                            output_hidden_states=output_hidden_states)


class T5ClassificationHead(DenseTanhClassificationHead):
    """T5's classification head (transformers' names)."""

    def __init__(self, config: T5Config):
        super().__init__(config.d_model, config.num_labels, config.classifier_dropout)


class T5EncoderForSequenceClassification(T5PreTrainedModel):
    """T5's encoder (`transformer`, a T5EncoderModel) with a sequence classification head
    on the mean of its final states over the real tokens (T5 has no [CLS]): the
    `classification` task family's head for T5 checkpoints. transformers has no such
    class (its T5ForSequenceClassification runs the decoder too), so this checkpoint loads
    in bertkit only; its `transformer.` weights are T5EncoderModel's. Losses as
    BertForSequenceClassification (by `problem_type`)."""

    base_model_prefix = "transformer"
    backbone_prefix = "transformer."
    optional_prefixes = ("classification_head.",)

    def __init__(self, config: T5Config):
        super().__init__(config)
        self.num_labels = config.num_labels
        self.transformer = T5EncoderModel(config)
        self.classification_head = T5ClassificationHead(config)
        self.init_weights()

    def _init_module(self, module: nn.Module) -> None:
        if isinstance(module, T5ClassificationHead):  # transformers' init of its T5 head
            for linear in (module.dense, module.out_proj):
                nn.init.normal_(linear.weight, 0.0, self.config.initializer_factor * self.config.d_model**-0.5)
                nn.init.zeros_(linear.bias)
        elif not isinstance(module, T5EncoderForSequenceClassification):
            super()._init_module(module)

    def forward(self, input_ids: torch.Tensor | None = None, attention_mask: torch.Tensor | None = None,
                labels: torch.Tensor | None = None, output_hidden_states: bool = False,
                output_attentions: bool = False, return_dict: bool = True) -> SequenceClassifierOutput:
        """input_ids, attention_mask (B, S); labels (B,) class ids, (B,) float for regression
        or (B, K) float for multi-label -> logits (B, num_labels) and the loss."""
        out = self.transformer(input_ids=input_ids, attention_mask=attention_mask,
                               output_hidden_states=output_hidden_states)
        hidden = out.last_hidden_state  # (B, S, d_model)
        logits = self.classification_head(mean_over_tokens(hidden, attention_mask))  # (B, K)
        loss = None
        if labels is not None:
            loss = sequence_classification_loss(logits, labels, problem_type(self.config, labels))
        return SequenceClassifierOutput(loss, logits, out.hidden_states, None)
