"""Fine-tuning models: the backbone plus one small output layer (SPEC section 5).

Class names, attribute names (`bert`, `classifier`, `qa_outputs`) and forward semantics
are Hugging Face's, so a checkpoint fine-tuned in transformers loads here and the other
way round. The heads are generic over the backbone (`BertTaskModel`): another family's
head (RoBERTa, ALBERT, ELECTRA) subclasses its PreTrainedModel and the BERT head, and
its PreTrainedModel names the attribute (`base_model_prefix`) and builds the encoder
(`build_backbone`). Starting from a checkpoint without the head (a bare `BertModel` such as
all-MiniLM-L6-v2, or a pre-training checkpoint) initialises the head fresh and lists its
keys in `model.loading_info["missing_keys"]`.

Loss rules (transformers'):
- sequence classification: `config.problem_type` if set; else num_labels == 1 ->
  regression (MSE), integer labels -> single-label cross-entropy, float labels ->
  multi-label (BCE with logits);
- token classification: cross-entropy over positions whose label is not -100;
- question answering: mean of start and end cross-entropy; positions outside the
  sequence are clamped to T and ignored; unlike transformers, padding positions (mask 0)
  get the lowest logit (`finfo.min`), so they are never an answer and take no part in
  the loss (transformers' softmax includes them; the unpadded encoder path zeroes their hidden states);
- multiple choice: (B, C, T) inputs run as (B * C, T); one [CLS] score per choice,
  cross-entropy over the C choices.
"""

from __future__ import annotations

import inspect

import torch
from torch import nn

from bertkit.errors import ConfigError
from bertkit.model.bert.config import BertConfig
from bertkit.model.bert.modeling import BertModel, BertPreTrainedModel
from bertkit.model.layers import mean_over_tokens
from bertkit.model.losses import (
    choice_output,
    classifier_dropout,
    flatten_choices,
    problem_type,
    sequence_classification_loss,
    span_loss,
    token_classification_loss,
)
from bertkit.model.outputs import (
    MultipleChoiceModelOutput,
    QuestionAnsweringModelOutput,
    SequenceClassifierOutput,
    TokenClassifierOutput,
)


class FirstTokenClassificationHead(nn.Module):
    """The sequence head of RoBERTa and ELECTRA (HF's `classifier.dense/out_proj`): first
    token's final state -> dropout -> dense -> `activation` -> dropout -> out_proj (K outputs)."""

    activation = staticmethod(torch.tanh)

    def __init__(self, config: BertConfig):
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.hidden_size)
        self.dropout = nn.Dropout(classifier_dropout(config))
        self.out_proj = nn.Linear(config.hidden_size, config.num_labels)

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        """(B, T, H) -> (B, K)."""
        x = self.activation(self.dense(self.dropout(hidden_states[:, 0])))  # (B, H)
        return self.out_proj(self.dropout(x))


class BertTaskModel(BertPreTrainedModel):
    """What every task head shares: the encoder at attribute `base_model_prefix` (HF's:
    `bert`, `roberta`, ...), built by `build_backbone` and read through `backbone`, and the
    dropout rate of the output layer (`head_dropout`). A family overrides the three on its
    PreTrainedModel, which precedes the BERT head in its heads' bases."""

    base_model_prefix = "bert"

    @classmethod
    def build_backbone(cls, config: BertConfig, add_pooling_layer: bool) -> nn.Module:
        return BertModel(config, add_pooling_layer=add_pooling_layer)

    @classmethod
    def head_dropout(cls, config: BertConfig) -> float:
        return classifier_dropout(config)

    @property
    def backbone(self) -> nn.Module:
        """The encoder, whatever the family's attribute name."""
        return getattr(self, self.base_model_prefix)

    def add_backbone(self, config: BertConfig, add_pooling_layer: bool) -> None:
        setattr(self, self.base_model_prefix, self.build_backbone(config, add_pooling_layer))

    def encode_for_first_token(self, input_ids, token_type_ids, attention_mask, output_hidden_states, output_attentions):
        """The backbone's output for a head that reads only the first token ([CLS] / <s>):
        on backbones that support it the last layer runs at that position alone
        (bertkit.model.query_rows; 1/L of the encoder less its keys and values), and
        `last_hidden_state` is zero elsewhere."""
        if "read_positions" not in inspect.signature(self.backbone.forward).parameters:
            return self.backbone(input_ids=input_ids, token_type_ids=token_type_ids, attention_mask=attention_mask,
                                 output_hidden_states=output_hidden_states, output_attentions=output_attentions)
        first_only = torch.zeros_like(input_ids, dtype=torch.bool)  # the backbone adds position 0
        return self.backbone(input_ids=input_ids, token_type_ids=token_type_ids, attention_mask=attention_mask,
                             output_hidden_states=output_hidden_states, output_attentions=output_attentions,
                             read_positions=first_only)


