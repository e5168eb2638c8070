"""`PreTrainedModel`: what every family's model shares, none of it BERT's.

A family's models subclass it (through the family's own base, e.g. `BertPreTrainedModel`)
and set:
- `config_class`: the family's `PretrainedConfig` subclass (read by `from_pretrained`);
- `base_model_prefix`: the attribute holding the backbone in models with heads (HF's:
  `bert`, `roberta`, ...); checkpoints of the bare backbone have no such prefix;
- `backbone_prefix`: "" when the class *is* the backbone, `base_model_prefix + "."` when
  it wraps one;
- `optional_prefixes`: state-dict keys under these (heads, a pooler some checkpoints lack)
  may be missing from a checkpoint: they keep their fresh init and are listed in
  `loading_info["missing_keys"]`; any other missing key is an error (unless strict=False);
- `head_roots`, `derived_keys`: checkpoint keys never prefixed with the backbone's, and
  keys that carry no learned state (tied copies, buffers) and are dropped on load;
- `_init_module(module)`: the family's weight init, one module at a time (`init_weights`);
- `state_from_checkpoint` / `checkpoint_layout`: a hook for a family whose checkpoints
  may come in another layout (BERT's pre-LN models are saved in roberta-prelayernorm's).
Loading checks key sets and shapes, reads model.safetensors or (weights only)
pytorch_model.bin and never runs pickled code; saving writes config.json and
model.safetensors atomically (bertkit.interop.hf).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import torch
from torch import nn

from bertkit.pretrained_config import PretrainedConfig


class PreTrainedModel(nn.Module):
    """Config, weight init and HF-layout `from_pretrained` / `save_pretrained`."""

    config_class: type[PretrainedConfig] = PretrainedConfig
    base_model_prefix = ""
    backbone_prefix = ""
    optional_prefixes: tuple[str, ...] = ()
    head_roots: tuple[str, ...] = ()
    derived_keys: tuple[str, ...] = ()
    hf_config_fields: dict[str, object] = {}  # config.json fields transformers needs to run the class as bertkit

    def __init__(self, config: PretrainedConfig):
        super().__init__()
        self.config = config
        self.loading_info: dict[str, list[str]] = {"missing_keys": [], "unexpected_keys": []}

    # ---- init ---------------------------------------------------------------------
    def init_weights(self) -> None:
        """The family's init (`_init_module`) over every submodule, in `modules()` order."""
        for module in self.modules():
            self._init_module(module)

    def _init_module(self, module: nn.Module) -> None:
        """One module's init; here PyTorch's defaults are kept."""

    # ---- checkpoint layout hooks ----------------------------------------------------
    def state_from_checkpoint(self, state: dict[str, torch.Tensor], path: Path) -> dict[str, torch.Tensor]:
        """A checkpoint's state dict (canonical key names) in this model's family layout."""
        return state

    def checkpoint_layout(
        self, values: dict[str, Any], state: dict[str, torch.Tensor], directory: Path
    ) -> tuple[dict[str, Any], dict[str, torch.Tensor]]:
        """(config.json values, state dict) as they are written for this model."""
        return values, state

    # ---- loading and saving -------------------------------------------------------
    @classmethod
    def from_pretrained(
        cls,
        directory: str | os.PathLike,
        strict: bool = True,
        output_loading_info: bool = False,
        config: PretrainedConfig | None = None,
        **config_fields,
    ):
        """Load config.json + model.safetensors (or pytorch_model.bin, weights only).

        Missing optional weights (heads) are allowed, initialised fresh and listed in
        `model.loading_info`; other missing weights raise unless `strict=False`; a shape
        mismatch always raises. `config` replaces the directory's config.json (e.g. one
        with a task's label map); keyword config fields set on top, as transformers'
        `from_pretrained(path, num_labels=3)` (an unknown field: one error naming it)."""
        from bertkit.interop.hf import load_pretrained_weights
        from bertkit.interop.hub_cache import resolve_model_dir

        directory = resolve_model_dir(directory)  # a folder, or a Hugging Face id in the local cache
        config = config if config is not None else cls.config_class.from_pretrained(directory)
        if config_fields:
            config = type(config).from_dict({**config.to_dict(), **config_fields}, source="from_pretrained")
        model = cls(config)
        model.loading_info = load_pretrained_weights(model, Path(directory), strict=strict)
        model.eval()
        return (model, model.loading_info) if output_loading_info else model

    def save_pretrained(self, directory: str | os.PathLike, state_dict: dict[str, torch.Tensor] | None = None) -> None:
        """Write config.json and model.safetensors (atomically) in the HF layout.

        `state_dict` replaces the module's own (e.g. a full one gathered from FSDP shards)."""
        from bertkit.interop.hf import save_pretrained_checkpoint

        save_pretrained_checkpoint(self, Path(directory), state_dict)

    def num_parameters(self) -> int:
        return sum(p.numel() for p in self.parameters())


def normal_init(module: nn.Module, std: float) -> None:
    """transformers' BERT-style init of one module: Linear and Embedding weights normal(0, std),
    biases and the padding row zero, LayerNorm ones and zeros (BERT's and BART's `_init_module`)."""
    if isinstance(module, nn.Linear):
        nn.init.normal_(module.weight, 0.0, std)
        if module.bias is not None:
            nn.init.zeros_(module.bias)
    elif isinstance(module, nn.Embedding):
        nn.init.normal_(module.weight, 0.0, std)
        if module.padding_idx is not None:
            with torch.no_grad():
                module.weight[module.padding_idx].zero_()
    elif isinstance(module, nn.LayerNorm):
        nn.init.ones_(module.weight)
        nn.init.zeros_(module.bias)
