"""GPT-2 and GPT-1 (OpenAI GPT): the decoder-only family.

Classes, parameter names, configs and argument order are transformers':
- GPT-2: `GPT2Model` (`wte`, `wpe`, `drop`, `h.N.{ln_1, attn.c_attn, attn.c_proj, ln_2,
  mlp.c_fc, mlp.c_proj}`, `ln_f`), `GPT2LMHeadModel` (+ the vocabulary head, tied to
  `wte`), `GPT2DoubleHeadsModel` (+ `multiple_choice_head`), `GPT2ForSequenceClassification`
  (+ `score` on the last real token); forward order (input_ids, past_key_values,
  attention_mask, token_type_ids, position_ids, inputs_embeds, ...).
- GPT-1: `OpenAIGPTModel` (`tokens_embed`, `positions_embed`, `drop`, `h.N...`, no final
  LayerNorm, post-LN blocks) and the same three heads; forward order (input_ids,
  attention_mask, token_type_ids, position_ids, inputs_embeds, ...), `past_key_values`
  by keyword (transformers' GPT-1 has no cache; bertkit's generation uses one).
Both look `token_type_ids` up in the token table (transformers' rule), add learned
positions and run causal self-attention (bertkit.model.gpt.layers).

The KV cache (`past_key_values`): a tuple over layers of (key, value), each
(B, heads, length, d_head), batch first so beams reorder with `index_select(0, rows)`.
With a cache the model is given only the new tokens; positions continue from the
cache's length unless `position_ids` are given (generation passes them from the
attention mask, so left-padded rows count from their first real token).

Checkpoints are transformers' files: Conv1D weights (in, out) on disk, transposed in
one place (`layers.conv1d_layout`) on load and save; the vocabulary head is the token
embedding matrix and is never stored (`lm_head.weight` in a file is dropped).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from bertkit.errors import ConfigError
from bertkit.model.dropout import Dropout
from bertkit.model.generation import GenerationMixin
from bertkit.model.gpt.config import GPT2Config, OpenAIGPTConfig, _GPTConfig
from bertkit.model.gpt.layers import CausalMask, GPTBlock, GPTSequenceSummary, LayerCache, conv1d_layout
from bertkit.model.heads import decoder_cross_entropy
from bertkit.model.losses import IGNORE_INDEX, problem_type, sequence_classification_loss
from bertkit.model.outputs import ModelOutput
from bertkit.model.packed_linear import packed_matmul
from bertkit.model.pretrained import PreTrainedModel


# ---- outputs (transformers' names; `cache` is transformers 5's name of past_key_values) ----------
class _WithCache:
    @property
    def cache(self):
        return self.past_key_values


@dataclass
class BaseModelOutputWithPast(_WithCache, ModelOutput):
    """last_hidden_state (B, T, H); past_key_values per layer (key, value) when use_cache;
    hidden_states: L + 1 tensors (every block's input, then the final output, after ln_f
    for GPT-2); attentions: L tensors (B, heads, T, K)."""

    last_hidden_state: torch.Tensor
    past_key_values: tuple[LayerCache, ...] | None = None
    hidden_states: tuple[torch.Tensor, ...] | None = None
    attentions: tuple[torch.Tensor, ...] | None = None


@dataclass
class CausalLMOutputWithPast(_WithCache, ModelOutput):
    """loss: mean next-token CE over labels != -100 (labels shifted inside); logits (B, T, V)."""

    loss: torch.Tensor | None = None
    logits: torch.Tensor | None = None
    past_key_values: tuple[LayerCache, ...] | None = None
    hidden_states: tuple[torch.Tensor, ...] | None = None
    attentions: tuple[torch.Tensor, ...] | None = None


@dataclass
class GPT2DoubleHeadsModelOutput(_WithCache, ModelOutput):
    """loss: the LM loss (labels); mc_loss: CE over the choices (mc_labels); logits
    (B, C, T, V); mc_logits (B, C)."""

    loss: torch.Tensor | None = None
    mc_loss: torch.Tensor | None = None
    logits: torch.Tensor | None = None
    mc_logits: torch.Tensor | None = None
    past_key_values: tuple[LayerCache, ...] | None = None
    hidden_states: tuple[torch.Tensor, ...] | None = None
    attentions: tuple[torch.Tensor, ...] | None = None


OpenAIGPTDoubleHeadsModelOutput = GPT2DoubleHeadsModelOutput


@dataclass
class SequenceClassifierOutputWithPast(_WithCache, ModelOutput):
    """loss by problem type; logits (B, num_labels) at each row's last real token."""

    loss: torch.Tensor | None = None
    logits: torch.Tensor | None = None
    past_key_values: tuple[LayerCache, ...] | None = None
    hidden_states: tuple[torch.Tensor, ...] | None = None
    attentions: tuple[torch.Tensor, ...] | None = None


