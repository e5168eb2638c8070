"""DeBERTa-v2/v3 against transformers' DebertaV2 classes: seeded random tiny models in a v2 layout
(absolute positions, token types, separate position projections, v2's convolution) and a v3 layout
(shared key, log buckets, layer-normed relative embeddings), padded batches, checkpoints loading in
both directions; the relative-position buckets; config round-trip and field-named errors."""

from __future__ import annotations

import pytest
import torch
import transformers

import bertkit
from bertkit.errors import ConfigError
from bertkit.model.deberta.attention import log_bucket_positions
from bertkit.model.deberta import (
    DebertaV2Config, DebertaV2ForMaskedLM, DebertaV2ForMultipleChoice, DebertaV2ForQuestionAnswering,
    DebertaV2ForSequenceClassification, DebertaV2ForTokenClassification, DebertaV2Model,
)

B, T = 3, 20
TINY = dict(vocab_size=120, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
            max_position_embeddings=64, hidden_act="gelu")
LAYOUTS = {
    "v2": dict(relative_attention=True, pos_att_type=["p2c", "c2p"], max_relative_positions=16,
               position_biased_input=True, type_vocab_size=2, conv_kernel_size=3),
    # buckets of 8 at T=20: distances past 4 are log-bucketed
    "v3": dict(relative_attention=True, pos_att_type=["p2c", "c2p"], position_buckets=8, share_att_key=True,
               norm_rel_ebd="layer_norm", position_biased_input=False, type_vocab_size=0, legacy=False),
}
CLASSES = [DebertaV2Model, DebertaV2ForMaskedLM, DebertaV2ForSequenceClassification, DebertaV2ForTokenClassification,
           DebertaV2ForQuestionAnswering]


def _config(layout: str, **more) -> DebertaV2Config:
    return DebertaV2Config.from_dict({**TINY, **LAYOUTS[layout], **more})


def _inputs(config: DebertaV2Config, seed: int = 0):
    gen = torch.Generator().manual_seed(seed)
    ids = torch.randint(5, 120, (B, T), generator=gen)
    mask = torch.ones_like(ids)
    mask[1:, -5:] = 0  # padding in two rows, none in the first
    types = None
    if config.type_vocab_size:
        types = torch.zeros_like(ids)
        types[:, T // 2:] = 1
    return ids, mask, types


def _scores(out):
    """The head's scores: QA's start and end, else logits, else the encoder's last states."""
    if getattr(out, "start_logits", None) is not None:
        return torch.stack([out.start_logits, out.end_logits], -1)
    return out.logits if getattr(out, "logits", None) is not None else out.last_hidden_state


def _close(a, b):
    torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5)


def _compare(ours, ref, config):
    ids, mask, types = _inputs(config)
    with torch.no_grad():
        a = ours(input_ids=ids, attention_mask=mask, token_type_ids=types, output_hidden_states=True)
        b = ref(input_ids=ids, attention_mask=mask, token_type_ids=types, output_hidden_states=True)
    real = mask.bool()
    sa, sb = _scores(a), _scores(b)
    if sa.shape[:2] == (B, T):  # per token: the real positions (padding rows are not meaningful)
        sa, sb = sa[real], sb[real]
    _close(sa, sb)
    assert len(a.hidden_states) == len(b.hidden_states) == config.num_hidden_layers + 1
    for x, y in zip(a.hidden_states, b.hidden_states):
        _close(x[real], y[real])


@pytest.mark.parametrize("layout", ["v2", "v3"])
@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
def test_transformers_checkpoint_loads_here(tmp_path, layout, cls):
    config = _config(layout)
    torch.manual_seed(1)
    ref = getattr(transformers, cls.__name__)(transformers.DebertaV2Config(**config.to_dict())).eval()
    ref.save_pretrained(tmp_path)
    ours, info = cls.from_pretrained(tmp_path, output_loading_info=True)
    assert info == {"missing_keys": [], "unexpected_keys": []}
    _compare(ours, ref, config)


