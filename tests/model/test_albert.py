"""ALBERT against transformers (seeded random tiny models, both directions, padded batch),
cross-layer sharing (one tensor, gradients add up), the paper's parameter counts, config."""

from __future__ import annotations

import json

import pytest
import torch
import transformers

from bertkit.errors import BertkitError, ConfigError
from bertkit.model.albert.modeling import (
    AlbertConfig,
    AlbertForPreTraining,
    AlbertForSequenceClassification,
    AlbertModel,
)

TINY = dict(vocab_size=99, embedding_size=16, hidden_size=32, num_hidden_layers=3, num_attention_heads=2,
            intermediate_size=37, max_position_embeddings=64)


def batch(seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    input_ids = torch.randint(5, 99, (3, 11), generator=g)
    token_type_ids = torch.zeros_like(input_ids)
    token_type_ids[:, 6:] = 1
    attention_mask = torch.ones_like(input_ids)
    attention_mask[1, 7:] = 0  # padded rows
    attention_mask[2, 4:] = 0
    return input_ids, token_type_ids, attention_mask


def close(a: torch.Tensor, b: torch.Tensor) -> None:
    torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5)


def reference(cls, seed: int = 0, **values):
    torch.manual_seed(seed)
    return cls(transformers.AlbertConfig(**{**TINY, **values})).eval()


@pytest.mark.parametrize("groups, inner", [(1, 1), (3, 1), (2, 2)])
def test_transformers_checkpoint_loads_with_equal_outputs(tmp_path, groups, inner):
    ref = reference(transformers.AlbertForPreTraining, num_hidden_groups=groups, inner_group_num=inner)
    ref.save_pretrained(tmp_path)
    ours, info = AlbertForPreTraining.from_pretrained(tmp_path, output_loading_info=True)
    assert info == {"missing_keys": [], "unexpected_keys": []}
    ids, types, mask = batch()
    with torch.no_grad():
        theirs = ref(input_ids=ids, token_type_ids=types, attention_mask=mask, output_hidden_states=True)
        mine = ours(input_ids=ids, token_type_ids=types, attention_mask=mask, output_hidden_states=True)
    real = mask.bool()  # padding positions are zeros on bertkit's unpadded path
    close(mine.prediction_logits[real], theirs.prediction_logits[real])
    close(mine.sop_logits, theirs.sop_logits)
    assert len(mine.hidden_states) == len(theirs.hidden_states)
    for a, b in zip(mine.hidden_states, theirs.hidden_states, strict=True):
        close(a[real], b[real])
    # the bare encoder from the same checkpoint (prefix stripped), pooler included
    bare = AlbertModel.from_pretrained(tmp_path)
    with torch.no_grad():
        out = bare(input_ids=ids, token_type_ids=types, attention_mask=mask)
        hf = ref.albert(input_ids=ids, token_type_ids=types, attention_mask=mask)
    close(out.last_hidden_state[real], hf.last_hidden_state[real])
    close(out.pooler_output, hf.pooler_output)


@pytest.mark.parametrize("share", ["all", "none", "attention", "ffn"])
def test_bertkit_checkpoint_loads_in_transformers(tmp_path, share):
    torch.manual_seed(1)
    ours = AlbertForPreTraining(AlbertConfig(**TINY, share_layers=share)).eval()
    ours.save_pretrained(tmp_path)
    saved = json.loads((tmp_path / "config.json").read_text())
    assert saved["model_type"] == "albert" and saved["architectures"] == ["AlbertForPreTraining"]
    assert saved["num_hidden_groups"] == (1 if share == "all" else 3)
    assert saved.get("share_layers") == (share if share in ("attention", "ffn") else None)
    theirs = transformers.AlbertForPreTraining.from_pretrained(tmp_path).eval()
    ids, types, mask = batch(2)
    labels = torch.full_like(ids, -100)
    labels[0, 2], labels[1, 3], labels[2, 1] = 7, 8, 9
    order = torch.tensor([0, 1, 1])
    with torch.no_grad():
        ref = theirs(input_ids=ids, token_type_ids=types, attention_mask=mask, labels=labels, sentence_order_label=order)
        full = ours(input_ids=ids, token_type_ids=types, attention_mask=mask)
        sparse = ours(input_ids=ids, token_type_ids=types, attention_mask=mask, labels=labels, sentence_order_label=order)
    real = mask.bool()  # padding positions are zeros on bertkit's unpadded path
    close(full.prediction_logits[real], ref.prediction_logits[real])
    close(full.sop_logits, ref.sop_logits)
    close(sparse.loss, ref.loss)  # MLM (sparse logits, fused loss) + SOP
    rows, cols = sparse.masked_positions.unbind(1)
    close(sparse.prediction_logits, ref.prediction_logits[rows, cols])
    # and back: the same model again, sharing restored from config.json
    again = AlbertForPreTraining.from_pretrained(tmp_path)
    assert again.config.sharing == share
    assert again.num_parameters() == ours.num_parameters()


