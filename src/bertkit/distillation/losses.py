"""Distillation losses: soft targets at a temperature (Hinton et al.), DistilBERT's
cosine loss, TinyBERT's hidden-state and attention-map MSE. Each returns a *sum* over
the items it counts; the caller divides by the global count as the loop requires."""

from __future__ import annotations

import torch
import torch.nn.functional as F


def soft_target_loss(student_logits: torch.Tensor, teacher_logits: torch.Tensor, temperature: float,
                     kind: str = "kl", mask: torch.Tensor | None = None) -> torch.Tensor:
    """Summed over rows: T^2 * KL(softmax(t / T) || softmax(s / T)), or T^2 * the
    cross-entropy -sum p_t log p_s (kind "ce"). Logits (N, K), computed in float32;
    the T^2 keeps the gradient's scale independent of T (Hinton et al.).

    mask: (N, K) bool, True where an entry takes part (QA: the real positions of a
    window). The others get probability 0 on both sides: they are set to finfo.min
    after the division by T, so logits that are finfo.min already (bertkit's QA padding,
    -inf once divided by T < 1) or garbage give no inf - inf and no NaN, in the value or
    the gradient."""
    student = student_logits.float() / temperature  # (N, K)
    teacher = teacher_logits.float() / temperature
    if mask is not None:
        lowest = torch.finfo(torch.float32).min
        student = student.masked_fill(~mask, lowest)
        teacher = teacher.masked_fill(~mask, lowest)
    log_student = F.log_softmax(student, dim=-1)  # (N, K)
    log_teacher = F.log_softmax(teacher, dim=-1)
    probs = log_teacher.exp()
    if kind == "kl":
        per_row = (probs * (log_teacher - log_student)).sum(-1)  # (N,)
    else:
        per_row = -(probs * log_student).sum(-1)
    return per_row.sum() * temperature**2


def cosine_loss(student: torch.Tensor, teacher: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Sum over real tokens of 1 - cos(h_s, h_t) (DistilBERT). Hidden (B, T, H); mask (B, T) 1 = real."""
    cos = F.cosine_similarity(student.float(), teacher.float(), dim=-1)  # (B, T)
    return ((1.0 - cos) * mask).sum()


def hidden_mse(student: torch.Tensor, teacher: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Sum over real tokens of the mean squared difference over H (TinyBERT). (B, T, H), mask (B, T)."""
    return ((student.float() - teacher.float()) ** 2).mean(-1).mul(mask).sum()


def attention_mse(student: torch.Tensor, teacher: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Sum over real query tokens of the squared difference of attention rows, summed
    over keys and averaged over heads (TinyBERT's attention loss on probabilities).
    Attention (B, heads, T, T); mask (B, T)."""
    per_query = ((student.float() - teacher.float()) ** 2).sum(-1).mean(1)  # (B, T)
    return (per_query * mask).sum()
