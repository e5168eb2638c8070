"""DeBERTa-v2/v3 (He et al., 2021; He, Gao and Chen, 2021): the encoder, its masked LM and task heads.

transformers' class, attribute and config names, so checkpoints load both ways: `DebertaV2Model`
(`embeddings`: word, absolute positions only with `position_biased_input`, token types only with
`type_vocab_size` > 0, LayerNorm; `encoder`: the layers with disentangled attention
(bertkit.model.deberta.attention), `rel_embeddings` and its `LayerNorm`, v2's `conv`), no pooler.
A layer is BERT's post-LN block around the disentangled attention (`attention.self` /
`attention.output`, `intermediate`, `output`; the shared modules of bertkit.model.attention and layers).

The masked LM is transformers' `DebertaV2ForMaskedLM`: `legacy` configs hold `cls.predictions`
(BERT's head), the others `lm_predictions.lm_head` (dense -> act -> LayerNorm -> the tied word
embeddings + bias), the head microsoft's v3 checkpoints carry. By default the paper's enhanced mask
decoder is not run: transformers' class does not run it either (the checkpoints' absolute
`position_embeddings` are ignored on load, as here), so both compute the same function. With
`config.enhanced_mask_decoder` (bertkit's field, opt-in) it is run, as microsoft's MLM code runs it
(paper sec. 3.2): the encoder's last layer, weights shared, is applied twice more with keys and
values from the states entering it; the first time its queries (and residual) are those states plus
the absolute position embeddings I, the second time the first's output; the head reads the second.
The table is `deberta.embeddings.position_embeddings` (the key microsoft's checkpoints hold it
under), not added at the input unless `position_biased_input`.

Sequence classification and multiple choice read transformers' `ContextPooler` (first token ->
dropout -> dense -> pooler_hidden_act) at `pooler`; tagging and QA are BERT's heads over `deberta`.
"""

from __future__ import annotations

import torch
from torch import nn

from bertkit.model.attention import BertSublayerOutput
from bertkit.model.bert.modeling import BertPreTrainedModel, masked_lm
from bertkit.model.bert.task_heads import BertForQuestionAnswering, BertForTokenClassification, BertTaskModel
from bertkit.model.deberta.attention import DisentangledSelfAttention, relative_positions
from bertkit.model.deberta.config import DebertaV2Config
from bertkit.model.dropout import Dropout
from bertkit.model.heads import BertOnlyMLMHead, TiedDecoderHead
from bertkit.model.layers import ACTIVATIONS, BertIntermediate
from bertkit.model.losses import (choice_output, flatten_choices, problem_type,
                                  sequence_classification_loss)
from bertkit.model.outputs import (BertModelOutput, MaskedLMOutput, MultipleChoiceModelOutput,
                                   SequenceClassifierOutput)
from bertkit.model.pretrained import PreTrainedModel

CONV_ACTIVATIONS = {"tanh": torch.tanh, **ACTIVATIONS}
EMD_STEPS = 2  # the enhanced mask decoder's n: the last layer applied twice (the paper's and microsoft's code)


