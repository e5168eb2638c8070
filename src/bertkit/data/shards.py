"""Shard files: the instances of one slice and split as flat numpy arrays, written atomically.

A shard is a directory `{split}-{slice:05d}/` holding
  input_ids.npy            (T,) uint16 (vocabulary < 65536) or int32: all instances' ids, concatenated
  offsets.npy              (N + 1,) int64: instance i is input_ids[offsets[i]:offsets[i + 1]]
  segment_b.npy            (N,) int32: first position of segment B (token type 1 from there on); 0 = one segment
  next_sentence_label.npy  (N,) int8: NSP/SOP label, -100 for packed sequences
  labels.npy               (T,) int32, static masking only: MLM labels (-100 = not predicted)
  shard.json               counts, the split, the slice index and the build recipe
Arrays are `.npy` files, read back memory-mapped (`np.load(mmap_mode="r")`, never pickles).
A shard is written into a hidden temporary directory and renamed into place when every
file is on disk, so a killed build never leaves a partial shard under a shard's name.
"""

from __future__ import annotations

import itertools
import json
import os
import shutil
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from bertkit.errors import BertkitError

SHARD_FILE = "shard.json"
FORMAT_VERSION = 1
TMP_PREFIX = ".tmp-"


def shard_name(split: str, slice_index: int) -> str:
    return f"{split}-{slice_index:05d}"


def id_dtype(vocab_size: int) -> np.dtype:
    """uint16 when every id fits (vocabulary <= 65536), else int32."""
    return np.dtype(np.uint16) if vocab_size <= 1 << 16 else np.dtype(np.int32)


@dataclass
class ShardArrays:
    """The arrays of one shard (shapes and dtypes in the module docstring)."""

    input_ids: np.ndarray
    offsets: np.ndarray
    segment_b: np.ndarray
    next_sentence_label: np.ndarray
    labels: np.ndarray | None = None

    @property
    def num_instances(self) -> int:
        return len(self.offsets) - 1

    @classmethod
    def from_instances(cls, instances: Sequence[tuple], dtype: np.dtype) -> ShardArrays:
        """Arrays from `(input_ids, segment_b, label)` tuples, or `(..., mlm_labels)` for static masking."""
        n = len(instances)
        lengths = np.fromiter((len(x[0]) for x in instances), dtype=np.int64, count=n)
        offsets = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        total = int(offsets[-1])
        static = n > 0 and len(instances[0]) == 4
        if static:
            input_ids = np.concatenate([x[0] for x in instances]).astype(dtype, copy=False)
            labels = np.concatenate([x[3] for x in instances]).astype(np.int32, copy=False)
        else:
            input_ids = np.fromiter(itertools.chain.from_iterable(x[0] for x in instances), dtype=dtype, count=total)
            labels = None
        return cls(
            input_ids=input_ids,
            offsets=offsets,
            segment_b=np.fromiter((x[1] for x in instances), dtype=np.int32, count=n),
            next_sentence_label=np.fromiter((x[2] for x in instances), dtype=np.int8, count=n),
            labels=labels,
        )

    def items(self) -> list[tuple[str, np.ndarray]]:
        names = ["input_ids", "offsets", "segment_b", "next_sentence_label"] + (["labels"] if self.labels is not None else [])
        return [(name, getattr(self, name)) for name in names]


def write_shard(parent: Path, name: str, arrays: ShardArrays, meta: dict[str, Any]) -> Path:
    """Write `arrays` and `meta` (plus counts) as shard `parent/name`, atomically; returns its path."""
    target = parent / name
    tmp = parent / f"{TMP_PREFIX}{name}-{uuid.uuid4().hex[:12]}"
    tmp.mkdir(parents=True)
    try:
        for key, array in arrays.items():
            with open(tmp / f"{key}.npy", "wb") as handle:
                np.save(handle, array, allow_pickle=False)
                handle.flush()
                os.fsync(handle.fileno())
        meta = {
            **meta,
            "format_version": FORMAT_VERSION,
            "num_instances": arrays.num_instances,
            "num_tokens": int(len(arrays.input_ids)),
            "input_ids_dtype": arrays.input_ids.dtype.name,
            "static_labels": arrays.labels is not None,
        }
        with open(tmp / SHARD_FILE, "w", encoding="utf-8") as handle:
            handle.write(json.dumps(meta, indent=1) + "\n")
            handle.flush()
            os.fsync(handle.fileno())
        try:
            os.rename(tmp, target)
        except OSError as exc:
            raise BertkitError(f"{target}: cannot move the new shard into place ({exc.strerror or exc}); "
                               "is another build writing the same slice?") from exc
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    _fsync_dir(parent)
    return target


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def read_shard_meta(directory: Path) -> dict[str, Any]:
    """shard.json of the shard at `directory` (errors name the file)."""
    path = directory / SHARD_FILE
    try:
        meta = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise BertkitError(f"{path}: cannot read ({exc.strerror or exc})") from exc
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise BertkitError(f"{path}: not valid JSON ({exc})") from exc
    if not isinstance(meta, dict) or meta.get("format_version") != FORMAT_VERSION:
        raise BertkitError(f"{path}: not a bertkit shard (format_version {FORMAT_VERSION} expected)")
    return meta


def load_shard(directory: Path, meta: dict[str, Any]) -> ShardArrays:
    """The arrays of a shard, memory-mapped, checked against the counts in `meta`."""
    n, total = meta["num_instances"], meta["num_tokens"]
    expected = {"input_ids": (total,), "offsets": (n + 1,), "segment_b": (n,), "next_sentence_label": (n,)}
    if meta.get("static_labels"):
        expected["labels"] = (total,)
    arrays = {}
    for key, shape in expected.items():
        path = directory / f"{key}.npy"
        try:
            try:
                array = np.load(path, mmap_mode="r", allow_pickle=False)
            except ValueError:
                if shape[0] != 0:
                    raise
                array = np.load(path, allow_pickle=False)  # older numpy cannot map an empty array
        except OSError as exc:
            raise BertkitError(f"{path}: cannot read ({exc.strerror or exc})") from exc
        except ValueError as exc:
            raise BertkitError(f"{path}: damaged ({exc}); rebuild the shard") from exc
        if array.shape != shape:
            raise BertkitError(f"{path}: shape {array.shape}, shard.json says {shape}: the shard is damaged, rebuild it")
        arrays[key] = array
    if n and int(arrays["offsets"][-1]) != total:
        raise BertkitError(f"{directory}: offsets end at {int(arrays['offsets'][-1])}, not {total}: the shard is damaged")
    return ShardArrays(**arrays)
