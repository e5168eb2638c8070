"""BART against transformers' BartModel / BartForConditionalGeneration /
BartForSequenceClassification / BartForQuestionAnswering, both ways.

Random tiny checkpoints (no network), eval mode, a non-zero `final_logits_bias`.
transformers -> bertkit: a checkpoint saved by transformers loads with no missing or
unexpected keys and computes the same logits, loss and encoder outputs on padded batches
(<= 1e-5). bertkit -> transformers: what bertkit saves runs the same in transformers.
The KV cache: incremental decoding equals the full forward and transformers' cached steps.
"""

from __future__ import annotations

import json

import pytest
import torch
import transformers

from bertkit import (BartConfig, BartForConditionalGeneration, BartForQuestionAnswering,
                     BartForSequenceClassification, BartModel)
from bertkit.model.families import get_model_family, load_config

TOLERANCE = 1e-5
SIZES = dict(vocab_size=99, d_model=32, encoder_layers=2, decoder_layers=3, encoder_ffn_dim=48, decoder_ffn_dim=40,
             encoder_attention_heads=4, decoder_attention_heads=2, max_position_embeddings=64, dropout=0.0)
VARIANTS = {"tied": {}, "scaled-untied": dict(scale_embedding=True, tie_word_embeddings=False)}
OURS = {"BartModel": BartModel, "BartForConditionalGeneration": BartForConditionalGeneration,
        "BartForSequenceClassification": BartForSequenceClassification,
        "BartForQuestionAnswering": BartForQuestionAnswering}
EOS, PAD = 2, 1


def _batch():
    """Right-padded sources (lengths 12, 7, 4), each ending in EOS, and targets with -100 after them."""
    gen = torch.Generator().manual_seed(3)
    ids = torch.randint(3, 99, (3, 12), generator=gen)
    lengths = (12, 7, 4)
    mask = torch.zeros_like(ids)
    for row, length in enumerate(lengths):
        mask[row, :length] = 1
        ids[row, length - 1] = EOS
        ids[row, length:] = PAD
    ids[0, 5], ids[1, 2], ids[2, 1] = EOS, EOS, EOS  # a pair's separator (transformers: as many per row): the last counts
    labels = torch.randint(3, 99, (3, 9), generator=gen)
    decoder_mask = torch.ones_like(labels)
    decoder_mask[1, 5:] = 0
    labels[decoder_mask == 0] = -100
    return {"input_ids": ids, "attention_mask": mask, "labels": labels, "decoder_attention_mask": decoder_mask,
            "start_positions": torch.tensor([1, 2, 0]), "end_positions": torch.tensor([3, 5, 30])}


