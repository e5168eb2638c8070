"""`TrainingProgram`: everything the loop asks of a pre-training objective or a task.

The loop (bertkit.training.loop) knows nothing about BERT: a program hands it examples,
turns a batch into a loss and summable statistics, evaluates, and saves its model.

Losses are normalised by *global* counts: the loop first asks every micro-batch for
its `loss_counts` (e.g. masked tokens, sequences), sums them over accumulation steps
and processes, and passes the totals back to `compute_loss`. So the gradient of a step
is the same whether its batch ran in one piece, in eight accumulation steps or on eight
processes — the exactness the DDP and resume tests rely on.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn


class TrainingProgram:
    """Base class; subclasses implement the methods that raise NotImplementedError."""

    model: nn.Module

    # ---- data ----------------------------------------------------------------------
    def num_train_examples(self) -> int:
        raise NotImplementedError

    def train_example(self, index: int, epoch: int) -> dict[str, Any]:
        """Example `index` of the training set as seen in `epoch`; any randomness (dynamic
        masking) derives from (seed, epoch, index), never from a running stream."""
        raise NotImplementedError

    def collate(self, examples: list[dict[str, Any]]) -> dict[str, torch.Tensor]:
        raise NotImplementedError

    def epoch_order(self, permutation: np.ndarray, epoch: int, global_batch: int) -> np.ndarray:
        """The order of the training examples in `epoch`, given the loop's seeded random
        permutation (N,) of them. The default keeps it; a program may regroup it (e.g. by
        length) but must stay a pure function of its arguments, so resuming stays exact."""
        return permutation

    @staticmethod
    def count_tokens(batch: dict[str, torch.Tensor]) -> int:
        """Real (non-padding) tokens in a batch, for tokens/s."""
        if "attention_mask" in batch:
            return int(batch["attention_mask"].sum())
        return int(batch["input_ids"].numel()) if "input_ids" in batch else len(next(iter(batch.values())))

    # ---- loss ----------------------------------------------------------------------
    def loss_counts(self, batch: dict[str, torch.Tensor]) -> dict[str, float]:
        """The normaliser of each loss term in this micro-batch, e.g. {"mlm": 301, "nsp": 32}."""
        raise NotImplementedError

    def compute_loss(
        self, model: nn.Module, batch: dict[str, torch.Tensor], totals: dict[str, float]
    ) -> tuple[torch.Tensor, dict[str, float]]:
        """Scalar loss = sum over terms of (this batch's summed loss / totals[term]), and
        statistics as sums (loss sums, correct counts...) for `summarize`."""
        raise NotImplementedError

    def summarize(self, stats: dict[str, float]) -> dict[str, float]:
        """Summed statistics -> metrics (e.g. mlm_accuracy = correct / count)."""
        raise NotImplementedError

    def fix_shapes(self, model: nn.Module) -> None:
        """Before torch.compile (`--set compile=true`): give `model` the static row counts this
        program can bound, so the compiled step keeps one shape per micro-batch size (a masked
        LM's predictions per sequence: bertkit.model.static_shapes). Nothing by default: the
        model then compiles with its data-dependent counts (a graph break each)."""

    # ---- evaluation and saving -------------------------------------------------------
    def evaluate(self, model: nn.Module, ctx, batch_size: int, max_batches: int | None) -> dict[str, float]:
        """Metrics on the held-out data (every rank takes part; results are global)."""
        return {}

    def evaluation_details(self) -> dict[str, Any]:
        """What else an evaluation record in metrics.jsonl says about how it was scored (not
        metrics: never compared or plotted), e.g. {"eval_seed": 1234}; nothing by default."""
        return {}

    def on_evaluate(self, step: int, metrics: dict[str, float], improved: bool) -> None:
        """Called on every rank after each evaluation; `improved`: `metrics` are the best so
        far under the config's `metric_for_best` (and best/ now holds this model)."""

    def save_pretrained(self, model: nn.Module, directory: Path, state_dict: dict[str, torch.Tensor] | None = None) -> None:
        """Write `model` (or `state_dict` for it) and whatever else a checkpoint needs
        (tokenizer, label map) in the Hugging Face layout."""
        raise NotImplementedError

    def fsdp_units(self, model: nn.Module) -> list[nn.Module]:
        """Sub-modules FSDP shards separately: by default the members of every ModuleList (the layers)."""
        return [m for lst in model.modules() if isinstance(lst, nn.ModuleList) for m in lst]

    # ---- reporting -----------------------------------------------------------------
    progress_keys: tuple[str, ...] = ()  # metrics shown on the progress bar beside loss and lr
    plot_panels: list[tuple[str, list[str]]] = [("Loss", ["loss", "eval_loss"])]
