"""GPT-2 and GPT-1 against transformers' classes on random tiny models, weights copied both
ways through save_pretrained / from_pretrained folders: logits, the loss with labels,
hidden states, left- and right-padded batches, the KV cache, every class."""

from __future__ import annotations

import json

import pytest
import torch

transformers = pytest.importorskip("transformers")

import bertkit  # noqa: E402
from bertkit.errors import BertkitError, ConfigError  # noqa: E402

VOCAB, PAD = 64, 0
TOL = 1e-5
SIZES = dict(vocab_size=VOCAB, n_positions=32, n_embd=32, n_layer=2, n_head=4, resid_pdrop=0.0, embd_pdrop=0.0,
             attn_pdrop=0.0, summary_first_dropout=0.0)
VARIANTS = {
    "gpt2": (transformers.GPT2Config, dict(bos_token_id=1, eos_token_id=2)),
    "openai-gpt": (transformers.OpenAIGPTConfig, {}),
}
CLASSES = {  # ours, transformers' (by name)
    "gpt2": ["GPT2Model", "GPT2LMHeadModel", "GPT2DoubleHeadsModel", "GPT2ForSequenceClassification"],
    "openai-gpt": ["OpenAIGPTModel", "OpenAIGPTLMHeadModel", "OpenAIGPTDoubleHeadsModel",
                   "OpenAIGPTForSequenceClassification"],
}
PAIRS = [(variant, name) for variant, names in CLASSES.items() for name in names]


def _reference(variant: str, name: str, seed: int = 0, **overrides):
    config_class, extra = VARIANTS[variant]
    torch.manual_seed(seed)
    config = config_class(**{**SIZES, **extra, "pad_token_id": PAD, **overrides})
    model = getattr(transformers, name)(config).eval()
    with torch.no_grad():  # larger than the init, so every part of the model shows in the outputs
        for parameter in model.parameters():
            parameter.add_(torch.randn_like(parameter) * 0.2)
    return model


def _pair(variant, name, tmp_path, direction):
    """(transformers model, bertkit model) with the same weights, copied `direction`."""
    reference = _reference(variant, name)
    if direction == "hf->bertkit":
        reference.save_pretrained(tmp_path / "hf")
        ours = getattr(bertkit, name).from_pretrained(tmp_path / "hf").eval()
    else:
        reference.save_pretrained(tmp_path / "hf")
        start = getattr(bertkit, name).from_pretrained(tmp_path / "hf")
        torch.manual_seed(1)
        ours = getattr(bertkit, name)(start.config).eval()  # fresh weights, then the reference's through bertkit's save
        ours.load_state_dict(start.state_dict())
        ours.save_pretrained(tmp_path / "ours")
        reference = getattr(transformers, name).from_pretrained(tmp_path / "ours").eval()
    return reference, ours


def _batch(shape=(3, 10), padding=None, seed=0):
    generator = torch.Generator().manual_seed(seed)
    ids = torch.randint(3, VOCAB, shape, generator=generator)
    mask = torch.ones(shape, dtype=torch.long)
    if padding is not None:
        lengths = torch.tensor([shape[-1], shape[-1] - 4, shape[-1] - 7])[: shape[0]]
        positions = torch.arange(shape[-1])
        real = positions[None] < lengths[:, None] if padding == "right" else \
            positions[None] >= (shape[-1] - lengths)[:, None]
        mask = real.long()
        ids = ids.masked_fill(~real, PAD)
    return ids, mask


def _close(a, b, where=None):
    if where is not None:
        a, b = a[where], b[where]
    assert (a - b).abs().max().item() <= TOL, (a - b).abs().max().item()


def _call(model, name, ids, mask, **kwargs):
    if "DoubleHeads" in name:
        # one question, 3 choices; no mask (transformers' GPT-1 cannot take a (B, C, T) one)
        ids, mask = ids.view(1, *ids.shape), None
        kwargs.setdefault("mc_token_ids", torch.tensor([[9, 5, 2]]))
    with torch.no_grad():
        return model(input_ids=ids, attention_mask=mask, output_hidden_states=True, **kwargs)