# ---- the family base ------------------------------------------------------------------------
class GPTPreTrainedModel(PreTrainedModel):
    """Weight init, the checkpoint layout and the shared backbone forward of both GPTs."""

    config_class = GPT2Config
    base_model_prefix = "transformer"
    # the tied head (never stored here) and the causal-mask buffers older transformers saved
    derived_keys = ("lm_head.weight", ".attn.bias", ".attn.masked_bias", "position_ids")

    @classmethod
    def head_dropout(cls, config) -> float:
        """Dropout before the task layer: none in transformers' heads (`score` reads the state as
        is); a fine-tuning recipe's classifier_dropout is the run's, reported by the run."""
        return 0.0

    def _init_module(self, module: nn.Module) -> None:
        """transformers' GPT init: N(0, initializer_range) for linear and embedding weights,
        zero biases, LayerNorm 1 / 0; GPT-2 draws each block's two output projections
        (`attn.c_proj`, `mlp.c_proj`) from N(0, initializer_range / sqrt(2 * n_layer))."""
        std = self.config.initializer_range
        if isinstance(module, (nn.Linear, nn.Embedding)):
            nn.init.normal_(module.weight, 0.0, std)
            if getattr(module, "bias", None) is not None:
                nn.init.zeros_(module.bias)
        elif isinstance(module, nn.LayerNorm):
            nn.init.ones_(module.weight)
            nn.init.zeros_(module.bias)

    def init_weights(self) -> None:
        """transformers' init, then GPT-2's scaled output projections (after the plain
        linear init, as transformers applies its rules children first)."""
        super().init_weights()
        if self.config.pre_layer_norm:
            std = self.config.initializer_range / (2 * self.config.n_layer) ** 0.5
            for module in self.modules():
                if isinstance(module, GPTBlock):
                    for projection in (module.attn.c_proj, module.mlp.c_proj):
                        nn.init.normal_(projection.weight, 0.0, std)

    def state_from_checkpoint(self, state: dict[str, torch.Tensor], path: Path) -> dict[str, torch.Tensor]:
        """transformers' layout -> ours: Conv1D weights transposed; a checkpoint that stores the
        tied matrix as `lm_head.weight` only (transformers' OpenAIGPTDoubleHeadsModel ties
        that way round) gives it to the token embeddings."""
        state = conv1d_layout(state)
        embedding = self.backbone_model().word_embedding_name + ".weight"
        if "lm_head.weight" in state and not any(k.endswith(embedding) for k in state):
            state["transformer." + embedding] = state.pop("lm_head.weight")
        return state

    def checkpoint_layout(self, values: dict[str, Any], state: dict[str, torch.Tensor], directory: Path):
        return values, conv1d_layout(state)

    def get_input_embeddings(self) -> nn.Embedding:
        return self.backbone_model().word_embeddings()

    def get_output_embeddings(self) -> torch.Tensor:
        """The (V, H) vocabulary matrix of the tied head: the token embeddings."""
        return self.get_input_embeddings().weight

    def backbone_model(self):
        return self if not self.backbone_prefix else getattr(self, self.base_model_prefix)


