"""ELECTRA (Clark et al., 2020): the encoder, its discriminator and generator heads, task heads.

Hugging Face's class, attribute and config names, so checkpoints load both ways:
`ElectraModel` (embeddings of width `embedding_size`, `embeddings_project` to the hidden
size when the two differ, the BERT encoder, no pooler), `ElectraForPreTraining` (the
discriminator: `discriminator_predictions.dense` -> act -> `dense_prediction`, one
replaced-token logit per position), `ElectraForMaskedLM` (the generator:
`generator_predictions.dense` -> GELU -> `LayerNorm` to the embedding width, then
`generator_lm_head` tied to the word embeddings plus its own bias) and the fine-tuning
heads (`classifier.dense/out_proj` for sequence classification, `sequence_summary.summary`
then `classifier` for multiple choice, ...).

The encoder is bertkit's `BertEncoder` (the same layers and state-dict keys as HF's
ElectraEncoder); only the embeddings' width and the heads differ from BERT. It runs
BERT's unpadded path (bertkit.model.unpad) on padded batches, as `BertModel`.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from bertkit.model.bert.config import BertConfig
from bertkit.model.bert.modeling import BertPreTrainedModel, labelled_rows, run_encoder
from bertkit.model.embeddings import BertEmbeddings
from bertkit.model.heads import SequenceSummary, TiedOutputLayer, decoder_cross_entropy
from bertkit.model.layers import ACTIVATIONS, BertEncoder
from bertkit.model.outputs import BertModelOutput, MaskedLMOutput, ModelOutput, MultipleChoiceModelOutput
from bertkit.model.bert.task_heads import (
    BertForQuestionAnswering,
    BertForSequenceClassification,
    BertForTokenClassification,
    BertTaskModel,
    FirstTokenClassificationHead,
    choice_output,
    flatten_choices,
)
from bertkit.model.unpad import UnpadSwitch
from bertkit.model.electra.config import ElectraConfig

def _with_width(config: ElectraConfig, width: int) -> BertConfig:
    """A BertConfig view of `config` whose hidden_size is `width` (for the embeddings)."""
    return BertConfig(vocab_size=config.vocab_size, hidden_size=width, num_attention_heads=1, intermediate_size=1,
                      hidden_dropout_prob=config.hidden_dropout_prob, max_position_embeddings=config.max_position_embeddings,
                      type_vocab_size=config.type_vocab_size, layer_norm_eps=config.layer_norm_eps,
                      pad_token_id=config.pad_token_id)


class ElectraEmbeddings(BertEmbeddings):
    """BERT's input representation at width `embedding_size`: (B, T) ids -> (B, T, E)."""

    def __init__(self, config: ElectraConfig):
        super().__init__(_with_width(config, config.embedding_size))


class ElectraPreTrainedModel(BertPreTrainedModel):
    """HF-layout loading and saving with an `ElectraConfig`; the encoder lives at `electra.`.

    The fine-tuning heads are BERT's (bertkit.model.bert.task_heads) over the encoder
    `build_backbone` makes (never a pooler: ELECTRA has none), held at `electra`."""

    backbone_prefix = "electra."
    base_model_prefix = "electra"
    config_class = ElectraConfig
    optional_prefixes: tuple[str, ...] = ()

    @classmethod
    def build_backbone(cls, config: ElectraConfig, add_pooling_layer: bool) -> nn.Module:
        return ElectraModel(config)

    @property
    def bert(self) -> nn.Module:
        """The ELECTRA encoder under BERT's attribute name (for code written against BERT's models)."""
        return self.electra


class ElectraModel(UnpadSwitch, ElectraPreTrainedModel):
    """Embeddings (width E) -> `embeddings_project` (E -> H, when E != H) -> encoder. No pooler.

    Padded batches run BertModel's unpadded path (bertkit.model.unpad), chosen the same way:
    `unpad` (attribute, or `set_unpad(model, ...)`) None = automatic, True / False = always /
    never; `forward(..., unpad=...)` overrides it for one call.
    """

    backbone_prefix = ""

    def __init__(self, config: ElectraConfig):
        super().__init__(config)
        self.embeddings = ElectraEmbeddings(config)
        if config.embedding_size != config.hidden_size:
            self.embeddings_project = nn.Linear(config.embedding_size, config.hidden_size)
        else:
            self.embeddings_project = None
        self.encoder = BertEncoder(config)
        self.init_weights()

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.Tensor | None = None,
        output_hidden_states: bool = False,
        output_attentions: bool = False,
        unpad: bool | None = None,
    ) -> BertModelOutput:
        """input_ids, token_type_ids, attention_mask: (B, T) int (mask 1 = real token).

        Returns last_hidden_state (B, T, H), pooler_output None, and on request the hidden
        states (the projected embeddings first) and attention probabilities. On the unpadded
        path (never with output_attentions) `last_hidden_state` and `hidden_states` are zero
        at padding positions, the real positions those of the padded path."""
        unpadding = self.unpadding_for(attention_mask, unpad, output_attentions)
        hidden = self.embeddings(input_ids, token_type_ids, unpadding=unpadding)  # (B, T, E), or packed (N, E)
        if self.embeddings_project is not None:
            hidden = self.embeddings_project(hidden)  # (B, T, H) / (N, H)
        last, all_hidden, attentions = run_encoder(self.encoder, hidden, attention_mask, unpadding,
                                                   output_hidden_states, output_attentions)
        return BertModelOutput(last, None, all_hidden, attentions)


