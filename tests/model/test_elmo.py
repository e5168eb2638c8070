"""ELMo's biLM: shapes, the LSTM with projections against torch's nn.LSTM, character ids as
AllenNLP's mapper, save/load, bad words, and ScalarMix against Eq. 1."""

from __future__ import annotations

import json

import pytest
import torch
from torch import nn

from bertkit import ElmoBiLM, ElmoConfig, ScalarMix
from bertkit.errors import BertkitError
from bertkit.model.elmo.characters import BOS, CharacterMapper
from bertkit.model.elmo.layers import LstmWithProjection, reverse_words
from bertkit.model.families import MODEL_FAMILIES


def tiny(**overrides) -> ElmoBiLM:
    torch.manual_seed(0)
    return ElmoBiLM(ElmoConfig.from_preset("elmo-tiny", n_tokens_vocab=30, **overrides)).eval()


def test_presets_have_the_published_shapes():
    small, original = ElmoConfig.from_preset("elmo-small"), ElmoConfig.from_preset("elmo-original")
    assert (small.num_layers, small.cell_size, small.projection_dim, small.n_highway, small.num_filters) == (2, 1024, 128, 1, 2048)
    assert (original.cell_size, original.projection_dim, original.n_highway, original.num_filters) == (4096, 512, 2, 2048)
    assert MODEL_FAMILIES["elmo"].reads_words and not MODEL_FAMILIES["elmo"].tasks


def test_representations_shapes_and_layer_zero_duplicates_the_token_layer():
    model = tiny()
    layers, mask = model.embed_words([["The", "bank", "raised", "rates", "."], ["Hi"]])
    assert layers.shape == (2, 3, 5, 32) and mask.tolist() == [[1] * 5, [1, 0, 0, 0, 0]]
    torch.testing.assert_close(layers[:, 0, :, :16], layers[:, 0, :, 16:])
    assert layers[1, :, 1:].abs().sum() == 0  # padding words are zero


def test_a_sentence_is_read_the_same_alone_and_in_a_padded_batch():
    model = tiny()
    alone, _ = model.embed_words([["a", "short", "one"]])
    batched, _ = model.embed_words([["a", "much", "longer", "sentence", "here", "!"], ["a", "short", "one"]])
    torch.testing.assert_close(batched[1, :, :3], alone[0], atol=1e-6, rtol=1e-5)


def test_forward_states_never_see_later_words_and_backward_never_earlier():
    model = tiny()
    a = model.character_ids([["one", "two", "three", "four"]])
    b = model.character_ids([["one", "two", "zzz", "four"]])
    with torch.no_grad():
        ha, hb = model(a).hidden_states[-1], model(b).hidden_states[-1]
    p = model.config.projection_dim
    torch.testing.assert_close(ha[0, :3, :p], hb[0, :3, :p])  # <S> one two: before the change
    torch.testing.assert_close(ha[0, 4:, p:], hb[0, 4:, p:])  # four </S>: after it
    assert not torch.allclose(ha[0, 3:, :p], hb[0, 3:, :p])


def test_lstm_with_projection_equals_torch_lstm_with_proj_size():
    torch.manual_seed(1)
    ours = LstmWithProjection(6, 10, 4, cell_clip=None, proj_clip=None)
    ref = nn.LSTM(6, 10, proj_size=4, batch_first=True)
    with torch.no_grad():
        ref.weight_ih_l0.copy_(ours.input_linearity.weight)
        ref.weight_hh_l0.copy_(ours.state_linearity.weight)
        ref.bias_hh_l0.copy_(ours.state_linearity.bias)
        ref.bias_ih_l0.zero_()
        ref.weight_hr_l0.copy_(ours.state_projection.weight)
        x = torch.randn(3, 7, 6)
        torch.testing.assert_close(ours(x), ref(x)[0], atol=1e-6, rtol=1e-5)


def test_clipping_bounds_the_projection():
    torch.manual_seed(2)
    cell = LstmWithProjection(4, 8, 4, cell_clip=0.5, proj_clip=0.1)
    with torch.no_grad():
        out = cell(torch.randn(2, 5, 4) * 100)
    assert out.abs().max() <= 0.1 + 1e-7


def test_reverse_words_keeps_padding_in_place():
    x = torch.tensor([[1, 2, 3, 0], [4, 5, 0, 0]])
    assert reverse_words(x, torch.tensor([3, 2])).tolist() == [[3, 2, 1, 0], [5, 4, 0, 0]]


def test_character_ids_as_allennlp_and_long_words_cut_and_counted():
    mapper = CharacterMapper(50)
    ids = mapper.word_ids("ab")
    assert ids[:5].tolist() == [259, 98, 99, 260, 261] and (ids[4:] == 261).all()
    assert mapper.word_ids(BOS)[:4].tolist() == [259, 257, 260, 261]
    assert mapper.word_ids("<S>")[1] == ord("<") + 1  # a literal "<S>" in a text is a word
    assert mapper.word_ids("é")[1:3].tolist() == [0xC3 + 1, 0xA9 + 1]  # UTF-8 bytes
    long = mapper.word_ids("x" * 60)
    assert mapper.cut_words == 1 and long[48] == ord("x") + 1 and long[49] == 260


