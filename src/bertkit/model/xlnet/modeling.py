"""XLNet (Yang et al. 2019): permutation language modelling with two-stream attention over
Transformer-XL's relative encodings and segment recurrence.

transformers' names, keyword arguments and semantics throughout, so checkpoints move both
ways as a load: `transformer.{word_embedding, mask_emb, layer.N.rel_attn.{q,k,v,o,r,
r_r_bias,r_s_bias,r_w_bias,seg_embed,layer_norm}, layer.N.ff.{layer_1,layer_2,layer_norm}}`;
the LM head `lm_loss` (its weight tied to `word_embedding`, only `lm_loss.bias` stored);
the sequence heads' `sequence_summary.summary` + `logits_proj`; `classifier`;
`qa_outputs`. The attention itself is in bertkit.model.xlnet.attention.

Inputs (B, T) unless said: input_ids, attention_mask (1 = token; or HF's `input_mask`,
1 = padding), token_type_ids (segment ids: only "same segment or not" matters),
perm_mask (B, T, T) 1 = i may not see j, target_mapping (B, M, T) one-hot rows (the query
stream runs at those M positions; all-zero rows are padding), mems (per layer, (mlen, B,
D) as transformers). With target_mapping the output is the query stream's (B, M, D);
without it the content stream's (B, T, D). `mems` are returned when `use_mems` (default:
config.use_mems_eval in eval mode, use_mems_train in training, as transformers): each
layer's input, the last `mem_len` positions (the first `reuse_len` of this segment when set).

XLNet's input layout is `A <sep> B <sep> <cls>`, left-padded: the sequence heads read the
last position (`summary_type` "last").

Differences from transformers (none changes a result in eval mode): with target_mapping,
`attentions` hold the query stream's probabilities at the M target rows (B, n, M, K), not
at all T positions; positional-encoding dropout is drawn once per example as
transformers, but attention dropout comes from `F.scaled_dot_product_attention`;
XLNetForQuestionAnsweringSimple gives padding positions the lowest logit as every
bertkit QA head.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from bertkit.labels import IGNORE_INDEX
from bertkit.model.dropout import Dropout
from bertkit.model.heads import SequenceSummary, TiedOutputLayer
from bertkit.model.outputs import ModelOutput
from bertkit.model.pretrained import PreTrainedModel
from bertkit.model.unpad import UnpadSwitch, plan_unpadding
from bertkit.model.losses import (
    choice_output,
    flatten_choices,
    problem_type,
    sequence_classification_loss,
    span_loss,
    token_classification_loss,
)
from bertkit.model.xlnet.attention import (
    AttentionInputs,
    XLNetLayer,
    XLNetRelativeAttention,
    attention_masks,
    segment_difference,
    sinusoid_positions,
)
from bertkit.model.xlnet.config import XLNetConfig

Mems = tuple[torch.Tensor, ...]


# ---- outputs (transformers' field order) ----------------------------------------------------

@dataclass
class XLNetModelOutput(ModelOutput):
    """last_hidden_state: (B, T, D), or (B, M, D) (query stream) with target_mapping;
    mems: n_layer x (mlen, B, D) or None; hidden_states: (n_layer + 1) inputs/outputs, both
    streams interleaved (h, g, h, g, ...) with target_mapping; attentions: per layer."""

    last_hidden_state: torch.Tensor
    mems: Mems | None = None
    hidden_states: tuple[torch.Tensor, ...] | None = None
    attentions: tuple | None = None


@dataclass
class XLNetLMHeadModelOutput(ModelOutput):
    """loss: mean CE over labels != -100; logits (B, T or M, V)."""

    loss: torch.Tensor | None = None
    logits: torch.Tensor | None = None
    mems: Mems | None = None
    hidden_states: tuple[torch.Tensor, ...] | None = None
    attentions: tuple | None = None


@dataclass
class XLNetForSequenceClassificationOutput(ModelOutput):
    """logits (B, K); also the output of XLNetForMultipleChoice ((B, C)) and
    XLNetForTokenClassification ((B, T, K))."""

    loss: torch.Tensor | None = None
    logits: torch.Tensor | None = None
    mems: Mems | None = None
    hidden_states: tuple[torch.Tensor, ...] | None = None
    attentions: tuple | None = None


XLNetForTokenClassificationOutput = XLNetForSequenceClassificationOutput
XLNetForMultipleChoiceOutput = XLNetForSequenceClassificationOutput


@dataclass
class XLNetForQuestionAnsweringSimpleOutput(ModelOutput):
    """start_logits, end_logits (B, T); loss the mean of their CE."""

    loss: torch.Tensor | None = None
    start_logits: torch.Tensor | None = None
    end_logits: torch.Tensor | None = None
    mems: Mems | None = None
    hidden_states: tuple[torch.Tensor, ...] | None = None
    attentions: tuple | None = None


# ---- the encoder -----------------------------------------------------------------------------

class XLNetPreTrainedModel(PreTrainedModel):
    """transformers' init (normal(initializer_range) for linear, embedding and attention
    tensors, zero biases, unit LayerNorms) and the checkpoint layout (`transformer.` prefix,
    the tied `lm_loss.weight` never stored)."""

    config_class = XLNetConfig
    base_model_prefix = "transformer"
    backbone_prefix = "transformer."
    derived_keys = ("lm_loss.weight",)

    def _init_module(self, module: nn.Module) -> None:
        std = self.config.initializer_range
        if isinstance(module, (nn.Linear, nn.Embedding)):
            module.weight.data.normal_(mean=0.0, std=std)
            if isinstance(module, nn.Linear) and module.bias is not None:
                module.bias.data.zero_()
        elif isinstance(module, nn.LayerNorm):
            module.weight.data.fill_(1.0)
            module.bias.data.zero_()
        elif isinstance(module, XLNetRelativeAttention):
            for name in ("q", "k", "v", "o", "r", "r_r_bias", "r_s_bias", "r_w_bias", "seg_embed"):
                getattr(module, name).data.normal_(mean=0.0, std=std)
        elif isinstance(module, XLNetModel):
            module.mask_emb.data.normal_(mean=0.0, std=std)
        elif isinstance(module, XLNetLMLoss):
            module.bias.data.zero_()

    @classmethod
    def head_dropout(cls, config: XLNetConfig) -> float:
        """Dropout before the output layer (none: transformers' token and QA heads have none;
        the sequence heads override it)."""
        return 0.0

    def freeze_query_stream(self) -> None:
        """A task head never runs the query stream: `mask_emb` gets no gradient, so it is kept
        out of training (DDP requires every trainable parameter to take part in the loss)."""
        self.transformer.mask_emb.requires_grad_(False)

    @property
    def backbone(self) -> "XLNetModel":
        return getattr(self, self.base_model_prefix)


class XLNetModel(UnpadSwitch, XLNetPreTrainedModel):
    """Word embeddings (+ the query stream's `mask_emb`) -> n_layer two-stream layers.

    A padded batch on the content stream alone (no perm_mask, target_mapping, mems or
    output_attentions: fine-tuning and inference) runs BERT's unpadded path
    (bertkit.model.unpad): embeddings, projections, FFN and LayerNorms on the real tokens
    only; `last_hidden_state`, `hidden_states` and `mems` are then zero at padding (the real
    positions as padded). `unpad` (attribute, `set_unpad`, or the call's argument): None =
    automatic, True / False = always / never."""

    backbone_prefix = ""

    def __init__(self, config: XLNetConfig):
        super().__init__(config)
        self.word_embedding = nn.Embedding(config.vocab_size, config.d_model)
        self.mask_emb = nn.Parameter(torch.empty(1, 1, config.d_model))
        self.layer = nn.ModuleList(XLNetLayer(config) for _ in range(config.n_layer))
        self.dropout = Dropout(config.dropout)
        self.init_weights()

    def get_input_embeddings(self) -> nn.Embedding:
        return self.word_embedding

    def forward(
        self,
        input_ids: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        mems: Mems | list[torch.Tensor] | None = None,
        perm_mask: torch.Tensor | None = None,
        target_mapping: torch.Tensor | None = None,
        token_type_ids: torch.Tensor | None = None,
        input_mask: torch.Tensor | None = None,
        inputs_embeds: torch.Tensor | None = None,
        use_mems: bool | None = None,
        output_attentions: bool = False,
        output_hidden_states: bool = False,
        unpad: bool | None = None,
        read_positions: torch.Tensor | None = None,
    ) -> XLNetModelOutput:
        """See the module docstring for the inputs; returns XLNetModelOutput.

        read_positions (B,) long: the one position per row a head reads (the sequence heads'
        <cls>): the last layer then runs its queries and FFN there only, and
        `last_hidden_state` is zero elsewhere (content stream only; ignored with
        output_hidden_states / output_attentions, perm_mask, target_mapping or mems)."""
        config = self.config
        if (input_ids is None) == (inputs_embeds is None):
            raise ValueError("give exactly one of input_ids and inputs_embeds")
        if input_mask is not None and attention_mask is not None:
            raise ValueError("give one of input_mask (1 = padding) and attention_mask (1 = token), not both")
        if use_mems is None:
            use_mems = config.use_mems_train if self.training else config.use_mems_eval
        embedded = self.word_embedding(input_ids) if inputs_embeds is None else inputs_embeds  # (B, T, D)
        batch, qlen = embedded.shape[:2]
        device = embedded.device
        mlen = mems[0].shape[0] if mems is not None and mems[0] is not None else 0
        if input_mask is None and attention_mask is not None:
            input_mask = 1.0 - attention_mask.to(embedded.dtype if embedded.is_floating_point() else torch.float)
        content_mask, query_mask = attention_masks(config, input_mask, perm_mask, qlen, mlen, device)
        positions = sinusoid_positions(config, qlen, qlen + mlen, batch, device).to(embedded.dtype)
        if self.training and self.dropout.p > 0 and positions.dim() == 2:
            positions = positions.expand(batch, -1, -1)  # a dropout mask per example, as transformers
        inputs = AttentionInputs(
            content_mask, query_mask,
            segment_difference(token_type_ids, mlen) if token_type_ids is not None else None,
            self.dropout(positions),
        )
        unpadding = None
        if perm_mask is None and target_mapping is None and mems is None and not output_attentions:
            unpadding = plan_unpadding(_token_mask(attention_mask, input_mask), self.unpad if unpad is None else unpad)
        if unpadding is not None:
            embedded = unpadding.pack(embedded)  # (N, D)
        h = self.dropout(embedded)
        g = None
        if target_mapping is not None:
            inputs.target_positions = target_mapping.argmax(-1)  # (B, M)
            inputs.target_weight = (target_mapping.sum(-1) > 0).to(h.dtype)[:, None, :, None]  # (B, 1, M, 1)
            g = self.dropout(self.mask_emb.expand(batch, target_mapping.shape[1], -1))
        new_mems: list[torch.Tensor] = []
        hidden_states: list[torch.Tensor] = []
        attentions: list = []
        padded = unpadding.pad if unpadding is not None else (lambda x: x)  # packed rows -> (B, T, D)
        sparse_last = (read_positions is not None and not output_hidden_states and not output_attentions
                       and perm_mask is None and target_mapping is None and mems is None)
        for index, layer in enumerate(self.layer):
            if sparse_last and index == len(self.layer) - 1:
                if use_mems:
                    new_mems.append(self._cache_mem(padded(h), None))
                rows = layer.forward_at(h, read_positions, inputs, unpadding)  # (B, 1, D)
                h = torch.zeros(batch, qlen, rows.shape[-1], dtype=rows.dtype, device=rows.device)
                h[torch.arange(batch, device=h.device), read_positions] = rows[:, 0]
                unpadding, padded = None, (lambda x: x)
                break
            if use_mems:
                new_mems.append(self._cache_mem(padded(h), None if mems is None else mems[index]))
            if output_hidden_states:
                hidden_states += [padded(h), g] if g is not None else [padded(h)]
            mem = None if mems is None or mems[index] is None else mems[index].transpose(0, 1).to(h.dtype)
            # the model's output is the query stream: the last layer's content stream would be discarded
            query_only = (g is not None and index == len(self.layer) - 1 and not output_hidden_states
                          and not output_attentions)
            h, g, probs = layer(h, g, inputs, mem, output_attentions, unpadding, content=not query_only)
            if output_attentions:
                attentions.append(probs)
        h = padded(h) if h is not None else None
        if output_hidden_states:
            hidden_states += [h, g] if g is not None else [h]
        output = self.dropout(g if g is not None else h)
        return XLNetModelOutput(output, tuple(new_mems) if use_mems else None,
                                tuple(hidden_states) if output_hidden_states else None,
                                tuple(attentions) if output_attentions else None)

    def _cache_mem(self, h: torch.Tensor, previous: torch.Tensor | None) -> torch.Tensor:
        """This segment's layer input (B, T, D) appended to the memory -> (mlen', B, D), detached."""
        current = h.transpose(0, 1)  # (T, B, D)
        if self.config.reuse_len:
            current = current[: self.config.reuse_len]
        cutoff = -self.config.mem_len if self.config.mem_len else 0
        memory = current if previous is None else torch.cat([previous, current], dim=0)
        return memory[cutoff:].detach()


# ---- heads -----------------------------------------------------------------------------------

def _token_mask(attention_mask: torch.Tensor | None, input_mask: torch.Tensor | None) -> torch.Tensor | None:
    """(B, T) 1 = token, from either of transformers' two masks (None when neither is given)."""
    if attention_mask is not None:
        return attention_mask
    return None if input_mask is None else (input_mask == 0).long()


class XLNetLMLoss(TiedOutputLayer):
    """transformers' `lm_loss` linear layer with its weight tied to the word embeddings."""

    def __init__(self, config: XLNetConfig):
        super().__init__(config.vocab_size)


class XLNetLMHeadModel(XLNetPreTrainedModel):
    """XLNet with the tied vocabulary head: logits at every position, or at the M target
    rows of target_mapping (the query stream: permutation LM)."""

    optional_prefixes = ("lm_loss.",)

    def __init__(self, config: XLNetConfig):
        super().__init__(config)
        self.transformer = XLNetModel(config)
        self.lm_loss = XLNetLMLoss(config)
        self.init_weights()

    def logits(self, hidden_states: torch.Tensor) -> torch.Tensor:
        return self.lm_loss(hidden_states, self.transformer.word_embedding.weight)

    def forward(self, input_ids=None, attention_mask=None, mems=None, perm_mask=None, target_mapping=None,
                token_type_ids=None, input_mask=None, inputs_embeds=None, labels: torch.Tensor | None = None,
                use_mems=None, output_attentions: bool = False, output_hidden_states: bool = False,
                ) -> XLNetLMHeadModelOutput:
        """labels: (B, M) target ids with target_mapping, else (B, T); -100 ignored."""
        out = self.transformer(input_ids, attention_mask, mems, perm_mask, target_mapping, token_type_ids,
                               input_mask, inputs_embeds, use_mems, output_attentions, output_hidden_states)
        logits = self.logits(out.last_hidden_state)
        loss = None
        if labels is not None:
            loss = F.cross_entropy(logits.view(-1, logits.shape[-1]), labels.reshape(-1), ignore_index=IGNORE_INDEX)
        return XLNetLMHeadModelOutput(loss, logits, out.mems, out.hidden_states, out.attentions)


class XLNetSequenceSummary(SequenceSummary):
    """transformers' sequence summary (`summary` linear, activation, last dropout), reading
    by default the last position: XLNet's <cls>.

    With an attention mask, "last" reads the last *real* position of each row: the same
    position as transformers' on left-padded inputs (XLNet's tokenizer pads on the left),
    and still the <cls> on right-padded ones (bertkit's collate pads on the right). The
    relative encodings make a row's states independent of where its padding sits, so both
    paddings give transformers' left-padded result."""

    def __init__(self, config: XLNetConfig):
        super().__init__(config.hidden_size, config.hidden_size if config.summary_use_proj else None,
                         config.summary_type, config.summary_activation, 0.0, config.summary_last_dropout)

    def forward(self, hidden_states: torch.Tensor, attention_mask: torch.Tensor | None = None) -> torch.Tensor:
        """(B, T, H), mask (B, T) 1 = token -> (B, H)."""
        if self.summary_type != "last" or attention_mask is None:
            return super().forward(hidden_states)
        last = last_token_positions(attention_mask)
        return self.project(hidden_states[torch.arange(hidden_states.shape[0], device=last.device), last])  # (B, H)

    def read_positions(
        self, attention_mask: torch.Tensor | None, input_ids: torch.Tensor | None
    ) -> torch.Tensor | None:
        """(B,) the position `forward` will read, for XLNetModel's `read_positions` (None: all)."""
        if self.summary_type != "last" or input_ids is None:
            return None
        if attention_mask is None:
            return torch.full((input_ids.shape[0],), input_ids.shape[1] - 1, dtype=torch.long, device=input_ids.device)
        return last_token_positions(attention_mask)


def last_token_positions(attention_mask: torch.Tensor) -> torch.Tensor:
    """(B, T) 1 = token -> (B,) each row's last real position (T - 1 for a row of padding only)."""
    return attention_mask.shape[1] - 1 - (attention_mask.flip(1) > 0).to(torch.int8).argmax(1)


class XLNetForSequenceClassification(XLNetPreTrainedModel):
    """Last position -> sequence_summary (H -> H, tanh, dropout) -> `logits_proj` (H -> K);
    losses as transformers (regression, single- or multi-label by problem_type / labels)."""

    optional_prefixes = ("sequence_summary.", "logits_proj.")

    @classmethod
    def head_dropout(cls, config: XLNetConfig) -> float:
        return config.summary_last_dropout

    def __init__(self, config: XLNetConfig):
        super().__init__(config)
        self.num_labels = config.num_labels
        self.transformer = XLNetModel(config)
        self.sequence_summary = XLNetSequenceSummary(config)
        self.logits_proj = nn.Linear(config.d_model, config.num_labels)
        self.init_weights()
        self.freeze_query_stream()

    def forward(self, input_ids=None, attention_mask=None, mems=None, perm_mask=None, target_mapping=None,
                token_type_ids=None, input_mask=None, inputs_embeds=None, labels: torch.Tensor | None = None,
                use_mems=None, output_attentions: bool = False, output_hidden_states: bool = False,
                ) -> XLNetForSequenceClassificationOutput:
        """labels: (B,) int64 class ids, (B,) float targets (regression) or (B, K) float (multi-label)."""
        tokens = _token_mask(attention_mask, input_mask) if target_mapping is None else None  # else: M query rows
        out = self.transformer(input_ids, attention_mask, mems, perm_mask, target_mapping, token_type_ids,
                               input_mask, inputs_embeds, use_mems, output_attentions, output_hidden_states,
                               read_positions=self.sequence_summary.read_positions(tokens, input_ids))
        logits = self.logits_proj(self.sequence_summary(out.last_hidden_state, tokens))  # (B, K)
        loss = None
        if labels is not None:
            loss = sequence_classification_loss(logits, labels, problem_type(self.config, labels))
        return XLNetForSequenceClassificationOutput(loss, logits, out.mems, out.hidden_states, out.attentions)


class XLNetForTokenClassification(XLNetPreTrainedModel):
    """Every position -> `classifier` (H -> K); no dropout before it, as transformers."""

    optional_prefixes = ("classifier.",)

    def __init__(self, config: XLNetConfig):
        super().__init__(config)
        self.num_labels = config.num_labels
        self.transformer = XLNetModel(config)
        self.classifier = nn.Linear(config.d_model, config.num_labels)
        self.init_weights()
        self.freeze_query_stream()

    def forward(self, input_ids=None, attention_mask=None, mems=None, perm_mask=None, target_mapping=None,
                token_type_ids=None, input_mask=None, inputs_embeds=None, labels: torch.Tensor | None = None,
                use_mems=None, output_attentions: bool = False, output_hidden_states: bool = False,
                ) -> XLNetForTokenClassificationOutput:
        """labels: (B, T) int64, -100 where no loss is taken (a batch with none: zero loss)."""
        out = self.transformer(input_ids, attention_mask, mems, perm_mask, target_mapping, token_type_ids,
                               input_mask, inputs_embeds, use_mems, output_attentions, output_hidden_states)
        logits = self.classifier(out.last_hidden_state)  # (B, T, K)
        loss = None
        if labels is not None:
            loss = token_classification_loss(logits, labels)
        return XLNetForTokenClassificationOutput(loss, logits, out.mems, out.hidden_states, out.attentions)


class XLNetForQuestionAnsweringSimple(XLNetPreTrainedModel):
    """Start/end scores per position from `qa_outputs` (H -> 2); padding (attention_mask 0)
    gets the lowest logit."""

    optional_prefixes = ("qa_outputs.",)

    def __init__(self, config: XLNetConfig):
        super().__init__(config)
        self.num_labels = config.num_labels
        self.transformer = XLNetModel(config)
        self.qa_outputs = nn.Linear(config.d_model, config.num_labels)
        self.init_weights()
        self.freeze_query_stream()

    def forward(self, input_ids=None, attention_mask=None, mems=None, perm_mask=None, target_mapping=None,
                token_type_ids=None, input_mask=None, inputs_embeds=None, start_positions: torch.Tensor | None = None,
                end_positions: torch.Tensor | None = None, use_mems=None, output_attentions: bool = False,
                output_hidden_states: bool = False) -> XLNetForQuestionAnsweringSimpleOutput:
        """start_positions, end_positions: (B,) token indices; outside [0, T) ignored in the loss."""
        out = self.transformer(input_ids, attention_mask, mems, perm_mask, target_mapping, token_type_ids,
                               input_mask, inputs_embeds, use_mems, output_attentions, output_hidden_states)
        start_logits, end_logits, loss = span_loss(self.qa_outputs(out.last_hidden_state),
                                                   _token_mask(attention_mask, input_mask), start_positions, end_positions)
        return XLNetForQuestionAnsweringSimpleOutput(loss, start_logits, end_logits, out.mems, out.hidden_states,
                                                     out.attentions)


class XLNetForMultipleChoice(XLNetPreTrainedModel):
    """(B, C, T) inputs run as (B * C, T) rows -> sequence_summary -> `logits_proj` (H -> 1);
    cross-entropy over the C choices."""

    optional_prefixes = ("sequence_summary.", "logits_proj.")

    @classmethod
    def head_dropout(cls, config: XLNetConfig) -> float:
        return config.summary_last_dropout

    def __init__(self, config: XLNetConfig):
        super().__init__(config)
        self.transformer = XLNetModel(config)
        self.sequence_summary = XLNetSequenceSummary(config)
        self.logits_proj = nn.Linear(config.d_model, 1)
        self.init_weights()
        self.freeze_query_stream()

    def forward(self, input_ids=None, token_type_ids=None, input_mask=None, attention_mask=None, mems=None,
                perm_mask=None, target_mapping=None, inputs_embeds=None, labels: torch.Tensor | None = None,
                use_mems=None, output_attentions: bool = False, output_hidden_states: bool = False,
                ) -> XLNetForMultipleChoiceOutput:
        """input_ids, token_type_ids, attention_mask: (B, C, T); labels (B,) the right choice."""
        num_choices = (input_ids if input_ids is not None else inputs_embeds).shape[1]
        ids, types, mask, padding = flatten_choices(input_ids, token_type_ids, attention_mask, input_mask)
        embeds = None if inputs_embeds is None else inputs_embeds.reshape(-1, *inputs_embeds.shape[-2:])
        tokens = _token_mask(mask, padding) if target_mapping is None else None
        out = self.transformer(ids, mask, mems, perm_mask, target_mapping, types, padding, embeds, use_mems,
                               output_attentions, output_hidden_states,
                               read_positions=self.sequence_summary.read_positions(tokens, ids))
        scores = self.logits_proj(self.sequence_summary(out.last_hidden_state, tokens))  # (B * C, 1)
        result = choice_output(scores, num_choices, labels, out)
        return XLNetForMultipleChoiceOutput(result.loss, result.logits, out.mems, out.hidden_states, out.attentions)