@pytest.mark.parametrize("direction", ["hf->bertkit", "bertkit->hf"])
@pytest.mark.parametrize("variant,name", PAIRS)
def test_outputs_equal_transformers(variant, name, direction, tmp_path):
    reference, ours = _pair(variant, name, tmp_path, direction)
    ids, mask = _batch()
    kwargs = {}
    if "LMHead" in name or "DoubleHeads" in name:
        kwargs["labels"] = ids.view(1, *ids.shape) if "DoubleHeads" in name else ids
    if "DoubleHeads" in name:
        kwargs["mc_labels"] = torch.tensor([1])
    if "Sequence" in name:
        kwargs["labels"] = torch.tensor([0, 1, 1])
    expected, got = _call(reference, name, ids, mask, **kwargs), _call(ours, name, ids, mask, **kwargs)
    main = "last_hidden_state" if name.endswith("Model") and "Heads" not in name and "LMHead" not in name else "logits"
    _close(expected[main], got[main])
    if "DoubleHeads" in name:
        _close(expected.mc_logits, got.mc_logits)
        _close(expected.mc_loss, got.mc_loss)
    if "loss" in kwargs or "labels" in kwargs:
        _close(expected.loss, got.loss)
    assert len(expected.hidden_states) == len(got.hidden_states) == SIZES["n_layer"] + 1
    for a, b in zip(expected.hidden_states, got.hidden_states):
        _close(a.reshape(b.shape), b)


@pytest.mark.parametrize("padding", ["left", "right"])
@pytest.mark.parametrize("variant,name", [p for p in PAIRS if "DoubleHeads" not in p[1]])
def test_padded_batches_equal_transformers_at_real_tokens(variant, name, padding, tmp_path):
    reference, ours = _pair(variant, name, tmp_path, "hf->bertkit")
    ids, mask = _batch(padding=padding)
    position_ids = (mask.cumsum(-1) - 1).clamp(min=0)  # left padding: positions from the first real token
    kwargs = dict(position_ids=position_ids)
    if "Sequence" in name:
        kwargs["labels"] = torch.tensor([0, 1, 0])
    expected, got = _call(reference, name, ids, mask, **kwargs), _call(ours, name, ids, mask, **kwargs)
    if "Sequence" in name:  # the score at each row's last real token (found through pad_token_id)
        _close(expected.logits, got.logits)
        _close(expected.loss, got.loss)
        return
    main = "logits" if "LMHead" in name else "last_hidden_state"
    _close(expected[main], got[main], mask.bool())
    assert torch.isfinite(got[main]).all()


@pytest.mark.parametrize("variant", ["gpt2", "openai-gpt"])
def test_double_heads_on_right_padded_choices_equal_transformers(variant, tmp_path):
    """GPT-1's multiple choice as bertkit fine-tunes it: (B, C, T) right-padded choices, the score
    read at each choice's last real token (mc_token_ids), the LM loss over real tokens only.
    transformers' GPT-2 takes the (B, C, T) mask; its GPT-1 takes none, which changes nothing at
    real tokens of a causal model with right padding."""
    name = {"gpt2": "GPT2DoubleHeadsModel", "openai-gpt": "OpenAIGPTDoubleHeadsModel"}[variant]
    reference, ours = _pair(variant, name, tmp_path, "hf->bertkit")
    (first, first_mask), (second, second_mask) = _batch(padding="right"), _batch(padding="right", seed=1)
    ids, mask = torch.stack([first, second]), torch.stack([first_mask, second_mask.flip(0)])  # (2, 3, 10)
    ids = ids.masked_fill(mask == 0, PAD)
    mc_token_ids = mask.sum(-1) - 1  # (B, C)
    labels = ids.masked_fill(mask == 0, -100)
    kwargs = dict(mc_token_ids=mc_token_ids, labels=labels, mc_labels=torch.tensor([2, 0]))
    with torch.no_grad():
        expected = reference(input_ids=ids, attention_mask=mask if variant == "gpt2" else None, **kwargs)
        got = ours(input_ids=ids, attention_mask=mask, **kwargs)
    _close(expected.mc_logits, got.mc_logits)
    _close(expected.mc_loss, got.mc_loss)
    _close(expected.loss, got.loss)
    _close(expected.logits, got.logits, mask.bool())


