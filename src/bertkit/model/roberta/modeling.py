"""RoBERTa: the BERT encoder with RoBERTa's embeddings and heads (Hugging Face names and semantics).

The encoder layers are BERT's (`BertModel`); what differs is small and lives here:
- positions: `padding_idx + 1 + (index among the non-padding tokens)`, padding itself at
  `padding_idx` (HF `create_position_ids_from_input_ids`), so a checkpoint has
  `max_position_embeddings = max_seq_length + padding_idx + 1` (514 for 512 tokens);
- one token type (`type_vocab_size` 1 in RoBERTa's own checkpoints);
- the MLM head `lm_head` (dense -> exact GELU -> `layer_norm` -> decoder tied to the word
  embeddings, plus `bias`) and the classification head `classifier.dense/out_proj` on `<s>`.

State-dict keys equal transformers' (`roberta.embeddings.*`, `roberta.encoder.*`,
`lm_head.dense/layer_norm/bias`, `classifier.dense/out_proj`), so a checkpoint moves
both ways with `from_pretrained` / `save_pretrained`.
"""

from __future__ import annotations


import torch
import torch.nn.functional as F
from torch import nn

from bertkit.model.bert.config import BertConfig
from bertkit.model.bert.modeling import IGNORE_INDEX, BertModel, BertPreTrainedModel, masked_lm
from bertkit.model.embeddings import BertEmbeddings
from bertkit.model.heads import TiedDecoderHead
from bertkit.model.outputs import MaskedLMOutput
from bertkit.model.bert.task_heads import (
    BertForMultipleChoice,
    BertForQuestionAnswering,
    BertForSequenceClassification,
    BertForTokenClassification,
    FirstTokenClassificationHead,
)
from bertkit.model.roberta.config import RobertaConfig


def roberta_position_ids(input_ids: torch.Tensor, padding_idx: int) -> torch.Tensor:
    """(B, T) ids -> (B, T) positions: padding_idx + 1, + 2, ... over the non-padding tokens; padding_idx at padding."""
    real = input_ids.ne(padding_idx).int()  # (B, T)
    return (torch.cumsum(real, dim=1) * real).long() + padding_idx


class RobertaEmbeddings(BertEmbeddings):
    """BERT's embedding sum with positions counted past `padding_idx` (padding rows stay at padding_idx)."""

    def __init__(self, config: BertConfig):
        super().__init__(config)
        self.padding_idx = config.pad_token_id
        self.position_embeddings = nn.Embedding(config.max_position_embeddings, config.hidden_size,
                                                padding_idx=config.pad_token_id)

    def forward(
        self,
        input_ids: torch.Tensor,
        token_type_ids: torch.Tensor | None = None,
        position_ids: torch.Tensor | None = None,
        unpadding=None,
    ) -> torch.Tensor:
        """input_ids, token_type_ids: (B, T) int64 -> (B, T, H), or packed (N, H) rows of the
        real tokens with `unpadding` (bertkit.model.unpad).

        With one token type (RoBERTa's checkpoints) `token_type_ids` are ignored: a pair
        template that marks B with type 1 (BERT's, which bertkit's tokenizers use) then
        reads as RoBERTa's single type instead of indexing past the table."""
        if self.token_type_embeddings.num_embeddings == 1:
            token_type_ids = None
        if position_ids is None:
            position_ids = roberta_position_ids(input_ids, self.padding_idx)  # (B, T)
        if unpadding is None:
            return super().forward(input_ids, token_type_ids, position_ids)
        return super().forward(input_ids, token_type_ids, position_ids, unpadding=unpadding)


class RobertaPreTrainedModel(BertPreTrainedModel):
    """RoBERTa's config class and its encoder attribute `roberta` (HF's base_model_prefix).

    The task models below are BERT's task heads (bertkit.model.bert.task_heads) over the
    encoder `build_backbone` makes, held at `roberta`."""

    base_model_prefix = "roberta"
    config_class = RobertaConfig

    @classmethod
    def build_backbone(cls, config: BertConfig, add_pooling_layer: bool) -> nn.Module:
        return RobertaModel(config, add_pooling_layer=add_pooling_layer)

    @property
    def bert(self) -> nn.Module:
        """The encoder under BERT's attribute name (for code written against BERT's models)."""
        return self.roberta


