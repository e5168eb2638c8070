"""DeBERTa-v3's objective (He, Gao and Chen, 2021): ELECTRA's replaced-token detection with
gradient-disentangled embedding sharing (GDES).

Everything but the embedding sharing is ELECTRA's objective (bertkit.objectives.electra: the
corruption, the generator's samples, the loss L_MLM + disc_weight * L_RTD, the metrics), with a
DeBERTa-v2 generator (`DebertaV2ForMaskedLM`, the discriminator's width and `generator_depth` of its
layers, as the paper's half-depth generators; with the enhanced mask decoder unless
`objective.enhanced_mask_decoder=false`) and a DeBERTa-v2 discriminator with the replaced-token
head of microsoft's released code (`mask_predictions`).

GDES: ELECTRA shares one embedding table, so the discriminator's loss pulls the token embeddings
against the generator's MLM loss ("tug-of-war", sec. 3.2). Here the discriminator reads

    E_D = sg(E_G) + E_delta,        E_delta initialised at zero,

so the MLM loss alone trains E_G, and the RTD loss trains only the discriminator's own E_delta.
The discriminator's other embedding parts (LayerNorm, positions, token types when configured) are
its own.

A checkpoint folder holds the discriminator (model_type deberta-v2, E_delta merged into its word
embeddings as the paper's released checkpoints are: `finetune` and transformers' DebertaV2 heads load
it, the RTD head's `mask_predictions.*` ignored) and the generator in `generator/` (a
DebertaV2ForMaskedLM: `fill-mask` takes it). Resuming splits E_delta off again (E_D - E_G).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from bertkit.errors import BertkitError, ConfigError
from bertkit.model.deberta.config import DebertaV2Config
from bertkit.model.deberta.modeling import DebertaV2ForMaskedLM, DebertaV2Model, DebertaV2PreTrainedModel
from bertkit.model.electra.modeling import ElectraForPreTrainingOutput
from bertkit.model.layers import ACTIVATIONS
from bertkit.objectives.electra import GENERATOR_DIR, ElectraObjective, ElectraPretrainingModel
from bertkit.objectives.settings import ObjectiveSettings, setting

DELTA_KEY = "discriminator.deberta.embeddings.word_embeddings.delta"
WORD_EMBEDDINGS = "discriminator.deberta.embeddings.word_embeddings.weight"


class ReplacedTokenHead(nn.Module):
    """microsoft's `mask_predictions`: each state plus the first token's -> LayerNorm -> dense ->
    hidden_act -> `classifier` (H -> 1): (B, T, H) -> (B, T) logits, > 0 = replaced."""

    def __init__(self, config: DebertaV2Config):
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.hidden_size)
        self.act = ACTIVATIONS[config.hidden_act]
        self.LayerNorm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.classifier = nn.Linear(config.hidden_size, 1)

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        states = self.LayerNorm(hidden_states[:, :1] + hidden_states)  # (B, T, H)
        return self.classifier(self.act(self.dense(states))).squeeze(-1)


class DebertaV2ForReplacedTokenDetection(DebertaV2PreTrainedModel):
    """The v3 discriminator: the encoder at `deberta` and `mask_predictions`."""

    optional_prefixes = ("mask_predictions.",)

    def __init__(self, config: DebertaV2Config):
        super().__init__(config)
        self.deberta = DebertaV2Model(config)
        self.mask_predictions = ReplacedTokenHead(config)
        self.init_weights()

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None,
                token_type_ids: torch.Tensor | None = None) -> ElectraForPreTrainingOutput:
        """logits: (B, T) replaced-token logits (the loss is the objective's)."""
        out = self.deberta(input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids)
        return ElectraForPreTrainingOutput(None, self.mask_predictions(out.last_hidden_state))


class DisentangledEmbedding(nn.Module):
    """GDES's token embedding: sg(`shared`.weight) + `delta` (V, H). `shared` (the generator's table)
    is held outside this module's parameters: its gradient comes from the generator's loss only."""

    def __init__(self, shared: nn.Embedding, initial: torch.Tensor):
        super().__init__()
        self._shared = (shared,)  # a tuple: not a submodule (its owner is the generator)
        self.padding_idx = shared.padding_idx
        self.delta = nn.Parameter((initial - shared.weight).detach().clone())

    @property
    def weight(self) -> torch.Tensor:
        """E_D (V, H): the generator's table without its gradient, plus the delta."""
        return self._shared[0].weight.detach() + self.delta

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        return F.embedding(input_ids, self.weight, self.padding_idx)  # (B, T, H)


class DebertaV3PretrainingModel(ElectraPretrainingModel):
    """Generator + discriminator, the discriminator's word embeddings GDES over the generator's;
    the forward pass (mask -> generate -> sample -> detect) is ELECTRA's."""

    def __init__(self, discriminator: DebertaV2ForReplacedTokenDetection, generator: DebertaV2ForMaskedLM):
        nn.Module.__init__(self)  # ELECTRA's constructor shares the whole embedding module; GDES shares the table
        disc, gen = discriminator.config, generator.config
        for name in ("vocab_size", "hidden_size", "pad_token_id"):
            if getattr(gen, name) != getattr(disc, name):
                raise BertkitError(f"generator and discriminator must share the token embeddings, but their {name} "
                                   f"differ ({getattr(gen, name)} vs {getattr(disc, name)})")
        self.discriminator = discriminator
        self.generator = generator
        embeddings = discriminator.deberta.embeddings
        embeddings.word_embeddings = DisentangledEmbedding(generator.deberta.embeddings.word_embeddings,
                                                           embeddings.word_embeddings.weight)
        self.config = disc


def generator_config(config: DebertaV2Config, depth: float, enhanced_mask_decoder: bool = False) -> DebertaV2Config:
    """The generator of discriminator `config`: the same width (the token table is shared) and
    round(depth * layers) layers (at least 1), no task-head fields, the enhanced mask decoder on request."""
    layers = max(1, round(config.num_hidden_layers * depth))
    return dataclasses.replace(config, num_hidden_layers=layers, extra={}, id2label=None, label2id=None,
                               problem_type=None, enhanced_mask_decoder=enhanced_mask_decoder)


@dataclass(frozen=True)
class DebertaV3Settings(ObjectiveSettings):
    generator_depth: float = setting(0.5, "deberta-v3: generator layers as a fraction of the discriminator's, in "
                                          "(0, 1] (its width is the discriminator's: the embeddings are shared)")
    disc_weight: float = setting(50.0, "deberta-v3: lambda, the weight of the discriminator's loss")
    # on by default: the paper's and microsoft's generator run it, and at deberta-tiny it took the held-out
    # generator MLM loss from 5.33 to 4.80 and 5.11 to 4.83 (two seeds) in 300 steps (results/deberta_emd.jsonl)
    enhanced_mask_decoder: bool = setting(True, "deberta-v3: the generator predicts through DeBERTa's enhanced mask "
                                                "decoder (absolute positions added before its head; false: "
                                                "transformers' DebertaV2ForMaskedLM function)")

    def check(self) -> None:
        if not 0.0 < self.generator_depth <= 1.0:
            raise ConfigError(f"field 'generator_depth' must be in (0, 1], got {self.generator_depth}")
        if not self.disc_weight > 0.0:
            raise ConfigError(f"field 'disc_weight' must be positive, got {self.disc_weight}")


class DebertaV3Objective(ElectraObjective):
    name = "deberta-v3"
    settings_class = DebertaV3Settings
    config_class = DebertaV2Config
    discriminator_class = DebertaV2ForReplacedTokenDetection
    generator_class = DebertaV2ForMaskedLM
    pretraining_model_class = DebertaV3PretrainingModel  # E_delta = E_D - E_G when a folder is loaded (resume)

    @classmethod
    def build_model(cls, config: DebertaV2Config, settings: DebertaV3Settings | None = None) -> DebertaV3PretrainingModel:
        settings = settings or DebertaV3Settings()
        discriminator = DebertaV2ForReplacedTokenDetection(config)
        generator = DebertaV2ForMaskedLM(generator_config(config, settings.generator_depth,
                                                          settings.enhanced_mask_decoder))
        with torch.no_grad():  # E_delta starts at zero: E_D = E_G
            discriminator.deberta.embeddings.word_embeddings.weight.copy_(generator.deberta.embeddings.word_embeddings.weight)
        return DebertaV3PretrainingModel(discriminator, generator)

    def save_pretrained(self, model: DebertaV3PretrainingModel, directory: Path, state_dict=None) -> None:
        """ELECTRA's folders, the discriminator's word embeddings written as E_D = E_G + E_delta."""
        state = dict(model.state_dict() if state_dict is None else state_dict)
        shared = state["generator.deberta.embeddings.word_embeddings.weight"]
        state[WORD_EMBEDDINGS] = shared.detach() + state.pop(DELTA_KEY).to(shared.device)
        super().save_pretrained(model, directory, state_dict=state)
