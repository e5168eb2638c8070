"""Static shapes under torch.compile (bertkit.model.static_shapes): a BERT pre-training step is
one graph with a fixed token budget, and its loss and gradients are the eager ones."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from bertkit import BertConfig, BertForPreTraining
from bertkit.data.masking import Masker, MaskingConfig
from bertkit.model.static_shapes import set_prediction_budget, static_label_positions


def test_static_positions_put_the_labelled_ones_first_in_row_major_order():
    labels = torch.full((3, 6), -100)
    labels[0, 4], labels[1, 1], labels[1, 5], labels[2, 0] = 7, 8, 9, 10
    positions = static_label_positions(labels, per_sequence=2)
    assert positions.shape == (6, 2)
    assert positions[:4].tolist() == (labels != -100).nonzero().tolist()
    assert (labels[positions[4:, 0], positions[4:, 1]] == -100).all()  # fillers, ignored by the loss


@pytest.mark.parametrize("strategy", ["token", "whole_word", "span"])
def test_the_masker_never_labels_more_than_its_bound(strategy):
    vocab = 50
    masker = Masker(MaskingConfig(strategy=strategy), vocab_size=vocab, mask_token_id=4, special_ids=[0, 1, 2, 3, 4],
                    word_starts=np.arange(vocab) % 3 == 0)
    rng = np.random.default_rng(0)
    for length in (5, 17, 64, 128):
        bound = masker.max_predictions(length)
        for _ in range(50):
            ids = rng.integers(5, vocab, size=length)
            ids[0], ids[-1] = 2, 3
            _, labels = masker(ids, rng)
            assert (labels != -100).sum() <= bound
    assert Masker(MaskingConfig(), vocab_size=vocab, mask_token_id=4, special_ids=[0]).max_predictions(128) == 20


def test_a_compiled_pretraining_step_is_one_graph_with_the_eager_loss_and_gradients():
    torch.manual_seed(0)
    config = BertConfig(vocab_size=60, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                        intermediate_size=64, max_position_embeddings=32, hidden_dropout_prob=0.0,
                        attention_probs_dropout_prob=0.0)
    model = BertForPreTraining(config).train()
    ids = torch.randint(5, 60, (3, 12))
    mask = torch.ones_like(ids)
    mask[2, 9:] = 0  # padding: the eager step unpads, the compiled one stays padded
    labels = torch.full_like(ids, -100)
    labels[0, [2, 5]], labels[1, 7], labels[2, [1, 3]] = ids[0, [2, 5]], ids[1, 7], ids[2, [1, 3]]
    batch = {"input_ids": ids, "attention_mask": mask, "labels": labels, "next_sentence_label": torch.tensor([0, 1, 0])}

    def step(forward):
        model.zero_grad(set_to_none=True)
        out = forward(**batch)
        out.loss.backward()
        return out, {name: p.grad.clone() for name, p in model.named_parameters() if p.grad is not None}

    eager, eager_grads = step(model)
    set_prediction_budget(model, 3)
    compiled, compiled_grads = step(torch.compile(model, backend="eager", fullgraph=True))  # fullgraph: no break
    assert compiled.prediction_logits.shape == (9, 60)  # B x budget rows, whatever the count
    torch.testing.assert_close(compiled.loss, eager.loss)
    torch.testing.assert_close(compiled.prediction_logits[:5], eager.prediction_logits)
    assert compiled_grads.keys() == eager_grads.keys()
    for name, grad in eager_grads.items():
        torch.testing.assert_close(compiled_grads[name], grad, atol=1e-5, rtol=1e-4, msg=name)