class RobertaModel(RobertaPreTrainedModel, BertModel):
    """Embeddings (RoBERTa positions) -> BERT encoder -> pooler; forward as `BertModel.forward`."""

    def __init__(self, config: BertConfig, add_pooling_layer: bool = True):
        super().__init__(config, add_pooling_layer)
        self.embeddings = RobertaEmbeddings(config)
        self.init_weights()


class RobertaLMHead(TiedDecoderHead):
    """dense -> GELU (exact, whatever `hidden_act` says, as HF) -> layer_norm -> tied decoder + bias."""

    def __init__(self, config: BertConfig):
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.hidden_size)
        self.layer_norm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.bias = nn.Parameter(torch.zeros(config.vocab_size))

    def transform(self, hidden_states: torch.Tensor) -> torch.Tensor:
        """(..., H) -> (..., H)."""
        return self.layer_norm(F.gelu(self.dense(hidden_states)))


class RobertaForMaskedLM(RobertaPreTrainedModel):
    """RoBERTa with its MLM head (HF `RobertaForMaskedLM`; no pooler)."""

    backbone_prefix = "roberta."
    optional_prefixes = ("lm_head.", "roberta.pooler.")

    def __init__(self, config: BertConfig):
        super().__init__(config)
        self.roberta = RobertaModel(config, add_pooling_layer=False)
        self.lm_head = RobertaLMHead(config)
        self.init_weights()

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.Tensor | None = None,
        labels: torch.Tensor | None = None,
        output_hidden_states: bool = False,
        output_attentions: bool = False,
    ) -> MaskedLMOutput:
        """input_ids, token_type_ids, attention_mask: (B, T); labels: (B, T) original ids at
        masked positions, -100 elsewhere (then only those positions are projected)."""
        # with labels, the last layer runs only at the masked positions (bertkit.model.query_rows)
        read = None if labels is None else labels != IGNORE_INDEX
        out = self.roberta(input_ids=input_ids, token_type_ids=token_type_ids, attention_mask=attention_mask,
                           output_hidden_states=output_hidden_states, output_attentions=output_attentions,
                           read_positions=read)
        word_embeddings = self.roberta.embeddings.word_embeddings.weight
        loss, logits, positions = masked_lm(self.lm_head, out.last_hidden_state, word_embeddings, labels, self.static_budget())
        return MaskedLMOutput(loss, logits, positions, out.hidden_states, out.attentions)


class RobertaClassificationHead(FirstTokenClassificationHead):
    """<s> vector -> dropout -> dense -> tanh -> dropout -> out_proj (K outputs)."""

    activation = staticmethod(torch.tanh)


class RobertaForSequenceClassification(RobertaPreTrainedModel, BertForSequenceClassification):
    """HF `RobertaForSequenceClassification`: the classification head on `<s>` (no pooler);
    losses as `BertForSequenceClassification` (by `problem_type`)."""

    backbone_prefix = "roberta."
    optional_prefixes = ("classifier.", "roberta.pooler.")
    classification_head = RobertaClassificationHead


class RobertaForTokenClassification(RobertaPreTrainedModel, BertForTokenClassification):
    """HF `RobertaForTokenClassification`: every token -> dropout -> `classifier`; BERT's head over `roberta`."""

    backbone_prefix = "roberta."
    optional_prefixes = ("classifier.", "roberta.pooler.")


class RobertaForQuestionAnswering(RobertaPreTrainedModel, BertForQuestionAnswering):
    """HF `RobertaForQuestionAnswering`: start/end scores from `qa_outputs`; BERT's head over `roberta`."""

    backbone_prefix = "roberta."
    optional_prefixes = ("qa_outputs.", "roberta.pooler.")


class RobertaForMultipleChoice(RobertaPreTrainedModel, BertForMultipleChoice):
    """HF `RobertaForMultipleChoice`: pooled <s> per (context, choice) -> one score; BERT's head over `roberta`."""

    backbone_prefix = "roberta."
    optional_prefixes = ("classifier.", "roberta.pooler.")

    def forward(
        self,
        input_ids: torch.Tensor,
        token_type_ids: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        labels: torch.Tensor | None = None,
        output_hidden_states: bool = False,
        output_attentions: bool = False,
    ):
        """As BertForMultipleChoice, in transformers' own order for this class (token_type_ids
        second: RobertaForMultipleChoice's signature differs from its siblings')."""
        return super().forward(input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids,
                               labels=labels, output_hidden_states=output_hidden_states,
                               output_attentions=output_attentions)
