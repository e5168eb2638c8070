"""T5 against transformers' T5Model / T5ForConditionalGeneration / T5EncoderModel, both ways.

Random tiny checkpoints (no network), eval mode. transformers -> bertkit: a checkpoint
saved by transformers loads with no missing or unexpected keys and computes the same
logits, loss and encoder outputs on padded batches (<= 1e-5). bertkit -> transformers:
what bertkit saves (v1.0 tied, v1.1 with its own lm_head) runs the same in transformers.
Incremental decoding with the KV cache equals the full forward.
"""

from __future__ import annotations

import json

import pytest
import torch
import transformers

from bertkit.model.families import get_model_family, load_config, model_inputs
from bertkit.model.t5 import T5Config, T5EncoderModel, T5ForConditionalGeneration, T5Model

TOLERANCE = 1e-5
SIZES = dict(vocab_size=99, d_model=32, d_kv=8, d_ff=48, num_layers=2, num_decoder_layers=3, num_heads=4,
             relative_attention_num_buckets=8, relative_attention_max_distance=16, dropout_rate=0.0)
VARIANTS = {
    "v1.0": dict(feed_forward_proj="relu", tie_word_embeddings=True),
    "v1.1": dict(feed_forward_proj="gated-gelu", tie_word_embeddings=False),
}
CLASSES = ("T5Model", "T5ForConditionalGeneration", "T5EncoderModel")
OURS = {"T5Model": T5Model, "T5ForConditionalGeneration": T5ForConditionalGeneration,
        "T5EncoderModel": T5EncoderModel}


def _hf_config(variant: str):
    return transformers.T5Config(**SIZES, **VARIANTS[variant], decoder_start_token_id=0)


def _batch():
    """Right-padded sources (lengths 20, 13, 4: longer than max_distance, so far buckets are
    used) and targets (lengths 9, 5, 2) with -100 after the target, as a collator makes."""
    gen = torch.Generator().manual_seed(3)
    ids = torch.randint(2, 99, (3, 20), generator=gen)
    mask = torch.ones_like(ids)
    mask[1, 13:] = 0
    mask[2, 4:] = 0
    ids[mask == 0] = 0
    labels = torch.randint(2, 99, (3, 9), generator=gen)
    decoder_mask = torch.ones_like(labels)
    decoder_mask[1, 5:] = 0
    decoder_mask[2, 2:] = 0
    labels[decoder_mask == 0] = -100
    return {"input_ids": ids, "attention_mask": mask, "labels": labels, "decoder_attention_mask": decoder_mask}


def _run(model, name: str, batch: dict) -> dict[str, torch.Tensor]:
    """The outputs to compare: per-token ones at real positions only."""
    mask, decoder_mask = batch["attention_mask"].bool(), batch["decoder_attention_mask"].bool()
    with torch.no_grad():
        if name == "T5EncoderModel":
            out = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"])
            return {"last_hidden_state": out.last_hidden_state[mask]}
        decoder_input_ids = model._shift_right(batch["labels"])
        kwargs = dict(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"],
                      decoder_input_ids=decoder_input_ids, decoder_attention_mask=batch["decoder_attention_mask"])
        if name == "T5Model":
            out = model(**kwargs)
            return {"last_hidden_state": out.last_hidden_state[decoder_mask],
                    "encoder_last_hidden_state": out.encoder_last_hidden_state[mask]}
        out = model(**kwargs, labels=batch["labels"])
        return {"loss": out.loss, "logits": out.logits[decoder_mask],
                "encoder_last_hidden_state": out.encoder_last_hidden_state[mask]}