@pytest.mark.parametrize("padding", [None, "left"])
@pytest.mark.parametrize("variant", ["gpt2", "openai-gpt"])
def test_kv_cache_incremental_equals_full(variant, padding, tmp_path):
    name = CLASSES[variant][1]
    reference, ours = _pair(variant, name, tmp_path, "hf->bertkit")
    ids, mask = _batch(padding=padding)
    position_ids = (mask.cumsum(-1) - 1).clamp(min=0)
    with torch.no_grad():
        full = ours(input_ids=ids, attention_mask=mask, position_ids=position_ids).logits
        step = ours(input_ids=ids[:, :6], attention_mask=mask[:, :6], position_ids=position_ids[:, :6], use_cache=True)
        pieces, past = [step.logits], step.past_key_values
        for t in range(6, 10, 2):  # two tokens at a time, then the cache grows
            step = ours(input_ids=ids[:, t:t + 2], attention_mask=mask[:, :t + 2], position_ids=position_ids[:, t:t + 2],
                        past_key_values=past, use_cache=True)
            pieces.append(step.logits)
            past = step.past_key_values
    assert len(past) == SIZES["n_layer"] and past[0][0].shape == (3, 4, 10, 8)
    _close(full, torch.cat(pieces, dim=1), mask.bool())
    assert step.cache is step.past_key_values  # transformers 5's name
    if variant == "gpt2":  # transformers' GPT-2 cache gives the same logits
        with torch.no_grad():
            expected = reference(input_ids=ids, attention_mask=mask, position_ids=position_ids).logits
        _close(expected, full, mask.bool())


def test_positional_arguments_follow_transformers_order(tmp_path):
    reference, ours = _pair("gpt2", "GPT2LMHeadModel", tmp_path, "hf->bertkit")
    ids, mask = _batch(padding="right")
    with torch.no_grad():
        first = ours(ids, None, mask)  # (input_ids, past_key_values, attention_mask)
        cached = ours(ids[:, :4], None, mask[:, :4], use_cache=True)
        second = ours(ids[:, 4:], cached.past_key_values, mask)
    _close(first.logits[:, 4:], second.logits, mask[:, 4:].bool())
    _, gpt1 = _pair("openai-gpt", "OpenAIGPTLMHeadModel", tmp_path / "gpt1", "hf->bertkit")
    with torch.no_grad():
        _close(gpt1(ids, mask).logits, gpt1(input_ids=ids, attention_mask=mask).logits)  # (input_ids, attention_mask)


def test_token_type_ids_are_looked_up_in_the_token_table(tmp_path):
    for variant in ("gpt2", "openai-gpt"):
        name = CLASSES[variant][0]
        reference, ours = _pair(variant, name, tmp_path / variant, "hf->bertkit")
        ids, mask = _batch()
        types = torch.randint(0, VOCAB, ids.shape, generator=torch.Generator().manual_seed(3))
        with torch.no_grad():
            _close(reference(input_ids=ids, token_type_ids=types).last_hidden_state,
                   ours(input_ids=ids, token_type_ids=types).last_hidden_state)


