"""The unpadded encoder path (bertkit.model.unpad) for ELECTRA and ALBERT against their
padded path: hidden states (zeros at padding), the pooler, task-head and discriminator
logits, losses and every parameter's gradient (training mode, dropout off) within 1e-5 on
heavily and lightly padded batches; the automatic choice, `set_unpad` and the
output_attentions fallback, as BertModel's (tests/model/test_unpadded.py)."""

from __future__ import annotations

import pytest
import torch

from bertkit.model.albert import AlbertConfig, AlbertForSequenceClassification, AlbertModel
from bertkit.model.bert.modeling import set_unpad
from bertkit.model.electra import ElectraConfig, ElectraForPreTraining, ElectraForSequenceClassification, ElectraModel

B, T, V = 4, 12, 99
LENGTHS = {"heavy": [12, 7, 4, 3], "light": [12, 12, 12, 10]}  # ~45% and 3% padding
NO_DROPOUT = dict(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)


def _electra(embedding_size: int = 16, **fields) -> ElectraConfig:
    return ElectraConfig.from_dict(dict(vocab_size=V, embedding_size=embedding_size, hidden_size=32,
                                        num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
                                        max_position_embeddings=64, summary_last_dropout=0.0, **NO_DROPOUT, **fields))


def _albert(share: str = "all", **fields) -> AlbertConfig:
    return AlbertConfig.from_dict(dict(vocab_size=V, embedding_size=16, hidden_size=32, num_hidden_layers=3,
                                       num_attention_heads=2, intermediate_size=37, max_position_embeddings=64,
                                       share_layers=share, classifier_dropout_prob=0.0, **NO_DROPOUT, **fields))


CONFIGS = {  # name -> (backbone class, config)
    "electra-projected": (ElectraModel, lambda **f: _electra(16, **f)),
    "electra": (ElectraModel, lambda **f: _electra(32, **f)),
    "albert-all": (AlbertModel, lambda **f: _albert("all", **f)),
    "albert-attention": (AlbertModel, lambda **f: _albert("attention", **f)),
    "albert-ffn": (AlbertModel, lambda **f: _albert("ffn", **f)),
}