@pytest.mark.parametrize("layout", ["v2", "v3"])
@pytest.mark.parametrize("cls", [DebertaV2ForMaskedLM, DebertaV2ForSequenceClassification], ids=lambda c: c.__name__)
def test_bertkit_checkpoint_loads_in_transformers(tmp_path, layout, cls):
    config = _config(layout)
    torch.manual_seed(2)
    ours = cls(config).eval()
    ours.save_pretrained(tmp_path)
    ref, info = getattr(transformers, cls.__name__).from_pretrained(tmp_path, output_loading_info=True)
    assert not info["missing_keys"] and not info["unexpected_keys"]
    _compare(ours, ref.eval(), config)


def test_masked_lm_loss_and_labelled_logits_match_transformers(tmp_path):
    config = _config("v3")
    torch.manual_seed(3)
    ref = transformers.DebertaV2ForMaskedLM(transformers.DebertaV2Config(**config.to_dict())).eval()
    ref.save_pretrained(tmp_path)
    ours = DebertaV2ForMaskedLM.from_pretrained(tmp_path)
    ids, mask, _ = _inputs(config)
    chosen = (torch.rand(B, T, generator=torch.Generator().manual_seed(5)) < 0.3) & mask.bool()
    labels = torch.where(chosen, ids, torch.full_like(ids, -100))
    with torch.no_grad():
        a = ours(ids, mask, labels=labels)
        b = ref(input_ids=ids, attention_mask=mask, labels=labels)
    _close(a.loss, b.loss)
    _close(a.logits, b.logits[chosen])  # only the labelled positions reach the vocabulary: (N, V)
    assert a.masked_positions.tolist() == chosen.nonzero().tolist()


def test_multiple_choice_matches_transformers(tmp_path):
    config = _config("v3")
    torch.manual_seed(4)
    ref = transformers.DebertaV2ForMultipleChoice(transformers.DebertaV2Config(**config.to_dict())).eval()
    ref.save_pretrained(tmp_path)
    ours = DebertaV2ForMultipleChoice.from_pretrained(tmp_path)
    ids, mask, _ = _inputs(config)
    ids, mask = ids.view(1, B, T), mask.view(1, B, T)  # one question, three choices
    with torch.no_grad():
        a, b = ours(ids, mask, labels=torch.tensor([2])), ref(input_ids=ids, attention_mask=mask, labels=torch.tensor([2]))
    _close(a.logits, b.logits)
    _close(a.loss, b.loss)


def test_log_buckets_keep_near_distances_and_compress_far_ones():
    distances = torch.arange(-511, 512)  # up to max_position
    buckets = log_bucket_positions(distances, 256, 512)
    near = distances.abs() <= 128
    assert torch.equal(buckets[near], distances[near])  # exact up to half the buckets
    assert int(buckets.max()) <= 256 and int(buckets.min()) >= -256 and torch.equal(buckets.sign(), distances.sign())
    assert bool((buckets.diff() >= 0).all())  # monotone


def test_config_round_trip_presets_and_errors(tmp_path):
    config = DebertaV2Config.from_preset("deberta-mini", vocab_size=500)
    assert (config.num_hidden_layers, config.hidden_size, config.position_buckets, config.share_att_key) == (4, 256, 256, True)
    config.save_pretrained(tmp_path)
    assert DebertaV2Config.from_pretrained(tmp_path) == config
    assert transformers.DebertaV2Config.from_pretrained(tmp_path).position_buckets == 256
    assert set(DebertaV2Config.presets) >= {"deberta-tiny", "deberta-mini", "deberta-v3-xsmall", "deberta-v3-small",
                                            "deberta-v3-base"}
    assert DebertaV2Config.from_dict({**TINY, "pos_att_type": "p2c|c2p"}).pos_att_type == ["p2c", "c2p"]
    with pytest.raises(ConfigError, match="pos_att_type"):
        DebertaV2Config.from_dict({**TINY, "pos_att_type": ["c2c"]})
    with pytest.raises(ConfigError, match="pooler_hidden_size"):
        DebertaV2Config.from_dict({**TINY, "pooler_hidden_size": 16})
    with pytest.raises(ConfigError, match="norm_rel_ebd"):
        DebertaV2Config.from_dict({**TINY, "norm_rel_ebd": "rms"})
    assert bertkit.DebertaV2ForMaskedLM is DebertaV2ForMaskedLM and bertkit.DebertaV2Config is DebertaV2Config
