"""ALBERT's objective: masked LM + sentence-order prediction (SOP) on `sop` data.

A `sop` instance is two consecutive segments of one document, swapped with probability
0.5 at build time (`bertkit data build --format sop`); its label is 0 in order, 1 swapped.
Loss = mean CE over the masked positions + mean CE of the order over the pairs: BERT's
MLM + NSP arithmetic (bertkit.objectives.mlm_nsp) with SOP data and `AlbertForPreTraining`,
whose `sop_logits` the shared code reads under NSP's name. Metrics are reported as
`sop_loss` / `sop_accuracy`. NSP or packed data is refused before training starts.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from torch import nn

from bertkit.errors import BertkitError, ConfigError
from bertkit.model.albert.config import PARTIAL_SHARING, SHARING_MODES
from bertkit.model.albert import AlbertConfig, AlbertForPreTraining
from bertkit.objectives.mlm_nsp import MlmNspObjective
from bertkit.objectives.settings import ObjectiveSettings, setting
from bertkit.training.config import EVAL_SEED


@dataclass(frozen=True)
class AlbertSettings(ObjectiveSettings):
    """The model's shape for a fresh run; a checkpoint keeps its own (given, they must match it)."""

    embedding_size: int | None = setting(None, "albert: factorized embedding width E (V x E, then E x H; unset: 128)")
    share_layers: str | None = setting(None, "albert: cross-layer parameter sharing (unset: all)", SHARING_MODES)

    def check(self) -> None:
        if self.embedding_size is not None and self.embedding_size <= 0:
            raise ConfigError(f"field 'embedding_size' must be positive, got {self.embedding_size}")


class AlbertObjective(MlmNspObjective):
    name = "albert"
    data_formats = ("sop",)
    settings_class = AlbertSettings
    config_class = AlbertConfig
    model_class = AlbertForPreTraining
    progress_keys = ("mlm_accuracy", "sop_accuracy")
    plot_panels = [
        ("Loss", ["loss", "eval_loss"]),
        ("MLM accuracy", ["mlm_accuracy", "eval_mlm_accuracy"]),
        ("SOP accuracy", ["sop_accuracy", "eval_sop_accuracy"]),
    ]

    def __init__(self, model, train, eval_data, masking, seed, eval_seed: int = EVAL_SEED,
                 settings: AlbertSettings | None = None):
        settings = settings or AlbertSettings()
        config, embedding_size, share_layers = model.config, settings.embedding_size, settings.share_layers
        if embedding_size is not None and embedding_size != config.embedding_size:
            raise BertkitError(f"embedding_size {embedding_size} does not match the model's {config.embedding_size} "
                               f"(a checkpoint keeps its own; leave --embedding-size out)")
        groups = 1 if share_layers == "all" else config.num_hidden_layers  # all/none: equal when L = 1
        partial = share_layers if share_layers in PARTIAL_SHARING else None
        if share_layers is not None and (config.num_hidden_groups, config.inner_group_num, config.share_layers) != (
            groups, 1, partial
        ):
            raise BertkitError(f"share_layers {share_layers!r} does not match the model's {config.sharing!r} "
                               f"(a checkpoint keeps its own; leave --share-layers out)")
        super().__init__(model, train, eval_data, masking, seed, eval_seed, settings)

    @classmethod
    def build_model(cls, config: AlbertConfig, settings: AlbertSettings | None = None) -> nn.Module:
        settings = settings or AlbertSettings()
        changes: dict[str, Any] = {}
        if settings.embedding_size is not None:
            changes["embedding_size"] = settings.embedding_size
        if settings.share_layers is not None:  # the groups follow from the mode
            changes.update(share_layers=settings.share_layers, num_hidden_groups=None)
        if changes:
            config = AlbertConfig.from_dict({**config.to_dict(), **changes}, source="albert options")
        return AlbertForPreTraining(config)

    def fsdp_units(self, model: nn.Module) -> list[nn.Module]:
        """FSDP shards each distinct `AlbertLayer` (a layer shared by all runs gathers once per
        application). With attention- or FFN-only sharing a shared sub-module sits in every
        layer, which FSDP cannot manage in two units: the whole model is then one unit."""
        if model.config.share_layers is not None:
            return []
        return [layer for group in model.albert.encoder.albert_layer_groups for layer in group.albert_layers]

    def summarize(self, stats: dict[str, float]) -> dict[str, float]:
        metrics = super().summarize(stats)
        return {key.replace("nsp_", "sop_"): value for key, value in metrics.items()}