def _batch(lengths, seed: int = 0):
    gen = torch.Generator().manual_seed(seed)
    mask = (torch.arange(T)[None, :] < torch.tensor(lengths)[:, None]).long()  # (B, T)
    ids = torch.randint(5, V, (len(lengths), T), generator=gen) * mask
    types = torch.zeros_like(ids)
    types[:, T // 2:] = 1
    return ids, types * mask, mask


def _close(a, b, **kwargs):
    torch.testing.assert_close(a, b, atol=kwargs.get("atol", 1e-5), rtol=kwargs.get("rtol", 1e-5),
                               msg=kwargs.get("msg"))


def _both_paths(model, inputs: dict, loss_of):
    """Outputs, losses and gradients of one training step on the padded and the unpadded path."""
    results = []
    for unpad in (False, True):
        set_unpad(model, unpad)
        model.zero_grad(set_to_none=True)
        out = model(**inputs)
        loss = loss_of(out)
        loss.backward()
        results.append((out, loss.detach(), {n: p.grad for n, p in model.named_parameters() if p.grad is not None}))
    return results


def _assert_equal_gradients(model, padded: dict, unpadded: dict) -> None:
    assert padded.keys() == unpadded.keys() and len(padded) == len(list(model.parameters()))
    for key, grad in padded.items():
        _close(unpadded[key], grad, rtol=1e-4, msg=key)


@pytest.mark.parametrize("padding", ["heavy", "light"])
@pytest.mark.parametrize("name", CONFIGS)
def test_backbone_hidden_states_pooler_and_gradients_equal_the_padded_path(name, padding):
    cls, config = CONFIGS[name]
    torch.manual_seed(0)
    model = cls(config()).train()  # dropout is off: training mode is deterministic
    ids, types, mask = _batch(LENGTHS[padding])
    real = mask.bool()

    def loss_of(out):  # the padded path's padding positions carry no loss
        pooled = 0.0 if out.pooler_output is None else out.pooler_output.pow(2).sum()
        return out.last_hidden_state[real].pow(2).sum() + pooled

    inputs = dict(input_ids=ids, token_type_ids=types, attention_mask=mask, output_hidden_states=True)
    (padded, loss_a, grads_a), (unpadded, loss_b, grads_b) = _both_paths(model, inputs, loss_of)
    _close(loss_a, loss_b)
    layers = model.config.num_hidden_layers
    assert len(padded.hidden_states) == len(unpadded.hidden_states) == layers + 1
    for a, b in zip(padded.hidden_states, unpadded.hidden_states, strict=True):
        assert b.shape == (B, T, 32)
        _close(a[real], b[real])
        assert b[~real].abs().max() == 0  # zeros at padding, as BertModel's path
    assert unpadded.hidden_states[-1] is unpadded.last_hidden_state
    assert padded.last_hidden_state[~real].abs().max() > 0  # the padded path really ran padded
    if cls is AlbertModel:
        _close(padded.pooler_output, unpadded.pooler_output)
    else:
        assert unpadded.pooler_output is None
    _assert_equal_gradients(model, grads_a, grads_b)


HEADS = {
    "ElectraForSequenceClassification": (ElectraForSequenceClassification, lambda: _electra(16, num_labels=3)),
    "ElectraForSequenceClassification-unprojected": (ElectraForSequenceClassification,
                                                     lambda: _electra(32, num_labels=3)),
    "ElectraForPreTraining": (ElectraForPreTraining, lambda: _electra(16)),
    "AlbertForSequenceClassification": (AlbertForSequenceClassification, lambda: _albert("all", num_labels=3)),
    "AlbertForSequenceClassification-attention": (AlbertForSequenceClassification,
                                                  lambda: _albert("attention", num_labels=3)),
}


@pytest.mark.parametrize("padding", ["heavy", "light"])
@pytest.mark.parametrize("name", HEADS)
def test_heads_logits_losses_and_gradients_equal_the_padded_path(name, padding):
    cls, config = HEADS[name]
    torch.manual_seed(0)
    model = cls(config()).train()
    ids, types, mask = _batch(LENGTHS[padding])
    gen = torch.Generator().manual_seed(3)
    if cls is ElectraForPreTraining:  # replaced-token labels at the real positions
        labels = (torch.rand(B, T, generator=gen) < 0.3).long()
    else:
        labels = torch.randint(0, 3, (B,), generator=gen)
    inputs = dict(input_ids=ids, token_type_ids=types, attention_mask=mask, labels=labels)
    (padded, loss_a, grads_a), (unpadded, loss_b, grads_b) = _both_paths(model, inputs, lambda out: out.loss)
    _close(loss_a, loss_b)
    if cls is ElectraForPreTraining:  # one logit per token: equal at the real ones
        real = mask.bool()
        _close(padded.logits[real], unpadded.logits[real])
    else:
        _close(padded.logits, unpadded.logits)
    _assert_equal_gradients(model, grads_a, grads_b)


@pytest.mark.parametrize("name", ["electra-projected", "albert-attention"])
def test_automatic_choice_set_unpad_and_the_attentions_fallback(name):
    cls, config = CONFIGS[name]
    torch.manual_seed(0)
    model = cls(config()).eval()
    ids, types, mask = _batch(LENGTHS["heavy"])
    padding = mask == 0
    with torch.no_grad():
        auto = model(input_ids=ids, token_type_ids=types, attention_mask=mask).last_hidden_state
        forced = model(input_ids=ids, token_type_ids=types, attention_mask=mask, unpad=False).last_hidden_state
        assert auto[padding].abs().max() == 0 and forced[padding].abs().max() > 0
        _close(auto[~padding], forced[~padding])
        assert set_unpad(model, False) is model and model.unpad is False
        assert model(input_ids=ids, token_type_ids=types, attention_mask=mask).last_hidden_state[padding].abs().max() > 0
        set_unpad(model, True)
        assert model(input_ids=ids, token_type_ids=types, attention_mask=mask, unpad=False).last_hidden_state[padding].abs().max() > 0  # the call wins
        # output_attentions falls back to the padded path (hidden states too, then)
        out = model(input_ids=ids, token_type_ids=types, attention_mask=mask, output_attentions=True, output_hidden_states=True)
    heads = model.config.num_attention_heads
    assert len(out.attentions) == model.config.num_hidden_layers and out.attentions[0].shape == (B, heads, T, T)
    assert out.last_hidden_state[padding].abs().max() > 0
    _close(out.last_hidden_state, forced)
    # set_unpad reaches the backbone inside a task model
    head = ElectraForSequenceClassification(_electra(num_labels=2)) if cls is ElectraModel else \
        AlbertForSequenceClassification(_albert(num_labels=2))
    assert set_unpad(head, True).backbone.unpad is True
