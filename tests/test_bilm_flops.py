"""experiments/ablations.py's FLOPs formula for ELMo's biLM step (`bilm_step_flops`, the
ELMo arms of docs/ablations.md (i)), checked against torch's own count of the model's matmul
and convolution FLOPs (FlopCounterMode) on one forward pass with targets: a training step is
3 forward passes in the formula."""

import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "experiments"))
from ablations import bilm_step_flops  # noqa: E402
from test_ablation_flops import forward_flops  # noqa: E402

VOCAB = 512


SMALL_CUT = {"cell_size": 64, "projection_dim": 32, "n_highway": 2, "filters": [[1, 8], [2, 8], [3, 16], [4, 16]]}


@pytest.mark.parametrize("preset, sizes", [("elmo-tiny", {}), ("elmo-small", SMALL_CUT)])
def test_bilm_formula_matches_the_models_matmuls(preset, sizes):
    from bertkit.model.elmo import ElmoBiLM, ElmoConfig

    config = ElmoConfig.from_preset(preset, n_tokens_vocab=VOCAB, **sizes)
    torch.manual_seed(0)
    model = ElmoBiLM(config)
    characters = model.character_ids([["The", "bank", "raised", "rates"], ["Extraordinarily", "so"]])  # (2, 6, C)
    chars = model.char_encoder.crop(characters).shape[-1]  # the columns the CNN convolves
    targets = torch.randint(0, VOCAB, characters.shape[:2])
    targets[1, 3:] = -100  # the padded words predict nothing
    predicted = 2 * int((targets != -100).sum())
    counted = forward_flops(model, character_ids=characters, next_word_ids=targets, previous_word_ids=targets)
    formula = bilm_step_flops(config.to_dict(), 2, characters.shape[1], chars, predicted) / 3
    assert chars < characters.shape[-1]
    assert formula == pytest.approx(counted, rel=1e-6)
