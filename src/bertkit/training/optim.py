"""Optimizers and the learning-rate schedule of BERT pre-training and fine-tuning.

AdamW with decoupled weight decay 0.01 on weight matrices only (never on biases or
LayerNorm parameters, as the BERT reference), fused or multi-tensor where torch offers
it; LAMB (You et al., 2019) for large batches; linear warm-up from 0 then linear decay
to 0 at `max_steps`.
"""

from __future__ import annotations

import torch
from torch import nn

from bertkit.training.config import TrainingConfig


def parameter_groups(model: nn.Module, weight_decay: float) -> list[dict]:
    """Two groups: matrices and embeddings decay; biases and LayerNorm weights (1-D) do not."""
    decay, no_decay = [], []
    for name, param in model.named_parameters():
        if not param.requires_grad:
            continue
        (no_decay if param.ndim < 2 or "LayerNorm" in name or "layer_norm" in name else decay).append(param)
    return [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]


def build_optimizer(model: nn.Module, config: TrainingConfig) -> torch.optim.Optimizer:
    groups = parameter_groups(model, config.weight_decay)
    betas = (config.adam_beta1, config.adam_beta2)
    if config.optimizer == "lamb":
        return Lamb(groups, lr=config.lr, betas=betas, eps=config.adam_epsilon)
    # fused kernels exist for CPU and CUDA tensors alike in torch >= 2.4
    return torch.optim.AdamW(groups, lr=config.lr, betas=betas, eps=config.adam_epsilon, fused=True)


def linear_schedule(optimizer: torch.optim.Optimizer, warmup_steps: int, max_steps: int) -> torch.optim.lr_scheduler.LambdaLR:
    """lr multiplier: step/warmup during warm-up, then (max - step)/(max - warmup) down to 0."""

    def factor(step: int) -> float:
        if step < warmup_steps:
            return step / max(1, warmup_steps)
        return max(0.0, (max_steps - step) / max(1, max_steps - warmup_steps))

    return torch.optim.lr_scheduler.LambdaLR(optimizer, factor)


class Lamb(torch.optim.Optimizer):
    """Layer-wise adaptive moments (LAMB): the Adam update of each tensor (decoupled
    decay included) is rescaled by the trust ratio ||w|| / ||update||, so one learning
    rate serves batches of tens of thousands of sequences."""

    def __init__(self, params, lr: float = 1e-3, betas=(0.9, 0.999), eps: float = 1e-6, weight_decay: float = 0.0):
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay))

    @torch.no_grad()
    def step(self, closure=None):
        loss = closure() if closure is not None else None
        for group in self.param_groups:
            beta1, beta2 = group["betas"]
            for param in group["params"]:
                if param.grad is None:
                    continue
                state = self.state[param]
                if not state:
                    state["step"] = torch.zeros((), dtype=torch.float32)
                    state["exp_avg"] = torch.zeros_like(param)
                    state["exp_avg_sq"] = torch.zeros_like(param)
                state["step"] += 1
                step = state["step"].item()
                exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
                exp_avg.lerp_(param.grad, 1 - beta1)
                exp_avg_sq.mul_(beta2).addcmul_(param.grad, param.grad, value=1 - beta2)
                update = (exp_avg / (1 - beta1**step)) / ((exp_avg_sq / (1 - beta2**step)).sqrt_().add_(group["eps"]))
                if group["weight_decay"]:
                    update.add_(param, alpha=group["weight_decay"])
                weight_norm, update_norm = param.norm(), update.norm()
                trust = torch.where((weight_norm > 0) & (update_norm > 0), weight_norm / update_norm, torch.ones_like(weight_norm))
                param.add_(update * trust, alpha=-group["lr"])
        return loss
