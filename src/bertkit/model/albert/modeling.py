"""ALBERT (Lan et al. 2019): factorized embeddings, cross-layer parameter sharing, SOP.

Hugging Face names and semantics throughout, so checkpoints move both ways as a load:
`albert.embeddings.*` are E = `embedding_size` wide and `albert.encoder.embedding_hidden_mapping_in`
projects them to H; the encoder is `num_hidden_groups` groups of `inner_group_num`
layers (`albert.encoder.albert_layer_groups.N.albert_layers.M.{attention.{query,key,value,
dense,LayerNorm}, ffn, ffn_output, full_layer_layer_norm}`), layer i running group
int(i / (L / G)); `albert.pooler` is a bare linear layer (tanh applied in forward); the
MLM head is `predictions.{dense,LayerNorm,bias}` with the decoder tied to the word
embeddings (HF's `predictions.decoder.*` are tied copies, dropped on load and left out on
save); the sentence-order head is `sop_classifier.classifier`.

Sharing modes (`AlbertConfig.share_layers`, the CLI's `--share-layers`):
- `all`  (ALBERT's default): num_hidden_groups = 1, one layer applied L times;
- `none` : num_hidden_groups = L, every layer its own (BERT with factorized embeddings);
- `attention` / `ffn`: num_hidden_groups = L and the attention sub-layer (query, key,
  value, dense, attention.LayerNorm) or the FFN sub-layer (ffn, ffn_output,
  full_layer_layer_norm) of every layer is *one* module. HF's format cannot say this,
  so config.json keeps `share_layers` as an extra field and the weights hold L equal
  copies: transformers loads such a checkpoint as an unshared model computing the same
  function (fine-tuning there unties it); bertkit re-ties on load and refuses a
  checkpoint whose copies differ.

Padded batches run BERT's unpadded path (bertkit.model.unpad; `AlbertModel.unpad` and
`set_unpad`, as `BertModel`): the embeddings, their projection and every layer's row-wise
work see only the real tokens, and padding positions of the outputs are zeros.

Two deliberate differences from transformers' AlbertLayer: the FFN output gets dropout
before its residual (as in the original ALBERT and in BERT; transformers defines it but
does not apply it), which matters only when training with hidden_dropout_prob > 0
(ALBERT's default is 0); and `forward` takes (input_ids, attention_mask, token_type_ids)
in transformers' positional order.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from bertkit.errors import BertkitError
from bertkit.model.attention import BertSelfAttention
from bertkit.model.bert.modeling import IGNORE_INDEX, BertPreTrainedModel, masked_lm, run_encoder
from bertkit.model.dropout import Dropout
from bertkit.model.embeddings import BertEmbeddings
from bertkit.model.heads import TiedDecoderHead
from bertkit.model.layers import ACTIVATIONS
from bertkit.model.outputs import BertModelOutput, MaskedLMOutput, ModelOutput
from bertkit.model.bert.task_heads import (
    BertForMultipleChoice,
    BertForQuestionAnswering,
    BertForSequenceClassification,
    BertForTokenClassification,
)
from bertkit.model.unpad import Unpadding, UnpadSwitch
from bertkit.model.albert.config import PARTIAL_SHARING, AlbertConfig

class _Width:
    """`config` as seen by a module built for width `hidden_size` (ALBERT's embeddings are E wide)."""

    def __init__(self, config: AlbertConfig, hidden_size: int):
        self._config = config
        self.hidden_size = hidden_size

    def __getattr__(self, name: str) -> Any:
        if name == "_config":  # not set yet (e.g. during copying): no recursion
            raise AttributeError(name)
        return getattr(self._config, name)


class AlbertEmbeddings(BertEmbeddings):
    """BERT's input representation at width E: word + position + token-type, LayerNorm, dropout.
    (B, T) ids -> (B, T, E)."""

    def __init__(self, config: AlbertConfig):
        super().__init__(_Width(config, config.embedding_size))


class AlbertAttention(BertSelfAttention):
    """HF's AlbertAttention: BERT's multi-head self-attention (query/key/value) followed by
    the output projection `dense`, dropout, residual and `LayerNorm` in one module."""

    def __init__(self, config: AlbertConfig):
        super().__init__(config)
        self.dense = nn.Linear(config.hidden_size, config.hidden_size)
        self.LayerNorm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.output_dropout = Dropout(config.hidden_dropout_prob)

    def forward(
        self, hidden_states: torch.Tensor, attention_mask: torch.Tensor | None, output_attentions: bool = False,
        unpadding: Unpadding | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """(B, T, H), mask (B, 1, 1, T) bool -> (B, T, H), probs (B, heads, T, T) or None.
        With `unpadding`, hidden_states and the result are packed (N, H) rows."""
        context, probs = super().forward(hidden_states, attention_mask, output_attentions, unpadding)
        return self.LayerNorm(hidden_states + self.output_dropout(self.dense(context))), probs


class AlbertLayer(nn.Module):
    """Post-LN layer: x = attention(x) (residual + LN inside); x = LN(x + drop(ffn_output(act(ffn(x)))))."""

    def __init__(self, config: AlbertConfig):
        super().__init__()
        self.full_layer_layer_norm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.attention = AlbertAttention(config)
        self.ffn = nn.Linear(config.hidden_size, config.intermediate_size)
        self.ffn_output = nn.Linear(config.intermediate_size, config.hidden_size)
        self.activation = ACTIVATIONS[config.hidden_act]
        self.dropout = Dropout(config.hidden_dropout_prob)

    def forward(
        self, hidden_states: torch.Tensor, attention_mask: torch.Tensor | None, output_attentions: bool = False,
        unpadding: Unpadding | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """(B, T, H) -> (B, T, H), probs or None; packed (N, H) rows with `unpadding`."""
        attention_output, probs = self.attention(hidden_states, attention_mask, output_attentions, unpadding)
        ffn_output = self.ffn_output(self.activation(self.ffn(attention_output)))  # (B, T, H)
        return self.full_layer_layer_norm(attention_output + self.dropout(ffn_output)), probs


class AlbertLayerGroup(nn.Module):
    def __init__(self, config: AlbertConfig):
        super().__init__()
        self.albert_layers = nn.ModuleList(AlbertLayer(config) for _ in range(config.inner_group_num))


class AlbertTransformer(nn.Module):
    """E -> H projection, then L layer applications over `num_hidden_groups` parameter groups."""

    def __init__(self, config: AlbertConfig):
        super().__init__()
        self.num_hidden_layers = config.num_hidden_layers
        self.num_hidden_groups = config.num_hidden_groups
        self.embedding_hidden_mapping_in = nn.Linear(config.embedding_size, config.hidden_size)
        self.albert_layer_groups = nn.ModuleList(AlbertLayerGroup(config) for _ in range(config.num_hidden_groups))
        if config.share_layers in PARTIAL_SHARING:
            first = self.albert_layer_groups[0].albert_layers[0]
            parts = ("attention",) if config.share_layers == "attention" else ("ffn", "ffn_output", "full_layer_layer_norm")
            for group in self.albert_layer_groups[1:]:
                for part in parts:  # one module under every layer's name: one tensor, gradients add up
                    setattr(group.albert_layers[0], part, getattr(first, part))

    def group_of_layer(self, index: int) -> int:
        """HF's rule: layer i runs group int(i / (L / G))."""
        return int(index / (self.num_hidden_layers / self.num_hidden_groups))

    def forward(
        self,
        hidden_states: torch.Tensor,
        attention_mask: torch.Tensor | None,
        output_hidden_states: bool = False,
        output_attentions: bool = False,
        unpadding: Unpadding | None = None,
    ) -> tuple[torch.Tensor, tuple[torch.Tensor, ...] | None, tuple[torch.Tensor, ...] | None]:
        """(B, T, E) embeddings -> last (B, T, H), hidden states (projected embeddings, then
        every layer application), attention probabilities of every layer application.
        With `unpadding`, the embeddings and every returned hidden state are packed rows
        ((N, E) in, (N, H) out; bertkit.model.unpad)."""
        hidden_states = self.embedding_hidden_mapping_in(hidden_states)  # (B, T, H) / (N, H)
        all_hidden = [hidden_states] if output_hidden_states else None
        all_attentions = [] if output_attentions else None
        for index in range(self.num_hidden_layers):
            for layer in self.albert_layer_groups[self.group_of_layer(index)].albert_layers:
                hidden_states, probs = layer(hidden_states, attention_mask, output_attentions, unpadding)
                if all_hidden is not None:
                    all_hidden.append(hidden_states)
                if all_attentions is not None:
                    all_attentions.append(probs)
        return (
            hidden_states,
            tuple(all_hidden) if all_hidden is not None else None,
            tuple(all_attentions) if all_attentions is not None else None,
        )


class AlbertPreTrainedModel(BertPreTrainedModel):
    """BERT's init and HF-layout loading/saving with ALBERT's config, prefix and tied copies.

    The task heads below are BERT's (bertkit.model.bert.task_heads) over the encoder
    `build_backbone` makes, held at `albert`; their dropout is `head_dropout`."""

    base_model_prefix = "albert"
    config_class = AlbertConfig
    backbone_prefix = ""
    optional_prefixes: tuple[str, ...] = ("pooler.",)

    @classmethod
    def build_backbone(cls, config: AlbertConfig, add_pooling_layer: bool) -> nn.Module:
        return AlbertModel(config, add_pooling_layer=add_pooling_layer)

    @classmethod
    def head_dropout(cls, config: AlbertConfig) -> float:
        """HF ALBERT heads use classifier_dropout_prob; bertkit's generic classifier_dropout wins when set."""
        return config.classifier_dropout if config.classifier_dropout is not None else config.classifier_dropout_prob

    @property
    def bert(self) -> nn.Module:
        """The ALBERT encoder under BERT's attribute name (for code written against BERT's models)."""
        return self.albert

    @classmethod
    def from_pretrained(
        cls,
        directory: str | os.PathLike,
        strict: bool = True,
        output_loading_info: bool = False,
        config: AlbertConfig | None = None,
    ):
        """Load config.json + model.safetensors (or pytorch_model.bin, weights only); see
        BertPreTrainedModel.from_pretrained. Partially shared layers must hold equal copies."""
        loaded = super().from_pretrained(directory, strict=strict, output_loading_info=output_loading_info, config=config)
        model = loaded[0] if output_loading_info else loaded
        if model.config.share_layers in PARTIAL_SHARING:
            _check_shared_copies(model, Path(directory))
        return loaded

    def save_pretrained(self, directory: str | os.PathLike, state_dict: dict[str, torch.Tensor] | None = None) -> None:
        """HF layout; a module shared by several layers is written once per layer (equal copies)."""
        state = self.state_dict() if state_dict is None else state_dict
        seen: set[int] = set()
        untied = {}
        for key, tensor in state.items():
            pointer = tensor.untyped_storage().data_ptr()
            untied[key] = tensor.clone() if pointer in seen else tensor
            seen.add(pointer)
        super().save_pretrained(directory, state_dict=untied)


def _shared_key_sets(model: nn.Module) -> list[list[str]]:
    """State-dict keys that name one tensor (partially shared layers), in groups of two or more."""
    by_tensor: dict[int, list[str]] = {}
    for key, tensor in model.state_dict(keep_vars=True).items():
        by_tensor.setdefault(id(tensor), []).append(key)
    return [keys for keys in by_tensor.values() if len(keys) > 1]


def _check_shared_copies(model: nn.Module, directory: Path) -> None:
    from bertkit.interop.hf import read_state_dict

    prefix = f"{AlbertPreTrainedModel.base_model_prefix}."
    raw, path = read_state_dict(directory)
    raw = {k.removeprefix(prefix): v for k, v in raw.items()}
    for keys in _shared_key_sets(model):
        copies = [raw.get(k.removeprefix(prefix)) for k in keys]
        copies = [c for c in copies if c is not None]
        if any(not torch.equal(copies[0], c) for c in copies[1:]):
            raise BertkitError(
                f"{path}: config.json says share_layers {model.config.share_layers!r}, but the layers' copies of "
                f"{keys[0].split('albert_layers.0.')[-1]!r} differ (the weights were untied, e.g. fine-tuned in "
                f"transformers); drop 'share_layers' and set num_hidden_groups to load them unshared"
            )


@dataclass
class AlbertForPreTrainingOutput(ModelOutput):
    """loss: MLM (+ SOP when `sentence_order_label` is given), scalar.

    prediction_logits: (B, T, V) without `labels`; with them (N, V) at the N labelled
    positions in row-major order (`masked_positions` (N, 2)), as BertForPreTraining.
    sop_logits: (B, 2), index 0 = in order, 1 = swapped.
    """

    loss: torch.Tensor | None = None
    prediction_logits: torch.Tensor | None = None
    sop_logits: torch.Tensor | None = None
    masked_positions: torch.Tensor | None = None
    hidden_states: tuple[torch.Tensor, ...] | None = None
    attentions: tuple[torch.Tensor, ...] | None = None

    @property
    def seq_relationship_logits(self) -> torch.Tensor | None:
        """`sop_logits` under BertForPreTraining's name for the sentence-pair head, so code
        written for MLM + NSP (bertkit.objectives.mlm_nsp) reads SOP unchanged."""
        return self.sop_logits


class AlbertModel(UnpadSwitch, AlbertPreTrainedModel):
    """Factorized embeddings -> shared-parameter encoder -> tanh pooler on [CLS].

    Padded batches run the unpadded path (bertkit.model.unpad), chosen as BertModel's:
    `unpad` (attribute, or `set_unpad(model, ...)`) None = automatic, True / False =
    always / never; `forward(..., unpad=...)` overrides it for one call.
    """

    def __init__(self, config: AlbertConfig, add_pooling_layer: bool = True):
        super().__init__(config)
        self.embeddings = AlbertEmbeddings(config)
        self.encoder = AlbertTransformer(config)
        self.pooler = nn.Linear(config.hidden_size, config.hidden_size) if add_pooling_layer else None
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
        last_hidden_state (B, T, H); pooler_output (B, H); hidden_states L+1 x (B, T, H).
        On the unpadded path (never with output_attentions) `last_hidden_state` and
        `hidden_states` are zero at padding; real positions and the pooler as padded."""
        unpadding = self.unpadding_for(attention_mask, unpad, output_attentions)
        embedded = self.embeddings(input_ids, token_type_ids, unpadding=unpadding)  # (B, T, E), or packed (N, E)
        last, all_hidden, attentions = run_encoder(self.encoder, embedded, attention_mask, unpadding,
                                                   output_hidden_states, output_attentions)
        pooled = torch.tanh(self.pooler(last[:, 0])) if self.pooler is not None else None
        return BertModelOutput(last, pooled, all_hidden, attentions)


class AlbertMLMHead(TiedDecoderHead):
    """H -> E (dense, activation, LayerNorm), then the decoder tied to the (V, E) word
    embeddings plus `bias`. Tied functionally: the state dict holds the matrix once."""

    def __init__(self, config: AlbertConfig):
        super().__init__()
        self.LayerNorm = nn.LayerNorm(config.embedding_size, eps=config.layer_norm_eps)
        self.bias = nn.Parameter(torch.zeros(config.vocab_size))
        self.dense = nn.Linear(config.hidden_size, config.embedding_size)
        self.activation = ACTIVATIONS[config.hidden_act]

    def transform(self, hidden_states: torch.Tensor) -> torch.Tensor:
        """(..., H) -> (..., E)."""
        return self.LayerNorm(self.activation(self.dense(hidden_states)))


class AlbertSOPHead(nn.Module):
    """Sentence-order prediction on the pooled [CLS]: dropout, (H -> 2) `classifier`."""

    def __init__(self, config: AlbertConfig):
        super().__init__()
        self.dropout = nn.Dropout(config.classifier_dropout_prob)
        self.classifier = nn.Linear(config.hidden_size, 2)

    def forward(self, pooled_output: torch.Tensor) -> torch.Tensor:
        return self.classifier(self.dropout(pooled_output))  # (B, 2)


class AlbertForPreTraining(AlbertPreTrainedModel):
    """ALBERT with the masked-LM and sentence-order-prediction heads (HF semantics)."""

    backbone_prefix = "albert."
    optional_prefixes = ("predictions.", "sop_classifier.", "albert.pooler.")

    def __init__(self, config: AlbertConfig):
        super().__init__(config)
        self.albert = AlbertModel(config)
        self.predictions = AlbertMLMHead(config)
        self.sop_classifier = AlbertSOPHead(config)
        self.init_weights()

    def mlm_logits(self, hidden_states: torch.Tensor) -> torch.Tensor:
        """(..., H) -> (..., V) vocabulary logits through the tied decoder."""
        return self.predictions(hidden_states, self.albert.embeddings.word_embeddings.weight)

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.Tensor | None = None,
        labels: torch.Tensor | None = None,
        sentence_order_label: torch.Tensor | None = None,
        output_hidden_states: bool = False,
        output_attentions: bool = False,
    ) -> AlbertForPreTrainingOutput:
        """labels: (B, T) original ids at masked positions, -100 elsewhere;
        sentence_order_label: (B,) 0 = A then B, 1 = swapped (-100 = ignore)."""
        out = self.albert(input_ids=input_ids, token_type_ids=token_type_ids, attention_mask=attention_mask,
                          output_hidden_states=output_hidden_states, output_attentions=output_attentions)
        sop_logits = self.sop_classifier(out.pooler_output)  # (B, 2)
        word_embeddings = self.albert.embeddings.word_embeddings.weight
        loss, prediction_logits, positions = masked_lm(self.predictions, out.last_hidden_state, word_embeddings, labels, self.static_budget())
        if sentence_order_label is not None:
            sop_loss = F.cross_entropy(sop_logits, sentence_order_label.view(-1), ignore_index=IGNORE_INDEX)
            loss = sop_loss if loss is None else loss + sop_loss
        return AlbertForPreTrainingOutput(loss, prediction_logits, sop_logits, positions, out.hidden_states,
                                          out.attentions)


class AlbertForMaskedLM(AlbertPreTrainedModel):
    """ALBERT with its MLM head only (HF `AlbertForMaskedLM`: no pooler, no SOP head)."""

    backbone_prefix = "albert."
    optional_prefixes = ("predictions.",)

    def __init__(self, config: AlbertConfig):
        super().__init__(config)
        self.albert = AlbertModel(config, add_pooling_layer=False)
        self.predictions = AlbertMLMHead(config)
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
        """(B, T) int inputs; labels (B, T) original ids at masked positions, -100 elsewhere
        (then logits are (N, V) at those positions only, see `masked_positions`)."""
        out = self.albert(input_ids=input_ids, token_type_ids=token_type_ids, attention_mask=attention_mask,
                          output_hidden_states=output_hidden_states, output_attentions=output_attentions)
        word_embeddings = self.albert.embeddings.word_embeddings.weight
        loss, logits, positions = masked_lm(self.predictions, out.last_hidden_state, word_embeddings, labels, self.static_budget())
        return MaskedLMOutput(loss, logits, positions, out.hidden_states, out.attentions)


class AlbertForSequenceClassification(AlbertPreTrainedModel, BertForSequenceClassification):
    """Pooled [CLS] -> dropout (classifier_dropout_prob) -> K-way `classifier` (K = 1: regression).
    BertForSequenceClassification over `albert`."""

    backbone_prefix = "albert."
    optional_prefixes = ("classifier.", "albert.pooler.")


class AlbertForTokenClassification(AlbertPreTrainedModel, BertForTokenClassification):
    """Every token -> dropout -> K-way `classifier` (NER); BertForTokenClassification over `albert`."""

    backbone_prefix = "albert."
    optional_prefixes = ("classifier.",)


class AlbertForQuestionAnswering(AlbertPreTrainedModel, BertForQuestionAnswering):
    """Start/end scores per token from `qa_outputs` (H -> 2); BertForQuestionAnswering over `albert`."""

    backbone_prefix = "albert."
    optional_prefixes = ("qa_outputs.",)


class AlbertForMultipleChoice(AlbertPreTrainedModel, BertForMultipleChoice):
    """Each (context, choice) -> pooled [CLS] -> dropout -> one score; BertForMultipleChoice over `albert`."""

    backbone_prefix = "albert."
    optional_prefixes = ("classifier.", "albert.pooler.")