HEADS = {  # bertkit class name -> (transformers class, outputs compared, config values)
    "AlbertForSequenceClassification": (transformers.AlbertForSequenceClassification, ["logits"], {"num_labels": 3}),
    "AlbertForTokenClassification": (transformers.AlbertForTokenClassification, ["logits"], {"num_labels": 5}),
    "AlbertForQuestionAnswering": (transformers.AlbertForQuestionAnswering, ["start_logits", "end_logits"], {}),
    "AlbertForMultipleChoice": (transformers.AlbertForMultipleChoice, ["logits"], {}),
}


@pytest.mark.parametrize("name", list(HEADS))
def test_task_heads_match_transformers_both_ways(tmp_path, name):
    import bertkit.model.albert.modeling as albert

    hf_cls, fields, values = HEADS[name]
    ref = reference(hf_cls, **values)
    ref.save_pretrained(tmp_path / "hf")
    ours = getattr(albert, name).from_pretrained(tmp_path / "hf")
    assert ours.loading_info == {"missing_keys": [], "unexpected_keys": []}
    ids, types, mask = batch(3)
    if name == "AlbertForMultipleChoice":  # (B, C, T): two choices per example
        ids, types, mask = (torch.stack([x, x.flip(0)], dim=1) for x in (ids, types, mask))
    per_token = name in ("AlbertForQuestionAnswering", "AlbertForTokenClassification")
    real = mask.bool() if per_token else slice(None)
    ours.save_pretrained(tmp_path / "ours")
    back = hf_cls.from_pretrained(tmp_path / "ours").eval()
    with torch.no_grad():
        mine = ours(input_ids=ids, token_type_ids=types, attention_mask=mask)
        for model in (ref, back):
            theirs = model(input_ids=ids, token_type_ids=types, attention_mask=mask)
            for field in fields:  # per token: compare the real tokens (QA gives padding the lowest score,
                # and padding states are zeros on bertkit's unpadded path)
                close(mine[field][real], theirs[field][real])


def test_masked_lm_matches_transformers_both_ways(tmp_path):
    from bertkit.model.albert import AlbertForMaskedLM

    ref = reference(transformers.AlbertForMaskedLM)
    ref.save_pretrained(tmp_path / "hf")
    ours = AlbertForMaskedLM.from_pretrained(tmp_path / "hf")
    assert ours.loading_info == {"missing_keys": [], "unexpected_keys": []}
    ids, types, mask = batch(6)
    labels = torch.full_like(ids, -100)
    labels[0, 1], labels[2, 3] = 11, 12
    ours.save_pretrained(tmp_path / "ours")
    back = transformers.AlbertForMaskedLM.from_pretrained(tmp_path / "ours").eval()
    with torch.no_grad():
        full, sparse = ours(input_ids=ids, token_type_ids=types, attention_mask=mask), ours(input_ids=ids, token_type_ids=types, attention_mask=mask, labels=labels)
        for model in (ref, back):
            theirs = model(input_ids=ids, token_type_ids=types, attention_mask=mask, labels=labels)
            real = mask.bool()  # padding positions are zeros on bertkit's unpadded path
            close(full.logits[real], theirs.logits[real])
            close(sparse.loss, theirs.loss)
            close(sparse.logits, theirs.logits[labels != -100])


def test_sequence_classification_loss_matches_transformers(tmp_path):
    ref = reference(transformers.AlbertForSequenceClassification, num_labels=3)
    ref.save_pretrained(tmp_path)
    ours = AlbertForSequenceClassification.from_pretrained(tmp_path)
    ids, types, mask = batch(5)
    labels = torch.tensor([0, 2, 1])
    with torch.no_grad():
        close(ours(input_ids=ids, token_type_ids=types, attention_mask=mask, labels=labels).loss,
              ref(input_ids=ids, token_type_ids=types, attention_mask=mask, labels=labels).loss)


def test_head_model_from_a_pretraining_checkpoint_initialises_the_head(tmp_path):
    AlbertForPreTraining(AlbertConfig(**TINY)).save_pretrained(tmp_path)
    model = AlbertForSequenceClassification.from_pretrained(tmp_path)
    assert model.loading_info["missing_keys"] == ["classifier.bias", "classifier.weight"]
    assert "predictions.bias" in model.loading_info["unexpected_keys"]


@pytest.mark.parametrize("share, parts", [
    ("attention", ["attention.query.weight", "attention.dense.bias", "attention.LayerNorm.weight"]),
    ("ffn", ["ffn.weight", "ffn_output.bias", "full_layer_layer_norm.weight"]),
])
def test_partial_sharing_is_one_tensor_whose_gradient_sums_the_layers(share, parts):
    torch.manual_seed(3)
    shared = AlbertModel(AlbertConfig(**TINY, share_layers=share))
    unshared = AlbertModel(AlbertConfig(**TINY, share_layers="none"))
    unshared.load_state_dict(shared.state_dict())  # the shared weights as three equal copies
    layers = [g.albert_layers[0] for g in shared.encoder.albert_layer_groups]
    other = "ffn.weight" if share == "attention" else "attention.query.weight"
    for part in parts:
        tensors = {id(layer.get_parameter(part)) for layer in layers}
        assert len(tensors) == 1, part
    assert len({id(layer.get_parameter(other)) for layer in layers}) == 3  # the rest stays per layer
    ids, types, mask = batch(4)
    for model in (shared, unshared):
        model(input_ids=ids, token_type_ids=types, attention_mask=mask).last_hidden_state.pow(2).sum().backward()
    for part in parts:
        per_layer = [g.albert_layers[0].get_parameter(part).grad for g in unshared.encoder.albert_layer_groups]
        close(layers[0].get_parameter(part).grad, sum(per_layer))
    # the optimizer sees each shared tensor once
    names = [n for n, _ in shared.named_parameters()]
    assert sum(n.endswith(parts[0]) for n in names) == 1


