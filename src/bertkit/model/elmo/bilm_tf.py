"""Reading a published ELMo (bilm-tf's options.json + weights.hdf5) into `ElmoBiLM`, with h5py.

The layout (bilm-tf's dump, the files AllenNLP loads), mapped as AllenNLP maps it:
- `char_embed` (261, E): our embedding rows 1..261 (row 0 is the padding word's, zero);
- `CNN/W_cnn_i` (1, width, E, count), `CNN/b_cnn_i`: `char_conv_i` (count, E, width);
- `CNN_high_k/{W,b}_transform`, `{W,b}_carry`: highway layer k, TensorFlow's
  (1 - t) x + t f(x) with t = sigmoid(W_carry x + b_carry) written as ours,
  g x + (1 - g) f(x), by negating the carry weights (g = 1 - t);
- `CNN_proj/{W,b}_proj`: `projection` (transposed);
- `RNN_d/RNN/MultiRNNCell/Celll/LSTMCell/{W_0, B, W_P_0}` (d = 0 forward, 1 backward; l the
  layer): TensorFlow's gates (input, new memory, forget, output) over [x; h] -> ours (input,
  forget, memory, output) split into `input_linearity` and `state_linearity`, TensorFlow's
  forget bias of 1 added to the bias, `W_P_0` the projection.
The published files carry no softmax: the model loads as a features-only biLM
(n_tokens_vocab 0). h5py is optional (`pip install h5py`); without it this is a one-line error.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from bertkit.errors import BertkitError
from bertkit.model.elmo.config import ElmoConfig


def _h5py():
    try:
        import h5py
    except ImportError:
        raise BertkitError("reading bilm-tf weights (weights.hdf5) needs h5py: pip install h5py") from None
    return h5py


def lstm_cell_path(direction: int, layer: int) -> str:
    return f"RNN_{direction}/RNN/MultiRNNCell/Cell{layer}/LSTMCell"


def _swap_memory_and_forget(rows: np.ndarray, cell: int) -> np.ndarray:
    """TensorFlow's gate blocks (i, j, f, o) -> ours (i, f, j, o) along the first axis."""
    out = rows.copy()
    out[cell:2 * cell], out[2 * cell:3 * cell] = rows[2 * cell:3 * cell], rows[cell:2 * cell]
    return out


def read_bilm_tf(options_file: str | Path, weight_file: str | Path) -> tuple[ElmoConfig, dict[str, np.ndarray]]:
    """(config, state dict in ElmoBiLM's names) of a published ELMo; errors name the file and the
    missing array. `ElmoBiLM.from_bilm_tf` builds the model from them."""
    h5py = _h5py()
    options_file, weight_file = Path(options_file), Path(weight_file)
    try:
        options = json.loads(options_file.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise BertkitError(f"{options_file}: not a readable options.json ({exc})") from None
    config = ElmoConfig.from_options({**options, "n_tokens_vocab": 0}, str(options_file))
    state = {}
    try:
        with h5py.File(weight_file, "r") as fin:
            def array(name: str) -> np.ndarray:
                if name not in fin:
                    raise BertkitError(f"{weight_file}: no array {name!r} (not bilm-tf's layout, or options.json "
                                       "does not match it)")
                return np.asarray(fin[name][...], dtype=np.float32)

            chars = array("char_embed")
            state["char_encoder.char_embedding.weight"] = np.concatenate([np.zeros((1, chars.shape[1]), np.float32), chars])
            for i in range(len(config.filters)):
                state[f"char_encoder.char_conv_{i}.weight"] = np.transpose(array(f"CNN/W_cnn_{i}")[0], (2, 1, 0))
                state[f"char_encoder.char_conv_{i}.bias"] = array(f"CNN/b_cnn_{i}")
            for k in range(config.n_highway):
                group = f"CNN_high_{k}"
                state[f"char_encoder.highways.layers.{k}.weight"] = np.concatenate(
                    [array(f"{group}/W_transform").T, -array(f"{group}/W_carry").T])
                state[f"char_encoder.highways.layers.{k}.bias"] = np.concatenate(
                    [array(f"{group}/b_transform"), -array(f"{group}/b_carry")])
            state["char_encoder.projection.weight"] = array("CNN_proj/W_proj").T
            state["char_encoder.projection.bias"] = array("CNN_proj/b_proj")
            cell, width = config.cell_size, config.projection_dim
            for layer in range(config.num_layers):
                for direction, name in enumerate(("forward", "backward")):
                    path, prefix = lstm_cell_path(direction, layer), f"lstm.{name}_layer_{layer}"
                    weights = _swap_memory_and_forget(array(f"{path}/W_0").T, cell)  # (4c, in + P)
                    bias = array(f"{path}/B")
                    bias[2 * cell:3 * cell] += 1.0  # TensorFlow adds its forget bias at run time
                    state[f"{prefix}.input_linearity.weight"] = weights[:, :width]
                    state[f"{prefix}.state_linearity.weight"] = weights[:, width:]
                    state[f"{prefix}.state_linearity.bias"] = _swap_memory_and_forget(bias, cell)
                    state[f"{prefix}.state_projection.weight"] = array(f"{path}/W_P_0").T
    except OSError as exc:
        raise BertkitError(f"{weight_file}: not a readable HDF5 file ({exc})") from None
    return config, state
