"""Task heads against transformers: logits and losses of a seeded random tiny model with
copied weights, checkpoints in both directions, label-map config round trip, and the
real MiniLM checkpoint (no heads) loading into each class with the head reported."""

from __future__ import annotations

import json

import pytest
import torch
import transformers

from bertkit import (
    BertConfig,
    BertForMultipleChoice,
    BertForQuestionAnswering,
    BertForSequenceClassification,
    BertForTokenClassification,
)

CLASSES = {
    "BertForSequenceClassification": BertForSequenceClassification,
    "BertForTokenClassification": BertForTokenClassification,
    "BertForQuestionAnswering": BertForQuestionAnswering,
    "BertForMultipleChoice": BertForMultipleChoice,
}
B, C, T = 3, 4, 10


def _ids(*shape, seed=0):
    gen = torch.Generator().manual_seed(seed)
    ids = torch.randint(5, 120, shape, generator=gen)
    types = torch.zeros_like(ids)
    types[..., T // 2:] = 1
    mask = torch.ones_like(ids)
    mask[..., -3:] = 0  # some padding in every row
    mask[0, ...] = 1  # and a row without
    return ids, types, mask


def _batch(name: str, num_labels: int):
    """Inputs + labels (bertkit keyword names; transformers uses the same)."""
    gen = torch.Generator().manual_seed(1)
    if name == "BertForMultipleChoice":
        ids, types, mask = _ids(B, C, T)
        return dict(input_ids=ids, token_type_ids=types, attention_mask=mask, labels=torch.tensor([0, 3, 1]))
    ids, types, mask = _ids(B, T)
    inputs = dict(input_ids=ids, token_type_ids=types, attention_mask=mask)
    if name == "BertForSequenceClassification":
        inputs["labels"] = torch.randint(0, num_labels, (B,), generator=gen)
    elif name == "BertForTokenClassification":
        labels = torch.randint(0, num_labels, (B, T), generator=gen)
        labels[:, 0] = -100
        labels[mask == 0] = -100
        inputs["labels"] = labels
    else:  # QA: one position out of range (clamped and ignored, as in transformers)
        inputs["start_positions"] = torch.tensor([1, 4, 50])
        inputs["end_positions"] = torch.tensor([2, 6, 7])
    return inputs


def _hf_config(cfg: BertConfig) -> transformers.BertConfig:
    return transformers.BertConfig(**cfg.to_dict())


def _outputs(out) -> list[torch.Tensor]:
    if hasattr(out, "start_logits"):
        return [out.loss, out.start_logits, out.end_logits]
    return [out.loss, out.logits]


def _assert_same(ours, theirs, inputs=None):
    """Equal outputs. Given the inputs: per-token logits only at real positions (at padding
    bertkit's unpadded encoder path gives zeros), and QA against transformers' logits with
    padding masked to finfo.min (bertkit's rule: padding is never an answer)."""
    expected = _outputs(theirs)
    mask = None if inputs is None else inputs["attention_mask"]
    if mask is not None and hasattr(theirs, "start_logits"):
        width = mask.shape[1]
        starts, ends = (x.masked_fill(mask == 0, torch.finfo(x.dtype).min) for x in expected[1:])
        loss = sum(torch.nn.functional.cross_entropy(logits, positions.clamp(0, width), ignore_index=width)
                   for logits, positions in ((starts, inputs["start_positions"]), (ends, inputs["end_positions"]))) / 2
        expected = [loss, starts, ends]
    for a, b in zip(_outputs(ours), expected, strict=True):
        if mask is not None and a.dim() >= 2 and a.shape[:2] == mask.shape:  # per token: (B, T, ...)
            a, b = a[mask.bool()], b[mask.bool()]
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5)


LABELS = {"BertForQuestionAnswering": ["start", "end"]}  # QA's two outputs


@pytest.fixture()
def labelled_config(tiny_config, name):
    return tiny_config.with_labels(LABELS.get(name, ["neg", "neu", "pos"]))


@pytest.mark.parametrize("name", CLASSES)
def test_transformers_checkpoint_loads_and_matches(tmp_path, labelled_config, name):
    torch.manual_seed(0)
    ref = getattr(transformers, name)(_hf_config(labelled_config)).eval()
    ref.save_pretrained(tmp_path)
    ours, info = CLASSES[name].from_pretrained(tmp_path, output_loading_info=True)
    assert info == {"missing_keys": [], "unexpected_keys": []}
    assert ours.config.id2label == dict(enumerate(LABELS.get(name, ["neg", "neu", "pos"])))
    inputs = _batch(name, labelled_config.num_labels)
    with torch.no_grad():
        _assert_same(ours(**inputs), ref(**inputs), inputs)


@pytest.mark.parametrize("name", CLASSES)
def test_bertkit_checkpoint_loads_in_transformers_and_back(tmp_path, labelled_config, name):
    torch.manual_seed(1)
    ours = CLASSES[name](labelled_config).eval()
    ours.save_pretrained(tmp_path)
    assert json.loads((tmp_path / "config.json").read_text())["architectures"] == [name]
    ref = getattr(transformers, name).from_pretrained(tmp_path).eval()
    assert ref.config.id2label == labelled_config.id2label and ref.config.label2id == labelled_config.label2id
    assert set(ref.state_dict()) - {"bert.embeddings.position_ids"} == set(ours.state_dict())
    inputs = _batch(name, labelled_config.num_labels)
    with torch.no_grad():
        _assert_same(ours(**inputs), ref(**inputs), inputs)
    (tmp_path / "hf").mkdir()
    ref.save_pretrained(tmp_path / "hf")
    again = CLASSES[name].from_pretrained(tmp_path / "hf")
    for key, value in ours.state_dict().items():
        torch.testing.assert_close(again.state_dict()[key], value, atol=0, rtol=0)
    assert again.config.id2label == ours.config.id2label


