"""Heads shared by several objectives: the pooler and the masked-LM prediction head."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from bertkit.config import BertConfig
from bertkit.model.layers import ACTIVATIONS


class BertPooler(nn.Module):
    """tanh(dense(h_[CLS])): (B, T, H) -> (B, H)."""

    def __init__(self, config: BertConfig):
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.hidden_size)

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        return torch.tanh(self.dense(hidden_states[:, 0]))


class BertPredictionHeadTransform(nn.Module):
    def __init__(self, config: BertConfig):
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.hidden_size)
        self.act = ACTIVATIONS[config.hidden_act]
        self.LayerNorm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        return self.LayerNorm(self.act(self.dense(hidden_states)))


class BertLMPredictionHead(nn.Module):
    """MLM head: transform (dense + act + LayerNorm), then the decoder tied to the word
    embeddings plus an output bias. The tie is functional (the embedding matrix is
    passed in), so the state dict holds the matrix once."""

    def __init__(self, config: BertConfig):
        super().__init__()
        self.transform = BertPredictionHeadTransform(config)
        self.bias = nn.Parameter(torch.zeros(config.vocab_size))

    def forward(self, hidden_states: torch.Tensor, word_embeddings: torch.Tensor) -> torch.Tensor:
        """hidden_states: (..., H); word_embeddings: (V, H) -> logits (..., V)."""
        return F.linear(self.transform(hidden_states), word_embeddings, self.bias)


class BertPreTrainingHeads(nn.Module):
    """`cls` in HF's BertForPreTraining: MLM predictions + NSP (IsNext / NotNext) on the pooled [CLS]."""

    def __init__(self, config: BertConfig):
        super().__init__()
        self.predictions = BertLMPredictionHead(config)
        self.seq_relationship = nn.Linear(config.hidden_size, 2)