class DebertaV2Embeddings(nn.Module):
    """word (+ absolute position) (+ token type) -> LayerNorm -> zero at padding -> dropout: (B, T) -> (B, T, H)."""

    def __init__(self, config: DebertaV2Config):
        super().__init__()
        hidden = config.hidden_size
        self.word_embeddings = nn.Embedding(config.vocab_size, hidden, padding_idx=config.pad_token_id)
        self.position_biased_input = config.position_biased_input  # else the table (if any) is the EMD's
        self.position_embeddings = (nn.Embedding(config.max_position_embeddings, hidden)
                                    if config.position_biased_input else None)
        self.token_type_embeddings = nn.Embedding(config.type_vocab_size, hidden) if config.type_vocab_size else None
        self.LayerNorm = nn.LayerNorm(hidden, eps=config.layer_norm_eps)
        self.dropout = Dropout(config.hidden_dropout_prob)

    def forward(self, input_ids: torch.Tensor, token_type_ids: torch.Tensor | None = None,
                attention_mask: torch.Tensor | None = None) -> torch.Tensor:
        embeddings = self.word_embeddings(input_ids)  # (B, T, H)
        if self.position_biased_input:
            embeddings = embeddings + self.absolute_positions(input_ids.shape[1])
        if self.token_type_embeddings is not None:
            embeddings = embeddings + (self.token_type_embeddings.weight[0] if token_type_ids is None
                                       else self.token_type_embeddings(token_type_ids))
        embeddings = self.LayerNorm(embeddings)
        if attention_mask is not None:  # padding rows zero, as transformers' (v2's convolution reads them)
            embeddings = embeddings * attention_mask.unsqueeze(-1).to(embeddings.dtype)
        return self.dropout(embeddings)

    def absolute_positions(self, length: int) -> torch.Tensor:
        """The first `length` rows of `position_embeddings`: (T, H)."""
        if length > self.position_embeddings.num_embeddings:
            raise ValueError(f"sequence length {length} exceeds max_position_embeddings "
                             f"{self.position_embeddings.num_embeddings}; truncate the input")
        return self.position_embeddings.weight[:length]


class DebertaV2Attention(nn.Module):
    def __init__(self, config: DebertaV2Config):
        super().__init__()
        self.self = DisentangledSelfAttention(config)
        self.output = BertSublayerOutput(config.hidden_size, config)


class DebertaV2Layer(nn.Module):
    """Post-LN: x = LN(x + drop(attn(x))); x = LN(x + drop(ffn(x))), the attention disentangled."""

    def __init__(self, config: DebertaV2Config):
        super().__init__()
        self.attention = DebertaV2Attention(config)
        self.intermediate = BertIntermediate(config)
        self.output = BertSublayerOutput(config.intermediate_size, config)

    def forward(self, hidden_states, key_keep, relative, rel_embeddings, output_attentions=False, query_states=None):
        """query_states (B, T, H): the queries' states (and the residual), keys and values from
        hidden_states (the enhanced mask decoder); None: hidden_states for all three."""
        attn_out, ffn_out = self.attention.output, self.output
        context, probs = self.attention.self(hidden_states, key_keep, relative, rel_embeddings, output_attentions,
                                             query_states)
        residual = hidden_states if query_states is None else query_states
        hidden_states = attn_out.LayerNorm(residual + attn_out.dropout(attn_out.dense(context)))
        ffn = ffn_out.dense(self.intermediate(hidden_states))
        return ffn_out.LayerNorm(hidden_states + ffn_out.dropout(ffn)), probs  # (B, T, H)


class ConvLayer(nn.Module):
    """DeBERTa-v2's convolution beside the first layer: conv1d over the embeddings (padding zero)
    -> dropout -> conv_act, added to the first layer's output -> LayerNorm -> zero at padding."""

    def __init__(self, config: DebertaV2Config):
        super().__init__()
        size = config.conv_kernel_size
        self.conv = nn.Conv1d(config.hidden_size, config.hidden_size, size, padding=(size - 1) // 2,
                              groups=config.conv_groups)
        self.LayerNorm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.dropout = Dropout(config.hidden_dropout_prob)
        self.act = CONV_ACTIVATIONS[config.conv_act]

    def forward(self, embeddings: torch.Tensor, layer_output: torch.Tensor, real: torch.Tensor) -> torch.Tensor:
        """embeddings, layer_output: (B, T, H); real: (B, T, 1) float, 1 = real token."""
        out = self.conv(embeddings.transpose(1, 2)).transpose(1, 2) * real  # (B, T, H)
        return self.LayerNorm(layer_output + self.act(self.dropout(out))) * real


