"""What every family's heads share: the ignored-label index, the classification loss rule
(transformers' `problem_type`), classifier dropout and the multiple-choice reshapes.

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