def _assert_same(ours: dict, theirs: dict, where: str) -> None:
    assert ours.keys() == theirs.keys()
    for key in ours:
        torch.testing.assert_close(ours[key], theirs[key], atol=TOLERANCE, rtol=TOLERANCE,
                                   msg=lambda m: f"{where} {key}: {m}")


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("name", CLASSES)
def test_transformers_checkpoint_computes_the_same_here(tmp_path, variant, name):
    torch.manual_seed(0)
    theirs = getattr(transformers, name)(_hf_config(variant)).eval()
    theirs.save_pretrained(tmp_path)
    ours, info = OURS[name].from_pretrained(tmp_path, output_loading_info=True)
    assert info == {"missing_keys": [], "unexpected_keys": []}
    assert ours.config.feed_forward_proj == VARIANTS[variant]["feed_forward_proj"]
    assert ours.config.scale_decoder_outputs == (variant == "v1.0")
    batch = _batch()
    _assert_same(_run(ours, name, batch), _run(theirs, name, batch), f"{name} {variant} from transformers")


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("name", CLASSES)
def test_bertkit_checkpoint_computes_the_same_in_transformers(tmp_path, variant, name):
    torch.manual_seed(0)
    ours = OURS[name](T5Config(**SIZES, **VARIANTS[variant])).eval()
    ours.save_pretrained(tmp_path)
    saved = json.loads((tmp_path / "config.json").read_text())
    assert saved["model_type"] == "t5" and saved["architectures"] == [name]
    theirs = getattr(transformers, name).from_pretrained(tmp_path).eval()
    if name == "T5ForConditionalGeneration":  # v1.1's own head survives transformers' tying
        assert (theirs.lm_head.weight is theirs.shared.weight) == (variant == "v1.0")
    batch = _batch()
    _assert_same(_run(ours, name, batch), _run(theirs, name, batch), f"{name} {variant} in transformers")
    reloaded, info = OURS[name].from_pretrained(tmp_path, output_loading_info=True)
    assert info == {"missing_keys": [], "unexpected_keys": []}
    assert load_config(tmp_path).to_dict() == {**ours.config.to_dict(), "architectures": [name]}
    for (key, value), (key_back, value_back) in zip(ours.state_dict().items(), reloaded.state_dict().items()):
        assert key == key_back and torch.equal(value, value_back), key


def test_parameter_names_are_transformers(tmp_path):
    for variant in VARIANTS:
        ours = set(T5ForConditionalGeneration(T5Config(**SIZES, **VARIANTS[variant])).state_dict())
        theirs = set(transformers.T5ForConditionalGeneration(_hf_config(variant)).state_dict())
        tied_copies = {"encoder.embed_tokens.weight", "decoder.embed_tokens.weight"}
        if variant == "v1.0":
            tied_copies.add("lm_head.weight")
        assert ours == theirs - tied_copies, variant
    assert "decoder.block.1.layer.1.EncDecAttention.k.weight" in ours
    assert "encoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight" in ours
    assert "encoder.block.1.layer.0.SelfAttention.relative_attention_bias.weight" not in ours  # shared from block 0


