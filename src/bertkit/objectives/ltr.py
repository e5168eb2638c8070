"""Left-to-right language model on the BERT backbone (GPT-1 style): the paper's Table 5 "LTR" arm.

Every position attends to itself and the positions before it (a causal mask passed to
`BertModel` as a (B, T, T) attention mask, HF semantics) and predicts the next token:
labels[t] = input_ids[t + 1], a loss at every position but the last of each sequence
(padding excluded). No masking, no NSP; it trains on any instance format (token types
are kept, the sentence label ignored), so it can share the MLM arms' data.

The model is HF's `BertLMHeadModel` layout (`bert.*` without pooler, `cls.predictions.*`
tied to the word embeddings): transformers loads `final/` as `BertLMHeadModel`, causal
there too (config.json has `is_decoder: true`), and the task layer fine-tunes the encoder
as any BERT checkpoint (bidirectionally, as bertkit fine-tunes every BERT).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from bertkit.model.bert.config import BertConfig
from bertkit.data.dataset import PretrainingDataset
from bertkit.model.bert.modeling import IGNORE_INDEX, BertModel, BertPreTrainedModel, masked_lm
from bertkit.model.families import model_inputs
from bertkit.model.heads import BertOnlyMLMHead
from bertkit.model.outputs import ModelOutput
from bertkit.objectives.base import PretrainingObjective, mlm_metrics, mlm_statistics, sequence_counts


def causal_attention_mask(attention_mask: torch.Tensor | None, seq_len: int, device: torch.device) -> torch.Tensor:
    """(B, T) padding mask (or None) -> (B or 1, T, T) bool: query i sees key j iff j <= i and j is real."""
    causal = torch.ones(seq_len, seq_len, dtype=torch.bool, device=device).tril()  # (T, T)
    if attention_mask is None:
        return causal[None]  # (1, T, T)
    return causal[None] & attention_mask.bool()[:, None, :]  # (B, T, T)


def next_token_labels(input_ids: np.ndarray) -> np.ndarray:
    """(T,) ids -> (T,) labels: the next id at every position, -100 at the last."""
    labels = np.full(input_ids.shape, IGNORE_INDEX, dtype=np.int64)
    labels[:-1] = input_ids[1:]
    return labels


@dataclass
class CausalLMOutput(ModelOutput):
    """loss: mean next-token CE over the positions with label != -100; logits: (B, T, V)
    without labels, else (N, V) at those N positions (row-major)."""

    loss: torch.Tensor | None = None
    logits: torch.Tensor | None = None
    hidden_states: tuple[torch.Tensor, ...] | None = None


class BertLMHeadModel(BertPreTrainedModel):
    """BERT encoder with a causal mask + the tied vocabulary head `cls.predictions` (HF names)."""

    backbone_prefix = "bert."
    optional_prefixes = ("cls.", "bert.pooler.")
    hf_config_fields = {"is_decoder": True}  # transformers then masks causally too

    def __init__(self, config: BertConfig):
        super().__init__(config)
        self.bert = BertModel(config, add_pooling_layer=False)
        self.cls = BertOnlyMLMHead(config)
        self.init_weights()

    def forward(
        self,
        input_ids: torch.Tensor,
        token_type_ids: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        labels: torch.Tensor | None = None,
        output_hidden_states: bool = False,
    ) -> CausalLMOutput:
        """input_ids, token_type_ids, attention_mask: (B, T); labels: (B, T) the token each
        position predicts (already shifted: `next_token_labels`), -100 for none."""
        mask = causal_attention_mask(attention_mask, input_ids.shape[1], input_ids.device)
        if mask.shape[0] != input_ids.shape[0]:
            mask = mask.expand(input_ids.shape[0], -1, -1)  # (B, T, T)
        out = self.bert(input_ids=input_ids, token_type_ids=token_type_ids, attention_mask=mask,
                        output_hidden_states=output_hidden_states)
        weight = self.bert.embeddings.word_embeddings.weight
        loss, logits, _ = masked_lm(self.cls.predictions, out.last_hidden_state, weight, labels)
        return CausalLMOutput(loss, logits, out.hidden_states)


class LtrObjective(PretrainingObjective):
    name = "ltr"
    data_formats = ("nsp", "packed", "sop")
    progress_keys = ("lm_accuracy",)
    plot_panels = [("Loss", ["loss", "eval_loss"]), ("Next-token accuracy", ["lm_accuracy", "eval_lm_accuracy"])]
    model_class = BertLMHeadModel
    needs_dynamic_masking = "reads unmasked text"

    def example(self, data: PretrainingDataset, index: int, epoch: int, seed: int) -> dict[str, Any]:
        """No masking: the text as it is and its next-token labels (the same every epoch)."""
        example = dict(data[index])
        example["labels"] = next_token_labels(example["input_ids"])
        return example

    def loss_counts(self, batch: dict[str, torch.Tensor]) -> dict[str, float]:
        return {"lm": sequence_counts(batch["labels"])}

    def compute_loss(self, model, batch, totals) -> tuple[torch.Tensor, dict[str, Any]]:
        labels = batch["labels"]
        out = model(**model_inputs(model, batch), labels=labels)
        stats = mlm_statistics(out.logits, labels, out.loss)
        return out.loss * (stats["mlm_count"] / max(totals["lm"], 1.0)), stats

    def summarize(self, stats: dict[str, float]) -> dict[str, float]:
        metrics = {key.replace("mlm_", "lm_"): value for key, value in mlm_metrics(stats).items()}
        if "lm_loss" in metrics:
            metrics["loss"] = metrics["lm_loss"]
        return metrics
