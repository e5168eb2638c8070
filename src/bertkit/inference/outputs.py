"""What a loaded model gives the inference layer for a list of encoded features.

Encoders give scores (logits); a text-to-text model (T5, to come) gives generated token
sequences as well. One type carries both, so `predict` and `evaluate` read a model's
outputs the same way whichever kind of model produced them.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass
class InferenceOutputs:
    """Per feature, in input order.

    logits: (K,) sequence classification, (T_i, K) tagging, (T_i, 2) QA start / end,
    (C,) multiple choice; float32 (bertkit.tasks.programs.run_features).
    sequences: the generated token ids of each feature (a text-to-text model); None for
    encoders, which generate nothing.
    precision: the precision the model ran in ("fp32", "int8", "bf16";
    bertkit.inference.precision); the logits are float32 whatever it is.
    """

    logits: list[np.ndarray]
    sequences: list[list[int]] | None = None
    precision: str = "fp32"
