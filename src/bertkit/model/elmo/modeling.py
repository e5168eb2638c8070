"""ELMo's bidirectional language model (Peters et al. 2018): `ElmoBiLM`.

character ids (B, W, C) -> CharacterEncoder -> token vectors x (B, W, P)
  -> forward LSTMP stack over x, backward LSTMP stack over x reversed (residual between layers)
representations (B, W, 2P) each: layer 0 = [x; x] (the token layer duplicated to the biLM's
width), layer k = [forward_k; backward_k] for k = 1..num_layers.
The two language models share the token layer and the softmax (`softmax`: P -> n_tokens_vocab
words): the forward top layer at word t predicts word t + 1, the backward one word t - 1.

Sentences are wrapped in <S> ... </S> (bertkit.model.elmo.characters) for training and for
features alike; `embed_words` wraps, runs and strips them, so callers see one vector per word.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from bertkit.errors import BertkitError
from bertkit.model.elmo.characters import BOS, EOS, CharacterMapper, batch_character_ids
from bertkit.model.elmo.config import ElmoConfig
from bertkit.model.elmo.layers import CharacterEncoder, ElmoLstm, Highway
from bertkit.model.losses import IGNORE_INDEX
from bertkit.model.outputs import ModelOutput
from bertkit.model.pretrained import PreTrainedModel


@dataclass
class ElmoOutput(ModelOutput):
    """hidden_states: num_layers + 1 representations (B, W, 2P), layer 0 first; last_hidden_state:
    the top one; attention_mask (B, W): 1 on real words. With targets: loss = mean forward NLL +
    mean backward NLL, and per direction the summed NLL, correct predictions and target count."""

    last_hidden_state: torch.Tensor | None = None
    hidden_states: tuple[torch.Tensor, ...] | None = None
    attention_mask: torch.Tensor | None = None
    loss: torch.Tensor | None = None
    forward_loss_sum: torch.Tensor | None = None
    backward_loss_sum: torch.Tensor | None = None
    forward_correct: torch.Tensor | None = None
    backward_correct: torch.Tensor | None = None
    forward_count: int = 0
    backward_count: int = 0


class ElmoPreTrainedModel(PreTrainedModel):
    config_class = ElmoConfig
    base_model_prefix = "elmo"

    def _init_module(self, module: nn.Module) -> None:
        """Linear and convolution weights normal(0, initializer_range), biases 0, the padding
        character's embedding 0, highway gates biased to carry (1)."""
        std = self.config.initializer_range
        if isinstance(module, (nn.Linear, nn.Conv1d)):
            nn.init.normal_(module.weight, std=std)
            if module.bias is not None:
                nn.init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            nn.init.normal_(module.weight, std=std)
            with torch.no_grad():
                module.weight[module.padding_idx].zero_()
        elif isinstance(module, Highway):
            for layer in module.layers:
                self._init_module(layer)
            module.reset_gate_bias()


