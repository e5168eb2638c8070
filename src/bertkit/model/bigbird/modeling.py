"""BigBird (Zaheer et al., 2020; KoBigBird): BERT's encoder with block-sparse attention, for long inputs.

transformers' class, attribute and config names, so checkpoints load both ways (`bert.embeddings.*`,
`bert.encoder.layer.N.attention.self.query`, `bert.pooler` a bare Linear, `cls.predictions.*`,
`classifier.dense/out_proj`, `qa_classifier.intermediate/output/qa_outputs`). The layers are BERT's
(`BertEncoder`) with BigBird's self-attention (bertkit.model.bigbird.attention); what differs from
BERT lives here:
- embeddings: dropout before the LayerNorm, word embeddings times sqrt(H) with `rescale_embeddings`;
- block-sparse mode pads the input to a multiple of `block_size` (pad id, mask 0, token type 0) and
  cuts the outputs back; an input of at most `config.sparse_threshold` tokens runs full attention
  instead (transformers' rule; there it also switches the model to full attention for good, here
  the choice is made per call);
- the pooler `tanh(pooler(h_[CLS]))`, present in every model but the QA one, as transformers';
- the sequence head applies `hidden_act` (not tanh); the QA head runs a feed-forward block
  (`qa_classifier`) before its start/end layer and takes the question (up to the first
  `sep_token_id`) out of the answers, as transformers'.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from bertkit.model.attention import BertSublayerOutput
from bertkit.model.bert.modeling import BertPreTrainedModel, broadcast_attention_mask, masked_lm
from bertkit.model.bert.task_heads import (
    BertForMultipleChoice,
    BertForQuestionAnswering,
    BertForSequenceClassification,
    BertForTokenClassification,
    FirstTokenClassificationHead,
)
from bertkit.model.bigbird.attention import BigBirdSelfAttention, BlockSparseMask
from bertkit.model.bigbird.config import BigBirdConfig
from bertkit.model.embeddings import BertEmbeddings
from bertkit.model.heads import BertOnlyMLMHead
from bertkit.model.layers import ACTIVATIONS, BertEncoder, BertIntermediate
from bertkit.model.outputs import BertModelOutput, MaskedLMOutput, QuestionAnsweringModelOutput

QUESTION_PENALTY = 1e6  # subtracted from a question token's start/end scores (transformers')


class BigBirdEmbeddings(BertEmbeddings):
    """word (times sqrt(H) with `rescale_embeddings`) + token type + position -> dropout -> LayerNorm."""

    def __init__(self, config: BigBirdConfig):
        super().__init__(config)
        self.scale = config.hidden_size ** 0.5 if config.rescale_embeddings else None

    def forward(self, input_ids: torch.Tensor, token_type_ids: torch.Tensor | None = None,
                position_ids: torch.Tensor | None = None) -> torch.Tensor:
        """input_ids, token_type_ids, position_ids: (B, T) int64 -> (B, T, H)."""
        length = input_ids.shape[1]
        if position_ids is None:
            if length > self.position_embeddings.num_embeddings:
                raise ValueError(f"sequence length {length} exceeds max_position_embeddings "
                                 f"{self.position_embeddings.num_embeddings}; truncate the input")
            position_ids = self.position_ids[:length]
        words = self.word_embeddings(input_ids)
        if self.scale is not None:
            words = words * self.scale
        types = (self.token_type_embeddings.weight[0] if token_type_ids is None
                 else self.token_type_embeddings(token_type_ids))
        return self.LayerNorm(self.dropout(words + types + self.position_embeddings(position_ids)))


class BigBirdPreTrainedModel(BertPreTrainedModel):
    """BigBird's config, its encoder at `bert` (transformers' base_model_prefix) and BERT's init.

    The task models are BERT's heads (bertkit.model.bert.task_heads) over the encoder `build_backbone`
    makes, with the pooler wherever transformers has one (`pooled`: all but the QA model), so the two
    libraries' checkpoints hold the same keys."""

    config_class = BigBirdConfig
    base_model_prefix = "bert"
    pooled = True

    @classmethod
    def build_backbone(cls, config: BigBirdConfig, add_pooling_layer: bool) -> nn.Module:
        return BigBirdModel(config, add_pooling_layer=cls.pooled)