@dataclass
class ElectraForPreTrainingOutput(ModelOutput):
    """loss: mean BCE of replaced (1) vs original (0) over the real tokens; logits: (B, T)."""

    loss: torch.Tensor | None = None
    logits: torch.Tensor | None = None
    hidden_states: tuple[torch.Tensor, ...] | None = None
    attentions: tuple[torch.Tensor, ...] | None = None


class ElectraDiscriminatorPredictions(nn.Module):
    """(B, T, H) -> dense -> hidden_act -> dense_prediction -> (B, T) replaced-token logits."""

    def __init__(self, config: ElectraConfig):
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.hidden_size)
        self.act = ACTIVATIONS[config.hidden_act]
        self.dense_prediction = nn.Linear(config.hidden_size, 1)

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        return self.dense_prediction(self.act(self.dense(hidden_states))).squeeze(-1)


class ElectraGeneratorPredictions(nn.Module):
    """(..., H) -> dense -> GELU (exact, whatever hidden_act is, as HF) -> LayerNorm -> (..., E)."""

    def __init__(self, config: ElectraConfig):
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.embedding_size)
        self.LayerNorm = nn.LayerNorm(config.embedding_size, eps=config.layer_norm_eps)

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        return self.LayerNorm(F.gelu(self.dense(hidden_states)))


class ElectraGeneratorLMHead(TiedOutputLayer):
    """The output layer tied to the word embeddings (HF: `generator_lm_head`)."""

    def __init__(self, config: ElectraConfig):
        super().__init__(config.vocab_size)


class ElectraForPreTraining(ElectraPreTrainedModel):
    """The discriminator: one logit per token, > 0 = replaced (HF semantics)."""

    optional_prefixes = ("discriminator_predictions.",)

    def __init__(self, config: ElectraConfig):
        super().__init__(config)
        self.electra = ElectraModel(config)
        self.discriminator_predictions = ElectraDiscriminatorPredictions(config)
        self.init_weights()

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.Tensor | None = None,
        labels: torch.Tensor | None = None,
        output_hidden_states: bool = False,
        output_attentions: bool = False,
    ) -> ElectraForPreTrainingOutput:
        """labels: (B, T) 1 = replaced, 0 = original; the loss is the mean BCE over the
        positions with attention_mask 1 (all positions without a mask)."""
        out = self.electra(input_ids=input_ids, token_type_ids=token_type_ids, attention_mask=attention_mask,
                           output_hidden_states=output_hidden_states, output_attentions=output_attentions)
        logits = self.discriminator_predictions(out.last_hidden_state)  # (B, T)
        loss = None
        if labels is not None:
            active = attention_mask.bool() if attention_mask is not None else torch.ones_like(labels, dtype=torch.bool)
            loss = F.binary_cross_entropy_with_logits(logits[active], labels[active].to(logits.dtype))
        return ElectraForPreTrainingOutput(loss, logits, out.hidden_states, out.attentions)


