"""The last layer run only where the pre-training heads read (bertkit.model.query_rows)."""

import copy

import pytest
import torch
import torch.nn.functional as F

from bertkit.model.bert.config import BertConfig
from bertkit.model.bert import BertForPreTraining
from bertkit.model.query_rows import QueryRows


def tiny(pre_layer_norm: bool) -> BertForPreTraining:
    torch.manual_seed(0)
    config = BertConfig(vocab_size=100, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                        intermediate_size=64, pre_layer_norm=pre_layer_norm, hidden_dropout_prob=0.0,
                        attention_probs_dropout_prob=0.0)
    return BertForPreTraining(config)


def batch():
    generator = torch.Generator().manual_seed(1)
    ids = torch.randint(5, 100, (4, 16), generator=generator)
    mask = torch.ones(4, 16, dtype=torch.long)
    mask[1, 10:] = 0
    mask[3, 5:] = 0
    chosen = (torch.rand(4, 16, generator=generator) < 0.3) & mask.bool()
    chosen[:, 0] = False
    chosen[2] = False  # a row with nothing masked still feeds NSP through [CLS]
    labels = torch.where(chosen, ids, torch.full_like(ids, -100))
    return ids, mask, labels, torch.tensor([0, 1, 1, 0])


def full_last_layer_loss(model, ids, mask, labels, nsp):
    """The reference: every position through the last layer, then the heads."""
    out = model.bert(ids, attention_mask=mask)
    where = (labels != -100).nonzero()
    mlm, logits = model.cls.predictions.loss_and_logits(
        out.last_hidden_state[where[:, 0], where[:, 1]], model.bert.embeddings.word_embeddings.weight,
        labels[where[:, 0], where[:, 1]])
    return mlm + F.cross_entropy(model.cls.seq_relationship(out.pooler_output), nsp), logits


@pytest.mark.parametrize("pre_layer_norm", [False, True])
@pytest.mark.parametrize("unpad", [False, True])
def test_sparse_last_layer_equals_the_full_one(pre_layer_norm, unpad):
    model = tiny(pre_layer_norm)
    model.bert.unpad = unpad
    ids, mask, labels, nsp = batch()
    out = model(ids, attention_mask=mask, labels=labels, next_sentence_label=nsp)
    reference = copy.deepcopy(model)
    loss, logits = full_last_layer_loss(reference, ids, mask, labels, nsp)
    assert torch.allclose(out.loss, loss, atol=1e-6)
    assert torch.allclose(out.prediction_logits, logits, atol=1e-5)
    ours = torch.autograd.grad(out.loss, list(model.parameters()))
    theirs = torch.autograd.grad(loss, list(reference.parameters()))
    for name, a, b in zip([n for n, _ in model.named_parameters()], ours, theirs):
        assert torch.allclose(a, b, atol=1e-6), name


def test_last_hidden_state_is_zero_where_not_read_and_pooler_matches():
    model = tiny(False).eval()
    ids, mask, labels, _ = batch()
    read = labels != -100
    sparse = model.bert(ids, attention_mask=mask, read_positions=read)
    full = model.bert(ids, attention_mask=mask)
    read[:, 0] = True
    assert torch.allclose(sparse.last_hidden_state[read], full.last_hidden_state[read], atol=1e-6)
    assert sparse.last_hidden_state[~read].abs().max() == 0
    assert torch.allclose(sparse.pooler_output, full.pooler_output, atol=1e-6)


def test_hidden_states_or_attentions_requested_run_every_position():
    model = tiny(False).eval()
    ids, mask, labels, _ = batch()
    out = model.bert(ids, attention_mask=mask, output_hidden_states=True, read_positions=labels != -100)
    assert torch.allclose(out.last_hidden_state, model.bert(ids, attention_mask=mask).last_hidden_state, atol=1e-6)
    assert len(out.hidden_states) == 3


def test_query_rows_layout_on_a_hand_made_mask():
    needed = torch.tensor([[True, False, True, True], [False, True, False, False]])
    rows = QueryRows.build(needed)
    assert rows.flat.tolist() == [0, 2, 3, 5]
    assert rows.query_position.tolist() == [[0, 2, 3], [1, 0, 0]]
    assert rows.slots.tolist() == [0, 1, 2, 3]
    x = torch.arange(8.0).view(2, 4, 1)
    assert rows.select(x).view(-1).tolist() == [0.0, 2.0, 3.0, 5.0]
    assert rows.scatter(rows.select(x), 2, 4).view(2, 4).tolist() == [[0, 0, 2, 3], [0, 5, 0, 0]]


@pytest.mark.parametrize("unpad", [False, True])
def test_sequence_classification_runs_the_last_layer_at_cls_only(unpad):
    from bertkit.model.bert.task_heads import BertForSequenceClassification

    torch.manual_seed(0)
    config = BertConfig(vocab_size=100, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                        intermediate_size=64, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    model = BertForSequenceClassification(config)
    model.bert.unpad = unpad
    ids, mask, _, _ = batch()
    labels = torch.tensor([0, 1, 1, 0])
    out = model(ids, attention_mask=mask, labels=labels)
    full = model.bert(ids, attention_mask=mask)  # every position through the last layer
    logits = model.classifier(model.dropout(full.pooler_output))
    assert torch.allclose(out.logits, logits, atol=1e-6)
    ours = torch.autograd.grad(out.loss, list(model.parameters()))
    theirs = torch.autograd.grad(F.cross_entropy(logits, labels), list(model.parameters()))
    for a, b in zip(ours, theirs):
        assert torch.allclose(a, b, atol=1e-6)