class BigBirdModel(BigBirdPreTrainedModel):
    """Embeddings -> BERT's layers with BigBird's attention -> pooler (tanh of a Linear on [CLS])."""

    def __init__(self, config: BigBirdConfig, add_pooling_layer: bool = True):
        super().__init__(config)
        self.embeddings = BigBirdEmbeddings(config)
        self.encoder = BertEncoder(config)
        for layer in self.encoder.layer:
            layer.attention.self = BigBirdSelfAttention(config)
        self.pooler = nn.Linear(config.hidden_size, config.hidden_size) if add_pooling_layer else None
        self.init_weights()

    def uses_sparse_attention(self, length: int) -> bool:
        """Whether an input of `length` tokens runs block-sparse (else full) attention."""
        return self.config.attention_type == "block_sparse" and length > self.config.sparse_threshold

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.Tensor | None = None,
        position_ids: torch.Tensor | None = None,
        output_hidden_states: bool = False,
        output_attentions: bool = False,
    ) -> BertModelOutput:
        """input_ids, attention_mask (1 = real token), token_type_ids, position_ids: (B, T) int.

        Block-sparse inputs are padded to a multiple of `block_size` inside and every output is cut back
        to T (hidden states (B, T, H), attentions (B, heads, T, T))."""
        batch, length = input_ids.shape
        if not self.uses_sparse_attention(length):
            hidden = self.embeddings(input_ids, token_type_ids, position_ids)
            mask = broadcast_attention_mask(attention_mask)
            last, all_hidden, attentions = self.encoder(hidden, mask, output_hidden_states, output_attentions)
            return BertModelOutput(last, self.pool(last), all_hidden, attentions)
        extra = (-length) % self.config.block_size
        if attention_mask is None:
            attention_mask = torch.ones_like(input_ids)
        if extra:  # padding as transformers': the pad id, mask 0, token type 0, position id = the pad id
            input_ids = F.pad(input_ids, (0, extra), value=self.config.pad_token_id)
            attention_mask = F.pad(attention_mask, (0, extra), value=0)
            token_type_ids = None if token_type_ids is None else F.pad(token_type_ids, (0, extra), value=0)
            position_ids = None if position_ids is None else F.pad(position_ids, (0, extra),
                                                                   value=self.config.pad_token_id)
        hidden = self.embeddings(input_ids, token_type_ids, position_ids)
        mask = BlockSparseMask(attention_mask, self.config.block_size)
        last, all_hidden, attentions = self.encoder(hidden, mask, output_hidden_states, output_attentions)
        pooled = self.pool(last)
        if extra:
            last = last[:, :length]
            all_hidden = None if all_hidden is None else tuple(h[:, :length] for h in all_hidden)
            attentions = None if attentions is None else tuple(a[..., :length, :length] for a in attentions)
        return BertModelOutput(last, pooled, all_hidden, attentions)

    def pool(self, last: torch.Tensor) -> torch.Tensor | None:
        """(B, T, H) -> (B, H) tanh(pooler(h_[CLS])), None without a pooler."""
        return None if self.pooler is None else torch.tanh(self.pooler(last[:, 0]))


class BigBirdForMaskedLM(BigBirdPreTrainedModel):
    """BigBird with BERT's MLM head `cls.predictions` (transformers' BigBirdForMaskedLM, pooler included)."""

    backbone_prefix = "bert."
    optional_prefixes = ("cls.", "bert.pooler.")

    def __init__(self, config: BigBirdConfig):
        super().__init__(config)
        self.bert = BigBirdModel(config)
        self.cls = BertOnlyMLMHead(config)
        self.init_weights()

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.Tensor | None = None,
        position_ids: torch.Tensor | None = None,
        labels: torch.Tensor | None = None,
        output_hidden_states: bool = False,
        output_attentions: bool = False,
    ) -> MaskedLMOutput:
        """input_ids, attention_mask, token_type_ids: (B, T); without labels logits (B, T, V); with labels
        (B, T) (ids at masked positions, -100 elsewhere) the mean cross-entropy over the labelled positions
        and their logits only (N, V), with their positions (N, 2)."""
        out = self.bert(input_ids, attention_mask, token_type_ids, position_ids, output_hidden_states,
                        output_attentions)
        word_embeddings = self.bert.embeddings.word_embeddings.weight
        loss, logits, positions = masked_lm(self.cls.predictions, out.last_hidden_state, word_embeddings, labels,
                                            self.static_budget())
        return MaskedLMOutput(loss, logits, positions, out.hidden_states, out.attentions)