class BertForSequenceClassification(BertTaskModel):
    """[CLS] -> pooler -> dropout -> K-way linear layer (K = 1: regression, e.g. STS-B).

    `config.classifier_pooling` "mean" reads the mean of the last layer over the real tokens
    instead, with no pooler: an MLM-only pre-training never trains [CLS] or the pooler
    (docs/finetuning.md). transformers has no such BERT head; it loads the checkpoint
    with its pooler (pre-LN: `classifier.dense`) freshly initialised and warns so.

    A family whose HF head reads the first token's final state itself (RoBERTa, ELECTRA:
    `classifier.dense/out_proj`) sets `classification_head` to that module class, mapping
    (B, T, H) -> (B, K); the backbone is then built without a pooler."""

    backbone_prefix = "bert."
    optional_prefixes = ("classifier.", "bert.pooler.")
    classification_head: type[nn.Module] | None = None

    def __init__(self, config: BertConfig):
        super().__init__(config)
        self.num_labels = config.num_labels
        self.mean_pooling = config.classifier_pooling == "mean"
        if self.mean_pooling and self.classification_head is not None:
            raise ConfigError(f"field 'classifier_pooling': 'mean' is for heads on BERT's pooler; "
                              f"{type(self).__name__} reads the first token (use 'cls')")
        self.add_backbone(config, add_pooling_layer=self.classification_head is None and not self.mean_pooling)
        if self.classification_head is None:
            self.dropout = nn.Dropout(self.head_dropout(config))
            self.classifier = nn.Linear(config.hidden_size, config.num_labels)
        else:
            self.classifier = self.classification_head(config)
        self.init_weights()

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.Tensor | None = None,
        labels: torch.Tensor | None = None,
        output_hidden_states: bool = False,
        output_attentions: bool = False,
    ) -> SequenceClassifierOutput:
        """input_ids, token_type_ids, attention_mask: (B, T) int. labels: (B,) int64 class
        ids, (B,) float targets for regression, or (B, K) float for multi-label."""
        if self.mean_pooling:
            out = self.backbone(input_ids=input_ids, token_type_ids=token_type_ids, attention_mask=attention_mask,
                                output_hidden_states=output_hidden_states, output_attentions=output_attentions)
            logits = self.classifier(self.dropout(mean_over_tokens(out.last_hidden_state, attention_mask)))  # (B, K)
        else:
            out = self.encode_for_first_token(input_ids, token_type_ids, attention_mask, output_hidden_states,
                                              output_attentions)
            if self.classification_head is None:
                logits = self.classifier(self.dropout(out.pooler_output))  # (B, K)
            else:
                logits = self.classifier(out.last_hidden_state)  # (B, K)
        loss = None
        if labels is not None:
            loss = sequence_classification_loss(logits, labels, problem_type(self.config, labels))
        return SequenceClassifierOutput(loss, logits, out.hidden_states, out.attentions)


