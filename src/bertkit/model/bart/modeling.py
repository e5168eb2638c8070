"""BART (Lewis et al. 2019): the denoising encoder-decoder — a BERT-like bidirectional
encoder, a GPT-like causal decoder with cross-attention, both post-LN with GELU.

`BartModel` (encoder + decoder), `BartForConditionalGeneration` (+ the vocabulary head
tied to `model.shared`, plus the `final_logits_bias` buffer; loss with `labels`),
`BartForSequenceClassification` (a head on the decoder's state at the last EOS of each
row) and `BartForQuestionAnswering` (start/end scores from the decoder's states) have
transformers' parameter names (`model.shared`, `model.encoder.embed_positions`,
`model.decoder.layers.N.encoder_attn.k_proj`, `layernorm_embedding`, `lm_head`,
`final_logits_bias`, `classification_head.{dense,out_proj}`, `qa_outputs`) and
positional argument order, so checkpoints load both ways (KoBART's included).

The decoder reads the target shifted right with `decoder_start_token_id` (EOS in BART)
first; with no `decoder_input_ids` and no `labels` it reads `input_ids` shifted so (what
the classification and QA heads run on, as transformers). The KV cache is a tuple over
decoder layers of (self_key, self_value, cross_key, cross_value) (B, heads, length,
head_dim), as T5's, so `generate` (bertkit.model.generation) serves both families. Its
positions are absolute, so the decoder also takes `decoder_position_ids` (bertkit's own
argument, after transformers' ones): the rows of `decode_steps`, their caches left-padded
to a common length, each keep their own positions and merge (`takes_decoder_position_ids`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from bertkit.model.bart.config import BartConfig
from bertkit.model.bart.layers import (
    BartAttention,
    BartDecoder,
    BartEncoder,
    BartLearnedPositionalEmbedding,
    BartScaledWordEmbedding,
)
from bertkit.model.generation import GenerationMixin
from bertkit.model.heads import DenseTanhClassificationHead, decoder_cross_entropy
from bertkit.model.losses import IGNORE_INDEX, problem_type, sequence_classification_loss
from bertkit.model.outputs import ModelOutput
from bertkit.model.packed_linear import packed_matmul
from bertkit.model.pretrained import PreTrainedModel, normal_init
from bertkit.model.seq2seq import LayerCache, Seq2SeqLMOutput, Seq2SeqModelOutput, lm_output, read_encoder_output


@dataclass
class Seq2SeqSequenceClassifierOutput(ModelOutput):
    """loss: scalar (CE, MSE or BCE by problem type); logits (B, num_labels)."""

    loss: torch.Tensor | None = None
    logits: torch.Tensor | None = None
    decoder_hidden_states: tuple[torch.Tensor, ...] | None = None
    encoder_last_hidden_state: torch.Tensor | None = None
    encoder_hidden_states: tuple[torch.Tensor, ...] | None = None


@dataclass
class Seq2SeqQuestionAnsweringModelOutput(ModelOutput):
    """loss: mean of the start and end CE; start_logits, end_logits (B, T) over input positions."""

    loss: torch.Tensor | None = None
    start_logits: torch.Tensor | None = None
    end_logits: torch.Tensor | None = None
    decoder_hidden_states: tuple[torch.Tensor, ...] | None = None
    encoder_last_hidden_state: torch.Tensor | None = None
    encoder_hidden_states: tuple[torch.Tensor, ...] | None = None


def shift_tokens_right(input_ids: torch.Tensor, pad_token_id: int, decoder_start_token_id: int) -> torch.Tensor:
    """(B, T) -> (B, T): decoder_start_token_id, then input_ids[:, :-1], -100 replaced by pad (transformers')."""
    shifted = torch.full_like(input_ids, decoder_start_token_id)
    shifted[:, 1:] = input_ids[:, :-1]
    return shifted.masked_fill(shifted == IGNORE_INDEX, pad_token_id)


class BartPreTrainedModel(PreTrainedModel):
    """Config, transformers' init and the checkpoint layout shared by the BART models."""

    config_class = BartConfig
    base_model_prefix = "model"
    # tied, the stacks' `embed_tokens` are `shared` itself; transformers may store the copies
    _tied_copies = ("encoder.embed_tokens.weight", "decoder.embed_tokens.weight")
    _fairseq_leftovers = ("encoder.version", "decoder.version")  # in checkpoints converted from fairseq

    @classmethod
    def head_dropout(cls, config: BartConfig) -> float:
        """Dropout before the classification head's layers (transformers': classifier_dropout)."""
        return config.classifier_dropout

    def _init_module(self, module: nn.Module) -> None:
        """transformers' init: normal(0, init_std) weights, zero biases, a zero padding row."""
        normal_init(module, self.config.init_std)
        if isinstance(module, BartForConditionalGeneration):
            nn.init.zeros_(module.final_logits_bias)

    def state_from_checkpoint(self, state: dict[str, torch.Tensor], path: Path) -> dict[str, torch.Tensor]:
        """Drop what carries no state here: fairseq's version counters and, tied, the copies of `shared`."""
        dropped = self._fairseq_leftovers + (self._tied_copies if self.config.tie_word_embeddings else ())
        tied_head = not isinstance(getattr(self, "lm_head", None), nn.Linear)
        return {k: v for k, v in state.items()
                if not k.endswith(dropped) and not (tied_head and k == "lm_head.weight")}


class BartModel(BartPreTrainedModel):
    """The bare encoder-decoder: (input_ids, decoder_input_ids) -> the decoder's last hidden states."""

    def __init__(self, config: BartConfig):
        super().__init__(config)
        scale = config.d_model**0.5 if config.scale_embedding else 1.0
        self.shared = BartScaledWordEmbedding(config.vocab_size, config.d_model, config.pad_token_id, scale)
        self.encoder = BartEncoder(config, self.shared)
        self.decoder = BartDecoder(config, self.shared)
        self.init_weights()

    def get_input_embeddings(self) -> nn.Embedding:
        return self.shared

    def get_encoder(self) -> BartEncoder:
        return self.encoder

    def forward(
        self, input_ids: torch.Tensor | None = None, attention_mask: torch.Tensor | None = None,
        decoder_input_ids: torch.Tensor | None = None, decoder_attention_mask: torch.Tensor | None = None,
        encoder_outputs: Any = None, past_key_values: tuple[LayerCache, ...] | None = None,
        inputs_embeds: torch.Tensor | None = None, decoder_inputs_embeds: torch.Tensor | None = None,
        use_cache: bool | None = None, output_hidden_states: bool = False, return_dict: bool = True,
        cache: tuple[LayerCache, ...] | None = None, decoder_position_ids: torch.Tensor | None = None,
    ) -> Seq2SeqModelOutput:
        """input_ids / attention_mask (B, S); decoder_input_ids / decoder_attention_mask (B, T)
        (1 = real token; default: input_ids shifted right); `encoder_outputs` skips the
        encoder; `past_key_values` (transformers 5: `cache`) the decoder's earlier steps;
        `decoder_position_ids` (B, T) the decoder tokens' positions (default: counted from the
        cache's length; bertkit's own, for rows with left-padded caches: decode_steps).
        -> Seq2SeqModelOutput (last_hidden_state (B, T, d_model), ...)."""
        if decoder_input_ids is None and decoder_inputs_embeds is None:
            if input_ids is None:
                raise ValueError("decoder_input_ids, decoder_inputs_embeds or input_ids is required")
            decoder_input_ids = shift_tokens_right(input_ids, self.config.pad_token_id,
                                                   self.config.decoder_start_token_id)
        if encoder_outputs is None:
            encoder_outputs = self.encoder(input_ids=input_ids, attention_mask=attention_mask,
                                           inputs_embeds=inputs_embeds, output_hidden_states=output_hidden_states)
        encoder_hidden, encoder_all = read_encoder_output(encoder_outputs)
        hidden, new_cache, decoder_all = self.decoder(
            decoder_input_ids, decoder_attention_mask, encoder_hidden, attention_mask,
            past_key_values if past_key_values is not None else cache, use_cache=bool(use_cache),
            output_hidden_states=output_hidden_states, inputs_embeds=decoder_inputs_embeds,
            position_ids=decoder_position_ids,
        )
        return Seq2SeqModelOutput(last_hidden_state=hidden, past_key_values=new_cache, decoder_hidden_states=decoder_all,
                                  encoder_last_hidden_state=encoder_hidden, encoder_hidden_states=encoder_all)


class _WithBartModel(BartPreTrainedModel):
    """A head on `model` (a BartModel): checkpoints of the bare model load with `model.` added."""

    backbone_prefix = "model."

    def get_encoder(self) -> BartEncoder:
        return self.model.encoder

    def get_input_embeddings(self) -> nn.Embedding:
        return self.model.shared


class BartForConditionalGeneration(_WithBartModel, GenerationMixin):
    """BartModel + the vocabulary head: logits = decoder states @ shared^T + final_logits_bias
    (a separate `lm_head` when tie_word_embeddings is false). `labels` (B, T) give the loss
    (mean CE over labels != -100) and, without decoder_input_ids, the decoder inputs."""

    optional_prefixes = ("final_logits_bias", "lm_head.")
    # absolute decoder positions, but given per row (decoder_position_ids): rows with left-padded caches merge
    takes_decoder_position_ids = True
    merges_decode_steps = True

    def __init__(self, config: BartConfig):
        BartPreTrainedModel.__init__(self, config)
        self.model = BartModel(config)
        self.register_buffer("final_logits_bias", torch.zeros(1, config.vocab_size))
        if not config.tie_word_embeddings:
            self.lm_head = nn.Linear(config.d_model, config.vocab_size, bias=False)
        self.init_weights()

    def output_embeddings(self) -> torch.Tensor:
        """The (V, d_model) vocabulary matrix: `lm_head`'s or, tied, `model.shared`'s."""
        head = getattr(self, "lm_head", None)
        return head.weight if head is not None else self.model.shared.weight

    def vocabulary_logits(self, decoder_hidden: torch.Tensor) -> torch.Tensor:
        """(..., d_model) decoder output -> (..., V) logits."""
        return packed_matmul(decoder_hidden, self.output_embeddings(), self.final_logits_bias.view(-1))

    def loss_and_logits(self, decoder_hidden: torch.Tensor, labels: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """decoder_hidden (B, T, d_model), labels (B, T) all real targets -> (mean CE, logits (B, T, V)):
        the head and the loss fused (bertkit.model.heads.decoder_cross_entropy)."""
        loss, logits = decoder_cross_entropy(decoder_hidden.reshape(-1, decoder_hidden.shape[-1]),
                                             self.output_embeddings(), self.final_logits_bias.view(-1),
                                             labels.reshape(-1))
        return loss, logits.view(*labels.shape, -1)

    def forward(
        self, input_ids: torch.Tensor | None = None, attention_mask: torch.Tensor | None = None,
        decoder_input_ids: torch.Tensor | None = None, decoder_attention_mask: torch.Tensor | None = None,
        encoder_outputs: Any = None, past_key_values: tuple[LayerCache, ...] | None = None,
        inputs_embeds: torch.Tensor | None = None, decoder_inputs_embeds: torch.Tensor | None = None,
        labels: torch.Tensor | None = None, use_cache: bool | None = None, output_hidden_states: bool = False,
        return_dict: bool = True, cache: tuple[LayerCache, ...] | None = None,
        decoder_position_ids: torch.Tensor | None = None,
    ) -> Seq2SeqLMOutput:
        """As BartModel.forward, plus labels (B, T) target ids (-100 = ignored) -> loss.
        logits: (B, T, V) float."""
        if labels is not None:
            use_cache = False
            if decoder_input_ids is None and decoder_inputs_embeds is None:
                decoder_input_ids = shift_tokens_right(labels, self.config.pad_token_id,
                                                       self.config.decoder_start_token_id)
        out = self.model(input_ids, attention_mask, decoder_input_ids, decoder_attention_mask, encoder_outputs,
                         past_key_values if past_key_values is not None else cache, inputs_embeds,
                         decoder_inputs_embeds, use_cache, output_hidden_states,
                         decoder_position_ids=decoder_position_ids)
        return lm_output(self, out, labels)

    def prepare_decoder_input_ids_from_labels(self, labels: torch.Tensor) -> torch.Tensor:
        return shift_tokens_right(labels, self.config.pad_token_id, self.config.decoder_start_token_id)


class BartClassificationHead(DenseTanhClassificationHead):
    """BART's classification head (transformers' names)."""

    def __init__(self, config: BartConfig):
        super().__init__(config.d_model, config.num_labels, config.classifier_dropout)


def last_eos_states(hidden: torch.Tensor, input_ids: torch.Tensor, eos_token_id: int) -> torch.Tensor:
    """hidden (B, T, d) at each row's last EOS of input_ids (B, T) -> (B, d). transformers takes
    the last of equally many EOS per row; any count is taken here (the same row when they are
    equal). A row without EOS is a ValueError naming it (task encoders keep EOS when truncating)."""
    is_eos = input_ids == eos_token_id
    has_eos = is_eos.any(dim=1)
    if not bool(has_eos.all()):
        row = int((~has_eos).nonzero()[0])
        raise ValueError(f"row {row} of the batch has no EOS token (id {eos_token_id}): BART's sequence "
                         "classifier reads the decoder's state at the last EOS")
    length = input_ids.shape[1]
    last = length - 1 - is_eos.flip(1).int().argmax(dim=1)  # (B,)
    return hidden[torch.arange(hidden.shape[0], device=hidden.device), last]


class BartForSequenceClassification(_WithBartModel):
    """BartModel (decoder reading input_ids shifted right) + `classification_head` on the
    decoder's state at each row's last EOS. Losses by `problem_type`, as transformers."""

    optional_prefixes = ("classification_head.",)

    def __init__(self, config: BartConfig):
        BartPreTrainedModel.__init__(self, config)
        self.model = BartModel(config)
        self.classification_head = BartClassificationHead(config)
        self.init_weights()

    def forward(
        self, input_ids: torch.Tensor | None = None, attention_mask: torch.Tensor | None = None,
        decoder_input_ids: torch.Tensor | None = None, decoder_attention_mask: torch.Tensor | None = None,
        encoder_outputs: Any = None, inputs_embeds: torch.Tensor | None = None,
        decoder_inputs_embeds: torch.Tensor | None = None, labels: torch.Tensor | None = None,
        use_cache: bool | None = None, output_hidden_states: bool = False, return_dict: bool = True,
    ) -> Seq2SeqSequenceClassifierOutput:
        """input_ids, attention_mask (B, S); labels (B,) class ids, (B,) float for regression or
        (B, K) float for multi-label -> logits (B, num_labels) and the loss."""
        if input_ids is None:
            raise ValueError("input_ids is required: the classifier reads the state at their last EOS")
        out = self.model(input_ids, attention_mask, decoder_input_ids, decoder_attention_mask, encoder_outputs,
                         None, inputs_embeds, decoder_inputs_embeds, False, output_hidden_states)
        pooled = last_eos_states(out.last_hidden_state, input_ids, self.config.eos_token_id)  # (B, d_model)
        logits = self.classification_head(pooled)
        loss = None
        if labels is not None:
            loss = sequence_classification_loss(logits, labels, problem_type(self.config, labels))
        return Seq2SeqSequenceClassifierOutput(loss, logits, out.decoder_hidden_states, out.encoder_last_hidden_state,
                                               out.encoder_hidden_states)


class BartForQuestionAnswering(_WithBartModel):
    """BartModel + `qa_outputs` (d_model -> 2): start and end scores over the input positions
    from the decoder's states (it reads input_ids shifted right). Loss as transformers':
    positions clamped to [0, T], T ignored, mean of the start and end CE."""

    optional_prefixes = ("qa_outputs.",)

    def __init__(self, config: BartConfig):
        BartPreTrainedModel.__init__(self, config)
        self.num_labels = 2
        self.model = BartModel(config)
        self.qa_outputs = nn.Linear(config.d_model, 2)
        self.init_weights()

    def forward(
        self, input_ids: torch.Tensor | None = None, attention_mask: torch.Tensor | None = None,
        decoder_input_ids: torch.Tensor | None = None, decoder_attention_mask: torch.Tensor | None = None,
        encoder_outputs: Any = None, start_positions: torch.Tensor | None = None,
        end_positions: torch.Tensor | None = None, inputs_embeds: torch.Tensor | None = None,
        decoder_inputs_embeds: torch.Tensor | None = None, use_cache: bool | None = None,
        output_hidden_states: bool = False, return_dict: bool = True,
    ) -> Seq2SeqQuestionAnsweringModelOutput:
        """input_ids, attention_mask (B, T); start/end_positions (B,) -> start/end logits (B, T), loss."""
        out = self.model(input_ids, attention_mask, decoder_input_ids, decoder_attention_mask, encoder_outputs,
                         None, inputs_embeds, decoder_inputs_embeds, False, output_hidden_states)
        start_logits, end_logits = self.qa_outputs(out.last_hidden_state).unbind(dim=-1)  # (B, T) each
        loss = None
        if start_positions is not None and end_positions is not None:
            ignored = start_logits.shape[1]
            start = start_positions.view(-1).clamp(0, ignored)
            end = end_positions.view(-1).clamp(0, ignored)
            loss = (F.cross_entropy(start_logits, start, ignore_index=ignored)
                    + F.cross_entropy(end_logits, end, ignore_index=ignored)) / 2
        return Seq2SeqQuestionAnsweringModelOutput(loss, start_logits.contiguous(), end_logits.contiguous(),
                                                   out.decoder_hidden_states, out.encoder_last_hidden_state,
                                                   out.encoder_hidden_states)


__all__ = [
    "BartConfig", "BartPreTrainedModel", "BartModel", "BartForConditionalGeneration", "BartForSequenceClassification",
    "BartForQuestionAnswering", "BartAttention", "BartLearnedPositionalEmbedding", "shift_tokens_right",
]
