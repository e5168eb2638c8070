"""A published ELMo's files (bilm-tf options.json + weights.hdf5) load into ElmoBiLM: a random file
written in that layout, its biLM computed with TensorFlow's formulas in numpy, matches."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

h5py = pytest.importorskip("h5py")

from bertkit import ElmoBiLM  # noqa: E402
from bertkit.errors import BertkitError  # noqa: E402
from bertkit.model.elmo.bilm_tf import lstm_cell_path  # noqa: E402

OPTIONS = {"lstm": {"cell_clip": 3, "use_skip_connections": True, "n_layers": 2, "proj_clip": 3, "projection_dim": 6,
                    "dim": 10},
           "char_cnn": {"activation": "relu", "filters": [[1, 4], [2, 4], [3, 8]], "n_highway": 2,
                        "embedding": {"dim": 5}, "n_characters": 262, "max_characters_per_token": 50},
           "n_tokens_vocab": 100}


def write_files(tmp_path, rng):
    (tmp_path / "options.json").write_text(json.dumps(OPTIONS))
    arrays = {"char_embed": rng.normal(size=(261, 5))}
    for i, (width, count) in enumerate(OPTIONS["char_cnn"]["filters"]):
        arrays[f"CNN/W_cnn_{i}"] = rng.normal(size=(1, width, 5, count)) * 0.5
        arrays[f"CNN/b_cnn_{i}"] = rng.normal(size=count) * 0.1
    for k in range(2):
        for part in ("carry", "transform"):
            arrays[f"CNN_high_{k}/W_{part}"] = rng.normal(size=(16, 16)) * 0.3
            arrays[f"CNN_high_{k}/b_{part}"] = rng.normal(size=16) * 0.1
    arrays["CNN_proj/W_proj"], arrays["CNN_proj/b_proj"] = rng.normal(size=(16, 6)) * 0.3, rng.normal(size=6) * 0.1
    for layer in range(2):
        for direction in range(2):
            path = lstm_cell_path(direction, layer)
            arrays[f"{path}/W_0"] = rng.normal(size=(6 + 6, 40)) * 0.4
            arrays[f"{path}/B"] = rng.normal(size=40) * 0.1
            arrays[f"{path}/W_P_0"] = rng.normal(size=(10, 6)) * 0.4
    with h5py.File(tmp_path / "weights.hdf5", "w") as fout:
        for name, value in arrays.items():
            fout.create_dataset(name, data=value.astype(np.float32))
    return {k: v.astype(np.float32) for k, v in arrays.items()}


def sigmoid(x):
    return 1 / (1 + np.exp(-x))


def tf_bilm(arrays, char_ids):
    """bilm-tf's forward in numpy: char CNN, TF highway, projection, TF LSTMCell (i, j, f, o; forget
    bias 1; clips), residual from layer 2; (W, C) character ids (AllenNLP's, shifted by one)."""
    embedded = arrays["char_embed"][char_ids - 1]  # (W, C, E): id 0 never occurs in a word
    pooled = []
    for i, (width, count) in enumerate(OPTIONS["char_cnn"]["filters"]):
        kernel = arrays[f"CNN/W_cnn_{i}"][0]  # (width, E, count)
        windows = np.stack([embedded[:, s:s + width] for s in range(50 - width + 1)], 1)  # (W, S, width, E)
        conv = np.einsum("wsae,aec->wsc", windows, kernel) + arrays[f"CNN/b_cnn_{i}"]
        pooled.append(np.maximum(conv.max(1), 0))
    x = np.concatenate(pooled, -1)
    for k in range(2):
        carry = sigmoid(x @ arrays[f"CNN_high_{k}/W_carry"] + arrays[f"CNN_high_{k}/b_carry"])
        transform = np.maximum(x @ arrays[f"CNN_high_{k}/W_transform"] + arrays[f"CNN_high_{k}/b_transform"], 0)
        x = carry * transform + (1 - carry) * x
    tokens = x @ arrays["CNN_proj/W_proj"] + arrays["CNN_proj/b_proj"]  # (W, P)

    def run(inputs, direction, layer):
        path = lstm_cell_path(direction, layer)
        c, h, out = np.zeros(10), np.zeros(6), []
        for x_t in inputs:
            z = np.concatenate([x_t, h]) @ arrays[f"{path}/W_0"] + arrays[f"{path}/B"]
            i, j, f, o = np.split(z, 4)
            c = np.clip(sigmoid(f + 1.0) * c + sigmoid(i) * np.tanh(j), -3, 3)
            h = np.clip((sigmoid(o) * np.tanh(c)) @ arrays[f"{path}/W_P_0"], -3, 3)
            out.append(h)
        return np.stack(out)

    layers = [np.concatenate([tokens, tokens], -1)]
    forward, backward = tokens, tokens[::-1]
    for layer in range(2):
        new_forward, new_backward = run(forward, 0, layer), run(backward, 1, layer)
        if layer:
            new_forward, new_backward = new_forward + forward, new_backward + backward
        forward, backward = new_forward, new_backward
        layers.append(np.concatenate([forward, backward[::-1]], -1))
    return layers


def test_a_bilm_tf_file_loads_and_computes_as_tensorflow(tmp_path):
    arrays = write_files(tmp_path, np.random.default_rng(0))
    model = ElmoBiLM.from_bilm_tf(tmp_path / "options.json", tmp_path / "weights.hdf5")
    assert model.softmax is None and model.config.cell_size == 10
    ids = model.character_ids([["The", "bank", "raised", "rates"]])
    with torch.no_grad():
        ours = [h[0].numpy() for h in model(ids).hidden_states]
    for got, expected in zip(ours, tf_bilm(arrays, ids[0].numpy())):
        np.testing.assert_allclose(got, expected, atol=1e-4, rtol=1e-4)
    model.save_pretrained(tmp_path / "converted")  # then a bertkit checkpoint like any other
    assert ElmoBiLM.from_pretrained(tmp_path / "converted").loading_info["missing_keys"] == []


def test_a_file_missing_an_array_is_one_line(tmp_path):
    write_files(tmp_path, np.random.default_rng(1))
    with h5py.File(tmp_path / "weights.hdf5", "a") as fout:
        del fout["CNN_proj/W_proj"]
    with pytest.raises(BertkitError, match=r"weights.hdf5: no array 'CNN_proj/W_proj'"):
        ElmoBiLM.from_bilm_tf(tmp_path / "options.json", tmp_path / "weights.hdf5")