def _run(model, name: str, batch: dict) -> dict[str, torch.Tensor]:
    mask = batch["attention_mask"].bool()
    source = dict(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"])
    with torch.no_grad():
        if name == "BartModel":
            out = model(**source)
            return {"last_hidden_state": out.last_hidden_state[mask],
                    "encoder_last_hidden_state": out.encoder_last_hidden_state[mask]}
        if name == "BartForConditionalGeneration":
            out = model(**source, labels=batch["labels"])
            real = batch["decoder_attention_mask"].bool()
            return {"loss": out.loss, "logits": out.logits[real],
                    "encoder_last_hidden_state": out.encoder_last_hidden_state[mask]}
        if name == "BartForSequenceClassification":
            out = model(**source, labels=torch.tensor([0, 2, 1]))
            return {"loss": out.loss, "logits": out.logits}
        out = model(**source, start_positions=batch["start_positions"], end_positions=batch["end_positions"])
        return {"loss": out.loss, "start_logits": out.start_logits[mask], "end_logits": out.end_logits[mask]}


def _assert_same(ours: dict, theirs: dict, where: str) -> None:
    assert ours.keys() == theirs.keys()
    for key in ours:
        torch.testing.assert_close(ours[key], theirs[key], atol=TOLERANCE, rtol=TOLERANCE,
                                   msg=lambda m: f"{where} {key}: {m}")


def _randomize_bias(model) -> None:
    if hasattr(model, "final_logits_bias"):
        with torch.no_grad():
            model.final_logits_bias.normal_()


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("name", OURS)
def test_transformers_checkpoint_computes_the_same_here(tmp_path, variant, name):
    torch.manual_seed(0)
    theirs = getattr(transformers, name)(transformers.BartConfig(**SIZES, **VARIANTS[variant])).eval()
    _randomize_bias(theirs)
    theirs.save_pretrained(tmp_path)
    ours, info = OURS[name].from_pretrained(tmp_path, output_loading_info=True)
    assert info == {"missing_keys": [], "unexpected_keys": []}
    _assert_same(_run(ours, name, _batch()), _run(theirs, name, _batch()), f"{name} {variant} from transformers")


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("name", OURS)
def test_bertkit_checkpoint_computes_the_same_in_transformers(tmp_path, variant, name):
    torch.manual_seed(0)
    ours = OURS[name](BartConfig(**SIZES, **VARIANTS[variant])).eval()
    _randomize_bias(ours)
    ours.save_pretrained(tmp_path)
    saved = json.loads((tmp_path / "config.json").read_text())
    assert saved["model_type"] == "bart" and saved["architectures"] == [name]
    theirs = getattr(transformers, name).from_pretrained(tmp_path).eval()
    if name == "BartForConditionalGeneration":
        assert (theirs.lm_head.weight is theirs.model.shared.weight) == (variant == "tied")
    _assert_same(_run(ours, name, _batch()), _run(theirs, name, _batch()), f"{name} {variant} in transformers")
    reloaded, info = OURS[name].from_pretrained(tmp_path, output_loading_info=True)
    assert info == {"missing_keys": [], "unexpected_keys": []}
    assert load_config(tmp_path).to_dict() == {**ours.config.to_dict(), "architectures": [name]}
    for (key, value), (key_back, value_back) in zip(ours.state_dict().items(), reloaded.state_dict().items()):
        assert key == key_back and torch.equal(value, value_back), key


def test_parameter_names_are_transformers():
    for variant, options in VARIANTS.items():
        ours = set(BartForConditionalGeneration(BartConfig(**SIZES, **options)).state_dict())
        theirs = set(transformers.BartForConditionalGeneration(transformers.BartConfig(**SIZES, **options)).state_dict())
        tied_copies = set()
        if variant == "tied":  # untied, each stack owns its table, as transformers builds it
            tied_copies = {"model.encoder.embed_tokens.weight", "model.decoder.embed_tokens.weight", "lm_head.weight"}
        assert ours == theirs - tied_copies, variant
    assert {"model.shared.weight", "final_logits_bias", "model.encoder.layernorm_embedding.weight",
            "model.decoder.layers.2.encoder_attn.k_proj.bias", "model.decoder.layers.0.fc1.weight"} <= ours
    positions = BartModel(BartConfig(**SIZES)).encoder.embed_positions
    assert positions.weight.shape == (64 + 2, 32) and positions.offset == 2


def test_positional_arguments_are_transformers_order():
    torch.manual_seed(0)
    model = BartForConditionalGeneration(BartConfig(**SIZES)).eval()
    batch = _batch()
    decoder_input_ids = model.prepare_decoder_input_ids_from_labels(batch["labels"])
    with torch.no_grad():
        by_position = model(batch["input_ids"], batch["attention_mask"], decoder_input_ids,
                            batch["decoder_attention_mask"], None, None, None, None, batch["labels"])
        by_name = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"], labels=batch["labels"],
                        decoder_attention_mask=batch["decoder_attention_mask"])
    assert torch.equal(by_position.logits, by_name.logits) and torch.equal(by_position.loss, by_name.loss)


