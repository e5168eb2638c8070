"""ELMo's own layers: the character CNN token layer (with highway layers) and the LSTM with projections.

Attribute names follow AllenNLP's ELMo modules (`char_conv_N`, `highways`, `projection`;
`forward_layer_N` / `backward_layer_N` holding `input_linearity`, `state_linearity`,
`state_projection`), so their weights map one to one.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from bertkit.model.elmo.characters import PAD_CHAR
from bertkit.model.elmo.config import ElmoConfig

PAD_ID = PAD_CHAR + 1  # the padding character's id (ids are shifted by one: 0 pads a whole word)


class Highway(nn.Module):
    """y = g * x + (1 - g) * act(W_h x), g = sigmoid(W_g x) (Srivastava et al.); AllenNLP's layout:
    one Linear(D, 2D) per layer, the nonlinear half first, the gate bias starting at 1 (carry)."""

    def __init__(self, size: int, num_layers: int, activation):
        super().__init__()
        self.size = size
        self.layers = nn.ModuleList(nn.Linear(size, 2 * size) for _ in range(num_layers))
        self.activation = activation

    def reset_gate_bias(self) -> None:
        with torch.no_grad():
            for layer in self.layers:
                layer.bias[self.size:].fill_(1.0)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self.layers:
            nonlinear, gate = layer(x).chunk(2, dim=-1)
            gate = torch.sigmoid(gate)
            x = gate * x + (1 - gate) * self.activation(nonlinear)
        return x


class CharacterEncoder(nn.Module):
    """(B, W, C) character ids -> (B, W, projection_dim) token vectors: embed each character,
    convolve with each (width, count) filter, max over positions, activation, highway layers,
    linear projection."""

    def __init__(self, config: ElmoConfig):
        super().__init__()
        self.activation = torch.relu if config.activation == "relu" else torch.tanh
        self.char_embedding = nn.Embedding(config.n_characters, config.char_embedding_dim, padding_idx=0)
        self.num_convolutions = len(config.filters)
        for index, (width, count) in enumerate(config.filters):
            self.add_module(f"char_conv_{index}", nn.Conv1d(config.char_embedding_dim, count, width, bias=True))
        self.highways = Highway(config.num_filters, config.n_highway, self.activation)
        self.projection = nn.Linear(config.num_filters, config.projection_dim)

    def forward(self, char_ids: torch.Tensor) -> torch.Tensor:
        char_ids = self.crop(char_ids)
        batch, words, chars = char_ids.shape
        embedded = self.char_embedding(char_ids.view(-1, chars)).transpose(1, 2)  # (B * W, E, C)
        pooled = [self.activation(getattr(self, f"char_conv_{i}")(embedded).amax(dim=-1))
                  for i in range(self.num_convolutions)]  # each (B * W, count)
        token = self.highways(torch.cat(pooled, dim=-1))  # (B * W, filters)
        return self.projection(token).view(batch, words, -1)  # (B, W, P)


    def crop(self, char_ids: torch.Tensor) -> torch.Tensor:
        """The character columns that can change the max-pooled features: the batch's longest
        word (padding id 261 after its end-of-word mark) plus the widest filter's span. Every
        window past a word's end sees padding characters only and gives one value per filter, the
        same for every word, and the crop keeps at least one such window for every word that had
        one: exact, and a 6-byte word costs 15 columns instead of 50."""
        real = (char_ids != PAD_ID) & (char_ids != 0)  # (B, W, C)
        if not bool(real.any()):
            return char_ids
        longest = int(real.any(0).any(0).nonzero().max()) + 1
        keep = min(char_ids.shape[-1], longest + max(conv.kernel_size[0] for conv in self._convolutions()))
        return char_ids[..., :keep]

    def _convolutions(self) -> list[nn.Conv1d]:
        return [getattr(self, f"char_conv_{i}") for i in range(self.num_convolutions)]


class LstmWithProjection(nn.Module):
    """One direction of one LSTMP layer (Sak et al. 2014), AllenNLP's `LstmCellWithProjection`:
    gates = input_linearity(x_t) + state_linearity(h_{t-1}) in the order input, forget,
    memory, output; c_t = i * tanh(m) + f * c_{t-1} (clipped to +-cell_clip);
    h_t = state_projection(o * tanh(c_t)) (clipped to +-proj_clip)."""

    def __init__(self, input_size: int, cell_size: int, projection_dim: int, cell_clip: float | None,
                 proj_clip: float | None):
        super().__init__()
        self.cell_size = cell_size
        self.cell_clip, self.proj_clip = cell_clip, proj_clip
        self.input_linearity = nn.Linear(input_size, 4 * cell_size, bias=False)
        self.state_linearity = nn.Linear(projection_dim, 4 * cell_size, bias=True)
        self.state_projection = nn.Linear(cell_size, projection_dim, bias=False)

    def forward(self, inputs: torch.Tensor) -> torch.Tensor:
        """inputs (B, W, I), left-aligned (a row's padding after its words: it cannot reach them)
        -> (B, W, P) outputs."""
        return run_lstms([self], inputs[None])[0]


def run_lstms(cells: list[LstmWithProjection], inputs: torch.Tensor) -> torch.Tensor:
    """Several LSTMP layers of the same shapes over their own inputs in one loop over words
    (the forward and backward LMs' layer k side by side: half the Python steps, batched
    matmuls): inputs (D, B, W, I) -> (D, B, W, P)."""
    first = cells[0]
    c, clip_cell, clip_proj = first.cell_size, first.cell_clip, first.proj_clip
    w_in = torch.stack([cell.input_linearity.weight for cell in cells])  # (D, 4c, I)
    w_state = torch.stack([cell.state_linearity.weight.t() for cell in cells])  # (D, P, 4c)
    b_state = torch.stack([cell.state_linearity.bias for cell in cells])[:, None, :]  # (D, 1, 4c)
    w_proj = torch.stack([cell.state_projection.weight.t() for cell in cells])  # (D, c, P)
    directions, batch, words, _ = inputs.shape
    gates_in = torch.matmul(inputs, w_in.transpose(1, 2)[:, None])  # (D, B, W, 4c): every step's input term at once
    memory = inputs.new_zeros(directions, batch, c)
    state = inputs.new_zeros(directions, batch, w_proj.shape[-1])
    # unbind once, not gates_in[:, :, t] per step: each slice's backward would add a (D, B, W, 4c)
    # tensor of zeros (quadratic in the words: 10x the forward's time at 100 words, 512 cells)
    step_inputs = gates_in.unbind(2)  # W x (D, B, 4c)
    outputs = []
    for t in range(words):
        gates = torch.baddbmm(b_state, state, w_state) + step_inputs[t]  # (D, B, 4c): input, forget, memory, output
        squashed = torch.sigmoid(gates)
        memory = squashed[..., c:2 * c] * memory + squashed[..., :c] * torch.tanh(gates[..., 2 * c:3 * c])
        if clip_cell is not None:
            memory = memory.clamp(-clip_cell, clip_cell)
        state = torch.bmm(squashed[..., 3 * c:] * torch.tanh(memory), w_proj)  # (D, B, P)
        if clip_proj is not None:
            state = state.clamp(-clip_proj, clip_proj)
        outputs.append(state)
    return torch.stack(outputs, dim=2)  # (D, B, W, P)


def reverse_words(x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """(B, W, ...) -> each row's first lengths[b] entries reversed, the padding left after them."""
    width = x.shape[1]
    positions = torch.arange(width, device=x.device)[None, :]  # (1, W)
    index = torch.where(positions < lengths[:, None], lengths[:, None] - 1 - positions, positions)  # (B, W)
    return x.gather(1, index.view(*index.shape, *([1] * (x.dim() - 2))).expand_as(x))


class ElmoLstm(nn.Module):
    """`num_layers` LSTMP layers per direction, a residual connection around every layer but the
    first (`use_skip_connections`); the backward LM reads each sentence reversed."""

    def __init__(self, config: ElmoConfig):
        super().__init__()
        self.num_layers = config.num_layers
        self.use_skip_connections = config.use_skip_connections
        for index in range(config.num_layers):
            for direction in ("forward", "backward"):
                self.add_module(f"{direction}_layer_{index}", LstmWithProjection(
                    config.projection_dim, config.cell_size, config.projection_dim, config.cell_clip, config.proj_clip))

    def layer(self, direction: str, index: int) -> LstmWithProjection:
        return getattr(self, f"{direction}_layer_{index}")

    def forward(self, tokens: torch.Tensor, lengths: torch.Tensor) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """tokens (B, W, P), lengths (B,) -> per layer (forward (B, W, P), backward (B, W, P)),
        the backward outputs back in reading order."""
        forward, backward = tokens, reverse_words(tokens, lengths)
        layers = []
        for index in range(self.num_layers):
            cells = [self.layer("forward", index), self.layer("backward", index)]
            next_forward, next_backward = run_lstms(cells, torch.stack([forward, backward])).unbind(0)
            if index > 0 and self.use_skip_connections:
                next_forward, next_backward = next_forward + forward, next_backward + backward
            forward, backward = next_forward, next_backward
            layers.append((forward, reverse_words(backward, lengths)))
        return layers
