"""What every family's heads share: the ignored-label index, the classification loss rule
(transformers' `problem_type`), the tagging and extractive-QA losses, classifier dropout and the
multiple-choice reshapes.

Family-neutral: BERT's task heads, T5's encoder classifier and XLNet's heads all use these,
so none of them imports another family for its loss.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

from bertkit.labels import IGNORE_INDEX  # noqa: F401  (re-exported: the models import it from here)
from bertkit.model.outputs import MultipleChoiceModelOutput



def every_target_labelled(labels: torch.Tensor | None) -> bool:
    """Whether a decoder's fused head-and-loss applies: labels given and none ignored. Read
    on the host only on a CPU and outside compilation; elsewhere False (the general head and
    loss, the same numbers) so a GPU step makes no host sync and a compiled one no graph break."""
    if labels is None or labels.device.type != "cpu" or torch.compiler.is_compiling():
        return False
    return bool((labels != IGNORE_INDEX).all())


def classifier_dropout(config: Any) -> float:
    """Dropout before a classification layer: classifier_dropout, else hidden_dropout_prob."""
    return config.classifier_dropout if config.classifier_dropout is not None else config.hidden_dropout_prob


def problem_type(config: Any, labels: torch.Tensor) -> str:
    """The loss a sequence classifier uses for `labels` (transformers' rule; the config is not changed)."""
    if config.problem_type is not None:
        return config.problem_type
    if config.num_labels == 1:
        return "regression"
    return "multi_label_classification" if labels.is_floating_point() else "single_label_classification"


def sequence_classification_loss(logits: torch.Tensor, labels: torch.Tensor, kind: str) -> torch.Tensor:
    """logits (B, K); labels (B,) int class ids (-100 ignored), (B,) / (B, K) float targets."""
    if kind == "regression":
        if logits.shape[-1] == 1:
            return F.mse_loss(logits.view(-1), labels.view(-1).to(logits.dtype))
        return F.mse_loss(logits, labels.to(logits.dtype))
    if kind == "multi_label_classification":
        return F.binary_cross_entropy_with_logits(logits, labels.to(logits.dtype))
    return F.cross_entropy(logits.view(-1, logits.shape[-1]), labels.view(-1), ignore_index=IGNORE_INDEX)


def token_classification_loss(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """logits (B, T, K), labels (B, T) (-100 = no loss) -> mean cross-entropy over the labelled
    positions; zero (not transformers' NaN) when none is labelled."""
    flat_logits, flat_labels = logits.reshape(-1, logits.shape[-1]), labels.reshape(-1)  # (B * T, K), (B * T,)
    if bool((flat_labels != IGNORE_INDEX).any()):
        return F.cross_entropy(flat_logits, flat_labels, ignore_index=IGNORE_INDEX)
    return flat_logits.sum() * 0.0


def span_loss(
    logits: torch.Tensor, attention_mask: torch.Tensor | None, start_positions: torch.Tensor | None,
    end_positions: torch.Tensor | None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """Extractive QA: logits (B, T, 2) start and end scores -> start_logits, end_logits (B, T), the
    dtype's minimum at padding (mask 0: never an answer), and the mean of the start and end
    cross-entropy when positions (B,) are given (outside [0, T): clamped to T and ignored), else None."""
    start_logits, end_logits = (part.squeeze(-1).contiguous() for part in logits.split(1, dim=-1))  # (B, T) each
    if attention_mask is not None:
        padding = attention_mask == 0  # (B, T)
        start_logits = start_logits.masked_fill(padding, torch.finfo(start_logits.dtype).min)
        end_logits = end_logits.masked_fill(padding, torch.finfo(end_logits.dtype).min)
    loss = None
    if start_positions is not None and end_positions is not None:
        ignored = start_logits.shape[1]  # T: where clamped out-of-range positions land
        start, end = start_positions.view(-1).clamp(0, ignored), end_positions.view(-1).clamp(0, ignored)
        loss = (F.cross_entropy(start_logits, start, ignore_index=ignored)
                + F.cross_entropy(end_logits, end, ignore_index=ignored)) / 2
    return start_logits, end_logits, loss


def flatten_choices(*tensors: torch.Tensor | None) -> tuple[torch.Tensor | None, ...]:
    """(B, C, T) multiple-choice inputs as (B * C, T) rows (None stays None)."""
    return tuple(None if x is None else x.reshape(-1, x.shape[-1]) for x in tensors)


def choice_output(scores: torch.Tensor, num_choices: int, labels: torch.Tensor | None, out) -> MultipleChoiceModelOutput:
    """One score per (context, choice) row (B * C, 1) -> logits (B, C), and the
    cross-entropy over the choices when `labels` (B,) are given (-100 ignored)."""
    logits = scores.view(-1, num_choices)  # (B, C)
    loss = None
    if labels is not None:
        loss = F.cross_entropy(logits, labels.view(-1), ignore_index=IGNORE_INDEX)
    return MultipleChoiceModelOutput(loss, logits, out.hidden_states, out.attentions)
