"""MT-DNN's stochastic answer network head (Liu et al., 2018 "Stochastic Answer Networks
for Natural Language Inference"; Liu et al., 2019 MT-DNN section 3.1) for pair classification.

The encoder's last layer is split into two memories by token types: the premise M^p (type
0: [CLS] A [SEP]) and the hypothesis M^h (type 1: B [SEP]). Then

    s_0 = sum_i softmax_i(w . M^p_i) M^p_i                 the premise's self-attended summary
    for t = 1..K:
        beta = softmax_j(s_{t-1} W M^h_j); x_t = sum_j beta_j M^h_j   bilinear attention
        s_t  = GRUCell(x_t, s_{t-1})
        P_t  = softmax(W_p [s_t; x_t; |s_t - x_t|; s_t * x_t])       a prediction per step
    P = mean of P_t over the steps kept

Training drops whole steps per example with probability `step_dropout` (stochastic
prediction dropout, 0.1 in the paper; at least one step is kept); inference averages all K
steps. The model's `logits` are log P, so cross-entropy on them is the paper's loss on P.

A model of a family without token types (every token_type_ids 0 or none given) reads the
whole sequence as both memories. `save_pretrained` writes config.json (architectures:
SanForSequenceClassification), model.safetensors (the family's backbone under its HF
attribute, `bert.` ..., and the head under `san.`) and san.json (K, the step dropout):
a bertkit-only folder; transformers has no such class and cannot load it.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import torch
from torch import nn

from bertkit.atomic import write_text_atomic
from bertkit.errors import ConfigError
from bertkit.model.losses import problem_type, sequence_classification_loss
from bertkit.model.outputs import SequenceClassifierOutput
from bertkit.model.pretrained import PreTrainedModel

SAN_FILE = "san.json"
SAN_ARCHITECTURE = "SanForSequenceClassification"


def is_san_model(directory: str | os.PathLike) -> bool:
    """Whether `directory` holds a SanForSequenceClassification checkpoint (its san.json)."""
    return (Path(directory) / SAN_FILE).is_file()


def masked_softmax(scores: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Softmax over the last axis of scores (B, T) where mask (B, T) is true; (B, T)."""
    return torch.softmax(scores.masked_fill(~mask, torch.finfo(scores.dtype).min), dim=-1)


class StochasticAnswerNetwork(nn.Module):
    """The SAN head on two memories: premise (B, Tp, H), hypothesis (B, Th, H) with their
    boolean masks -> (B, K steps, num_labels) per-step probabilities."""

    def __init__(self, hidden_size: int, num_labels: int, steps: int = 5, step_dropout: float = 0.1):
        super().__init__()
        if steps < 1:
            raise ConfigError(f"field 'san_steps' must be at least 1, got {steps}")
        if not 0.0 <= step_dropout < 1.0:
            raise ConfigError(f"field 'san_step_dropout' must be in [0, 1), got {step_dropout}")
        self.steps = steps
        self.step_dropout = step_dropout
        self.summary = nn.Linear(hidden_size, 1)  # w: the premise's self-attention scores
        self.bilinear = nn.Linear(hidden_size, hidden_size, bias=False)  # W: s W M^h
        self.gru = nn.GRUCell(hidden_size, hidden_size)
        self.classifier = nn.Linear(4 * hidden_size, num_labels)

    def step_probabilities(self, premise: torch.Tensor, premise_mask: torch.Tensor, hypothesis: torch.Tensor,
                           hypothesis_mask: torch.Tensor) -> torch.Tensor:
        """(B, T, H) memories and (B, T) bool masks -> P_t for every step: (B, K, num_labels)."""
        alpha = masked_softmax(self.summary(premise).squeeze(-1), premise_mask)  # (B, T)
        state = torch.einsum("bt,bth->bh", alpha, premise)  # s_0 (B, H)
        keys = self.bilinear(hypothesis)  # (B, T, H): W M^h
        probabilities = []
        for _ in range(self.steps):
            beta = masked_softmax(torch.einsum("bh,bth->bt", state, keys), hypothesis_mask)  # (B, T)
            x = torch.einsum("bt,bth->bh", beta, hypothesis)  # (B, H)
            state = self.gru(x, state)
            features = torch.cat([state, x, (state - x).abs(), state * x], dim=-1)  # (B, 4H)
            probabilities.append(torch.softmax(self.classifier(features), dim=-1))
        return torch.stack(probabilities, dim=1)  # (B, K, num_labels)

    def forward(self, premise, premise_mask, hypothesis, hypothesis_mask) -> torch.Tensor:
        """Log of the averaged step probabilities, (B, num_labels): the steps kept by stochastic
        prediction dropout in training, all of them in eval mode."""
        steps = self.step_probabilities(premise, premise_mask, hypothesis, hypothesis_mask)  # (B, K, C)
        if self.training and self.step_dropout > 0:
            keep = torch.rand(steps.shape[:2], device=steps.device) >= self.step_dropout  # (B, K)
            forced = torch.randint(self.steps, (steps.shape[0],), device=steps.device)  # one step always kept
            keep[torch.arange(steps.shape[0], device=steps.device), forced] = True
            weights = keep.to(steps.dtype) / keep.sum(1, keepdim=True)  # (B, K)
            averaged = torch.einsum("bk,bkc->bc", weights, steps)
        else:
            averaged = steps.mean(1)
        return torch.log(averaged.clamp_min(torch.finfo(averaged.dtype).tiny))