class ElmoBiLM(ElmoPreTrainedModel):
    """The biLM: token layer, forward and backward LSTMP stacks, the shared softmax (when
    `n_tokens_vocab` > 0; a checkpoint without it loads as a features-only biLM)."""

    optional_prefixes = ("softmax.",)

    def __init__(self, config: ElmoConfig):
        super().__init__(config)
        self.char_encoder = CharacterEncoder(config)
        self.lstm = ElmoLstm(config)
        self.dropout = nn.Dropout(config.dropout)
        self.softmax = nn.Linear(config.projection_dim, config.n_tokens_vocab) if config.n_tokens_vocab else None
        self.init_weights()

    def forward(
        self,
        character_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        next_word_ids: torch.Tensor | None = None,
        previous_word_ids: torch.Tensor | None = None,
        output_hidden_states: bool = True,
    ) -> ElmoOutput:
        """character_ids (B, W, C) int64 (0 = a padded word); attention_mask (B, W) (default: words
        whose ids are not all 0); next_word_ids / previous_word_ids (B, W) int64: the softmax row
        each word's forward / backward state predicts, -100 for none (both or neither)."""
        mask = (character_ids > 0).any(-1) if attention_mask is None else attention_mask.bool()  # (B, W)
        lengths = mask.sum(1)
        tokens = self.char_encoder(character_ids)  # (B, W, P)
        layers = self.lstm(self.dropout(tokens), lengths)
        keep = mask.unsqueeze(-1).to(tokens.dtype)
        hidden = (torch.cat([tokens, tokens], dim=-1) * keep,
                  *(torch.cat([fwd, bwd], dim=-1) * keep for fwd, bwd in layers))  # each (B, W, 2P)
        out = ElmoOutput(hidden[-1], hidden, mask.long())
        if next_word_ids is None:
            return out
        if self.softmax is None:
            raise ValueError("this biLM has no softmax (n_tokens_vocab 0): it cannot score words")
        forward_top, backward_top = layers[-1]
        out.forward_loss_sum, out.forward_correct, out.forward_count = self._score(forward_top, next_word_ids)
        out.backward_loss_sum, out.backward_correct, out.backward_count = self._score(backward_top, previous_word_ids)
        out.loss = (out.forward_loss_sum / max(out.forward_count, 1)
                    + out.backward_loss_sum / max(out.backward_count, 1))
        return out

    def _score(self, states: torch.Tensor, targets: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, int]:
        """(summed NLL, correct argmax predictions, count) over the positions with a target."""
        where = targets != IGNORE_INDEX  # (B, W)
        logits = self.softmax(self.dropout(states[where]))  # (N, V)
        gold = targets[where]
        loss = F.cross_entropy(logits.float(), gold, reduction="sum")
        return loss, (logits.argmax(-1) == gold).sum(), int(gold.numel())

    @classmethod
    def from_bilm_tf(cls, options_file, weight_file) -> "ElmoBiLM":
        """A published ELMo (bilm-tf's options.json + weights.hdf5; needs h5py) in eval mode: the
        arrays mapped by bertkit.model.elmo.bilm_tf, checked against the options' shapes."""
        from bertkit.model.elmo.bilm_tf import read_bilm_tf

        config, state = read_bilm_tf(options_file, weight_file)
        model = cls(config)
        expected = model.state_dict()
        for key in expected:
            if key not in state:
                raise BertkitError(f"{weight_file}: nothing maps to {key}")
            if tuple(state[key].shape) != tuple(expected[key].shape):
                raise BertkitError(f"{weight_file}: {key} has shape {tuple(state[key].shape)}, options.json implies "
                                   f"{tuple(expected[key].shape)}")
        model.load_state_dict({k: torch.from_numpy(np.ascontiguousarray(v)) for k, v in state.items()})
        return model.eval()

    # ---- words in, representations out ----------------------------------------------------
    def character_ids(self, sentences: Sequence[Sequence[str]], where: str = "sentence",
                      mapper: CharacterMapper | None = None) -> torch.Tensor:
        """AllenNLP's `batch_to_ids` with the sentence markers: (B, max W + 2, C) int64."""
        mapper = mapper or CharacterMapper(self.config.max_characters_per_token)
        rows = [mapper.sentence_ids([BOS, *words, EOS] if words else [], f"{where} {i + 1}")
                for i, words in enumerate(sentences)]
        return torch.from_numpy(batch_character_ids(rows))

    def embed_words(self, sentences: Sequence[Sequence[str]], where: str = "sentence",
                    mapper: CharacterMapper | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """Sentences of words -> (representations (B, L + 1, W, 2P), mask (B, W)): one vector per
        word and layer, the <S> / </S> positions removed. An empty sentence is an error naming it."""
        for index, words in enumerate(sentences):
            if not words:
                raise BertkitError(f"{where} {index + 1}: an empty sentence (no words to represent)")
        ids = self.character_ids(sentences, where, mapper).to(next(self.parameters()).device)
        out = self(ids)
        lengths = out.attention_mask.sum(1) - 2  # words without the markers
        width = int(lengths.max())
        layers = torch.stack(out.hidden_states, dim=1)[:, :, 1:width + 1]  # (B, L + 1, W, 2P)
        mask = torch.arange(width, device=ids.device)[None, :] < lengths[:, None]  # (B, W)
        return layers * mask[:, None, :, None].to(layers.dtype), mask.long()


def word_targets(word_rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(W,) softmax rows of a sentence with its markers -> (next, previous) (W,) int64:
    position t predicts rows[t + 1] forward and rows[t - 1] backward, -100 at the ends."""
    next_ids = np.full(word_rows.shape, IGNORE_INDEX, dtype=np.int64)
    previous_ids = np.full(word_rows.shape, IGNORE_INDEX, dtype=np.int64)
    next_ids[:-1] = word_rows[1:]
    previous_ids[1:] = word_rows[:-1]
    return next_ids, previous_ids
