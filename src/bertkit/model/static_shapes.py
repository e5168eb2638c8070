"""Static shapes under torch.compile: a fixed token budget where eager code picks a data-dependent count.

Eagerly, a masked LM's vocabulary head reads the labelled positions only (`labelled_rows`: a
`nonzero`, whose row count depends on the batch). A compiled graph breaks at such an
operator (and at every host read), so the step runs as several graphs with a Python hop
between each, and CUDA graphs (torch.compile's mode="reduce-overhead") cannot be captured.

With a prediction budget set on the model (`set_prediction_budget(model, k)`: at most k
labelled positions per sequence, which BERT's masker guarantees, e.g. 20 of 128 at 15%,
Google's `max_predictions_per_seq`), the head reads a fixed B x k rows while compiling: the
labelled positions first, in row-major order (the eager rows, in the eager order), then
filler positions whose label is -100, which the loss ignores. The loss is the eager one,
and the compiled graph has one shape per micro-batch size. Eagerly (and in the eager
fallback of bertkit.training.compile) the budget is not used: the eager path stays the
one the CPU is tuned for.
"""

from __future__ import annotations

import torch
from torch import nn

from bertkit.model.losses import IGNORE_INDEX


class PredictionBudget:
    """A model whose masked-LM head can read a fixed number of rows per sequence under
    torch.compile (`prediction_budget`: None = the eager, data-dependent count)."""

    prediction_budget: int | None = None

    def static_budget(self) -> int | None:
        """The rows per sequence to read now: the budget while compiling, else None."""
        return self.prediction_budget if torch.compiler.is_compiling() else None


def set_prediction_budget(model: nn.Module, per_sequence: int | None) -> bool:
    """Give every `PredictionBudget` module inside `model` the budget `per_sequence`; whether
    there was one (a family without it compiles with its data-dependent rows)."""
    found = False
    for module in model.modules():
        if isinstance(module, PredictionBudget):
            module.prediction_budget = per_sequence
            found = True
    return found


def static_label_positions(labels: torch.Tensor, per_sequence: int) -> torch.Tensor:
    """labels (B, T) (-100 = no prediction) -> (B * per_sequence, 2) int64 (row, column) positions:
    the labelled ones in row-major order, then unlabelled fillers (label -100), so the count
    never depends on the data. A sequence may hold at most `per_sequence` labels (a budget
    the masker keeps); the total is what counts, so a batch's spare rows serve any sequence."""
    batch_size, seq_len = labels.shape
    budget = min(batch_size * per_sequence, batch_size * seq_len)
    unlabelled = (labels == IGNORE_INDEX).view(-1).to(torch.int8)  # 0 first: labelled, stable order kept
    flat = torch.sort(unlabelled, stable=True).indices[:budget]  # (budget,)
    return torch.stack((flat // seq_len, flat % seq_len), dim=1)