def test_bad_words_are_one_line_errors():
    mapper = CharacterMapper(50)
    with pytest.raises(BertkitError, match=r"^input line 3: word 'a\\udcff' is not valid Unicode"):
        mapper.word_ids("a\udcff", "input line 3")
    with pytest.raises(BertkitError, match=r"^texts\[0\]: an empty sentence"):
        mapper.sentence_ids([], "texts[0]")
    with pytest.raises(BertkitError, match="sentence 2: an empty sentence"):
        tiny().embed_words([["a"], []])


def test_save_and_load_round_trip_and_features_only_checkpoint(tmp_path):
    model = tiny()
    model.save_pretrained(tmp_path / "lm")
    assert json.loads((tmp_path / "lm" / "config.json").read_text())["model_type"] == "elmo"
    back = ElmoBiLM.from_pretrained(tmp_path / "lm")
    assert back.loading_info == {"missing_keys": [], "unexpected_keys": []}
    ids = model.character_ids([["x", "y"]])
    with torch.no_grad():
        torch.testing.assert_close(back(ids).last_hidden_state, model(ids).last_hidden_state)
    bare = ElmoBiLM(ElmoConfig.from_preset("elmo-tiny"))  # no softmax: features only
    bare.save_pretrained(tmp_path / "bare")
    assert ElmoBiLM.from_pretrained(tmp_path / "bare").softmax is None


def test_loss_is_mean_forward_plus_mean_backward_nll():
    from bertkit.model.elmo.modeling import word_targets
    import numpy as np

    model = tiny(dropout=0.0)
    ids = model.character_ids([["a", "b", "c"]])
    next_ids, previous_ids = (torch.from_numpy(t)[None] for t in word_targets(np.array([0, 5, 6, 7, 1])))
    with torch.no_grad():
        out = model(ids, next_word_ids=next_ids, previous_word_ids=previous_ids)
        fwd, bwd = out.hidden_states[-1][0, :, :16], out.hidden_states[-1][0, :, 16:]
        expected = (nn.functional.cross_entropy(model.softmax(fwd[:4]), torch.tensor([5, 6, 7, 1]))
                    + nn.functional.cross_entropy(model.softmax(bwd[1:]), torch.tensor([0, 5, 6, 7])))
    torch.testing.assert_close(out.loss, expected)
    assert out.forward_count == out.backward_count == 4


# ---- ScalarMix (Eq. 1) ------------------------------------------------------------------------
def test_scalar_mix_is_gamma_times_softmax_weighted_sum():
    mix = ScalarMix(3)
    with torch.no_grad():
        for p, value in zip(mix.scalar_parameters, (0.5, -1.0, 2.0)):
            p.fill_(value)
        mix.gamma.fill_(1.7)
    layers = [torch.randn(2, 4, 5) for _ in range(3)]
    s = torch.softmax(torch.tensor([0.5, -1.0, 2.0]), 0)
    torch.testing.assert_close(mix(layers), 1.7 * (s[0] * layers[0] + s[1] * layers[1] + s[2] * layers[2]))
    torch.testing.assert_close(mix(torch.stack(layers, 2), layer_dim=2), mix(layers))
    assert set(dict(mix.named_parameters())) == {"gamma", "scalar_parameters.0", "scalar_parameters.1",
                                                 "scalar_parameters.2"}  # AllenNLP's names


def test_scalar_mix_layer_norm_uses_real_positions_only():
    mix = ScalarMix(2, do_layer_norm=True)
    layers = [torch.randn(2, 3, 4), torch.randn(2, 3, 4)]
    mask = torch.tensor([[1, 1, 0], [1, 0, 0]])
    changed = [t.clone() for t in layers]
    for t in changed:
        t[0, 2] = 100.0
        t[1, 1:] = -50.0  # padding: must not move the statistics
    out, moved = mix(layers, mask), mix(changed, mask)
    real = mask.bool()
    torch.testing.assert_close(out[real], moved[real])
    values = layers[0][real]
    expected0 = (layers[0] - values.mean()) / torch.sqrt(values.var(unbiased=False) + 1e-12)
    torch.testing.assert_close(ScalarMix(1, do_layer_norm=True)([layers[0]], mask)[real], expected0[real])


def test_scalar_mix_loads_the_old_tagger_layout():
    mix = ScalarMix(3)
    mix.load_state_dict({"scalar_weights": torch.tensor([1.0, 2.0, 3.0]), "gamma": torch.tensor([2.0])})
    assert torch.cat(list(mix.scalar_parameters)).tolist() == [1.0, 2.0, 3.0]


def test_cropping_the_character_columns_is_exact():
    model = tiny()
    ids = model.character_ids([["a", "longer", "x"], ["b"]])
    encoder = model.char_encoder
    assert encoder.crop(ids).shape[-1] == 1 + 6 + 1 + 3  # BOW "longer" EOW + the widest filter (3)
    full = encoder.projection(encoder.highways(torch.cat([
        torch.relu(getattr(encoder, f"char_conv_{i}")(encoder.char_embedding(ids.view(-1, 50)).transpose(1, 2)).amax(-1))
        for i in range(encoder.num_convolutions)], -1))).view(2, ids.shape[1], -1)
    with torch.no_grad():
        torch.testing.assert_close(encoder(ids), full)
