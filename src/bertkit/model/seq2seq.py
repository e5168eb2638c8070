"""What the encoder-decoder families (T5, BART) share: the decoder layer's cache, the outputs,
the fused projections, and reading an encoder's output. Masks: bertkit.model.masks."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from bertkit.labels import IGNORE_INDEX
from bertkit.model.losses import every_target_labelled
from bertkit.model.outputs import ModelOutput
from bertkit.model.packed_linear import linear

# (self_key, self_value, cross_key, cross_value), each (B, heads, length, head_dim)
LayerCache = tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]


def project(hidden_states: torch.Tensor, *layers: nn.Linear) -> tuple[torch.Tensor, ...]:
    """Each of `layers`' projections (weights, and biases when they have them) of `hidden_states`:
    one matmul over the concatenated parameters while autograd records them, else one matmul each
    on oneDNN's packed weights (bertkit.model.packed_linear; no weight copy per call; int8
    quantized layers run their own)."""
    if torch.is_grad_enabled() and any(isinstance(layer.weight, torch.Tensor) and layer.weight.requires_grad
                                       for layer in layers):
        biases = [layer.bias for layer in layers]
        bias = None if any(b is None for b in biases) else torch.cat(biases)
        fused = F.linear(hidden_states, torch.cat([layer.weight for layer in layers]), bias)
        return fused.split([layer.out_features for layer in layers], dim=-1)
    return tuple(linear(hidden_states, layer) for layer in layers)


def read_encoder_output(encoder_outputs: Any) -> tuple[torch.Tensor, tuple[torch.Tensor, ...] | None]:
    """An encoder output (with `last_hidden_state`) or a tuple whose [0] is it -> (hidden, hidden states)."""
    if hasattr(encoder_outputs, "last_hidden_state"):
        return encoder_outputs.last_hidden_state, getattr(encoder_outputs, "hidden_states", None)
    return encoder_outputs[0], (encoder_outputs[1] if len(encoder_outputs) > 1 else None)


@dataclass
class Seq2SeqModelOutput(ModelOutput):
    """last_hidden_state: the decoder's (B, T, d_model); past_key_values: per decoder layer
    (self_key, self_value, cross_key, cross_value) (B, heads, length, head_dim) when use_cache;
    encoder_last_hidden_state (B, S, d_model); hidden states: L + 1 tensors each (every
    block's input, then the final output)."""

    last_hidden_state: torch.Tensor
    past_key_values: tuple[LayerCache, ...] | None = None
    decoder_hidden_states: tuple[torch.Tensor, ...] | None = None
    encoder_last_hidden_state: torch.Tensor | None = None
    encoder_hidden_states: tuple[torch.Tensor, ...] | None = None


@dataclass
class Seq2SeqLMOutput(ModelOutput):
    """loss: mean CE over the target positions with label != -100; logits (B, T, V);
    the rest as `Seq2SeqModelOutput`."""

    loss: torch.Tensor | None = None
    logits: torch.Tensor | None = None
    past_key_values: tuple[LayerCache, ...] | None = None
    decoder_hidden_states: tuple[torch.Tensor, ...] | None = None
    encoder_last_hidden_state: torch.Tensor | None = None
    encoder_hidden_states: tuple[torch.Tensor, ...] | None = None


def lm_output(model: Any, out: Seq2SeqModelOutput, labels: torch.Tensor | None) -> Seq2SeqLMOutput:
    """The LM output over the decoder's states `out`: the head and the loss fused where every target
    position has a label (`model.loss_and_logits`; losses.every_target_labelled), else the logits
    (`model.vocabulary_logits`) and, with labels, the mean cross-entropy over the labelled positions."""
    if every_target_labelled(labels):
        loss, logits = model.loss_and_logits(out.last_hidden_state, labels)
    else:
        logits = model.vocabulary_logits(out.last_hidden_state)  # (B, T, V)
        loss = None if labels is None else F.cross_entropy(
            logits.reshape(-1, logits.shape[-1]).float(), labels.reshape(-1), ignore_index=IGNORE_INDEX)
    return Seq2SeqLMOutput(loss=loss, logits=logits, past_key_values=out.past_key_values,
                           decoder_hidden_states=out.decoder_hidden_states,
                           encoder_last_hidden_state=out.encoder_last_hidden_state,
                           encoder_hidden_states=out.encoder_hidden_states)
