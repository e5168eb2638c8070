"""`decode_steps` (bertkit.model.decoding): rows decoded together while they come and go —
a row joining a running batch (its caches left-padded to the others' length), rows
leaving it — get the tokens `generate` gives each input alone."""

from __future__ import annotations

import pytest
import torch

from bertkit.model.packed_linear import packed_weights
from bertkit.model.t5 import T5Config, T5ForConditionalGeneration

INPUTS = [[5, 9, 14, 3, 22, 7, 1], [8, 4, 1], [30, 31, 32, 33, 1], [12, 1]]


@pytest.fixture(scope="module")
def model():
    torch.manual_seed(0)
    model = T5ForConditionalGeneration(T5Config(vocab_size=40, d_model=16, d_kv=4, d_ff=32, num_layers=2, num_heads=4,
                                                decoder_start_token_id=0, eos_token_id=1, pad_token_id=0)).eval()
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.normal_(0.0, 0.6)
    return model


def alone(model, ids, steps):
    out = model.generate(input_ids=torch.tensor([ids]), max_new_tokens=steps, eos_token_id=[])  # no EOS: `steps` tokens
    return out[0].tolist()


def greedy(steps_object):
    steps_object.append(steps_object.next_logits().argmax(dim=-1))


def test_rows_that_join_and_leave_get_their_own_tokens(model):
    with torch.inference_mode(), packed_weights():
        running = model.decode_steps([INPUTS[0]])
        for _ in range(3):
            greedy(running)
        joining = model.decode_steps(INPUTS[1:3])  # join after three steps: their caches are shorter
        greedy(joining)
        running.merge(joining)
        for _ in range(4):
            greedy(running)
        running.keep([2, 0])  # row 1 leaves; the others go on, reordered
        late = model.decode_steps([INPUTS[3]])
        greedy(late)
        running.merge(late)
        for _ in range(5):
            greedy(running)
        histories = [running.tokens(i) for i in range(running.rows)]
    assert histories[0] == alone(model, INPUTS[2], 10)
    assert histories[1] == alone(model, INPUTS[0], 12)
    assert histories[2] == alone(model, INPUTS[3], 6)


def test_a_model_with_absolute_positions_does_not_merge(model):
    steps = model.decode_steps([INPUTS[0]])
    steps.can_merge = False  # what GenerationMixin's default (merges_decode_steps = False) gives
    with pytest.raises(ValueError, match="cannot merge"):
        steps.merge(model.decode_steps([INPUTS[1]]))