class BertForTokenClassification(BertTaskModel):
    """Every token's final hidden state -> dropout -> K-way linear layer (NER tagging)."""

    backbone_prefix = "bert."
    optional_prefixes = ("classifier.",)

    def __init__(self, config: BertConfig):
        super().__init__(config)
        self.num_labels = config.num_labels
        self.add_backbone(config, add_pooling_layer=False)
        self.dropout = nn.Dropout(self.head_dropout(config))
        self.classifier = nn.Linear(config.hidden_size, config.num_labels)
        self.init_weights()

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.Tensor | None = None,
        labels: torch.Tensor | None = None,
        output_hidden_states: bool = False,
        output_attentions: bool = False,
    ) -> TokenClassifierOutput:
        """labels: (B, T) int64 label ids, -100 where no loss is taken (sub-word
        continuations, special tokens, padding)."""
        out = self.backbone(input_ids=input_ids, token_type_ids=token_type_ids, attention_mask=attention_mask,
                            output_hidden_states=output_hidden_states, output_attentions=output_attentions)
        logits = self.classifier(self.dropout(out.last_hidden_state))  # (B, T, K)
        loss = None
        if labels is not None:
            loss = token_classification_loss(logits, labels)  # nothing labelled: zero, not transformers' NaN
        return TokenClassifierOutput(loss, logits, out.hidden_states, out.attentions)


class BertForQuestionAnswering(BertTaskModel):
    """Extractive QA: a (H -> 2) layer gives every token a start and an end score."""

    backbone_prefix = "bert."
    optional_prefixes = ("qa_outputs.",)

    def __init__(self, config: BertConfig):
        super().__init__(config)
        if config.num_labels != 2:
            raise ConfigError(
                f"{type(self).__name__} needs num_labels 2 (start, end), the config has {config.num_labels}"
            )
        self.num_labels = config.num_labels
        self.add_backbone(config, add_pooling_layer=False)
        self.qa_outputs = nn.Linear(config.hidden_size, config.num_labels)
        self.init_weights()

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.Tensor | None = None,
        start_positions: torch.Tensor | None = None,
        end_positions: torch.Tensor | None = None,
        output_hidden_states: bool = False,
        output_attentions: bool = False,
    ) -> QuestionAnsweringModelOutput:
        """start_positions, end_positions: (B,) int64 token indices of the answer span
        (0 = [CLS] for no answer); indices outside [0, T) are ignored in the loss."""
        out = self.backbone(input_ids=input_ids, token_type_ids=token_type_ids, attention_mask=attention_mask,
                            output_hidden_states=output_hidden_states, output_attentions=output_attentions)
        return self.span_output(self.qa_outputs(out.last_hidden_state), attention_mask, start_positions,
                                end_positions, out)

    @staticmethod
    def span_output(logits: torch.Tensor, attention_mask: torch.Tensor | None, start_positions: torch.Tensor | None,
                    end_positions: torch.Tensor | None, out) -> QuestionAnsweringModelOutput:
        """logits (B, T, 2) start and end scores -> the output: padding never an answer, the loss
        when positions are given (`out`: the backbone's output, for its hidden states)."""
        start_logits, end_logits, loss = span_loss(logits, attention_mask, start_positions, end_positions)
        return QuestionAnsweringModelOutput(loss, start_logits, end_logits, out.hidden_states, out.attentions)


class BertForMultipleChoice(BertTaskModel):
    """Each (context, choice) pair -> pooled [CLS] -> one scalar; softmax over the choices."""

    backbone_prefix = "bert."
    optional_prefixes = ("classifier.", "bert.pooler.")

    def __init__(self, config: BertConfig):
        super().__init__(config)
        self.add_backbone(config, add_pooling_layer=True)
        self.dropout = nn.Dropout(self.head_dropout(config))
        self.classifier = nn.Linear(config.hidden_size, 1)
        self.init_weights()

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.Tensor | None = None,
        labels: torch.Tensor | None = None,
        output_hidden_states: bool = False,
        output_attentions: bool = False,
    ) -> MultipleChoiceModelOutput:
        """input_ids, token_type_ids, attention_mask: (B, C, T) int; labels: (B,) int64
        index of the right choice."""
        ids, types, mask = flatten_choices(input_ids, token_type_ids, attention_mask)
        out = self.encode_for_first_token(ids, types, mask, output_hidden_states, output_attentions)
        scores = self.classifier(self.dropout(out.pooler_output))  # (B * C, 1)
        return choice_output(scores, input_ids.shape[1], labels, out)


TASK_MODEL_CLASSES = {
    cls.__name__: cls
    for cls in (
        BertForSequenceClassification, BertForTokenClassification, BertForQuestionAnswering, BertForMultipleChoice
    )
}