class ElectraForMaskedLM(ElectraPreTrainedModel):
    """The generator: MLM logits through the tied output layer (HF semantics)."""

    optional_prefixes = ("generator_predictions.", "generator_lm_head.")

    def __init__(self, config: ElectraConfig):
        super().__init__(config)
        self.electra = ElectraModel(config)
        self.generator_predictions = ElectraGeneratorPredictions(config)
        self.generator_lm_head = ElectraGeneratorLMHead(config)
        self.init_weights()

    def mlm_logits(self, hidden_states: torch.Tensor) -> torch.Tensor:
        """(..., H) encoder states -> (..., V) vocabulary logits."""
        projected = self.generator_predictions(hidden_states)  # (..., E)
        return self.generator_lm_head(projected, self.electra.embeddings.word_embeddings.weight)

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.Tensor | None = None,
        labels: torch.Tensor | None = None,
        output_hidden_states: bool = False,
        output_attentions: bool = False,
    ) -> MaskedLMOutput:
        """labels: (B, T) original ids at masked positions, -100 elsewhere. logits: (B, T, V)
        without labels; with them (N, V) at the N labelled positions only (row-major, listed
        in `masked_positions`), as bertkit's other MLM heads."""
        out = self.electra(input_ids=input_ids, token_type_ids=token_type_ids, attention_mask=attention_mask,
                           output_hidden_states=output_hidden_states, output_attentions=output_attentions)
        if labels is None:
            return MaskedLMOutput(None, self.mlm_logits(out.last_hidden_state), None, out.hidden_states, out.attentions)
        positions, selected, targets = labelled_rows(out.last_hidden_state, labels)  # (N, 2), (N, H), (N,)
        loss, logits = decoder_cross_entropy(self.generator_predictions(selected),  # (N, E)
                                             self.electra.embeddings.word_embeddings.weight,
                                             self.generator_lm_head.bias, targets)
        return MaskedLMOutput(loss, logits, positions, out.hidden_states, out.attentions)


# ---- fine-tuning heads -------------------------------------------------------------------


class ElectraClassificationHead(FirstTokenClassificationHead):
    """[CLS] state -> dropout -> dense -> GELU (exact) -> dropout -> out_proj: (B, T, H) -> (B, K)."""

    activation = staticmethod(F.gelu)


class ElectraForSequenceClassification(ElectraPreTrainedModel, BertForSequenceClassification):
    """HF's ElectraForSequenceClassification: `classifier.dense/out_proj` on [CLS]; losses as
    BertForSequenceClassification."""

    optional_prefixes = ("classifier.",)
    classification_head = ElectraClassificationHead


class ElectraForTokenClassification(ElectraPreTrainedModel, BertForTokenClassification):
    """Every token -> dropout -> K-way `classifier` (NER); BertForTokenClassification over `electra`."""

    optional_prefixes = ("classifier.",)


class ElectraForQuestionAnswering(ElectraPreTrainedModel, BertForQuestionAnswering):
    """Start/end scores per token from `qa_outputs` (H -> 2); BertForQuestionAnswering over `electra`."""

    optional_prefixes = ("qa_outputs.",)


class ElectraSequenceSummary(SequenceSummary):
    """HF's ElectraSequenceSummary, the multiple-choice head's reading of a sequence:
    (B, T, H) -> (B, H): the first token's state (`summary_type` "first", the default), the
    last position's ("last") or the mean -> `summary` (H -> H linear; identity without
    summary_use_proj) -> summary_activation -> dropout (summary_last_dropout). Like
    transformers' ELECTRA config, bertkit's has no summary_first_dropout /
    summary_proj_to_labels: no dropout before `summary`, which keeps the hidden size."""

    def __init__(self, config: ElectraConfig):
        super().__init__(config.hidden_size, config.hidden_size if config.summary_use_proj else None,
                         config.summary_type, config.summary_activation, 0.0, config.summary_last_dropout)


class ElectraForMultipleChoice(ElectraPreTrainedModel, BertTaskModel):
    """HF's ElectraForMultipleChoice: (B, C, T) inputs run as (B * C, T); each (context,
    choice) row -> `sequence_summary` -> `classifier` (H -> 1), no pooler and no other
    dropout; cross-entropy over the C choices (labels -100 ignored)."""

    optional_prefixes = ("sequence_summary.", "classifier.")

    def __init__(self, config: ElectraConfig):
        super().__init__(config)
        self.add_backbone(config, add_pooling_layer=False)
        self.sequence_summary = ElectraSequenceSummary(config)
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
        index of the right choice. logits: (B, C)."""
        ids, types, mask = flatten_choices(input_ids, token_type_ids, attention_mask)  # (B * C, T)
        if self.sequence_summary.summary_type == "first":
            out = self.encode_for_first_token(ids, types, mask, output_hidden_states, output_attentions)
        else:  # the last position / the mean over T read padding states too (transformers'): run padded
            out = self.electra(input_ids=ids, token_type_ids=types, attention_mask=mask,
                               output_hidden_states=output_hidden_states, output_attentions=output_attentions,
                               unpad=False)
        scores = self.classifier(self.sequence_summary(out.last_hidden_state))  # (B * C, 1)
        return choice_output(scores, input_ids.shape[1], labels, out)
