"""Reading a built pre-training data directory: `PretrainingDataset`.

    DIR/
      tokenizer/                    the tokenizer the ids belong to (save_pretrained copy)
      train-00000/ train-00001/ ... one shard per slice of the corpus (shards.py)
      eval-00000/ ...               held-out documents, for the slices that have some
      build-00000-of-00001.json     one per finished build job: the recipe and slice count

`open` checks that every shard was built by the same recipe (format, max_seq_length,
tokenizer fingerprint, masking, seed, ...) and that the finished jobs cover every slice,
so a half-built or mixed directory is an error, not a silently smaller dataset. Items
are read from memory-mapped arrays; a binary search over cumulative shard sizes finds
the shard.
"""

from __future__ import annotations

import bisect
import hashlib
import json
import re
from collections import OrderedDict
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

import numpy as np

from bertkit.data.shards import ShardArrays, load_shard, read_shard_meta
from bertkit.errors import BertkitError

SPLITS = ("train", "eval")
TOKENIZER_DIR = "tokenizer"
JOB_MARKER = re.compile(r"build-(\d+)-of-(\d+)\.json\Z")
SHARD_DIR = re.compile(r"(train|eval)-(\d+)\Z")
OPEN_SHARDS = 32  # memory-mapped shards kept open (each holds a few file descriptors)


def job_marker_name(job_index: int, num_jobs: int) -> str:
    return f"build-{job_index:05d}-of-{num_jobs:05d}.json"


@dataclass(frozen=True)
class DatasetInfo:
    """What a data directory holds (one split), from its shards' recipe and counts."""

    instance_format: str  # "nsp" | "packed" | "sop"
    max_seq_length: int
    vocab_size: int
    tokenizer_fingerprint: str
    pad_token_id: int
    cls_token_id: int
    sep_token_id: int
    mask_token_id: int
    unk_token_id: int | None
    masking: str  # "dynamic" | "static" (input_ids already masked, labels stored)
    dupe_factor: int
    seed: int
    num_instances: int
    num_tokens: int
    split: str = "train"
    num_shards: int = 0
    short_seq_prob: float = 0.1
    max_predictions_per_seq: int | None = None  # static masking only
    whole_word_masking: bool = False  # static masking only

    @classmethod
    def from_recipe(cls, recipe: dict[str, Any], **counts: Any) -> DatasetInfo:
        names = {f.name for f in fields(cls)}
        values = {k: v for k, v in {**recipe, **recipe["tokenizer"]}.items() if k in names}
        values["tokenizer_fingerprint"] = recipe["tokenizer"]["fingerprint"]
        return cls(**values, **counts)


def tokenizer_fingerprint(tokenizer: Any) -> str:
    """sha256 of what decides the ids: the vocabulary in id order, the sub-word model type,
    the normalizer and pre-tokenizer, the special-token roles, and morpheme splitting."""
    spec = json.loads(tokenizer.backend.to_str())
    vocab = tokenizer.get_vocab()
    tokens = sorted(vocab, key=vocab.__getitem__)
    payload = {
        "vocab": tokens,
        "model": tokenizer.model_type,
        "normalizer": spec.get("normalizer"),
        "pre_tokenizer": spec.get("pre_tokenizer"),
        "specials": [tokenizer.pad_token, tokenizer.unk_token, tokenizer.cls_token, tokenizer.sep_token, tokenizer.mask_token],
        "morphemes": tokenizer.config.pretokenize_morphemes,
    }
    return hashlib.sha256(json.dumps(payload, sort_keys=True, ensure_ascii=False).encode("utf-8")).hexdigest()


# A decoder's tokenizer (GPT-2's) has one end-of-text token and neither [SEP] nor padding:
# its EOS joins documents (GPT-2's packing) and fills padding, which the attention mask hides.
ROLE_FALLBACKS = {"sep": "eos", "pad": "eos"}


def special_token_id(tokenizer: Any, role: str) -> int | None:
    """The id the data use for `role` ("cls", "sep", "pad", "mask", ...): the tokenizer's,
    else its `ROLE_FALLBACKS` stand-in; None when it has neither."""
    token_id = getattr(tokenizer, f"{role}_token_id")
    if token_id is None and role in ROLE_FALLBACKS:
        token_id = getattr(tokenizer, f"{ROLE_FALLBACKS[role]}_token_id")
    return token_id


def tokenizer_summary(tokenizer: Any) -> dict[str, Any]:
    """The recipe's tokenizer entry: fingerprint, vocabulary size and special ids."""
    return {
        "fingerprint": tokenizer_fingerprint(tokenizer),
        "vocab_size": tokenizer.vocab_size,
        "pad_token_id": special_token_id(tokenizer, "pad"),
        "cls_token_id": tokenizer.cls_token_id,
        "sep_token_id": special_token_id(tokenizer, "sep"),
        "mask_token_id": tokenizer.mask_token_id,
        "unk_token_id": tokenizer.unk_token_id,
    }