class BigBirdClassificationHead(FirstTokenClassificationHead):
    """[CLS] -> dropout -> dense -> `hidden_act` -> dropout -> out_proj (transformers' BigBirdClassificationHead)."""

    def __init__(self, config: BigBirdConfig):
        super().__init__(config)
        self.activation = ACTIVATIONS[config.hidden_act]


class BigBirdForSequenceClassification(BigBirdPreTrainedModel, BertForSequenceClassification):
    """transformers' BigBirdForSequenceClassification: `classifier.dense/out_proj` on [CLS]; losses by
    `problem_type` as BERT's."""

    backbone_prefix = "bert."
    optional_prefixes = ("classifier.", "bert.pooler.")
    classification_head = BigBirdClassificationHead


class BigBirdForTokenClassification(BigBirdPreTrainedModel, BertForTokenClassification):
    """transformers' BigBirdForTokenClassification: every token -> dropout -> `classifier`."""

    backbone_prefix = "bert."
    optional_prefixes = ("classifier.", "bert.pooler.")


class BigBirdForMultipleChoice(BigBirdPreTrainedModel, BertForMultipleChoice):
    """transformers' BigBirdForMultipleChoice: pooled [CLS] per (context, choice) -> one score."""

    backbone_prefix = "bert."
    optional_prefixes = ("classifier.", "bert.pooler.")


class BigBirdForQuestionAnsweringHead(nn.Module):
    """`qa_classifier`: dropout -> intermediate (dense, act) -> output (dense, dropout, LayerNorm with the
    residual) -> `qa_outputs` (H -> 2): (B, T, H) -> (B, T, 2)."""

    def __init__(self, config: BigBirdConfig):
        super().__init__()
        self.dropout = nn.Dropout(config.hidden_dropout_prob)
        self.intermediate = BertIntermediate(config)
        self.output = BertSublayerOutput(config.intermediate_size, config)
        self.qa_outputs = nn.Linear(config.hidden_size, 2)

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        inner = self.output.dense(self.intermediate(self.dropout(hidden_states)))
        return self.qa_outputs(self.output.LayerNorm(self.output.dropout(inner) + hidden_states))


class BigBirdForQuestionAnswering(BigBirdPreTrainedModel, BertForQuestionAnswering):
    """transformers' BigBirdForQuestionAnswering (no pooler): `qa_classifier` over every token; the
    question's tokens (up to and with the first `sep_token_id`, [CLS] excepted) get 1e6 off their
    scores; losses and padding as BERT's QA head."""

    backbone_prefix = "bert."
    optional_prefixes = ("qa_classifier.",)
    pooled = False

    def __init__(self, config: BigBirdConfig):
        BigBirdPreTrainedModel.__init__(self, config)
        self.num_labels = 2
        self.add_backbone(config, add_pooling_layer=False)
        self.qa_classifier = BigBirdForQuestionAnsweringHead(config)
        self.init_weights()

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        question_lengths: torch.Tensor | None = None,
        token_type_ids: torch.Tensor | None = None,
        position_ids: torch.Tensor | None = None,
        start_positions: torch.Tensor | None = None,
        end_positions: torch.Tensor | None = None,
        output_hidden_states: bool = False,
        output_attentions: bool = False,
    ) -> QuestionAnsweringModelOutput:
        """question_lengths: (B, 1) tokens of [CLS] + question + [SEP]; None: up to the first
        `sep_token_id` (none: no question masking). Without token_type_ids the question is type 0, the
        rest type 1. start_positions, end_positions: (B,) as BERT's QA head."""
        length = input_ids.shape[1]
        sep = self.config.sep_token_id
        if question_lengths is None and sep is not None:
            question_lengths = (input_ids == sep).int().argmax(-1, keepdim=True) + 1  # (B, 1)
        question = None
        if question_lengths is not None:
            question = torch.arange(length, device=input_ids.device)[None, :] < question_lengths.view(-1, 1)  # (B, T)
            if token_type_ids is None:
                token_type_ids = (~question).long()
            question[:, 0] = False  # [CLS]: the no-answer position
        out = self.bert(input_ids, attention_mask, token_type_ids, position_ids, output_hidden_states,
                        output_attentions)
        logits = self.qa_classifier(out.last_hidden_state)  # (B, T, 2)
        if question is not None:
            logits = logits - question[..., None].to(logits.dtype) * QUESTION_PENALTY
        return self.span_output(logits, attention_mask, start_positions, end_positions, out)