class _GPTBackbone(GPTPreTrainedModel):
    """The decoder stack's forward, shared by GPT2Model and OpenAIGPTModel; each names
    its embeddings (transformers' attribute names) and whether it has a final LayerNorm."""

    def word_embeddings(self) -> nn.Embedding:
        raise NotImplementedError

    def position_embeddings(self) -> nn.Embedding:
        raise NotImplementedError

    def build_stack(self, config: _GPTConfig) -> None:
        self.drop = Dropout(config.embd_pdrop)
        self.h = nn.ModuleList([GPTBlock(config, i) for i in range(config.n_layer)])

    def run(self, input_ids, past_key_values, attention_mask, token_type_ids, position_ids, inputs_embeds,
            use_cache, output_attentions, output_hidden_states) -> BaseModelOutputWithPast:
        """input_ids (..., T) long (any leading shape: the double-heads model's (B, C, T));
        past_key_values per layer (key, value) (N, heads, P, d_head); attention_mask
        (..., P + T) 1 = real token; token_type_ids (..., T) token ids whose embeddings are
        added; position_ids (..., T) (default: P, P + 1, ...). -> last_hidden_state (..., T, H)."""
        if (input_ids is None) == (inputs_embeds is None):
            raise ConfigError("input_ids / inputs_embeds: give exactly one of them")
        shape = input_ids.shape if input_ids is not None else inputs_embeds.shape[:-1]
        length = shape[-1]
        if inputs_embeds is None:
            inputs_embeds = self.word_embeddings()(input_ids.reshape(-1, length))
        else:
            inputs_embeds = inputs_embeds.reshape(-1, length, inputs_embeds.shape[-1])
        rows, device = inputs_embeds.shape[0], inputs_embeds.device
        past_length = past_key_values[0][0].shape[2] if past_key_values else 0
        if past_length + length > self.config.n_positions:
            raise ConfigError(f"input length {past_length + length} exceeds the model's n_positions "
                              f"({self.config.n_positions})")
        if position_ids is None:
            position_ids = torch.arange(past_length, past_length + length, device=device)[None]
        else:
            position_ids = position_ids.reshape(-1, length)
        hidden = inputs_embeds + self.position_embeddings()(position_ids)
        if token_type_ids is not None:
            hidden = hidden + self.word_embeddings()(token_type_ids.reshape(-1, length))
        hidden = self.drop(hidden)
        if attention_mask is not None:
            attention_mask = attention_mask.reshape(rows, -1)
        mask = CausalMask(attention_mask, length, past_length, device)
        all_hidden = [] if output_hidden_states else None
        all_attentions = [] if output_attentions else None
        presents = [] if use_cache else None
        for i, block in enumerate(self.h):
            if all_hidden is not None:
                all_hidden.append(hidden)
            past = past_key_values[i] if past_key_values else None
            hidden, present, probs = block(hidden, mask, past, bool(use_cache), bool(output_attentions))
            if presents is not None:
                presents.append(present)
            if all_attentions is not None:
                all_attentions.append(probs)
        if self.config.final_layer_norm:
            hidden = self.ln_f(hidden)
        out_shape = (*shape, hidden.shape[-1])
        hidden = hidden.view(out_shape)
        if all_hidden is not None:
            all_hidden = tuple(h.view(out_shape) for h in all_hidden) + (hidden,)
        return BaseModelOutputWithPast(hidden, tuple(presents) if presents is not None else None,
                                       all_hidden, tuple(all_attentions) if all_attentions is not None else None)


class GPT2PreTrainedModel(GPTPreTrainedModel):
    config_class = GPT2Config


class OpenAIGPTPreTrainedModel(GPTPreTrainedModel):
    config_class = OpenAIGPTConfig


class GPT2Model(_GPTBackbone, GPT2PreTrainedModel):
    """GPT-2's decoder: token + learned position embeddings, pre-LN blocks, final `ln_f`."""

    def __init__(self, config: GPT2Config):
        super().__init__(config)
        self.wte = nn.Embedding(config.vocab_size, config.n_embd)
        self.wpe = nn.Embedding(config.n_positions, config.n_embd)
        self.build_stack(config)
        self.ln_f = nn.LayerNorm(config.n_embd, eps=config.layer_norm_epsilon)
        self.init_weights()

    word_embedding_name = "wte"

    def word_embeddings(self) -> nn.Embedding:
        return self.wte

    def position_embeddings(self) -> nn.Embedding:
        return self.wpe

    def forward(self, input_ids=None, past_key_values=None, attention_mask=None, token_type_ids=None,
                position_ids=None, inputs_embeds=None, use_cache=None, output_attentions=False,
                output_hidden_states=False, return_dict=True) -> BaseModelOutputWithPast:
        return self.run(input_ids, past_key_values, attention_mask, token_type_ids, position_ids, inputs_embeds,
                        use_cache, output_attentions, output_hidden_states)