def scan_shards(directory: Path) -> dict[tuple[str, int], dict[str, Any]]:
    """(split, slice index) -> shard.json, for every finished shard in `directory`."""
    found = {}
    if not directory.is_dir():
        return found
    for path in directory.iterdir():
        match = SHARD_DIR.match(path.name)
        if match and (path / "shard.json").is_file():
            found[(match[1], int(match[2]))] = read_shard_meta(path)
    return found


def scan_job_markers(directory: Path) -> dict[str, dict[str, Any]]:
    """Marker file name -> its content, for every finished build job in `directory`."""
    found = {}
    if not directory.is_dir():
        return found
    for path in sorted(directory.iterdir()):
        if JOB_MARKER.match(path.name):
            try:
                found[path.name] = json.loads(path.read_text(encoding="utf-8"))
            except (OSError, json.JSONDecodeError, UnicodeDecodeError) as exc:
                raise BertkitError(f"{path}: unreadable build record ({exc})") from exc
    return found


def describe_difference(old: dict[str, Any], new: dict[str, Any], new_name: str) -> str | None:
    """A phrase naming the first field where two recipes differ, e.g. "another tokenizer" or
    "instance_format='nsp' (this build: 'sop')"; None when they are the same."""
    if old.get("tokenizer", {}).get("fingerprint") != new.get("tokenizer", {}).get("fingerprint"):
        return f"another tokenizer than {new_name}"
    for key in sorted(set(old) | set(new)):
        if old.get(key) != new.get(key):
            return f"{key}={old.get(key)!r} ({new_name}: {new.get(key)!r})"
    return None


class PretrainingDataset:
    """The instances of one split of a built data directory, indexable like a list.

    Item: {"input_ids": (T,) int64 with [CLS]/[SEP], "token_type_ids": (T,) int64,
    "next_sentence_label": int (nsp 0 IsNext / 1 NotNext; sop 0 in order / 1 swapped;
    packed -100), and "labels": (T,) int64 for static masking (input_ids already masked)}.
    """

    def __init__(self, directory: Path, split: str, shard_dirs: list[Path], metas: list[dict[str, Any]], info: DatasetInfo):
        self.directory = directory
        self.split = split
        self.info = info
        self._shard_dirs = shard_dirs
        self._metas = metas
        self._starts = [0]  # cumulative instance counts: shard s holds [starts[s], starts[s + 1])
        for meta in metas:
            self._starts.append(self._starts[-1] + meta["num_instances"])
        self._open: OrderedDict[int, ShardArrays] = OrderedDict()

    @classmethod
    def open(cls, directory: str | Path, split: str = "train") -> PretrainingDataset:
        """Open `split` ("train" or "eval") of a data directory built by `bertkit data build`."""
        directory = Path(directory)
        if split not in SPLITS:
            raise BertkitError(f"split={split!r} is not one of {', '.join(SPLITS)}")
        if not directory.is_dir():
            raise BertkitError(f"{directory}: no such data directory")
        shards = scan_shards(directory)
        if not any(key[0] == "train" for key in shards):
            raise BertkitError(
                f"{directory}: no shards (train-*/shard.json): not a data directory built by `bertkit data build`"
            )
        recipe = _common_recipe(directory, shards)
        num_slices = _check_complete(directory, shards, recipe)
        if split == "train":
            indices = list(range(num_slices))
        else:
            indices = [k for k in range(num_slices) if shards[("train", k)].get("eval_instances", 0) > 0]
            missing = [k for k in indices if ("eval", k) not in shards]
            if missing:
                raise BertkitError(f"{directory}: eval shard eval-{missing[0]:05d} is missing; rebuild that slice")
            if not indices:
                raise BertkitError(f"{directory}: no eval split (built with --eval-fraction 0, or too few documents)")
        metas = [shards[(split, k)] for k in indices]
        for k, meta in zip(indices, metas):
            load_shard(directory / f"{split}-{k:05d}", meta)  # checks the arrays exist and agree with shard.json
        info = DatasetInfo.from_recipe(
            recipe,
            num_instances=sum(m["num_instances"] for m in metas),
            num_tokens=sum(m["num_tokens"] for m in metas),
            split=split,
            num_shards=len(metas),
        )
        return cls(directory, split, [directory / f"{split}-{k:05d}" for k in indices], metas, info)

    def __len__(self) -> int:
        return self._starts[-1]

    def __getitem__(self, index: int) -> dict[str, Any]:
        n = self._starts[-1]
        if index < 0:
            index += n
        if not 0 <= index < n:
            raise IndexError(f"index {index} out of range for a dataset of {n} instances")
        shard = bisect.bisect_right(self._starts, index) - 1
        local = index - self._starts[shard]
        arrays = self._arrays(shard)
        lo, hi = int(arrays.offsets[local]), int(arrays.offsets[local + 1])
        input_ids = np.array(arrays.input_ids[lo:hi], dtype=np.int64)  # (T,) a plain array, not a memmap view
        token_type_ids = np.zeros(hi - lo, dtype=np.int64)  # (T,)
        segment_b = int(arrays.segment_b[local])
        if segment_b:
            token_type_ids[segment_b:] = 1
        item = {
            "input_ids": input_ids,
            "token_type_ids": token_type_ids,
            "next_sentence_label": int(arrays.next_sentence_label[local]),
        }
        if arrays.labels is not None:
            item["labels"] = np.array(arrays.labels[lo:hi], dtype=np.int64)  # (T,)
        return item

    def text_lengths(self, drop_ids: np.ndarray) -> np.ndarray:
        """(N,) int64: per instance, its tokens that are not in `drop_ids` (e.g. the specials a format added)."""
        lengths = []
        for shard in range(len(self._shard_dirs)):
            arrays = self._arrays(shard)
            kept = np.zeros(len(arrays.input_ids) + 1, dtype=np.int64)  # kept[t]: kept tokens before position t
            np.cumsum(~np.isin(arrays.input_ids, drop_ids), out=kept[1:])
            offsets = np.asarray(arrays.offsets, dtype=np.int64)
            lengths.append(kept[offsets[1:]] - kept[offsets[:-1]])
        return np.concatenate(lengths) if lengths else np.zeros(0, dtype=np.int64)

    def _arrays(self, shard: int) -> ShardArrays:
        arrays = self._open.get(shard)
        if arrays is None:
            arrays = load_shard(self._shard_dirs[shard], self._metas[shard])
            self._open[shard] = arrays
            if len(self._open) > OPEN_SHARDS:
                self._open.popitem(last=False)
        else:
            self._open.move_to_end(shard)
        return arrays

    def tokenizer(self):
        """The tokenizer the ids belong to (DIR/tokenizer), checked against the shards' fingerprint."""
        from bertkit.tokenization import Tokenizer

        tokenizer = Tokenizer.from_pretrained(self.directory / TOKENIZER_DIR)
        if tokenizer_fingerprint(tokenizer) != self.info.tokenizer_fingerprint:
            raise BertkitError(f"{self.directory / TOKENIZER_DIR}: not the tokenizer these shards were built with")
        return tokenizer

    def __getstate__(self) -> dict[str, Any]:  # DataLoader workers (spawn) reopen the memory maps
        state = dict(self.__dict__)
        state["_open"] = OrderedDict()
        return state

    def __repr__(self) -> str:
        i = self.info
        return (f"PretrainingDataset({str(self.directory)!r}, split={self.split!r}, {i.instance_format}, "
                f"{i.num_instances:,} instances, {i.num_tokens:,} tokens, max_seq_length={i.max_seq_length})")