def test_saved_files_are_transformers_layout(tmp_path):
    """Conv1D weights stored (in, out), no lm_head copy, config fields by transformers' names."""
    from safetensors.torch import load_file

    config = bertkit.GPT2Config(**{**SIZES, "n_inner": 48})
    bertkit.GPT2LMHeadModel(config).save_pretrained(tmp_path)
    state = load_file(tmp_path / "model.safetensors")
    assert state["transformer.h.0.attn.c_attn.weight"].shape == (32, 96)
    assert state["transformer.h.0.mlp.c_fc.weight"].shape == (32, 48)
    assert state["transformer.h.1.mlp.c_proj.weight"].shape == (48, 32)
    assert "lm_head.weight" not in state and "transformer.ln_f.weight" in state
    values = json.loads((tmp_path / "config.json").read_text())
    assert values["model_type"] == "gpt2" and values["n_embd"] == 32 and values["architectures"] == ["GPT2LMHeadModel"]
    reloaded = bertkit.GPT2LMHeadModel.from_pretrained(tmp_path)
    assert reloaded.config.n_inner == 48


def test_gpt2_init_scales_the_residual_projections():
    config = bertkit.GPT2Config(vocab_size=VOCAB, n_embd=256, n_layer=8, n_head=4, n_positions=32)
    torch.manual_seed(0)
    model = bertkit.GPT2Model(config)
    block = model.h[3]
    assert abs(block.attn.c_attn.weight.std().item() - 0.02) < 0.001
    for projection in (block.attn.c_proj, block.mlp.c_proj):
        assert abs(projection.weight.std().item() - 0.02 / 16 ** 0.5) < 0.0005  # 0.02 / sqrt(2 L)
    gpt1 = bertkit.OpenAIGPTModel(bertkit.OpenAIGPTConfig(vocab_size=VOCAB, n_embd=256, n_layer=8, n_head=4,
                                                          n_positions=32))
    assert abs(gpt1.h[3].mlp.c_proj.weight.std().item() - 0.02) < 0.001
    assert not hasattr(gpt1, "ln_f") and hasattr(model, "ln_f")


def test_presets_have_the_published_shapes():
    with torch.device("meta"):
        gpt2 = bertkit.GPT2LMHeadModel(bertkit.GPT2Config.from_preset("gpt2"))
        gpt1 = bertkit.OpenAIGPTLMHeadModel(bertkit.OpenAIGPTConfig.from_preset("gpt1"))
    assert gpt2.num_parameters() == 124_439_808  # openai-community/gpt2
    assert gpt1.num_parameters() == 116_534_784  # openai-community/openai-gpt
    assert gpt1.config.n_positions == 512 and gpt1.config.vocab_size == 40478
    for preset in ("gpt-tiny", "gpt-mini"):
        assert bertkit.GPT2Config.from_preset(preset).model_type == "gpt2"
    mini = bertkit.OpenAIGPTConfig.from_preset("gpt1-mini")
    assert (mini.model_type, mini.n_embd, mini.n_layer) == ("openai-gpt", 256, 4)


def test_family_registry_and_loading_by_model_type(tmp_path):
    from bertkit.model.families import family_of, get_model_family, load_config

    for variant, names in CLASSES.items():
        family = get_model_family(variant)
        assert family.can_generate and family.generator_class().__name__ == names[1]
        assert family.backbone_class().__name__ == names[0]
        _reference(variant, names[1]).save_pretrained(tmp_path / variant)
        assert family_of(tmp_path / variant).model_type == variant
        assert type(load_config(tmp_path / variant)).__name__ == ("GPT2Config" if variant == "gpt2" else "OpenAIGPTConfig")
        backbone = family.backbone_class().from_pretrained(tmp_path / variant)  # the LM checkpoint's backbone
        assert backbone.loading_info["missing_keys"] == []