def test_incremental_decoding_with_the_cache_equals_the_full_forward():
    torch.manual_seed(0)
    model = BartForConditionalGeneration(BartConfig(**SIZES)).eval()
    batch = _batch()
    decoder_input_ids = torch.randint(3, 99, (3, 11), generator=torch.Generator().manual_seed(5))
    source = dict(attention_mask=batch["attention_mask"])
    with torch.no_grad():
        full = model(input_ids=batch["input_ids"], **source, decoder_input_ids=decoder_input_ids).logits
        encoder_outputs = model.get_encoder()(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"])
        out = model(encoder_outputs=encoder_outputs, **source, decoder_input_ids=decoder_input_ids[:, :1],
                    use_cache=True)
        steps, past = [out.logits], out.past_key_values
        for start, stop in ((1, 4), (4, 5), (5, 6), (6, 11)):
            out = model(encoder_outputs=(encoder_outputs.last_hidden_state,), **source, past_key_values=past,
                        decoder_input_ids=decoder_input_ids[:, start:stop], use_cache=True)
            steps.append(out.logits)
            past = out.past_key_values
    torch.testing.assert_close(torch.cat(steps, dim=1), full, atol=TOLERANCE, rtol=TOLERANCE)
    assert len(past) == 3 and all(len(layer) == 4 for layer in past)
    self_key, _, cross_key, _ = past[0]
    assert self_key.shape == (3, 2, 11, 16) and cross_key.shape == (3, 2, 12, 16)


def test_cache_matches_transformers_step_by_step(tmp_path):
    """Padded decoder steps with a cache, against transformers' own cache."""
    torch.manual_seed(0)
    theirs = transformers.BartForConditionalGeneration(transformers.BartConfig(**SIZES)).eval()
    theirs.save_pretrained(tmp_path)
    ours = BartForConditionalGeneration.from_pretrained(tmp_path)
    batch = _batch()
    decoder_input_ids = torch.randint(3, 99, (3, 6), generator=torch.Generator().manual_seed(5))
    decoder_mask = torch.ones_like(decoder_input_ids)
    decoder_mask[2, :2] = 0  # left padding in the decoder
    source = dict(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"])
    with torch.no_grad():
        a = ours(**source, decoder_input_ids=decoder_input_ids[:, :4], decoder_attention_mask=decoder_mask[:, :4],
                 use_cache=True)
        b = theirs(**source, decoder_input_ids=decoder_input_ids[:, :4], decoder_attention_mask=decoder_mask[:, :4],
                   use_cache=True)
        real = decoder_mask[:, :4].bool()  # a padded query sees no key: each library fills it its own way
        torch.testing.assert_close(a.logits[real], b.logits[real], atol=TOLERANCE, rtol=TOLERANCE)
        a = ours(**source, decoder_input_ids=decoder_input_ids[:, 4:], decoder_attention_mask=decoder_mask,
                 past_key_values=a.past_key_values, use_cache=True)
        their_cache = {"cache": b.cache} if hasattr(b, "cache") else {"past_key_values": b.past_key_values}
        b = theirs(**source, decoder_input_ids=decoder_input_ids[:, 4:], decoder_attention_mask=decoder_mask,
                   **their_cache, use_cache=True)
    torch.testing.assert_close(a.logits, b.logits, atol=TOLERANCE, rtol=TOLERANCE)


def test_hidden_states_when_asked(tmp_path):
    torch.manual_seed(0)
    theirs = transformers.BartForConditionalGeneration(transformers.BartConfig(**SIZES)).eval()
    theirs.save_pretrained(tmp_path)
    ours = BartForConditionalGeneration.from_pretrained(tmp_path)
    batch = _batch()
    with torch.no_grad():
        a = ours(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"], labels=batch["labels"],
                 output_hidden_states=True)
        b = theirs(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"], labels=batch["labels"],
                   output_hidden_states=True)
    assert len(a.encoder_hidden_states) == 3 and len(a.decoder_hidden_states) == 4
    mask = batch["attention_mask"].bool()
    for x, y in zip(a.encoder_hidden_states, b.encoder_hidden_states, strict=True):
        torch.testing.assert_close(x[mask], y[mask], atol=TOLERANCE, rtol=TOLERANCE)
    for x, y in zip(a.decoder_hidden_states, b.decoder_hidden_states, strict=True):
        torch.testing.assert_close(x, y, atol=TOLERANCE, rtol=TOLERANCE)


def test_classifier_needs_an_eos_in_every_row():
    model = BartForSequenceClassification(BartConfig(**SIZES)).eval()
    ids = torch.tensor([[0, 5, 6, EOS], [0, 5, 6, 7]])
    with pytest.raises(ValueError, match="row 1 of the batch has no EOS"):
        model(input_ids=ids)


def test_presets_and_the_family_entry():
    base = BartConfig.from_preset("bart-base")
    assert (base.d_model, base.encoder_layers, base.decoder_layers, base.encoder_attention_heads) == (768, 6, 6, 12)
    kobart = BartConfig.from_preset("kobart-base")
    assert (kobart.d_model, kobart.encoder_layers, kobart.decoder_attention_heads, kobart.vocab_size) == (768, 6, 16, 30000)
    for preset in ("bart-tiny", "bart-mini"):
        BartConfig.from_preset(preset)
    family = get_model_family("bart")
    assert family.can_generate and family.supports("classification") and family.supports("qa")
    assert family.supports("text2text") and family.backbone_class() is BartModel
    assert base.decoder_start_token_id == base.eos_token_id == 2 and base.num_labels == 3


def test_kobart_config_json_loads():
    """gogamza/kobart-base-v2's config.json fields (written out here, no network)."""
    values = {"activation_dropout": 0.0, "activation_function": "gelu", "add_bias_logits": False,
              "add_final_layer_norm": False, "architectures": ["BartModel"], "attention_dropout": 0.0,
              "author": "Heewon Jeon(madjakarta@gmail.com)", "bos_token_id": 1, "classif_dropout": 0.1,
              "classifier_dropout": 0.1, "d_model": 768, "decoder_attention_heads": 16, "decoder_ffn_dim": 3072,
              "decoder_layerdrop": 0.0, "decoder_layers": 6, "decoder_start_token_id": 1, "do_blenderbot_90_layernorm": False,
              "dropout": 0.1, "encoder_attention_heads": 16, "encoder_ffn_dim": 3072, "encoder_layerdrop": 0.0,
              "encoder_layers": 6, "eos_token_id": 1, "extra_pos_embeddings": 2, "force_bos_token_to_be_generated": False,
              "forced_eos_token_id": 1, "gradient_checkpointing": False, "id2label": {"0": "NEGATIVE", "1": "POSITIVE"},
              "init_std": 0.02, "is_encoder_decoder": True, "kobart_version": 2.0,
              "label2id": {"NEGATIVE": 0, "POSITIVE": 1}, "max_position_embeddings": 1026, "model_type": "bart",
              "normalize_before": False, "normalize_embedding": True, "num_hidden_layers": 6, "pad_token_id": 3,
              "scale_embedding": False, "static_position_embeddings": False, "tokenizer_class": "PreTrainedTokenizerFast",
              "transformers_version": "4.3.3", "use_cache": True, "vocab_size": 30000}
    config = BartConfig.from_dict(values)
    assert (config.pad_token_id, config.eos_token_id, config.decoder_start_token_id, config.num_labels) == (3, 1, 1, 2)
    assert config.to_dict()["kobart_version"] == 2.0