class DebertaV2Encoder(nn.Module):
    """The layers, the relative embedding table (`rel_embeddings`, 2k x H) shared by all of them,
    its `LayerNorm` (norm_rel_ebd "layer_norm") and v2's `conv`."""

    def __init__(self, config: DebertaV2Config):
        super().__init__()
        self.config = config
        self.layer = nn.ModuleList(DebertaV2Layer(config) for _ in range(config.num_hidden_layers))
        if config.relative_attention:
            self.rel_embeddings = nn.Embedding(2 * config.relative_span, config.hidden_size)
        if config.layer_norm_rel_embeddings:
            self.LayerNorm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.conv = ConvLayer(config) if config.conv_kernel_size > 0 else None

    def relative_table(self) -> torch.Tensor | None:
        """The (2k, H) relative embeddings every layer reads (layer-normed when configured)."""
        if not self.config.relative_attention:
            return None
        table = self.rel_embeddings.weight
        return self.LayerNorm(table) if self.config.layer_norm_rel_embeddings else table

    def layer_inputs(self, hidden_states: torch.Tensor, attention_mask: torch.Tensor):
        """What every layer reads besides its states: key_keep (B, 1, 1, T) bool or None (no padding),
        the relative positions (T, T) and the relative table (2k, H) or None."""
        key_keep = None if bool(attention_mask.all()) else attention_mask.bool()[:, None, None, :]  # (B, 1, 1, T)
        relative = relative_positions(hidden_states.shape[1], self.config, hidden_states.device)  # (T, T)
        return key_keep, relative, self.relative_table()

    def forward(self, hidden_states, attention_mask, output_hidden_states=False, output_attentions=False):
        """hidden_states: (B, T, H) embeddings; attention_mask: (B, T) 1 = real token.
        Returns last (B, T, H), all hidden states (embeddings first) and attentions, or None."""
        key_keep, relative, table = self.layer_inputs(hidden_states, attention_mask)
        all_hidden = [hidden_states] if output_hidden_states else None
        attentions = [] if output_attentions else None
        embeddings = hidden_states
        for index, layer in enumerate(self.layer):
            hidden_states, probs = layer(hidden_states, key_keep, relative, table, output_attentions)
            if index == 0 and self.conv is not None:
                hidden_states = self.conv(embeddings, hidden_states, attention_mask.unsqueeze(-1).to(hidden_states.dtype))
            if output_hidden_states:
                all_hidden.append(hidden_states)
            if output_attentions:
                attentions.append(probs)
        return hidden_states, None if all_hidden is None else tuple(all_hidden), \
            None if attentions is None else tuple(attentions)


class DebertaV2PreTrainedModel(BertPreTrainedModel):
    """The DeBERTa family's base: its config, the encoder at `deberta`, transformers' init (normal
    weights, zero biases, unit LayerNorms), and the task heads' dropout (`cls_dropout`, else
    hidden_dropout_prob). It builds on BERT's base for the heads it shares (tagging, QA), not its layout:
    DeBERTa has no pre-LN variant."""

    config_class = DebertaV2Config
    base_model_prefix = "deberta"
    backbone_prefix = "deberta."
    optional_prefixes: tuple[str, ...] = ()
    state_from_checkpoint = PreTrainedModel.state_from_checkpoint
    checkpoint_layout = PreTrainedModel.checkpoint_layout

    @classmethod
    def build_backbone(cls, config: DebertaV2Config, add_pooling_layer: bool = False) -> nn.Module:
        return DebertaV2Model(config)

    @classmethod
    def head_dropout(cls, config: DebertaV2Config) -> float:
        return config.cls_dropout if config.cls_dropout is not None else config.hidden_dropout_prob