def test_multiple_choice_head_through_the_registry_contract():
    """The task families find GPT's multiple-choice head in the registry (`TaskHead`): the
    double-heads model, its target keyword and output fields, and `mc_token_ids` derived by
    `model_inputs` from the mask (each choice's last real token, left or right padded); BERT's
    heads keep the plain call and a multiple-choice batch feeds them unchanged."""
    from bertkit.model.families import (PLAIN_HEAD, architecture_task_families, get_model_family, head_of_model,
                                        model_inputs)

    for variant, names in CLASSES.items():
        family = get_model_family(variant)
        assert family.task_class("multiple_choice").__name__ == names[2]
        assert architecture_task_families()[names[2]] == "multiple_choice"
        config_class, extra = VARIANTS[variant]
        model = getattr(bertkit, names[2])(getattr(bertkit, config_class.__name__)(**SIZES, **extra))
        head = head_of_model(model)
        assert (head.labels, head.loss, head.logits, head.last_token_input) == (
            "mc_labels", "mc_loss", "mc_logits", "mc_token_ids")
        mask = torch.tensor([[[1, 1, 1, 0], [1, 1, 1, 1]], [[0, 0, 1, 1], [0, 1, 1, 1]]])  # right, then left padding
        batch = {"input_ids": torch.ones_like(mask), "attention_mask": mask, "token_type_ids": torch.zeros_like(mask),
                 "labels": torch.tensor([0, 1])}
        inputs = model_inputs(model, batch)
        assert set(inputs) == {"input_ids", "attention_mask", "mc_token_ids"}
        assert inputs["mc_token_ids"].tolist() == [[2, 3], [3, 3]]
    bert = bertkit.BertForMultipleChoice(bertkit.BertConfig.from_preset("tiny", vocab_size=64))
    plain = head_of_model(bert)
    assert (plain.labels, plain.loss, plain.logits, plain.last_token_input) == ("labels", "loss", "logits", None)
    assert plain.class_name == "BertForMultipleChoice" and head_of_model(bert.bert) == PLAIN_HEAD
    assert "mc_token_ids" not in model_inputs(bert, batch)


def test_bad_configs_and_inputs_name_the_field(tmp_path):
    with pytest.raises(ConfigError, match="n_embd"):
        bertkit.GPT2Config(n_embd=30, n_head=4)
    with pytest.raises(ConfigError, match="activation_function"):
        bertkit.GPT2Config(activation_function="nope")
    with pytest.raises(ConfigError, match="afn"):
        bertkit.OpenAIGPTConfig(afn="nope")
    with pytest.raises(ConfigError, match="n_positions"):
        model = bertkit.GPT2Model(bertkit.GPT2Config(**SIZES))
        model(input_ids=torch.zeros(1, 33, dtype=torch.long))
    classifier = bertkit.GPT2ForSequenceClassification(bertkit.GPT2Config(**SIZES))
    with pytest.raises(ConfigError, match="pad_token_id"):
        classifier(input_ids=torch.ones(2, 4, dtype=torch.long))
    (tmp_path / "bad").mkdir()
    bertkit.GPT2Config(**SIZES).save_pretrained(tmp_path / "bad")
    with pytest.raises(BertkitError, match="model.safetensors"):
        bertkit.GPT2LMHeadModel.from_pretrained(tmp_path / "bad")


@pytest.mark.parametrize("variant", ["gpt2", "openai-gpt"])
def test_fused_causal_lm_loss_equals_forward_loss_and_its_gradients(variant):
    config_class = bertkit.GPT2Config if variant == "gpt2" else bertkit.OpenAIGPTConfig
    model_class = bertkit.GPT2LMHeadModel if variant == "gpt2" else bertkit.OpenAIGPTLMHeadModel
    torch.manual_seed(0)
    model = model_class(config_class(**SIZES))
    ids, mask = _batch(padding="right")
    labels = ids.masked_fill(mask == 0, -100)
    grads = []
    for loss_of in (lambda: model(input_ids=ids, attention_mask=mask, labels=labels).loss,
                    lambda: model.causal_lm_loss(ids, labels, attention_mask=mask)):
        model.zero_grad()
        loss = loss_of()
        loss.backward()
        grads.append((loss.detach(), {n: p.grad.clone() for n, p in model.named_parameters()}))
    (loss_a, grad_a), (loss_b, grad_b) = grads
    _close(loss_a, loss_b)
    for name in grad_a:
        _close(grad_a[name], grad_b[name])