class SanForSequenceClassification(PreTrainedModel):
    """A model family's bare encoder (under its HF attribute: `bert`, `roberta`, ...) with the
    SAN head (`san`) for pair classification. config: the family's config with the task's
    label map; steps: K; step_dropout: the stochastic prediction dropout rate."""

    def __init__(self, config, steps: int = 5, step_dropout: float = 0.1):
        from bertkit.model.families import family_for_config

        super().__init__(config)
        if config.num_labels < 2:
            raise ConfigError("field 'head': the stochastic answer network classifies (2 or more labels); "
                              "a regression task keeps its linear head")
        family = family_for_config(config)
        self.base_model_prefix = family.backbone_attribute
        self.backbone_prefix = f"{family.backbone_attribute}."
        self.optional_prefixes = ("san.", f"{family.backbone_attribute}.pooler.")
        self.num_labels = config.num_labels
        setattr(self, family.backbone_attribute, family.backbone_class()(config))
        self.dropout = nn.Dropout(config.hidden_dropout_prob)
        self.san = StochasticAnswerNetwork(config.hidden_size, config.num_labels, steps, step_dropout)

    @property
    def backbone(self) -> nn.Module:
        return getattr(self, self.base_model_prefix)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None,
                token_type_ids: torch.Tensor | None = None, labels: torch.Tensor | None = None,
                output_hidden_states: bool = False, output_attentions: bool = False) -> SequenceClassifierOutput:
        """input_ids, attention_mask, token_type_ids: (B, T) int; labels: (B,) int64 class ids.
        logits: (B, num_labels), the log of the SAN's averaged probabilities."""
        inputs = {"input_ids": input_ids, "attention_mask": attention_mask}
        if token_type_ids is not None:
            inputs["token_type_ids"] = token_type_ids
        out = self.backbone(**inputs, output_hidden_states=output_hidden_states,
                            output_attentions=output_attentions)
        memory = self.dropout(out.last_hidden_state)  # (B, T, H)
        real = torch.ones_like(input_ids, dtype=torch.bool) if attention_mask is None else attention_mask.bool()
        if token_type_ids is None or not bool((token_type_ids != 0).any()):
            premise_mask = hypothesis_mask = real  # no segments: the whole sequence is both memories
        else:
            premise_mask, hypothesis_mask = real & (token_type_ids == 0), real & (token_type_ids != 0)
            lone = ~hypothesis_mask.any(1, keepdim=True)  # a row without a second segment reads itself
            hypothesis_mask = torch.where(lone, premise_mask, hypothesis_mask)
        logits = self.san(memory, premise_mask, memory, hypothesis_mask)
        loss = None
        if labels is not None:
            loss = sequence_classification_loss(logits, labels, problem_type(self.config, labels))
        return SequenceClassifierOutput(loss=loss, logits=logits, hidden_states=out.hidden_states,
                                        attentions=out.attentions)

    def save_pretrained(self, directory: str | os.PathLike, state_dict: dict[str, torch.Tensor] | None = None) -> None:
        """config.json + model.safetensors (the HF layout) + san.json (K and the step dropout)."""
        super().save_pretrained(directory, state_dict)
        write_text_atomic(Path(directory) / SAN_FILE, json.dumps(
            {"steps": self.san.steps, "step_dropout": self.san.step_dropout}, indent=2) + "\n")

    @classmethod
    def from_pretrained(cls, directory: str | os.PathLike, strict: bool = True, output_loading_info: bool = False,
                        config=None, **config_fields):
        """A folder `save_pretrained` wrote (its config.json, or `config`, and san.json)."""
        from bertkit.interop.hf import load_pretrained_weights
        from bertkit.model.families import load_config

        directory = Path(directory)
        config = config if config is not None else load_config(directory)
        if config_fields:
            config = type(config).from_dict({**config.to_dict(), **config_fields}, source="from_pretrained")
        settings = json.loads((directory / SAN_FILE).read_text(encoding="utf-8")) if is_san_model(directory) else {}
        model = cls(config, steps=int(settings.get("steps", 5)), step_dropout=float(settings.get("step_dropout", 0.1)))
        model.loading_info = load_pretrained_weights(model, directory, strict=strict)
        model.eval()
        return (model, model.loading_info) if output_loading_info else model