class DebertaV2Model(DebertaV2PreTrainedModel):
    """Embeddings -> encoder (disentangled attention). No pooler."""

    backbone_prefix = ""

    def __init__(self, config: DebertaV2Config):
        super().__init__(config)
        self.embeddings = DebertaV2Embeddings(config)
        self.encoder = DebertaV2Encoder(config)
        self.init_weights()

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.Tensor | None = None,
        output_hidden_states: bool = False,
        output_attentions: bool = False,
    ) -> BertModelOutput:
        """input_ids, attention_mask, token_type_ids: (B, T) int (mask 1 = real token). Returns
        last_hidden_state (B, T, H), pooler_output None, on request the hidden states (the
        embeddings first) and attention probabilities (B, heads, T, T). States at padding
        positions are not meaningful."""
        if attention_mask is None:
            attention_mask = torch.ones_like(input_ids)
        hidden = self.embeddings(input_ids, token_type_ids, attention_mask)  # (B, T, H)
        last, all_hidden, attentions = self.encoder(hidden, attention_mask, output_hidden_states, output_attentions)
        return BertModelOutput(last, None, all_hidden, attentions)


class DebertaV2LMPredictionHead(TiedDecoderHead):
    """transformers' unlegacy head (`lm_predictions.lm_head`): dense -> hidden_act -> LayerNorm, then
    the tied word embeddings plus `bias`."""

    def __init__(self, config: DebertaV2Config):
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.hidden_size)
        self.act = ACTIVATIONS[config.hidden_act]
        self.LayerNorm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.bias = nn.Parameter(torch.zeros(config.vocab_size))

    def transform(self, hidden_states: torch.Tensor) -> torch.Tensor:
        return self.LayerNorm(self.act(self.dense(hidden_states)))


class DebertaV2OnlyMLMHead(nn.Module):
    def __init__(self, config: DebertaV2Config):
        super().__init__()
        self.lm_head = DebertaV2LMPredictionHead(config)


class DebertaV2ForMaskedLM(DebertaV2PreTrainedModel):
    """The encoder and a vocabulary head tied to the word embeddings (`cls.predictions` when
    `config.legacy`, else `lm_predictions.lm_head`)."""

    optional_prefixes = ("cls.", "lm_predictions.")

    def __init__(self, config: DebertaV2Config):
        super().__init__(config)
        self.deberta = DebertaV2Model(config)
        if config.legacy:
            self.cls = BertOnlyMLMHead(config)
        else:
            self.lm_predictions = DebertaV2OnlyMLMHead(config)
        embeddings = self.deberta.embeddings
        if config.enhanced_mask_decoder and embeddings.position_embeddings is None:  # the EMD's I, this head's only
            embeddings.position_embeddings = nn.Embedding(config.max_position_embeddings, config.hidden_size)
        self.init_weights()

    @property
    def vocabulary_head(self) -> TiedDecoderHead:
        return self.cls.predictions if self.config.legacy else self.lm_predictions.lm_head

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
        without labels; with them (N, V) at the N labelled positions only (row-major, listed in
        `masked_positions`), as bertkit's other MLM heads; loss: their mean cross-entropy."""
        emd = self.config.enhanced_mask_decoder
        out = self.deberta(input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids,
                           output_hidden_states=output_hidden_states or emd, output_attentions=output_attentions)
        states = out.last_hidden_state
        if emd:
            mask = torch.ones_like(input_ids) if attention_mask is None else attention_mask
            states = self.enhanced_mask_decoder(out.hidden_states[-2], mask)
        loss, logits, positions = masked_lm(self.vocabulary_head, states,
                                            self.deberta.embeddings.word_embeddings.weight, labels, self.static_budget())
        return MaskedLMOutput(loss, logits, positions, out.hidden_states if output_hidden_states else None,
                              out.attentions)

    def enhanced_mask_decoder(self, hidden_states: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        """The EMD (module docstring): hidden_states (B, T, H) entering the encoder's last layer,
        attention_mask (B, T) -> the states the head reads (B, T, H)."""
        encoder = self.deberta.encoder
        key_keep, relative, table = encoder.layer_inputs(hidden_states, attention_mask)
        query = hidden_states + self.deberta.embeddings.absolute_positions(hidden_states.shape[1])  # H + I
        for _ in range(EMD_STEPS):
            query, _ = encoder.layer[-1](hidden_states, key_keep, relative, table, query_states=query)
        return query


# ---- fine-tuning heads -------------------------------------------------------------------


class ContextPooler(nn.Module):
    """transformers' ContextPooler: first token (B, T, H) -> dropout (pooler_dropout) -> dense ->
    pooler_hidden_act -> (B, H)."""

    def __init__(self, config: DebertaV2Config):
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.hidden_size)
        self.dropout = nn.Dropout(config.pooler_dropout)
        self.act = ACTIVATIONS[config.pooler_hidden_act]

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        return self.act(self.dense(self.dropout(hidden_states[:, 0])))


