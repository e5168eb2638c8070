"""The unpadded encoder path (bertkit.model.unpad) against the padded path and transformers:
every hidden state, the pooler, task-head logits and training gradients (dropout off)
equal within 1e-5 on heavily and lightly padded batches, post-LN and pre-LN; the
automatic choice; dropout on real tokens only; backward-compatible layer calls."""

from __future__ import annotations

import pytest
import torch
import transformers

from bertkit import (
    BertConfig,
    BertForMultipleChoice,
    BertForPreTraining,
    BertForQuestionAnswering,
    BertForSequenceClassification,
    BertForTokenClassification,
    BertModel,
)
from bertkit.model.bert.modeling import set_unpad
from bertkit.model.unpad import UNPAD_MIN_PADDING, Unpadding, plan_unpadding

B, T = 4, 12
# rows' real lengths: heavy padding (about 45%) and light padding (one short row, 3%)
LENGTHS = {"heavy": [12, 7, 4, 3], "light": [12, 12, 12, 10]}


def _config(tiny_config, pre_layer_norm: bool, dropout: float = 0.0, **fields) -> BertConfig:
    return BertConfig.from_dict({**tiny_config.to_dict(), "pre_layer_norm": pre_layer_norm,
                                 "hidden_dropout_prob": dropout, "attention_probs_dropout_prob": dropout, **fields})