def _common_recipe(directory: Path, shards: dict[tuple[str, int], dict[str, Any]]) -> dict[str, Any]:
    """The recipe every shard shares; an error naming two shards that disagree otherwise."""
    (first_key, first), *rest = sorted(shards.items())
    recipe = first["recipe"]
    for key, meta in rest:
        difference = describe_difference(meta["recipe"], recipe, f"{first_key[0]}-{first_key[1]:05d}")
        if difference:
            raise BertkitError(
                f"{directory}: shards disagree: {key[0]}-{key[1]:05d} was built with {difference}; "
                "rebuild it with one recipe (bertkit data build --overwrite)"
            )
    return recipe


def _check_complete(directory: Path, shards: dict[tuple[str, int], dict[str, Any]], recipe: dict[str, Any]) -> int:
    """The number of slices, after checking the finished jobs cover all of them."""
    markers = {name: m for name, m in scan_job_markers(directory).items() if m.get("recipe") == recipe}
    if not markers:
        raise BertkitError(
            f"{directory}: the build has not finished (no build-*-of-*.json for these shards); "
            "run the same `bertkit data build` command again to complete it"
        )
    counts = {m["num_slices"] for m in markers.values()}
    if len(counts) != 1:
        raise BertkitError(f"{directory}: build records disagree on the number of slices ({sorted(counts)})")
    num_slices = counts.pop()
    covered: set[int] = set()
    for marker in markers.values():
        covered.update(range(marker["job_index"], num_slices, marker["num_jobs"]))
    jobs = sorted({m["num_jobs"] for m in markers.values()})
    missing = [k for k in range(num_slices) if k not in covered]
    if missing:
        example = missing[0]
        raise BertkitError(
            f"{directory}: incomplete: {len(missing)} of {num_slices} slices are not built yet (e.g. slice {example}, "
            f"job --shard-index {example % jobs[0]} of --num-shards {jobs[0]}); run the missing jobs"
        )
    absent = [k for k in range(num_slices) if ("train", k) not in shards]
    if absent:
        raise BertkitError(f"{directory}: shard train-{absent[0]:05d} is missing; run the build again to rebuild it")
    return num_slices
