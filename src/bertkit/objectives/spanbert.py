"""SpanBERT's objective: span masking + the Span Boundary Objective (Joshi et al. 2020).

Masking is bertkit.data.masking's "span" strategy (whole-word spans, lengths from
Geometric(0.2) truncated at 10, inside one segment, never adjacent, 15% budget,
80/10/10 per span), so the runs of labelled positions in `labels` are exactly the spans
and each span's boundary tokens x_{s-1} and x_{e+1} are unmasked real tokens.

Span Boundary Objective: every token x_i of a span (s..e) is also predicted from
y_i = f(x_{s-1}, x_{e+1}, p_{i-s+1}): the two boundary encodings and a learned
relative-position embedding, through a 2-layer feed-forward network with GELU and
LayerNorm, then the decoder tied to the word embeddings. Loss = L_MLM + L_SBO, both mean
cross-entropy over the masked tokens. Single segment, no NSP: trains on `packed` data.

The model `SpanBertForPreTraining` is HF's `BertForMaskedLM` layout (`bert.*` without
pooler, `cls.predictions.*`) plus `sbo.*`: transformers' `BertForMaskedLM` loads `final/`
(reporting the `sbo.*` keys as unused), and it fine-tunes as a BERT checkpoint.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from bertkit.model.bert.config import BertConfig
from bertkit.errors import ConfigError
from bertkit.evaluation.metrics import percent
from bertkit.model.bert.modeling import IGNORE_INDEX, BertModel, BertPreTrainedModel
from bertkit.model.families import model_inputs
from bertkit.model.heads import BertOnlyMLMHead, decoder_cross_entropy
from bertkit.model.outputs import ModelOutput
from bertkit.objectives.base import MaskedLMObjective, mlm_metrics, mlm_statistics, sequence_counts
from bertkit.objectives.settings import ObjectiveSettings, setting
from bertkit.training.config import EVAL_SEED

MAX_SPAN_POSITIONS = 64  # relative positions embedded; a span token further in (a 10-word span of long words) shares the last


def span_boundaries(labels: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """The masked positions of `labels` (B, T) and their spans' boundaries.

    A span is a maximal run of consecutive positions with label != -100. Returns, for the
    N masked positions in row-major order: positions (N, 2) (row, column), left (N,) the
    column s-1 before the span, right (N,) the column e+1 after it, relative (N,) i - s
    (0 for a span's first token).
    """
    masked = labels != IGNORE_INDEX  # (B, T)
    batch, seq_len = masked.shape
    column = torch.arange(seq_len, device=labels.device).expand(batch, seq_len)  # (B, T)
    previous = F.pad(masked[:, :-1], (1, 0), value=False)  # (B, T) masked[t-1]
    following = F.pad(masked[:, 1:], (0, 1), value=False)  # (B, T) masked[t+1]
    first = torch.where(masked & ~previous, column, -1)  # (B, T) span starts, -1 elsewhere
    last = torch.where(masked & ~following, column, seq_len)  # (B, T) span ends, T elsewhere
    start = torch.cummax(first, dim=1).values  # (B, T) the start of the run each position is in
    end = torch.cummin(last.flip(1), dim=1).values.flip(1)  # (B, T) the end of that run
    positions = masked.nonzero(as_tuple=False)  # (N, 2)
    rows, cols = positions[:, 0], positions[:, 1]
    span_start, span_end = start[rows, cols], end[rows, cols]
    return positions, span_start - 1, span_end + 1, cols - span_start


class SpanBoundaryHead(nn.Module):
    """y_i = LN(GELU(W2 LN(GELU(W1 [x_{s-1}; x_{e+1}; p_i])))), then tied decoder + `bias`."""

    def __init__(self, config: BertConfig, max_positions: int = MAX_SPAN_POSITIONS):
        super().__init__()
        hidden = config.hidden_size
        self.position_embeddings = nn.Embedding(max_positions, hidden)
        self.dense1 = nn.Linear(3 * hidden, hidden)
        self.LayerNorm1 = nn.LayerNorm(hidden, eps=config.layer_norm_eps)
        self.dense2 = nn.Linear(hidden, hidden)
        self.LayerNorm2 = nn.LayerNorm(hidden, eps=config.layer_norm_eps)
        self.bias = nn.Parameter(torch.zeros(config.vocab_size))

    def forward(self, left: torch.Tensor, right: torch.Tensor, relative: torch.Tensor) -> torch.Tensor:
        """left, right: (N, H) boundary encodings; relative: (N,) int offsets in the span -> (N, H)."""
        position = self.position_embeddings(relative.clamp(max=self.position_embeddings.num_embeddings - 1))  # (N, H)
        x = self.LayerNorm1(F.gelu(self.dense1(torch.cat([left, right, position], dim=-1))))  # (N, H)
        return self.LayerNorm2(F.gelu(self.dense2(x)))


@dataclass
class SpanBertOutput(ModelOutput):
    """loss = mlm_loss + sbo_loss (means over the N masked tokens); mlm_logits, sbo_logits: (N, V)."""

    loss: torch.Tensor | None = None
    mlm_loss: torch.Tensor | None = None
    sbo_loss: torch.Tensor | None = None
    mlm_logits: torch.Tensor | None = None
    sbo_logits: torch.Tensor | None = None
    masked_positions: torch.Tensor | None = None


class SpanBertForPreTraining(BertPreTrainedModel):
    """BERT encoder (no pooler) + MLM head `cls.predictions` + span boundary head `sbo`."""

    backbone_prefix = "bert."
    optional_prefixes = ("cls.", "sbo.", "bert.pooler.")

    def __init__(self, config: BertConfig):
        super().__init__(config)
        self.bert = BertModel(config, add_pooling_layer=False)
        self.cls = BertOnlyMLMHead(config)
        self.sbo = SpanBoundaryHead(config)
        self.init_weights()

    def forward(
        self,
        input_ids: torch.Tensor,
        token_type_ids: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        labels: torch.Tensor | None = None,
    ) -> SpanBertOutput:
        """input_ids, token_type_ids, attention_mask: (B, T); labels: (B, T) original ids on
        the spans, -100 elsewhere (runs of labels = spans, as the span masking makes them)."""
        if labels is None:
            raise ValueError("SpanBertForPreTraining needs labels (the masked spans)")
        positions, left, right, relative = span_boundaries(labels)
        right = right.clamp(max=labels.shape[1] - 1)  # only a span ending the row has none ([SEP] always does)
        left = left.clamp(min=0)
        rows, targets = positions[:, 0], labels[positions[:, 0], positions[:, 1]]
        read = labels != IGNORE_INDEX  # (B, T): the last layer runs only where the heads read
        read[rows, left] = True
        read[rows, right] = True
        hidden = self.bert(input_ids=input_ids, token_type_ids=token_type_ids, attention_mask=attention_mask,
                           read_positions=read).last_hidden_state  # (B, T, H)
        weight = self.bert.embeddings.word_embeddings.weight
        mlm_loss, mlm_logits = self.cls.predictions.loss_and_logits(hidden[rows, positions[:, 1]], weight, targets)
        boundary = self.sbo(hidden[rows, left], hidden[rows, right], relative)  # (N, H)
        sbo_loss, sbo_logits = decoder_cross_entropy(boundary, weight, self.sbo.bias, targets)
        return SpanBertOutput(mlm_loss + sbo_loss, mlm_loss, sbo_loss, mlm_logits, sbo_logits, positions)


@dataclass(frozen=True)
class SpanBertSettings(ObjectiveSettings):
    """The span lengths: Geometric(span_geometric_p) words, truncated at max_span_length (the paper's 0.2 and 10)."""

    span_geometric_p: float = setting(0.2, "spanbert: p of the geometric distribution of span lengths, in (0, 1]")
    max_span_length: int = setting(10, "spanbert: longest span, in words")

    def check(self) -> None:
        if not 0.0 < self.span_geometric_p <= 1.0:
            raise ConfigError(f"field 'span_geometric_p' must be in (0, 1], got {self.span_geometric_p}")
        if self.max_span_length <= 0:
            raise ConfigError(f"field 'max_span_length' must be positive, got {self.max_span_length}")


class SpanBertObjective(MaskedLMObjective):
    name = "spanbert"
    data_formats = ("packed",)  # single segments: paired (nsp / sop) data is refused
    settings_class = SpanBertSettings
    config_defaults: dict[str, Any] = {"masking": "span"}
    model_class = SpanBertForPreTraining
    needs_dynamic_masking = "masks spans as it loads"
    progress_keys = ("mlm_accuracy", "sbo_accuracy")
    plot_panels = [
        ("Loss", ["loss", "eval_loss"]),
        ("MLM accuracy", ["mlm_accuracy", "eval_mlm_accuracy"]),
        ("SBO accuracy", ["sbo_accuracy", "eval_sbo_accuracy"]),
    ]

    def __init__(self, model, train, eval_data, masking, seed, eval_seed: int = EVAL_SEED,
                 settings: SpanBertSettings | None = None):
        if masking.strategy != "span":
            raise ConfigError(f"field 'masking' must be 'span' for objective 'spanbert' (the span boundary "
                              f"objective reads whole spans), got {masking.strategy!r}")
        settings = settings or SpanBertSettings()
        masking = dataclasses.replace(masking, span_geometric_p=settings.span_geometric_p,
                                      max_span_length=settings.max_span_length)
        super().__init__(model, train, eval_data, masking, seed, eval_seed, settings)

    def loss_counts(self, batch: dict[str, torch.Tensor]) -> dict[str, float]:
        return {"mlm": sequence_counts(batch["labels"])}

    def compute_loss(self, model, batch, totals) -> tuple[torch.Tensor, dict[str, Any]]:
        labels = batch["labels"]
        out = model(**model_inputs(model, batch), labels=labels)
        stats = mlm_statistics(out.mlm_logits, labels, out.mlm_loss)
        sbo = mlm_statistics(out.sbo_logits, labels, out.sbo_loss)
        stats.update(sbo_loss_sum=sbo["mlm_loss_sum"], sbo_correct=sbo["mlm_correct"])
        # both terms are means over this micro-batch's masked tokens: weight them to its share
        return out.loss * (stats["mlm_count"] / max(totals["mlm"], 1.0)), stats

    def summarize(self, stats: dict[str, float]) -> dict[str, float]:
        metrics = mlm_metrics(stats)
        count = stats.get("mlm_count", 0.0)
        if count:
            metrics["sbo_loss"] = stats["sbo_loss_sum"] / count
            metrics["sbo_accuracy"] = percent(stats["sbo_correct"], count)
            metrics["loss"] = metrics["mlm_loss"] + metrics["sbo_loss"]
        return metrics