class OpenAIGPTModel(_GPTBackbone, OpenAIGPTPreTrainedModel):
    """GPT-1's decoder: token + learned position embeddings, post-LN blocks, no final LayerNorm."""

    def __init__(self, config: OpenAIGPTConfig):
        super().__init__(config)
        self.tokens_embed = nn.Embedding(config.vocab_size, config.n_embd)
        self.positions_embed = nn.Embedding(config.n_positions, config.n_embd)
        self.build_stack(config)
        self.init_weights()

    word_embedding_name = "tokens_embed"

    def word_embeddings(self) -> nn.Embedding:
        return self.tokens_embed

    def position_embeddings(self) -> nn.Embedding:
        return self.positions_embed

    def forward(self, input_ids=None, attention_mask=None, token_type_ids=None, position_ids=None,
                inputs_embeds=None, output_attentions=False, output_hidden_states=False, return_dict=True, *,
                past_key_values=None, use_cache=None) -> BaseModelOutputWithPast:
        return self.run(input_ids, past_key_values, attention_mask, token_type_ids, position_ids, inputs_embeds,
                        use_cache, output_attentions, output_hidden_states)


# ---- heads ----------------------------------------------------------------------------------
def shifted_lm_loss(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Mean CE of logits (..., T, V) at positions 0..T-2 against labels (..., T) at 1..T-1
    (-100 ignored), in float32: transformers' causal-LM loss."""
    return F.cross_entropy(logits[..., :-1, :].reshape(-1, logits.shape[-1]).float(),
                           labels[..., 1:].reshape(-1), ignore_index=IGNORE_INDEX)


class _GPTHeadModel(GPTPreTrainedModel):
    """A head over the backbone held as `transformer` (transformers' attribute)."""

    backbone_prefix = "transformer."
    backbone_class: type[_GPTBackbone] = GPT2Model

    def add_backbone(self, config: _GPTConfig) -> None:
        self.transformer = self.backbone_class(config)

    def backbone_outputs(self, input_ids, past_key_values, attention_mask, token_type_ids, position_ids,
                         inputs_embeds, use_cache, output_attentions, output_hidden_states) -> BaseModelOutputWithPast:
        return self.transformer.run(input_ids, past_key_values, attention_mask, token_type_ids, position_ids,
                                    inputs_embeds, use_cache, output_attentions, output_hidden_states)

    def vocabulary_logits(self, hidden: torch.Tensor) -> torch.Tensor:
        """(..., H) -> (..., V) through the tied head (packed weights while generating)."""
        return packed_matmul(hidden, self.get_output_embeddings())


class _CausalLM(_GPTHeadModel, GenerationMixin):
    """The language model: the backbone + the tied vocabulary head; loss with `labels`."""

    def __init__(self, config: _GPTConfig):
        super().__init__(config)
        self.add_backbone(config)
        self.init_weights()

    def lm_forward(self, input_ids, past_key_values, attention_mask, token_type_ids, position_ids, inputs_embeds,
                   labels, use_cache, output_attentions, output_hidden_states, logits_to_keep: int = 0,
                   ) -> CausalLMOutputWithPast:
        out = self.backbone_outputs(input_ids, past_key_values, attention_mask, token_type_ids, position_ids,
                                    inputs_embeds, use_cache, output_attentions, output_hidden_states)
        hidden = out.last_hidden_state
        if logits_to_keep:
            hidden = hidden[..., -logits_to_keep:, :]
        logits = self.vocabulary_logits(hidden)  # (B, T, V)
        loss = None if labels is None else shifted_lm_loss(logits, labels)
        return CausalLMOutputWithPast(loss, logits, out.past_key_values, out.hidden_states, out.attentions)

    def causal_lm_loss(self, input_ids: torch.Tensor, labels: torch.Tensor | None = None,
                       attention_mask: torch.Tensor | None = None, position_ids: torch.Tensor | None = None,
                       token_type_ids: torch.Tensor | None = None) -> torch.Tensor:
        """The training step's loss alone: forward's loss with `labels` (default: input_ids),
        the head and the loss fused (bertkit.model.heads.decoder_cross_entropy) over the
        positions with a target, and no (B, T, V) logits kept. -> scalar."""
        labels = input_ids if labels is None else labels
        out = self.backbone_outputs(input_ids, None, attention_mask, token_type_ids, position_ids, None,
                                    False, False, False)
        hidden = out.last_hidden_state[..., :-1, :].reshape(-1, out.last_hidden_state.shape[-1])  # (N, H)
        targets = labels[..., 1:].reshape(-1)
        keep = targets != IGNORE_INDEX
        if not bool(keep.all()):
            hidden, targets = hidden[keep], targets[keep]
        weight = self.get_output_embeddings()
        loss, _ = decoder_cross_entropy(hidden, weight, None, targets)  # GPT's head has no bias
        return loss


class GPT2LMHeadModel(_CausalLM, GPT2PreTrainedModel):
    """GPT-2 with its tied vocabulary head (transformers' GPT2LMHeadModel)."""

    backbone_class = GPT2Model

    def forward(self, input_ids=None, past_key_values=None, attention_mask=None, token_type_ids=None,
                position_ids=None, inputs_embeds=None, labels=None, use_cache=None, output_attentions=False,
                output_hidden_states=False, return_dict=True, logits_to_keep: int = 0) -> CausalLMOutputWithPast:
        """input_ids (B, T); labels (B, T) (shifted inside: labels = input_ids trains the next
        token; -100 ignored) -> loss, logits (B, T, V) (the last `logits_to_keep` positions
        when > 0), past_key_values when use_cache."""
        return self.lm_forward(input_ids, past_key_values, attention_mask, token_type_ids, position_ids,
                               inputs_embeds, labels, use_cache, output_attentions, output_hidden_states,
                               logits_to_keep)


class OpenAIGPTLMHeadModel(_CausalLM, OpenAIGPTPreTrainedModel):
    """GPT-1 with its tied vocabulary head (transformers' OpenAIGPTLMHeadModel)."""

    backbone_class = OpenAIGPTModel

    def forward(self, input_ids=None, attention_mask=None, token_type_ids=None, position_ids=None,
                inputs_embeds=None, labels=None, output_attentions=False, output_hidden_states=False,
                return_dict=True, logits_to_keep: int = 0, *, past_key_values=None, use_cache=None,
                ) -> CausalLMOutputWithPast:
        return self.lm_forward(input_ids, past_key_values, attention_mask, token_type_ids, position_ids,
                               inputs_embeds, labels, use_cache, output_attentions, output_hidden_states,
                               logits_to_keep)


class _DoubleHeads(_GPTHeadModel):
    """The LM head and a multiple-choice head (`multiple_choice_head`, a GPTSequenceSummary
    reading each choice's state at `mc_token_ids`): GPT-1's fine-tuning model. As
    transformers, the config's num_labels is set to 1 (one score per choice)."""

    optional_prefixes = ("multiple_choice_head.",)

    def __init__(self, config: _GPTConfig):
        super().__init__(config)
        config.num_labels = 1
        self.add_backbone(config)
        self.multiple_choice_head = GPTSequenceSummary(config)
        self.init_weights()

    def double_forward(self, input_ids, past_key_values, attention_mask, token_type_ids, position_ids, inputs_embeds,
                       mc_token_ids, labels, mc_labels, use_cache, output_attentions, output_hidden_states,
                       ) -> GPT2DoubleHeadsModelOutput:
        """input_ids (B, C, T); mc_token_ids (B, C) the extract token's position (default: the
        last); labels (B, C, T) LM targets (shifted inside); mc_labels (B,) the right choice."""
        out = self.backbone_outputs(input_ids, past_key_values, attention_mask, token_type_ids, position_ids,
                                    inputs_embeds, use_cache, output_attentions, output_hidden_states)
        hidden = out.last_hidden_state  # (B, C, T, H)
        lm_logits = self.vocabulary_logits(hidden)
        mc_logits = self.multiple_choice_head(hidden, mc_token_ids).squeeze(-1)  # (B, C)
        mc_loss = None
        if mc_labels is not None:
            mc_loss = F.cross_entropy(mc_logits.view(-1, mc_logits.shape[-1]), mc_labels.view(-1),
                                      ignore_index=IGNORE_INDEX)
        lm_loss = None if labels is None else shifted_lm_loss(lm_logits, labels)
        return GPT2DoubleHeadsModelOutput(lm_loss, mc_loss, lm_logits, mc_logits, out.past_key_values,
                                          out.hidden_states, out.attentions)


class GPT2DoubleHeadsModel(_DoubleHeads, GPT2PreTrainedModel):
    backbone_class = GPT2Model

    def forward(self, input_ids=None, past_key_values=None, attention_mask=None, token_type_ids=None,
                position_ids=None, inputs_embeds=None, mc_token_ids=None, labels=None, mc_labels=None,
                use_cache=None, output_attentions=False, output_hidden_states=False, return_dict=True,
                ) -> GPT2DoubleHeadsModelOutput:
        return self.double_forward(input_ids, past_key_values, attention_mask, token_type_ids, position_ids,
                                   inputs_embeds, mc_token_ids, labels, mc_labels, use_cache, output_attentions,
                                   output_hidden_states)


class OpenAIGPTDoubleHeadsModel(_DoubleHeads, OpenAIGPTPreTrainedModel):
    backbone_class = OpenAIGPTModel

    def forward(self, input_ids=None, attention_mask=None, token_type_ids=None, position_ids=None,
                inputs_embeds=None, mc_token_ids=None, labels=None, mc_labels=None, output_attentions=False,
                output_hidden_states=False, return_dict=True, *, past_key_values=None, use_cache=None,
                ) -> GPT2DoubleHeadsModelOutput:
        return self.double_forward(input_ids, past_key_values, attention_mask, token_type_ids, position_ids,
                                   inputs_embeds, mc_token_ids, labels, mc_labels, use_cache, output_attentions,
                                   output_hidden_states)


class _SequenceClassifier(_GPTHeadModel):
    """`score` (H -> num_labels, no bias) on each row's last token that is not
    `pad_token_id` (the rightmost: left and right padding alike); without pad_token_id
    only batches of one row. Loss by problem type (transformers' rule)."""

    optional_prefixes = ("score.",)

    def __init__(self, config: _GPTConfig):
        super().__init__(config)
        self.num_labels = config.num_labels
        self.add_backbone(config)
        self.score = nn.Linear(config.n_embd, config.num_labels, bias=False)
        self.init_weights()

    def classify(self, input_ids, past_key_values, attention_mask, token_type_ids, position_ids, inputs_embeds,
                 labels, use_cache, output_attentions, output_hidden_states) -> SequenceClassifierOutputWithPast:
        out = self.backbone_outputs(input_ids, past_key_values, attention_mask, token_type_ids, position_ids,
                                    inputs_embeds, use_cache, output_attentions, output_hidden_states)
        logits = self.score(out.last_hidden_state)  # (B, T, K)
        batch, length = logits.shape[:2]
        pad = self.config.pad_token_id
        if pad is None and batch != 1:
            raise ConfigError("pad_token_id: not set in the config, so only batches of one row can be classified "
                              "(the last token is read)")
        if pad is None or input_ids is None:
            last = torch.full((batch,), length - 1, device=logits.device)
        else:
            positions = torch.arange(length, device=logits.device)
            last = (positions * (input_ids != pad).int()).argmax(-1)
        pooled = logits[torch.arange(batch, device=logits.device), last]  # (B, K)
        loss = None
        if labels is not None:
            loss = sequence_classification_loss(pooled, labels, problem_type(self.config, labels))
        return SequenceClassifierOutputWithPast(loss, pooled, out.past_key_values, out.hidden_states, out.attentions)


class GPT2ForSequenceClassification(_SequenceClassifier, GPT2PreTrainedModel):
    backbone_class = GPT2Model

    def forward(self, input_ids=None, past_key_values=None, attention_mask=None, token_type_ids=None,
                position_ids=None, inputs_embeds=None, labels=None, use_cache=None, output_attentions=False,
                output_hidden_states=False, return_dict=True) -> SequenceClassifierOutputWithPast:
        return self.classify(input_ids, past_key_values, attention_mask, token_type_ids, position_ids, inputs_embeds,
                             labels, use_cache, output_attentions, output_hidden_states)


class OpenAIGPTForSequenceClassification(_SequenceClassifier, OpenAIGPTPreTrainedModel):
    backbone_class = OpenAIGPTModel

    def forward(self, input_ids=None, attention_mask=None, token_type_ids=None, position_ids=None,
                inputs_embeds=None, labels=None, output_attentions=False, output_hidden_states=False,
                return_dict=True, *, past_key_values=None, use_cache=None) -> SequenceClassifierOutputWithPast:
        return self.classify(input_ids, past_key_values, attention_mask, token_type_ids, position_ids, inputs_embeds,
                             labels, use_cache, output_attentions, output_hidden_states)