def _batch(lengths, seed=0, width=T):
    gen = torch.Generator().manual_seed(seed)
    rows = len(lengths)
    mask = (torch.arange(width)[None, :] < torch.tensor(lengths)[:, None]).long()  # (B, T)
    ids = torch.randint(5, 120, (rows, width), generator=gen) * mask
    types = torch.zeros_like(ids)
    types[:, width // 2 :] = 1
    return ids, types * mask, mask


def _both(model, *args, **kwargs):
    """The model's output on the padded and on the unpadded path."""
    return set_unpad(model, False)(*args, **kwargs), set_unpad(model, True)(*args, **kwargs)


def _close_real(a, b, mask):
    """Equal at the real positions of (B, T, ...) tensors."""
    real = mask.bool()
    torch.testing.assert_close(a[real], b[real], atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("pre_layer_norm", [False, True])
@pytest.mark.parametrize("padding", ["heavy", "light"])
def test_hidden_states_and_pooler_equal_the_padded_path(tiny_config, pre_layer_norm, padding):
    torch.manual_seed(0)
    model = BertModel(_config(tiny_config, pre_layer_norm)).eval()
    ids, types, mask = _batch(LENGTHS[padding])
    with torch.no_grad():
        padded, unpadded = _both(model, ids, attention_mask=mask, token_type_ids=types, output_hidden_states=True)
    assert len(unpadded.hidden_states) == 3
    for a, b in zip(padded.hidden_states, unpadded.hidden_states, strict=True):
        assert b.shape == (B, T, 32)
        _close_real(a, b, mask)
        assert b[mask == 0].abs().max() == 0  # documented: zeros at padding
    assert unpadded.hidden_states[-1] is unpadded.last_hidden_state
    torch.testing.assert_close(padded.pooler_output, unpadded.pooler_output, atol=1e-5, rtol=1e-5)


def _task_inputs(name: str, lengths):
    gen = torch.Generator().manual_seed(3)
    ids, types, mask = _batch(lengths)
    if name == "BertForMultipleChoice":  # (B // 2, 2, T): two choices per question
        ids, types, mask = (x.view(B // 2, 2, T) for x in (ids, types, mask))
        return dict(input_ids=ids, token_type_ids=types, attention_mask=mask, labels=torch.tensor([0, 1]))
    inputs = dict(input_ids=ids, token_type_ids=types, attention_mask=mask)
    if name == "BertForSequenceClassification":
        inputs["labels"] = torch.randint(0, 3, (B,), generator=gen)
    elif name == "BertForTokenClassification":
        labels = torch.randint(0, 3, (B, T), generator=gen)
        labels[mask == 0] = -100
        inputs["labels"] = labels
    elif name == "BertForQuestionAnswering":
        inputs["start_positions"] = torch.tensor([1, 2, 0, 1])
        inputs["end_positions"] = torch.tensor([3, 5, 0, 2])
    else:  # BertForPreTraining
        labels = torch.where(torch.rand(ids.shape, generator=gen) < 0.3, ids, torch.full_like(ids, -100))
        labels[mask == 0] = -100
        labels[0, 1] = ids[0, 1]
        inputs["labels"] = labels
        inputs["next_sentence_label"] = torch.tensor([0, 1, 1, 0])
    return inputs


HEADS = {cls.__name__: cls for cls in (BertForSequenceClassification, BertForTokenClassification,
                                       BertForQuestionAnswering, BertForMultipleChoice, BertForPreTraining)}


def _logits(name, out):
    if name == "BertForQuestionAnswering":
        return [out.start_logits, out.end_logits]
    if name == "BertForPreTraining":
        return [out.prediction_logits, out.seq_relationship_logits]
    return [out.logits]


@pytest.mark.parametrize("pre_layer_norm", [False, True])
@pytest.mark.parametrize("padding", ["heavy", "light"])
@pytest.mark.parametrize("name", HEADS)
def test_task_heads_losses_and_gradients_equal_the_padded_path(tiny_config, name, padding, pre_layer_norm):
    """Training mode with dropout off: loss, logits (at real positions) and every parameter's gradient."""
    labels = ["start", "end"] if name == "BertForQuestionAnswering" else ["a", "b", "c"]
    config = _config(tiny_config, pre_layer_norm).with_labels(labels)
    torch.manual_seed(0)
    model = HEADS[name](config).train()
    inputs = _task_inputs(name, LENGTHS[padding])
    outputs, grads = [], []
    for unpad in (False, True):
        set_unpad(model, unpad)
        model.zero_grad(set_to_none=True)
        out = model(**inputs)
        out.loss.backward()
        outputs.append(out)
        grads.append({n: p.grad for n, p in model.named_parameters() if p.grad is not None})
    torch.testing.assert_close(outputs[0].loss, outputs[1].loss, atol=1e-5, rtol=1e-5)
    mask = inputs["attention_mask"].reshape(-1, T)
    for a, b in zip(_logits(name, outputs[0]), _logits(name, outputs[1]), strict=True):
        if name in ("BertForTokenClassification", "BertForQuestionAnswering"):
            _close_real(a, b, mask)  # per token: equal at real positions
            if name == "BertForQuestionAnswering":  # padding is never an answer, on both paths
                assert (a[mask == 0] == torch.finfo(a.dtype).min).all() and (b[mask == 0] == a[mask == 0]).all()
        else:
            torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5)
    assert grads[0].keys() == grads[1].keys() and len(grads[0]) == len(list(model.parameters()))
    for key, grad in grads[0].items():
        torch.testing.assert_close(grads[1][key], grad, atol=1e-5, rtol=1e-4, msg=key)


def test_real_checkpoint_matches_transformers_on_a_padded_pair_batch(minilm_dir):
    tok = transformers.BertTokenizerFast.from_pretrained(minilm_dir)
    pairs = [("The bank raised interest rates.", "Markets fell sharply."),
             ("Hello!", None),
             ("We sat on the river bank and watched the boats go by all afternoon.", "It was warm.")]
    batch = tok.pad([tok(a, b) if b else tok(a) for a, b in pairs], return_tensors="pt")
    assert (batch["attention_mask"] == 0).any() and (batch["token_type_ids"] == 1).any()
    ours = set_unpad(BertModel.from_pretrained(minilm_dir), True)
    ref = transformers.BertModel.from_pretrained(minilm_dir, attn_implementation="sdpa").eval()
    with torch.no_grad():
        a = ours(input_ids=batch["input_ids"], token_type_ids=batch["token_type_ids"], attention_mask=batch["attention_mask"], output_hidden_states=True)
        b = ref(**batch, output_hidden_states=True)
    assert len(a.hidden_states) == len(b.hidden_states) == 7
    for mine, theirs in zip(a.hidden_states, b.hidden_states):
        _close_real(mine, theirs, batch["attention_mask"])
    torch.testing.assert_close(a.pooler_output, b.pooler_output, atol=1e-5, rtol=1e-5)


def test_automatic_choice_by_padding_fraction(tiny_config):
    full = torch.ones(4, 100, dtype=torch.long)
    assert plan_unpadding(full, None) is None  # no padding: the padded path, unmasked
    light, heavy = full.clone(), full.clone()
    light[0, 100 - int(UNPAD_MIN_PADDING * 400) + 1 :] = 0  # just under the threshold
    heavy[0, 100 - int(UNPAD_MIN_PADDING * 400) - 1 :] = 0  # just over it
    assert plan_unpadding(light, None) is None and plan_unpadding(light, False) is None
    assert isinstance(plan_unpadding(light, True), Unpadding)
    assert isinstance(plan_unpadding(heavy, None), Unpadding) and plan_unpadding(heavy, False) is None
    assert plan_unpadding(None, True) is None
    assert plan_unpadding(torch.ones(2, 5, 5), True) is None  # 3-D (e.g. causal) masks run padded
    # the model follows the choice: unpadded outputs are zero at padding, padded ones are not
    torch.manual_seed(0)
    model = BertModel(tiny_config).eval()
    ids, types, mask = _batch(LENGTHS["heavy"])
    with torch.no_grad():
        auto = model(input_ids=ids, token_type_ids=types, attention_mask=mask).last_hidden_state
        forced = model(input_ids=ids, token_type_ids=types, attention_mask=mask, unpad=False).last_hidden_state
    assert auto[mask == 0].abs().max() == 0 and forced[mask == 0].abs().max() > 0
    # output_attentions falls back to the padded path
    with torch.no_grad():
        out = model(input_ids=ids, token_type_ids=types, attention_mask=mask, output_attentions=True, unpad=True)
    assert len(out.attentions) == 2 and out.last_hidden_state[mask == 0].abs().max() > 0


def test_unpadding_indices_and_round_trip():
    mask = torch.tensor([[1, 1, 1, 0], [1, 0, 0, 0], [1, 1, 1, 1]])
    unpadding = Unpadding.from_attention_mask(mask)
    assert unpadding.indices.tolist() == [0, 1, 2, 4, 8, 9, 10, 11] and unpadding.num_tokens == 8
    assert unpadding.batch_index.tolist() == [0, 0, 0, 1, 2, 2, 2, 2]
    assert unpadding.position.tolist() == [0, 1, 2, 0, 0, 1, 2, 3]
    x = torch.randn(3, 4, 6)
    packed = unpadding.pack(x)
    assert packed.shape == (8, 6)
    back = unpadding.pad(packed)
    torch.testing.assert_close(back[mask.bool()], x[mask.bool()], rtol=0, atol=0)
    assert back[mask == 0].abs().max() == 0
    heads = unpadding.pad_heads(packed, 2)  # (B, heads, T, d_head)
    assert heads.shape == (3, 2, 4, 3)
    torch.testing.assert_close(unpadding.pack_heads(heads), packed, rtol=0, atol=0)
    assert Unpadding.from_attention_mask(torch.ones(2, 3)).key_mask is None


def test_dropout_applies_to_real_tokens_in_training(tiny_config):
    """With dropout on, the unpadded path trains: outputs differ from eval mode at real
    positions, each call draws a new mask, and a seed reproduces it."""
    torch.manual_seed(0)
    model = set_unpad(BertModel(_config(tiny_config, False, dropout=0.1)), True).train()
    ids, types, mask = _batch(LENGTHS["heavy"])
    torch.manual_seed(5)
    first = model(input_ids=ids, token_type_ids=types, attention_mask=mask).last_hidden_state
    second = model(input_ids=ids, token_type_ids=types, attention_mask=mask).last_hidden_state
    torch.manual_seed(5)
    again = model(input_ids=ids, token_type_ids=types, attention_mask=mask).last_hidden_state
    with torch.no_grad():
        plain = model.eval()(input_ids=ids, token_type_ids=types, attention_mask=mask).last_hidden_state
    real = mask.bool()
    assert not torch.allclose(first[real], second[real]) and not torch.allclose(first[real], plain[real])
    torch.testing.assert_close(first, again, rtol=0, atol=0)
    first.sum().backward()
    assert all(p.grad is not None and torch.isfinite(p.grad).all() for p in model.parameters()
               if p.requires_grad and p is not model.pooler.dense.weight and p is not model.pooler.dense.bias)


def test_layer_keeps_the_padded_signature(tiny_config):
    """`BertLayer(hidden_states, attention_mask, output_attentions)` on (B, T, H) still works,
    and its packed variant equals it at the real rows."""
    torch.manual_seed(0)
    model = BertModel(tiny_config).eval()
    layer = model.encoder.layer[0]
    ids, types, mask = _batch(LENGTHS["heavy"])
    unpadding = Unpadding.from_attention_mask(mask)
    with torch.no_grad():
        hidden = model.embeddings(ids, types)  # (B, T, H)
        padded, probs = layer(hidden, mask.bool()[:, None, None, :], False)
        packed, _ = layer(unpadding.pack(hidden), unpadding.key_mask, False, unpadding=unpadding)
    assert padded.shape == (B, T, 32) and probs is None and packed.shape == (unpadding.num_tokens, 32)
    torch.testing.assert_close(packed, unpadding.pack(padded), atol=1e-6, rtol=1e-6)


def test_embed_and_task_evaluation_run_unpadded(minilm_dir, tiny_config, monkeypatch):
    """`bertkit.embed` and the task programs' evaluation (`run_features`, used by fine-tuning,
    `evaluate` and `predict`) reach the unpadded path on padded batches, with the padded
    path's results."""
    import bertkit
    from bertkit import Tokenizer
    from bertkit.data.collate import collate
    from bertkit.tasks.programs import run_features

    calls = []
    original = BertModel._forward_unpadded

    def counting(self, *args, **kwargs):
        calls.append(args[0].shape)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(BertModel, "_forward_unpadded", counting)
    texts = ["Short.", "A somewhat longer sentence about the bank of the river.", "Mid length text here."]
    model, tokenizer = BertModel.from_pretrained(minilm_dir), Tokenizer.from_pretrained(minilm_dir)
    auto = bertkit.embed(texts, model=model, tokenizer=tokenizer, batch_size=3)
    assert len(calls) == 1
    padded = bertkit.embed(texts, model=set_unpad(model, False), tokenizer=tokenizer, batch_size=3)
    assert len(calls) == 1
    torch.testing.assert_close(torch.from_numpy(auto), torch.from_numpy(padded), atol=1e-5, rtol=1e-5)

    torch.manual_seed(0)
    classifier = BertForSequenceClassification(tiny_config.with_labels(["a", "b"])).eval()
    features = [{"input_ids": ids, "token_type_ids": [0] * len(ids)}
                for ids in ([2, 7, 8, 3], [2, 9, 3], [2, 5, 6, 7, 8, 9, 3])]  # padded to 8: 42% padding
    with torch.no_grad():
        outputs = run_features(classifier, features, lambda rows: collate(rows, 0), batch_size=3)
        reference = run_features(set_unpad(classifier, False), features, lambda rows: collate(rows, 0), batch_size=3)
    assert len(calls) == 2
    for a, b in zip(outputs, reference, strict=True):
        assert a.shape == (2,)
        torch.testing.assert_close(torch.from_numpy(a), torch.from_numpy(b), atol=1e-5, rtol=1e-5)
