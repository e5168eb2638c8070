"""Load and save model weights in the Hugging Face layout, for any model family.

Keys need no translation table because bertkit's module names are HF's. What differs
between a checkpoint and a model is declared on the model class
(bertkit.model.pretrained.PreTrainedModel): the backbone prefix a checkpoint may lack or
carry (`base_model_prefix`, `backbone_prefix`, `head_roots`), keys that carry no learned
state (`derived_keys`: tied copies, buffers HF sometimes stores) and a family's own
layout hooks (BERT's pre-LN models are saved in transformers' roberta-prelayernorm
layout, bertkit.interop.prelayernorm). Legacy TF-port names (LayerNorm gamma/beta) are
read as weight/bias for every family (`_canonical_key`).
"""

from __future__ import annotations

from pathlib import Path

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file

from bertkit.atomic import atomic_path
from bertkit.errors import BertkitError
from bertkit.interop.config_json import write_config_json

SAFETENSORS_NAME = "model.safetensors"
PYTORCH_NAME = "pytorch_model.bin"

def read_state_dict(directory: Path) -> tuple[dict[str, torch.Tensor], Path]:
    """Read model.safetensors (preferred) or pytorch_model.bin without executing pickled code."""
    if not directory.is_dir():
        from bertkit.interop.hub_cache import where_models_come_from

        raise BertkitError(where_models_come_from(str(directory)))
    path = directory / SAFETENSORS_NAME
    if path.exists():
        try:
            return load_file(path, device="cpu"), path
        except (SafetensorError, OSError, ValueError, RuntimeError) as exc:
            raise BertkitError(f"{path}: corrupt or truncated safetensors file ({exc})") from None
    path = directory / PYTORCH_NAME
    if path.exists():
        try:
            state = torch.load(path, map_location="cpu", weights_only=True)
        except Exception as exc:  # unpickling errors come in many types
            raise BertkitError(f"{path}: cannot read weights safely ({str(exc).splitlines()[0]})") from None
        if not isinstance(state, dict):
            raise BertkitError(f"{path}: expected a state dict of tensors")
        return state, path
    raise BertkitError(f"{directory}: no {SAFETENSORS_NAME} or {PYTORCH_NAME} found")


def _canonical_key(key: str) -> str:
    if key.endswith(".gamma"):
        return key[: -len("gamma")] + "weight"
    if key.endswith(".beta"):
        return key[: -len("beta")] + "bias"
    return key


def _align_prefix(
    state: dict[str, torch.Tensor], backbone_prefix: str, base_prefix: str, head_roots: tuple[str, ...]
) -> dict[str, torch.Tensor]:
    """Map checkpoint keys onto the model's naming: add or strip the backbone prefix.

    A bare `BertModel` checkpoint has no prefix; one saved from a model with heads
    (BertForPreTraining, BertForMaskedLM, ...) prefixes backbone keys with "bert."
    (`base_prefix`: "roberta." for RoBERTa; "." for a family without one). Keys under
    `head_roots` are never prefixed.
    """
    has_prefix = base_prefix != "." and any(k.startswith(base_prefix) for k in state)
    if backbone_prefix and not has_prefix:
        return {(k if k.startswith(head_roots) else backbone_prefix + k): v for k, v in state.items()}
    if not backbone_prefix and has_prefix:
        return {k.removeprefix(base_prefix): v for k, v in state.items()}
    return state


def load_pretrained_weights(model: torch.nn.Module, directory: Path, strict: bool = True) -> dict[str, list[str]]:
    """Load checkpoint weights into `model`; returns {"missing_keys", "unexpected_keys"}.

    Shapes must match exactly. Missing keys outside the model's optional prefixes (heads,
    pooler) raise `BertkitError` when `strict`.
    """
    raw, path = read_state_dict(directory)
    state = model.state_from_checkpoint({_canonical_key(k): v for k, v in raw.items()}, path)
    base_prefix = model.base_model_prefix + "."  # HF's attribute holding the encoder
    head_roots = model.head_roots + tuple(sorted({k.split(".")[0] + "." for k in model.state_dict()
                                                  if model.backbone_prefix and not k.startswith(model.backbone_prefix)}))
    state = _align_prefix(state, model.backbone_prefix, base_prefix, head_roots)
    state = {k: v for k, v in state.items() if not k.endswith(model.derived_keys)}
    expected = model.state_dict()
    for key, tensor in state.items():
        if key in expected and tuple(tensor.shape) != tuple(expected[key].shape):
            raise BertkitError(
                f"{path}: shape mismatch for {key!r}: checkpoint {tuple(tensor.shape)} vs model "
                f"{tuple(expected[key].shape)} (does config.json match the weights?)"
            )
    missing = sorted(set(expected) - set(state))
    unexpected = sorted(set(state) - set(expected))
    missing_backbone = [k for k in missing if not k.startswith(model.optional_prefixes)]
    if strict and missing_backbone:
        shown = ", ".join(missing_backbone[:3]) + (" ..." if len(missing_backbone) > 3 else "")
        raise BertkitError(f"{path}: {len(missing_backbone)} backbone weights missing ({shown})")
    model.load_state_dict({k: v for k, v in state.items() if k in expected}, strict=False)
    return {"missing_keys": missing, "unexpected_keys": unexpected}


def save_pretrained_checkpoint(
    model: torch.nn.Module, directory: Path, state_dict: dict[str, torch.Tensor] | None = None
) -> None:
    """config.json + model.safetensors for `model` (its class name in `architectures`), in
    the layout its class writes (`checkpoint_layout`: BERT's pre-LN models in transformers'
    roberta-prelayernorm layout, raising `BertkitError` before anything is written when
    transformers cannot express the model)."""
    config = model.config
    config.extra = {**config.extra, "architectures": [type(model).__name__]}
    # fields transformers reads to run this class as bertkit does (BertLMHeadModel: is_decoder,
    # i.e. causally); any other class drops them, e.g. a classifier fine-tuned from a causal LM
    values = {k: v for k, v in config.to_dict().items() if k != "is_decoder"}
    values.update(getattr(model, "hf_config_fields", {}))
    state = model.state_dict() if state_dict is None else state_dict
    values, state = model.checkpoint_layout(values, state, directory)
    write_config_json(directory, values)
    save_pretrained_weights(model, directory, state)


def save_pretrained_weights(model: torch.nn.Module, directory: Path, state_dict: dict[str, torch.Tensor] | None = None) -> Path:
    """Write model.safetensors atomically (see bertkit.atomic); `state_dict` defaults to the model's."""
    source = model.state_dict() if state_dict is None else state_dict
    state = {k: v.detach().contiguous().cpu() for k, v in source.items()}
    path = directory / SAFETENSORS_NAME
    with atomic_path(path) as tmp:
        save_file(state, str(tmp), metadata={"format": "pt"})
    return path