class PooledHead(DebertaV2PreTrainedModel, BertTaskModel):
    """The encoder, `pooler` (ContextPooler), `dropout` and a `classifier` of `outputs` scores."""

    optional_prefixes = ("pooler.", "classifier.")

    def __init__(self, config: DebertaV2Config, outputs: int):
        super().__init__(config)
        self.add_backbone(config, add_pooling_layer=False)
        self.pooler = ContextPooler(config)
        self.dropout = nn.Dropout(self.head_dropout(config))
        self.classifier = nn.Linear(config.hidden_size, outputs)
        self.init_weights()

    def pooled_scores(self, input_ids, attention_mask, token_type_ids, output_hidden_states, output_attentions):
        """(scores (B, outputs), the encoder's output)."""
        out = self.deberta(input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids,
                           output_hidden_states=output_hidden_states, output_attentions=output_attentions)
        return self.classifier(self.dropout(self.pooler(out.last_hidden_state))), out


class DebertaV2ForSequenceClassification(PooledHead):
    """First token -> ContextPooler -> dropout -> K-way `classifier`; losses as
    BertForSequenceClassification (transformers' rule by problem type)."""

    def __init__(self, config: DebertaV2Config):
        super().__init__(config, config.num_labels)
        self.num_labels = config.num_labels

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.Tensor | None = None,
        labels: torch.Tensor | None = None,
        output_hidden_states: bool = False,
        output_attentions: bool = False,
    ) -> SequenceClassifierOutput:
        """labels: (B,) int64 class ids, (B,) float targets (regression) or (B, K) float (multi-label)."""
        logits, out = self.pooled_scores(input_ids, attention_mask, token_type_ids, output_hidden_states,
                                         output_attentions)  # (B, K)
        loss = None if labels is None else sequence_classification_loss(logits, labels, problem_type(self.config, labels))
        return SequenceClassifierOutput(loss, logits, out.hidden_states, out.attentions)


class DebertaV2ForMultipleChoice(PooledHead):
    """(B, C, T) inputs run as (B * C, T); each row -> ContextPooler -> dropout -> `classifier`
    (H -> 1); cross-entropy over the C choices."""

    def __init__(self, config: DebertaV2Config):
        super().__init__(config, 1)

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.Tensor | None = None,
        labels: torch.Tensor | None = None,
        output_hidden_states: bool = False,
        output_attentions: bool = False,
    ) -> MultipleChoiceModelOutput:
        """input_ids, attention_mask, token_type_ids: (B, C, T) int; labels: (B,) the right choice."""
        ids, mask, types = flatten_choices(input_ids, attention_mask, token_type_ids)  # (B * C, T)
        scores, out = self.pooled_scores(ids, mask, types, output_hidden_states, output_attentions)  # (B * C, 1)
        return choice_output(scores, input_ids.shape[1], labels, out)


class DebertaV2ForTokenClassification(DebertaV2PreTrainedModel, BertForTokenClassification):
    """Every token -> dropout -> K-way `classifier`; BertForTokenClassification over `deberta`."""

    optional_prefixes = ("classifier.",)


class DebertaV2ForQuestionAnswering(DebertaV2PreTrainedModel, BertForQuestionAnswering):
    """Start/end scores per token from `qa_outputs` (H -> 2); BertForQuestionAnswering over `deberta`
    (padding positions get the lowest score, bertkit's rule)."""

    optional_prefixes = ("qa_outputs.",)