@pytest.mark.parametrize("variant", VARIANTS)
def test_incremental_decoding_with_the_cache_equals_the_full_forward(variant):
    torch.manual_seed(0)
    model = T5ForConditionalGeneration(T5Config(**SIZES, **VARIANTS[variant])).eval()
    batch = _batch()
    decoder_input_ids = torch.randint(2, 99, (3, 11), generator=torch.Generator().manual_seed(5))
    source = dict(attention_mask=batch["attention_mask"])
    with torch.no_grad():
        full = model(input_ids=batch["input_ids"], **source, decoder_input_ids=decoder_input_ids).logits
        encoder_outputs = model.get_encoder()(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"])
        out = model(encoder_outputs=encoder_outputs, **source, decoder_input_ids=decoder_input_ids[:, :1],
                    use_cache=True)
        steps, past = [out.logits], out.past_key_values
        for start, stop in ((1, 4), (4, 5), (5, 6), (6, 11)):  # any number of new positions per call
            out = model(encoder_outputs=(encoder_outputs.last_hidden_state,), **source, past_key_values=past,
                        decoder_input_ids=decoder_input_ids[:, start:stop], use_cache=True)
            steps.append(out.logits)
            past = out.past_key_values
    torch.testing.assert_close(torch.cat(steps, dim=1), full, atol=TOLERANCE, rtol=TOLERANCE)
    assert len(past) == 3 and all(len(layer) == 4 for layer in past)
    self_key, self_value, cross_key, cross_value = past[0]
    assert self_key.shape == self_value.shape == (3, 4, 11, 8)
    assert cross_key.shape == cross_value.shape == (3, 4, 20, 8)


def test_cache_matches_transformers_step_by_step(tmp_path):
    """Padded decoder steps with a cache, against transformers' own cache."""
    torch.manual_seed(0)
    theirs = transformers.T5ForConditionalGeneration(_hf_config("v1.1")).eval()
    theirs.save_pretrained(tmp_path)
    ours = T5ForConditionalGeneration.from_pretrained(tmp_path)
    batch = _batch()
    decoder_input_ids = torch.randint(2, 99, (3, 6), generator=torch.Generator().manual_seed(5))
    decoder_mask = torch.ones_like(decoder_input_ids)
    decoder_mask[2, :2] = 0  # left padding in the decoder
    source = dict(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"])
    with torch.no_grad():
        a = ours(**source, decoder_input_ids=decoder_input_ids[:, :4], decoder_attention_mask=decoder_mask[:, :4],
                 use_cache=True)
        b = theirs(**source, decoder_input_ids=decoder_input_ids[:, :4], decoder_attention_mask=decoder_mask[:, :4],
                   use_cache=True)
        torch.testing.assert_close(a.logits, b.logits, atol=TOLERANCE, rtol=TOLERANCE)
        a = ours(**source, decoder_input_ids=decoder_input_ids[:, 4:], decoder_attention_mask=decoder_mask,
                 past_key_values=a.past_key_values, use_cache=True)
        # transformers renamed its cache argument and output (past_key_values -> cache) around 5.2x
        their_cache = {"cache": b.cache} if hasattr(b, "cache") else {"past_key_values": b.past_key_values}
        b = theirs(**source, decoder_input_ids=decoder_input_ids[:, 4:], decoder_attention_mask=decoder_mask,
                   **their_cache, use_cache=True)
    torch.testing.assert_close(a.logits, b.logits, atol=TOLERANCE, rtol=TOLERANCE)


def test_shift_right_is_transformers():
    theirs = transformers.T5ForConditionalGeneration(_hf_config("v1.0"))
    ours = T5ForConditionalGeneration(T5Config(**SIZES))
    labels = _batch()["labels"]
    assert torch.equal(ours.shift_right(labels), theirs._shift_right(labels))


def test_hidden_states_when_asked(tmp_path):
    """Each block's input, then the final normed output: L + 1 tensors per stack, as transformers."""
    torch.manual_seed(0)
    theirs = transformers.T5ForConditionalGeneration(_hf_config("v1.0")).eval()
    theirs.save_pretrained(tmp_path)
    model = T5ForConditionalGeneration.from_pretrained(tmp_path)
    batch = _batch()
    with torch.no_grad():
        out = model(**model_inputs(model, batch), labels=batch["labels"], output_hidden_states=True)
        reference = theirs(**batch, output_hidden_states=True)
    assert len(out.decoder_hidden_states) == 3 + 1 and len(out.encoder_hidden_states) == 2 + 1
    assert torch.equal(out.encoder_hidden_states[-1], out.encoder_last_hidden_state)
    mask, decoder_mask = batch["attention_mask"].bool(), batch["decoder_attention_mask"].bool()
    for ours_states, their_states, real in ((out.encoder_hidden_states, reference.encoder_hidden_states, mask),
                                            (out.decoder_hidden_states, reference.decoder_hidden_states, decoder_mask)):
        for ours_state, their_state in zip(ours_states, their_states, strict=True):
            torch.testing.assert_close(ours_state[real], their_state[real], atol=TOLERANCE, rtol=TOLERANCE)


def test_registry_entry():
    family = get_model_family("t5")
    assert family.config_class() is T5Config and family.backbone_class() is T5Model
    assert family.can_generate and not family.can_fill_mask
    assert family.input_names == ("input_ids", "attention_mask", "decoder_input_ids", "decoder_attention_mask")
    import bertkit

    assert bertkit.T5ForConditionalGeneration is T5ForConditionalGeneration and bertkit.T5Config is T5Config
    assert bertkit.T5EncoderModel is T5EncoderModel and bertkit.T5Model is T5Model


@pytest.mark.parametrize("targets", ["padded", "full"])
@pytest.mark.parametrize("variant", VARIANTS)
def test_training_gradients_are_transformers(tmp_path, variant, targets):
    """One backward pass (train mode, dropout 0): every parameter's gradient, the shared
    relative position bias and the tied embedding included. Full targets (no -100, as
    span corruption makes them) take the fused head + loss."""
    torch.manual_seed(0)
    theirs = transformers.T5ForConditionalGeneration(_hf_config(variant))
    theirs.save_pretrained(tmp_path)
    ours = T5ForConditionalGeneration.from_pretrained(tmp_path).train()
    theirs.train()
    batch = _batch()
    if targets == "full":
        batch["labels"] = batch["labels"].masked_fill(batch["labels"] == -100, 5)
        batch["decoder_attention_mask"] = torch.ones_like(batch["labels"])
    ours_out, theirs_out = ours(**model_inputs(ours, batch), labels=batch["labels"]), theirs(**batch)
    torch.testing.assert_close(ours_out.loss, theirs_out.loss, atol=TOLERANCE, rtol=TOLERANCE)
    torch.testing.assert_close(ours_out.logits, theirs_out.logits, atol=TOLERANCE, rtol=TOLERANCE)
    ours_out.loss.backward()
    theirs_out.loss.backward()
    their_grads = {name: p.grad for name, p in theirs.named_parameters()}
    for name, parameter in ours.named_parameters():
        torch.testing.assert_close(parameter.grad, their_grads[name], atol=TOLERANCE, rtol=TOLERANCE, msg=name)
