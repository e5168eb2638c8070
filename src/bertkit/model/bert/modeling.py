"""The BERT backbone (`BertModel`) and `BertForPreTraining` (backbone + MLM + NSP heads).

Module attribute names equal Hugging Face's state-dict keys, so a checkpoint loads
with a key-set check rather than a translation table (see bertkit.interop.hf).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from bertkit.errors import BertkitError
from bertkit.interop import prelayernorm
from bertkit.model.embeddings import BertEmbeddings
from bertkit.model.bert.config import BertConfig
from bertkit.model.heads import BertPooler, BertPreTrainingHeads, labelled_rows  # noqa: F401  (ELECTRA imports it from here)
from bertkit.model.layers import BertEncoder
from bertkit.model.losses import IGNORE_INDEX
from bertkit.model.outputs import BertForPreTrainingOutput, BertModelOutput
from bertkit.model.pretrained import PreTrainedModel, normal_init
from bertkit.model.query_rows import QueryRows
from bertkit.model.static_shapes import PredictionBudget
from bertkit.model.unpad import Unpadding, UnpadSwitch, accepts_unpadding



def broadcast_attention_mask(attention_mask: torch.Tensor | None) -> torch.Tensor | None:
    """attention_mask (B, T) int (1 = real token) or (B, T, T) (HF semantics: row i = the
    keys query i sees) -> bool (B, 1, 1, T) / (B, 1, T, T) over the heads; None for no mask
    or a (B, T) mask without padding (attention then skips masking)."""
    if attention_mask is None:
        return None
    if attention_mask.dim() == 3:
        return attention_mask.bool()[:, None]  # (B, 1, T, T): keys each query attends to
    if not torch.compiler.is_compiling() and bool(attention_mask.all()):  # a host read: never in a compiled graph
        return None
    return attention_mask.bool()[:, None, None, :]  # (B, 1, 1, T): keys to attend to


def masked_lm(
    head: nn.Module, hidden_states: torch.Tensor, word_embeddings: torch.Tensor, labels: torch.Tensor | None,
    per_sequence: int | None = None,
) -> tuple[torch.Tensor | None, torch.Tensor, torch.Tensor | None]:
    """A tied vocabulary head (bertkit.model.heads.TiedDecoderHead) over hidden_states (B, T, H).

    Without labels: (None, logits (B, T, V), None). With labels (B, T) (-100 = none) only
    the labelled positions reach the vocabulary (the V x E decoder is most of a small
    model's work; ~85% of MLM positions carry no loss): (mean CE, logits (N, V), positions
    (N, 2)); a batch with nothing labelled gives zero loss, not NaN. `per_sequence`: a static
    row budget (labelled_rows), the rows past the labelled ones ignored by the loss."""
    if labels is None:
        return None, head(hidden_states, word_embeddings), None
    positions, selected, targets = labelled_rows(hidden_states, labels, per_sequence)
    loss, logits = head.loss_and_logits(selected, word_embeddings, targets)
    return loss, logits, positions


class BertPreTrainedModel(PredictionBudget, PreTrainedModel):
    """The BERT family's `PreTrainedModel` (bertkit.model.pretrained): BERT's config, init
    and checkpoint names; RoBERTa, ELECTRA and ALBERT build on it.

    Subclasses set `backbone_prefix` ("" when the class *is* the backbone, "bert."
    when it wraps one) and `optional_prefixes`: keys under those (heads, and the pooler,
    which MLM-only checkpoints lack) may be missing from a checkpoint — reported in
    `loading_info` and freshly initialised; other backbone keys may not. Pre-LN models
    are read and written in transformers' roberta-prelayernorm layout
    (bertkit.interop.prelayernorm).
    """

    config_class: type[BertConfig] = BertConfig  # the family's config class (HF's attribute)
    base_model_prefix = "bert"
    optional_prefixes: tuple[str, ...] = ("pooler.",)
    head_roots = ("cls.",)
    # keys HF may store that carry no learned state of their own in bertkit
    derived_keys = ("embeddings.position_ids", "embeddings.token_type_ids", "cls.predictions.decoder.weight",
                    "cls.predictions.decoder.bias", "lm_head.decoder.weight", "lm_head.decoder.bias")

    def init_weights(self) -> None:
        """BERT init: normal(0, initializer_range) weights, zero biases, unit LayerNorms."""
        super().init_weights()
        for name, param in self.named_parameters():
            if name.endswith("predictions.bias"):
                nn.init.zeros_(param)

    def _init_module(self, module: nn.Module) -> None:
        std = self.config.initializer_range
        normal_init(module, std)

    def state_from_checkpoint(self, state: dict[str, torch.Tensor], path: Path) -> dict[str, torch.Tensor]:
        """A pre-LN checkpoint in transformers' roberta-prelayernorm layout, under bertkit's names."""
        if not prelayernorm.is_hf_state(state):
            return state
        config = self.config
        if not config.pre_layer_norm:
            raise BertkitError(f"{path}: a pre-LN (roberta-prelayernorm) checkpoint, but the model's config is post-LN")
        try:
            return prelayernorm.state_from_hf(state, config.model_type, config.pad_token_id)
        except prelayernorm.LayoutError as exc:
            raise BertkitError(f"{path}: {exc}") from None

    def checkpoint_layout(
        self, values: dict[str, Any], state: dict[str, torch.Tensor], directory: Path
    ) -> tuple[dict[str, Any], dict[str, torch.Tensor]]:
        """A pre-LN model in transformers' roberta-prelayernorm layout (the one transformers
        computes identically); one it cannot express raises before anything is written."""
        config = self.config
        if not config.pre_layer_norm:
            return values, state
        try:
            values = prelayernorm.config_to_hf(values)
        except prelayernorm.LayoutError as exc:
            raise BertkitError(f"{directory}: cannot save: {exc}") from None
        return values, prelayernorm.state_to_hf(state, config.model_type, type(self).__name__, config.pad_token_id)


class BertModel(UnpadSwitch, BertPreTrainedModel):
    """Embeddings -> encoder -> pooler. The backbone every objective and task wraps.

    A batch with enough padding runs the unpadded path (bertkit.model.unpad): the dense
    layers see only the real tokens. `unpad` (attribute, or `set_unpad(model, ...)` for
    every backbone inside a model) chooses: None = automatic, True / False = always /
    never; `forward(..., unpad=...)` overrides it for one call.
    """

    def __init__(self, config: BertConfig, add_pooling_layer: bool = True):
        super().__init__(config)
        self.embeddings = BertEmbeddings(config)
        self.encoder = BertEncoder(config)
        self.pooler = BertPooler(config) if add_pooling_layer else None
        self.init_weights()

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.Tensor | None = None,
        output_hidden_states: bool = False,
        output_attentions: bool = False,
        unpad: bool | None = None,
        read_positions: torch.Tensor | None = None,
    ) -> BertModelOutput:
        """input_ids, token_type_ids, attention_mask: (B, T) int (mask 1 = real token).

        On the unpadded path (see the class docstring; never with output_attentions)
        `last_hidden_state` and `hidden_states` are zero at padding positions; real
        positions and `pooler_output` are those of the padded path.

        attention_mask may also be (B, T, T) (HF semantics): row i = the keys query i sees,
        e.g. a causal mask for a left-to-right LM.

        read_positions: (B, T) bool, the positions whose final hidden state the caller
        reads (e.g. MLM targets): the last layer runs only there and at [CLS] (for the
        pooler), and `last_hidden_state` is zero elsewhere (bertkit.model.query_rows).
        Ignored with output_hidden_states, output_attentions or a (B, T, T) mask, under a
        trace (`torch.onnx.export`), which would freeze the data-dependent row count, and under
        torch.compile, where that count would break the graph (bertkit.model.static_shapes)."""
        if read_positions is not None and (output_hidden_states or output_attentions or torch.jit.is_tracing()
                                           or torch.compiler.is_compiling()
                                           or (attention_mask is not None and attention_mask.dim() == 3)):
            read_positions = None
        if read_positions is not None:
            read_positions = read_positions.clone()
            read_positions[:, 0] = True  # [CLS]: the pooler's input
        unpadding = self.unpadding_for(attention_mask, unpad, output_attentions)
        if unpadding is not None:
            return self._forward_unpadded(input_ids, token_type_ids, unpadding, output_hidden_states, read_positions)
        mask = broadcast_attention_mask(attention_mask)
        hidden = self.embeddings(input_ids, token_type_ids)
        if read_positions is not None:
            query_rows = QueryRows.build(read_positions)
            rows, _, _ = self.encoder(hidden, mask, query_rows=query_rows)
            last = query_rows.scatter(rows, *input_ids.shape)  # (B, T, H), zeros where not read
            pooled = self.pooler(last) if self.pooler is not None else None
            return BertModelOutput(last, pooled, None, None)
        last, all_hidden, attentions = self.encoder(hidden, mask, output_hidden_states, output_attentions)
        pooled = self.pooler(last) if self.pooler is not None else None
        return BertModelOutput(last, pooled, all_hidden, attentions)

    def _forward_unpadded(
        self,
        input_ids: torch.Tensor,
        token_type_ids: torch.Tensor | None,
        unpadding: Unpadding,
        output_hidden_states: bool,
        read_positions: torch.Tensor | None = None,
    ) -> BertModelOutput:
        """The forward on packed (N, H) rows of the real tokens; outputs padded back to (B, T, H)."""
        if accepts_unpadding(self.embeddings):
            hidden = self.embeddings(input_ids, token_type_ids, unpadding=unpadding)  # (N, H)
        else:  # another family's embeddings that only run padded: pack their output
            hidden = unpadding.pack(self.embeddings(input_ids, token_type_ids))  # (N, H)
        if read_positions is not None:  # the last layer at the read (real) positions only
            real = torch.zeros_like(read_positions).view(-1).index_fill_(0, unpadding.indices, True)
            query_rows = QueryRows.build(read_positions & real.view_as(read_positions), unpadding)
            rows, _, _ = self.encoder(hidden, unpadding.key_mask, unpadding=unpadding, query_rows=query_rows)
            last = query_rows.scatter(rows, unpadding.batch_size, unpadding.seq_len)  # (B, T, H)
            pooled = self.pooler(last) if self.pooler is not None else None
            return BertModelOutput(last, pooled, None, None)
        last, all_hidden, _ = run_encoder(self.encoder, hidden, None, unpadding, output_hidden_states)  # (B, T, H)
        pooled = self.pooler(last) if self.pooler is not None else None  # reads the [CLS] rows only
        return BertModelOutput(last, pooled, all_hidden, None)


def run_encoder(
    encoder: nn.Module,
    hidden: torch.Tensor,
    attention_mask: torch.Tensor | None,
    unpadding: Unpadding | None,
    output_hidden_states: bool = False,
    output_attentions: bool = False,
) -> tuple[torch.Tensor, tuple[torch.Tensor, ...] | None, tuple[torch.Tensor, ...] | None]:
    """An encoder over embeddings `hidden`: padded (B, T, .) with the (B, T) mask, or packed
    (N, .) rows with `unpadding` (then no attentions, and the outputs padded back to
    (B, T, H) with zeros at padding). Returns (last, hidden states or None, attentions or None)."""
    if unpadding is None:
        return encoder(hidden, broadcast_attention_mask(attention_mask), output_hidden_states, output_attentions)
    last, all_hidden, _ = encoder(hidden, unpadding.key_mask, output_hidden_states, False, unpadding=unpadding)
    last, all_hidden = unpadding.pad_encoder_outputs(last, all_hidden)  # (B, T, H), zeros at padding
    return last, all_hidden, None


def set_unpad(model: nn.Module, unpad: bool | None) -> nn.Module:
    """Choose the encoder path of every backbone inside `model` (a task model, a
    pre-training model or a bare backbone; BERT, RoBERTa, ELECTRA and ALBERT: every
    `UnpadSwitch`): None = automatic by the batch's padding (the default), True = unpadded
    whenever a (B, T) attention mask is given, False = always padded. Returns `model`."""
    for module in model.modules():
        if isinstance(module, UnpadSwitch):
            module.unpad = unpad
    return model


class BertForPreTraining(BertPreTrainedModel):
    """BERT with the masked-LM and next-sentence-prediction heads (HF semantics)."""

    backbone_prefix = "bert."
    optional_prefixes = ("cls.", "bert.pooler.")

    def __init__(self, config: BertConfig):
        super().__init__(config)
        self.bert = BertModel(config)
        self.cls = BertPreTrainingHeads(config)
        self.init_weights()

    def mlm_logits(self, hidden_states: torch.Tensor) -> torch.Tensor:
        """(..., H) -> (..., V) vocabulary logits through the tied decoder."""
        return self.cls.predictions(hidden_states, self.bert.embeddings.word_embeddings.weight)

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.Tensor | None = None,
        labels: torch.Tensor | None = None,
        next_sentence_label: torch.Tensor | None = None,
        output_hidden_states: bool = False,
        output_attentions: bool = False,
    ) -> BertForPreTrainingOutput:
        """labels: (B, T) original ids at masked positions, -100 elsewhere;
        next_sentence_label: (B,) 0 = IsNext, 1 = NotNext (-100 = ignore)."""
        # with labels, the last layer runs only where the heads read (masked positions, [CLS])
        read = None if labels is None else labels != IGNORE_INDEX
        out = self.bert(input_ids=input_ids, token_type_ids=token_type_ids, attention_mask=attention_mask,
                        output_hidden_states=output_hidden_states, output_attentions=output_attentions,
                        read_positions=read)
        nsp_logits = self.cls.seq_relationship(out.pooler_output)  # (B, 2)
        loss, prediction_logits, positions = masked_lm(
            self.cls.predictions, out.last_hidden_state, self.bert.embeddings.word_embeddings.weight, labels,
            self.static_budget(),
        )
        if next_sentence_label is not None:
            nsp_loss = F.cross_entropy(nsp_logits, next_sentence_label.view(-1), ignore_index=IGNORE_INDEX)
            loss = nsp_loss if loss is None else loss + nsp_loss
        return BertForPreTrainingOutput(
            loss, prediction_logits, nsp_logits, positions, out.hidden_states, out.attentions
        )
