"""experiments/deberta_v3_vs_electra.py's FLOPs formula for the deberta-v3 objective against torch's
FLOP counter on bertkit's own generator (DebertaV2ForMaskedLM, logits at every position: masked = B x T)
and discriminator (DebertaV2ForReplacedTokenDetection), forward + backward, in training mode (the
explicit attention path, whose matmuls the counter sees)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from torch.utils.flop_counter import FlopCounterMode

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "experiments"))
from deberta_v3_vs_electra import arm_step_flops, deberta_v3_step_flops, equal_flops_steps  # noqa: E402

from bertkit.model.deberta.config import V3_LAYOUT, DebertaV2Config  # noqa: E402
from bertkit.model.deberta.modeling import DebertaV2ForMaskedLM  # noqa: E402
from bertkit.objectives.deberta_v3 import DebertaV2ForReplacedTokenDetection, generator_config  # noqa: E402

B, T, V = 3, 16, 120
SIZES = {"vocab_size": V, "hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 4, "intermediate_size": 64,
         "max_position_embeddings": 64}


def counted_step(config: DebertaV2Config, generator_layers: int) -> float:
    """FLOPs torch counts for forward + backward of the generator's and discriminator's losses."""
    torch.manual_seed(0)
    discriminator = DebertaV2ForReplacedTokenDetection(config).train()
    generator = DebertaV2ForMaskedLM(generator_config(config, generator_layers / config.num_hidden_layers)).train()
    assert generator.config.num_hidden_layers == generator_layers
    ids = torch.randint(5, V, (B, T), generator=torch.Generator().manual_seed(0))
    with FlopCounterMode(display=False) as counter:
        mlm = F.cross_entropy(generator(input_ids=ids).logits.flatten(0, 1), ids.flatten())
        rtd = F.binary_cross_entropy_with_logits(discriminator(input_ids=ids).logits, torch.zeros(B, T))
        (mlm + rtd).backward()
    return float(counter.get_total_flops())


@pytest.mark.parametrize("layout", [
    {},  # v3: c2p + p2c, 2 x 8 bucket rows, shared key
    {"position_buckets": -1, "max_relative_positions": 24, "pos_att_type": ["c2p"]},  # one term, 48 rows
    {"relative_attention": False, "pos_att_type": None, "position_biased_input": True},  # BERT's attention
])
def test_formula_matches_the_models_matmuls(layout):
    config = DebertaV2Config(**{**V3_LAYOUT, "position_buckets": 8, **layout, **SIZES})
    formula = deberta_v3_step_flops(config.to_dict(), 1, B, T, masked=B * T)
    assert formula == pytest.approx(counted_step(config, 1), rel=1e-9)


def test_relative_terms_cost_what_the_whole_table_does():
    """Each term: the table's projection (rows x H^2) and every position against all rows, per layer."""
    base = {**V3_LAYOUT, **SIZES, "position_buckets": 8}
    h, layers = SIZES["hidden_size"], 2 + 1  # discriminator + generator layers
    both = deberta_v3_step_flops(base, 1, B, T, masked=5)
    none = deberta_v3_step_flops({**base, "relative_attention": False}, 1, B, T, masked=5)
    assert both - none == pytest.approx(6.0 * layers * 2 * (16 * h * h + B * T * 16 * h))


def test_the_runs_budgets():
    """At the runs' shapes (batch 32 x 64 tokens, 4,000 pieces) a deberta-v3 step costs about twice an
    ELECTRA step (full-width generator, 512-row relative table), so equal FLOPs is ~2x ELECTRA's steps."""
    electra, deberta = arm_step_flops("electra", "tiny"), arm_step_flops("deberta-v3", "deberta-tiny")
    assert 1.5 < deberta / electra < 2.5
    assert equal_flops_steps(300) == round(300 * deberta / electra)
    with pytest.raises(ValueError, match="no FLOPs formula"):
        arm_step_flops("mlm", "tiny")