@pytest.mark.parametrize("num_labels,problem_type,labels", [
    (1, None, torch.tensor([0.5, 4.2, 2.0])),  # num_labels 1 -> regression (MSE)
    (3, None, torch.tensor([[1.0, 0.0, 1.0], [0.0, 0.0, 1.0], [0.0, 1.0, 0.0]])),  # float -> multi-label BCE
    (3, "single_label_classification", torch.tensor([2, -100, 0])),  # -100 ignored
    (2, "regression", torch.tensor([[0.1, 0.9], [0.3, 0.2], [1.0, 0.0]])),  # multi-output regression
])
def test_sequence_classification_loss_rules(tmp_path, tiny_config, num_labels, problem_type, labels):
    cfg = BertConfig.from_dict({**tiny_config.to_dict(), "num_labels": num_labels, "problem_type": problem_type})
    torch.manual_seed(2)
    ref = transformers.BertForSequenceClassification(_hf_config(cfg)).eval()
    ref.save_pretrained(tmp_path)
    ours = BertForSequenceClassification.from_pretrained(tmp_path)
    ids, types, mask = _ids(B, T)
    with torch.no_grad():
        a = ours(input_ids=ids, token_type_ids=types, attention_mask=mask, labels=labels)
        b = ref(input_ids=ids, token_type_ids=types, attention_mask=mask, labels=labels)
    _assert_same(a, b)
    assert ours.config.problem_type == problem_type  # the forward pass does not rewrite the config


def test_classifier_dropout_is_honoured_and_round_trips(tmp_path, tiny_config):
    cfg = BertConfig.from_dict({**tiny_config.to_dict(), "classifier_dropout": 0.3, "hidden_dropout_prob": 0.1})
    for cls in (BertForSequenceClassification, BertForTokenClassification, BertForMultipleChoice):
        assert cls(cfg).dropout.p == 0.3
    assert BertForSequenceClassification(tiny_config).dropout.p == tiny_config.hidden_dropout_prob
    cfg.save_pretrained(tmp_path)
    assert transformers.BertConfig.from_pretrained(tmp_path).classifier_dropout == 0.3
    assert BertConfig.from_pretrained(tmp_path).classifier_dropout == 0.3


def test_label_map_config_round_trip(tmp_path, tiny_config):
    assert tiny_config.num_labels == 2 and tiny_config.id2label is None and not tiny_config.has_label_names
    assert "id2label" not in tiny_config.to_dict()
    cfg = tiny_config.with_labels(["B-PER", "I-PER", "O"])
    assert cfg.num_labels == 3 and cfg.label2id == {"B-PER": 0, "I-PER": 1, "O": 2} and cfg.has_label_names
    cfg.save_pretrained(tmp_path / "ours")
    hf = transformers.BertConfig.from_pretrained(tmp_path / "ours")
    assert hf.num_labels == 3 and hf.id2label == cfg.id2label and hf.label2id == cfg.label2id
    transformers.BertConfig(hidden_size=32, num_attention_heads=4, num_labels=5).save_pretrained(tmp_path / "hf")
    mine = BertConfig.from_pretrained(tmp_path / "hf")
    assert mine.num_labels == 5 and mine.id2label[4] == "LABEL_4" and not mine.has_label_names
    assert BertConfig.from_preset("tiny", num_labels=1).num_labels == 1  # old-style `num_labels` key
    mine.num_labels = 2
    assert mine.label2id == {"LABEL_0": 0, "LABEL_1": 1}


def test_bad_task_fields_name_the_field(tiny_config):
    from bertkit.errors import ConfigError

    with pytest.raises(ConfigError, match="num_labels 2"):
        BertForQuestionAnswering(tiny_config.with_labels(["a", "b", "c"]))
    with pytest.raises(ConfigError, match="problem_type"):
        BertConfig.from_dict({**tiny_config.to_dict(), "problem_type": "ranking"})
    with pytest.raises(ConfigError, match="id2label"):
        BertConfig.from_dict({**tiny_config.to_dict(), "id2label": {"0": "a", "2": "b"}})
    with pytest.raises(ConfigError, match="classifier_dropout"):
        BertConfig.from_dict({**tiny_config.to_dict(), "classifier_dropout": 1.5})


@pytest.mark.parametrize("name,head,pooler", [
    ("BertForSequenceClassification", "classifier.", True),
    ("BertForTokenClassification", "classifier.", False),
    ("BertForQuestionAnswering", "qa_outputs.", False),
    ("BertForMultipleChoice", "classifier.", True),
])
def test_real_minilm_checkpoint_loads_with_a_fresh_head(minilm_dir, name, head, pooler):
    model, info = CLASSES[name].from_pretrained(minilm_dir, output_loading_info=True)
    assert info["missing_keys"] == [head + "bias", head + "weight"]
    # the token-level models have no pooler (as in transformers): MiniLM's is left unused
    assert info["unexpected_keys"] == ([] if pooler else ["bert.pooler.dense.bias", "bert.pooler.dense.weight"])
    backbone = transformers.BertModel.from_pretrained(minilm_dir).eval()
    ids = torch.tensor([[101, 7592, 2088, 102]])
    with torch.no_grad():
        torch.testing.assert_close(model.bert(ids).last_hidden_state, backbone(input_ids=ids).last_hidden_state,
                                   atol=1e-5, rtol=1e-5)
