"""The teacher cache: the teacher's outputs stored in float32 so a resumed or repeated
run reuses them. General distillation: one safetensors file per (epoch, training
example) under a folder keyed by everything they depend on (`TeacherCache`,
`general_cache_key`); task distillation: the logits of the whole training set in one
.npz aligned with the training features (`save_teacher_logits`, `task_cache_path`)."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from torch import nn

from bertkit.atomic import atomic_path
from bertkit.checksums import file_sha256
from bertkit.distillation.student import attention_layer_map, hidden_layer_map

if TYPE_CHECKING:
    from bertkit.distillation.config import DistillConfig, TaskDistillConfig


def weights_digest(directory: str | Path) -> str:
    """sha256 of a checkpoint's weight file (what the teacher computes depends on)."""
    from bertkit.interop.hf import PYTORCH_NAME, SAFETENSORS_NAME

    directory = Path(directory)
    path = directory / SAFETENSORS_NAME if (directory / SAFETENSORS_NAME).exists() else directory / PYTORCH_NAME
    return file_sha256(path, block_size=1 << 22)


def _digest(payload: Any) -> str:
    return hashlib.sha256(json.dumps(payload, sort_keys=True, default=str).encode("utf-8")).hexdigest()[:20]


class TeacherCache:
    """Teacher outputs per (epoch, training example), one safetensors file each, under a
    folder named by a key of everything they depend on."""

    def __init__(self, directory: Path):
        self.directory = directory

    def path(self, epoch: int, index: int) -> Path:
        return self.directory / f"epoch-{epoch:04d}" / f"{index:09d}.safetensors"

    def load(self, epoch: int, index: int) -> dict[str, torch.Tensor] | None:
        from safetensors.torch import load_file

        path = self.path(epoch, index)
        if not path.is_file():
            return None
        try:
            return load_file(path)
        except Exception:  # a torn file (killed mid-write cannot happen: writes are atomic) is recomputed
            return None

    def save(self, epoch: int, index: int, tensors: dict[str, torch.Tensor]) -> None:
        from safetensors.torch import save_file

        path = self.path(epoch, index)
        path.parent.mkdir(parents=True, exist_ok=True)
        with atomic_path(path) as tmp:
            save_file({k: v.detach().contiguous().cpu() for k, v in tensors.items()}, str(tmp))


def general_cache_key(config: DistillConfig, teacher: nn.Module, train) -> str:
    """What the teacher's outputs for (epoch, example) depend on: its weights and config,
    the data, the masking and seed, and which outputs are stored."""
    info = dataclasses.asdict(train.info)
    s_layers = config.student_layers or max(1, teacher.config.num_hidden_layers // 2)
    stored = {"logits": config.alpha_soft > 0, "last": config.alpha_cos > 0,
              "hidden": hidden_layer_map(teacher.config.num_hidden_layers, s_layers) if config.alpha_hidden > 0 else [],
              "attention": attention_layer_map(teacher.config.num_hidden_layers, s_layers)
              if config.alpha_attention > 0 else []}
    return _digest({"teacher": weights_digest(config.teacher), "teacher_config": teacher.config.to_dict(),
                    "data": info, "masking": [config.masking, config.mlm_probability, config.max_predictions_per_seq],
                    "seed": config.seed, "stored": stored})


def save_teacher_logits(path: Path, logits: list[np.ndarray]) -> None:
    """An .npz aligned with the features: `logits` (N, ...) when every feature's array has
    the same shape, else `values` (sum of the T_i, ...) and `lengths` (N,) (ragged: tagging
    and QA windows of their own lengths). Written atomically."""
    if len({x.shape for x in logits}) <= 1:
        arrays = {"logits": np.stack(logits) if logits else np.zeros((0,), np.float32)}
    else:
        arrays = {"values": np.concatenate(logits), "lengths": np.asarray([len(x) for x in logits], dtype=np.int64)}
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(path) as tmp, open(tmp, "wb") as handle:
        np.savez(handle, **arrays)


def load_teacher_logits(path: Path) -> list[np.ndarray]:
    """The per-feature arrays of `save_teacher_logits`."""
    with np.load(path, allow_pickle=False) as data:
        if "logits" in data:
            return list(data["logits"])
        return np.split(data["values"], np.cumsum(data["lengths"])[:-1])


def task_cache_path(config: TaskDistillConfig, spec) -> Path:
    key = _digest({"teacher": weights_digest(config.teacher), "train": file_digest(config.train),
                   "spec": dataclasses.asdict(spec)})
    return config.teacher_cache_root() / f"task-{key}.npz"


def file_digest(path: str) -> str:
    return file_sha256(path, block_size=1 << 22)