def test_all_sharing_applies_one_layer_L_times():
    model = AlbertModel(AlbertConfig(**TINY, share_layers="all"))
    assert len(model.encoder.albert_layer_groups) == 1
    unshared = AlbertModel(AlbertConfig(**TINY, share_layers="none"))
    per_layer = sum(p.numel() for p in unshared.encoder.albert_layer_groups[0].parameters())
    assert unshared.num_parameters() - model.num_parameters() == 2 * per_layer


def test_untied_copies_are_refused_for_a_partially_shared_config(tmp_path):
    model = AlbertForPreTraining(AlbertConfig(**TINY, share_layers="attention"))
    model.save_pretrained(tmp_path)
    hf = transformers.AlbertForPreTraining.from_pretrained(tmp_path)  # loads three unshared copies
    with torch.no_grad():
        hf.albert.encoder.albert_layer_groups[2].albert_layers[0].attention.query.weight.add_(0.1)
    hf.save_pretrained(tmp_path / "tuned")
    with pytest.raises(BertkitError, match=r"model\.safetensors: config\.json says share_layers 'attention'.*differ"):
        AlbertForPreTraining.from_pretrained(tmp_path / "tuned")


# ALBERT paper (Lan et al. 2019) Table 4, ALBERT-base (V=30000, L=12, H=768) with E = 128:
# all-shared 12M, shared-FFN 38M, shared-attention 64M, not-shared 89M; BERT-base 108M (Table 1).
@pytest.mark.parametrize("share, millions", [("all", 12), ("ffn", 38), ("attention", 64), ("none", 89)])
def test_albert_base_parameter_count_matches_the_paper(share, millions):
    config = AlbertConfig.from_preset("base", vocab_size=30000, embedding_size=128, share_layers=share)
    with torch.device("meta"):  # count only: no memory, no init work
        model = AlbertModel(config)
    count = model.num_parameters()
    assert abs(count / 1e6 - millions) < 0.8, count


def test_config_round_trip_and_hf_defaults(tmp_path):
    hf = transformers.AlbertConfig()
    ours = AlbertConfig()
    for name in ("vocab_size", "embedding_size", "hidden_size", "num_attention_heads", "intermediate_size",
                 "num_hidden_groups", "inner_group_num", "hidden_act", "hidden_dropout_prob", "classifier_dropout_prob"):
        assert getattr(ours, name) == getattr(hf, name), name
    transformers.AlbertConfig(**TINY, num_hidden_groups=3).save_pretrained(tmp_path)
    loaded = AlbertConfig.from_pretrained(tmp_path)
    assert loaded.num_hidden_groups == 3 and loaded.sharing == "none" and loaded.embedding_size == 16
    assert AlbertConfig.from_dict(loaded.to_dict()) == loaded


@pytest.mark.parametrize("values, message", [
    (dict(share_layers="some"), "share_layers' must be one of all, none, attention, ffn"),
    (dict(share_layers="attention", num_hidden_groups=1), "needs num_hidden_groups 3"),
    (dict(num_hidden_groups=4), "must not exceed num_hidden_layers"),
    (dict(embedding_size=0), "'embedding_size' must be a positive integer"),
    (dict(pre_layer_norm=True), "not supported by ALBERT"),
    (dict(model_type="bert"), "model_type' must be 'albert'"),
])
def test_config_errors_name_the_field(values, message):
    with pytest.raises(ConfigError, match=message):
        AlbertConfig.from_dict({**TINY, **values})


def test_family_registry_resolves_albert_checkpoints(tmp_path):
    from bertkit.model.families import family_of, load_config, task_model_class

    AlbertForPreTraining(AlbertConfig(**TINY, share_layers="ffn")).save_pretrained(tmp_path)
    assert family_of(tmp_path).backbone_class() is AlbertModel
    config = load_config(tmp_path)
    assert type(config) is AlbertConfig and config.sharing == "ffn"
    assert task_model_class(config, "classification") is AlbertForSequenceClassification
    import bertkit.model.albert.modeling as albert

    for task, name in [("tagging", "AlbertForTokenClassification"), ("qa", "AlbertForQuestionAnswering"),
                       ("multiple_choice", "AlbertForMultipleChoice")]:
        assert task_model_class(config, task) is getattr(albert, name)
