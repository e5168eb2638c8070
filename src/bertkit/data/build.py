"""The data build: corpus files -> tokenized pre-training instances in shards.

    build_dataset(["corpus.txt.gz"], "tok/", "data/", BuildOptions(instance_format="nsp"))

The corpus is streamed: documents are grouped into slices of about `slice_chars`
characters (corpus.py), and each slice is one unit of work for a worker process:
sentence-split, tokenize (one batch call), hold out some documents for evaluation, make
instances `dupe_factor` times (the recipe's format, bertkit.data.formats), optionally mask them (static masking, with
bertkit.data.masking), shuffle, and write `train-{slice}` and `eval-{slice}` shards
(shards.py). NotNext documents come from the same slice. Memory holds a few slices,
never the corpus.

Determinism: every random choice of slice k, copy c comes from its own stream seeded by
(seed, k, c, purpose), so the dataset depends on the corpus, the options and the seed,
not on the number of workers or jobs. `num_jobs`/`job_index` make this process build only
slices k with k % num_jobs == job_index, so many jobs (machines) can fill one directory;
each finished job writes `build-{job}-of-{jobs}.json`, and the reader checks that the jobs
cover every slice.

Re-running the same command resumes: finished shards of the same recipe are kept and
skipped. A directory holding shards of another recipe (tokenizer, format, seed, ...) is
refused unless `overwrite`, which deletes those shards (and rebuilds this job's slices).
"""

from __future__ import annotations

import json
import math
import os
import random
import shutil
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Iterator, Sequence

import numpy as np
from tqdm import tqdm

from bertkit.atomic import write_text_atomic
from bertkit.data.corpus import SLICE_CHARS, Slice, iter_documents, iter_slices
from bertkit.data.dataset import (
    ROLE_FALLBACKS,
    TOKENIZER_DIR,
    job_marker_name,
    describe_difference,
    scan_job_markers,
    scan_shards,
    special_token_id,
    tokenizer_fingerprint,
    tokenizer_summary,
)
from bertkit.data.formats import FORMATS, get_format
from bertkit.data.sentences import split_sentences
from bertkit.data.shards import TMP_PREFIX, ShardArrays, id_dtype, shard_name, write_shard
from bertkit.errors import BertkitError, ConfigError
from bertkit.parallel import parallel_map
from bertkit.columnar import expand_inputs
from bertkit.textio import check_readable

MASKINGS = ("dynamic", "static")
# Purposes of the random streams of one slice: (seed, slice, copy, purpose) seeds each.
_INSTANCES, _EVAL_SPLIT, _EVAL_INSTANCES, _SHUFFLE, _EVAL_SHUFFLE = range(5)


@dataclass(frozen=True)
class BuildOptions:
    """How instances are made. Everything here (with the tokenizer and the input files)
    is the dataset's recipe: shards of different recipes never mix in one directory."""

    instance_format: str = "nsp"  # a registered format (bertkit.data.formats): nsp, packed, sop
    max_seq_length: int = 128
    masking: str = "dynamic"  # "dynamic": masked at training time; "static": masked here, labels stored
    dupe_factor: int | None = None  # copies, each with its own instances and masks; None: 5 static, 1 dynamic
    short_seq_prob: float = 0.1
    max_predictions_per_seq: int | None = None  # static only; None: round(0.15 * max_seq_length)
    whole_word_masking: bool = False  # static only
    mlm_probability: float = 0.15  # static only
    seed: int = 12345
    eval_fraction: float = 0.01  # documents held out (at least one when there are enough)
    sentence_split: bool = True
    text_field: str = "text"  # JSONL field
    skip_bad_lines: bool = False
    slice_chars: int = SLICE_CHARS

    def __post_init__(self) -> None:
        get_format(self.instance_format)  # a registered format, or one line naming them
        if self.masking not in MASKINGS:
            raise ConfigError(f"masking={self.masking!r} is not one of {', '.join(MASKINGS)}")
        _check_int("max_seq_length", self.max_seq_length, 8)
        if self.dupe_factor is not None:
            _check_int("dupe_factor", self.dupe_factor, 1)
        if self.max_predictions_per_seq is not None:
            _check_int("max_predictions_per_seq", self.max_predictions_per_seq, 1)
        _check_int("seed", self.seed, 0)
        _check_int("slice_chars", self.slice_chars, 1)
        for name in ("short_seq_prob", "eval_fraction"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < 1:
                raise ConfigError(f"{name}={value!r} must be a number in [0, 1)")
        if not (isinstance(self.mlm_probability, (int, float)) and 0 < self.mlm_probability <= 1):
            raise ConfigError(f"mlm_probability={self.mlm_probability!r} must be a number in (0, 1]")
        if self.masking == "dynamic" and (self.whole_word_masking or self.max_predictions_per_seq is not None):
            name = "whole_word_masking" if self.whole_word_masking else "max_predictions_per_seq"
            raise ConfigError(f"{name} applies to static masking only (dynamic masking is set at training time)")

    def resolved(self) -> dict[str, Any]:
        """The options with defaults filled in (dupe factor, prediction cap), as stored in shard.json."""
        values = asdict(self)
        static = self.masking == "static"
        if values["dupe_factor"] is None:
            values["dupe_factor"] = 5 if static else 1
        if static and values["max_predictions_per_seq"] is None:
            values["max_predictions_per_seq"] = round(0.15 * self.max_seq_length)
        if not static:
            values["mlm_probability"] = None
        return values


@dataclass
class BuildResult:
    """What one build job did."""

    output_dir: Path
    num_slices: int  # slices in the whole corpus
    built: int  # slices this job built now
    resumed: int  # slices of this job already built by an earlier run (kept)
    train_instances: int = 0  # built now
    train_tokens: int = 0
    eval_instances: int = 0
    eval_tokens: int = 0
    seconds: float = 0.0


@dataclass
class _SliceResult:
    index: int
    chars: int
    train_instances: int
    train_tokens: int
    eval_instances: int
    eval_tokens: int


def build_dataset(
    files: Sequence[str | os.PathLike],
    tokenizer_dir: str | os.PathLike,
    output_dir: str | os.PathLike,
    options: BuildOptions | None = None,
    *,
    workers: int = 2,
    num_jobs: int = 1,
    job_index: int = 0,
    overwrite: bool = False,
    show_progress: bool = False,
) -> BuildResult:
    """Build (this job's part of) a pre-training data directory; see the module docstring.

    Errors about input (no files, unreadable/invalid file, empty corpus, one-document
    corpus with nsp, tokenizer without the needed special tokens, an output directory
    holding another dataset) raise `BertkitError` with one line naming the cause.
    """
    from bertkit.tokenization import Tokenizer

    started = time.perf_counter()
    options = options or BuildOptions()
    _check_int("workers", workers, 1)
    _check_int("num_shards", num_jobs, 1)
    if isinstance(job_index, bool) or not isinstance(job_index, int) or not 0 <= job_index < num_jobs:
        raise ConfigError(f"shard_index={job_index!r} must be in [0, {num_jobs}) (--num-shards {num_jobs})")
    if not files:
        raise BertkitError("no corpus files given")
    paths = [check_readable(f) for f in expand_inputs(files)]  # a folder of Parquet / Arrow files: its files
    tokenizer = Tokenizer.from_pretrained(tokenizer_dir)
    _check_special_tokens(tokenizer, tokenizer_dir, get_format(options.instance_format).needs_tokens,
                          options.masking == "static")
    output = Path(output_dir)
    if output.exists() and not output.is_dir():
        raise BertkitError(f"{output}: exists and is not a directory")
    recipe = {
        **options.resolved(),
        "inputs": [[p.name, p.stat().st_size] for p in paths],
        "tokenizer": tokenizer_summary(tokenizer),
    }
    _prepare_output(output, recipe, num_jobs, job_index, overwrite)

    result = BuildResult(output, num_slices=0, built=0, resumed=0)
    done = {k for (split, k), meta in scan_shards(output).items()
            if split == "train" and _reusable(output, k, meta, recipe)}
    bar = tqdm(desc="building", unit=" chars", unit_scale=True, disable=not show_progress, file=sys.stderr)

    def work() -> Iterator[Slice]:
        """This job's slices that are not built yet (saves the tokenizer before the first)."""
        documents = iter_documents([str(p) for p in paths], text_field=options.text_field,
                                   skip_bad_lines=options.skip_bad_lines, max_document_chars=options.slice_chars)
        for piece in iter_slices(documents, options.slice_chars):
            if piece.index == 0:
                _save_tokenizer(tokenizer, output)
            result.num_slices = piece.index + 1
            if piece.index % num_jobs != job_index:
                continue
            if piece.index in done:
                result.resumed += 1
                bar.update(piece.chars)
                continue
            _remove_temporaries(output, piece.index)
            yield piece

    with bar:
        for built in parallel_map(SliceBuilder(output, recipe), work(), workers=workers):
            result.built += 1
            result.train_instances += built.train_instances
            result.train_tokens += built.train_tokens
            result.eval_instances += built.eval_instances
            result.eval_tokens += built.eval_tokens
            bar.update(built.chars)
            bar.set_postfix(instances=f"{result.train_instances:,}", tokens=f"{result.train_tokens:,}", refresh=False)
    if result.num_slices == 0:
        raise BertkitError(f"no text in {', '.join(str(p) for p in paths)}: only empty documents (blank lines or none), nothing can be built")
    marker = {
        "recipe": recipe,
        "num_slices": result.num_slices,
        "job_index": job_index,
        "num_jobs": num_jobs,
        "built": result.built,
        "resumed": result.resumed,
    }
    write_text_atomic(output / job_marker_name(job_index, num_jobs), json.dumps(marker, indent=1) + "\n")
    result.seconds = time.perf_counter() - started
    return result


class SliceBuilder:
    """Turns one slice into its shards (runs in worker processes).

    Holds only the output directory and the recipe until first called, so it is cheap to
    send to workers; each loads the tokenizer (from the output's copy) once.
    """

    def __init__(self, output: Path, recipe: dict[str, Any]):
        self.output = output
        self.recipe = recipe
        self._tokenizer = None
        self._masker = None

    def __getstate__(self) -> dict[str, Any]:
        return {"output": self.output, "recipe": self.recipe, "_tokenizer": None, "_masker": None}

    def _load(self):
        if self._tokenizer is None:
            from bertkit.tokenization import Tokenizer

            self._tokenizer = Tokenizer.from_pretrained(self.output / TOKENIZER_DIR)
            if tokenizer_fingerprint(self._tokenizer) != self.recipe["tokenizer"]["fingerprint"]:
                raise BertkitError(f"{self.output / TOKENIZER_DIR}: changed during the build (another tokenizer)")
            if self.recipe["masking"] == "static":
                from bertkit.data.masking import Masker, MaskingConfig

                config = MaskingConfig(
                    mlm_probability=self.recipe["mlm_probability"],
                    max_predictions_per_seq=self.recipe["max_predictions_per_seq"],
                    strategy="whole_word" if self.recipe["whole_word_masking"] else "token",
                )
                self._masker = Masker.from_tokenizer(config, self._tokenizer)
        return self._tokenizer

    def __call__(self, piece: Slice) -> _SliceResult:
        recipe = self.recipe
        tokenizer = self._load()
        documents = tokenize_documents(tokenizer, piece.documents, recipe["sentence_split"])
        seed, k = recipe["seed"], piece.index
        fmt = get_format(recipe["instance_format"])
        train, held_out = _split_slice(documents, recipe, k)
        if len(train) < fmt.min_documents:
            others = [name for name in FORMATS if get_format(name).min_documents <= len(train)]
            raise BertkitError(
                f"{fmt.name} needs at least {fmt.min_documents} documents ({fmt.why_min_documents}) but "
                f"{'the corpus' if k == 0 else f'slice {k}'} has {len(train)}: separate documents with blank lines "
                f"(JSONL: one object each){', or use ' if others else ''}"
                + " or ".join(f"--format {name}" for name in others)
            )
        train_instances: list[tuple] = []
        for copy in range(recipe["dupe_factor"]):
            made = make_instances(train, recipe, _stream(seed, k, copy, _INSTANCES), tokenizer)
            train_instances += self._masked(made, seed, copy, k)
        eval_instances: list[tuple] = []
        if held_out:
            pool = held_out if len(held_out) >= 2 else train
            made = make_instances(held_out, recipe, _stream(seed, k, 0, _EVAL_INSTANCES), tokenizer,
                                  random_documents=None if pool is held_out else pool)
            eval_instances = self._masked(made, seed, recipe["dupe_factor"], k)
        _stream(seed, k, 0, _SHUFFLE).shuffle(train_instances)
        _stream(seed, k, 0, _EVAL_SHUFFLE).shuffle(eval_instances)
        dtype = id_dtype(tokenizer.vocab_size)
        eval_arrays = ShardArrays.from_instances(eval_instances, dtype)
        train_arrays = ShardArrays.from_instances(train_instances, dtype)
        meta = {"recipe": recipe, "slice_index": k, "slice_chars": piece.chars}
        if eval_instances:
            write_shard(self.output, shard_name("eval", k), eval_arrays, {**meta, "split": "eval"})
        # the train shard is written last: its presence means the slice is done
        write_shard(self.output, shard_name("train", k), train_arrays,
                    {**meta, "split": "train", "eval_instances": eval_arrays.num_instances})
        return _SliceResult(k, piece.chars, train_arrays.num_instances, len(train_arrays.input_ids),
                            eval_arrays.num_instances, len(eval_arrays.input_ids))

    def _masked(self, instances: list[tuple], seed: int, copy: int, k: int) -> list[tuple]:
        """Static masking: (masked ids, segment_b, label, mlm labels) with one generator per
        (seed, copy, slice); dynamic: the instances unchanged."""
        if self._masker is None:
            return instances
        from bertkit.data.masking import example_rng

        rng = example_rng(seed, copy, k)
        masked = []
        for input_ids, segment_b, label in instances:
            ids, labels = self._masker(np.asarray(input_ids, dtype=np.int64), rng)
            masked.append((ids, segment_b, label, labels))
        return masked


def tokenize_documents(tokenizer: Any, documents: list[list[str]], sentence_split: bool = True) -> list[list[list[int]]]:
    """Documents of lines -> documents of sentences of token ids (no special tokens).

    Each line is sentence-split (unless `sentence_split` is False); all sentences of the
    slice are tokenized in one batch call. Sentences without tokens and documents without
    sentences are dropped.
    """
    sentences: list[str] = []
    counts: list[int] = []
    for document in documents:
        before = len(sentences)
        for line in document:
            if sentence_split:
                sentences += split_sentences(line)
            else:
                sentences.append(line)
        counts.append(len(sentences) - before)
    ids = tokenizer(sentences, add_special_tokens=False)["input_ids"] if sentences else []
    result: list[list[list[int]]] = []
    start = 0
    for count in counts:
        document = [s for s in ids[start : start + count] if s]
        start += count
        if document:
            result.append(document)
    return result


def _split_slice(documents: list[Any], recipe: dict[str, Any], k: int) -> tuple[list[Any], list[Any]]:
    """(train, held-out) of slice k's tokenized documents, as the build splits them (its own stream)."""
    return split_documents(documents, recipe["eval_fraction"], first_slice=k == 0,
                           min_train=get_format(recipe["instance_format"]).min_documents,
                           rng=_stream(recipe["seed"], k, 0, _EVAL_SPLIT))


def documents_by_split(files: Sequence[str | os.PathLike], data_dir: str | os.PathLike) -> dict[str, list[list[str]]]:
    """The corpus documents (each its lines, as read) that the data directory `data_dir`, built
    from `files`, trained on and held out: {"train": [...], "eval": [...]}, split exactly as
    build_dataset split them (the recipe's reading options, seed and streams). For tools that
    train on the same documents another way (a reference trainer) and must not see the
    held-out ones. The files must be the build's inputs (names and sizes are checked)."""
    from bertkit.data.dataset import scan_shards
    from bertkit.tokenization import Tokenizer

    data_dir = Path(data_dir)
    metas = scan_shards(data_dir)
    if not metas:
        raise BertkitError(f"{data_dir}: no built shards (run bertkit data build first)")
    recipe = next(iter(metas.values()))["recipe"]
    paths = [check_readable(f) for f in expand_inputs(files)]
    if [[p.name, p.stat().st_size] for p in paths] != recipe["inputs"]:
        raise BertkitError(f"{data_dir}: built from {recipe['inputs']}, not from {[str(p) for p in paths]}")
    tokenizer = Tokenizer.from_pretrained(data_dir / TOKENIZER_DIR)
    documents = iter_documents([str(p) for p in paths], text_field=recipe["text_field"],
                               skip_bad_lines=recipe["skip_bad_lines"], max_document_chars=recipe["slice_chars"])
    out: dict[str, list[list[str]]] = {"train": [], "eval": []}
    for piece in iter_slices(documents, recipe["slice_chars"]):
        # the documents the build keeps (those with tokens), by position in the slice
        kept = [i for i, document in enumerate(piece.documents)
                if tokenize_documents(tokenizer, [document], recipe["sentence_split"])]
        train, held_out = _split_slice(kept, recipe, piece.index)
        out["train"] += [piece.documents[i] for i in train]
        out["eval"] += [piece.documents[i] for i in held_out]
    return out


def split_documents(
    documents: list[Any], eval_fraction: float, *, first_slice: bool, min_train: int, rng: random.Random
) -> tuple[list[Any], list[Any]]:
    """(train, held-out) documents of one slice, in their original order.

    About `eval_fraction` of the documents are held out (the count is rounded up or down at
    random, so the expected total is exact); the first slice holds out at least one when
    the fraction is not 0. At least `min_train` documents stay for training.
    """
    n = len(documents)
    expected = eval_fraction * n
    count = math.floor(expected) + (rng.random() < expected - math.floor(expected))
    if first_slice and eval_fraction > 0:
        count = max(count, 1)
    count = max(0, min(count, n - min_train))
    held = set(rng.sample(range(n), count)) if count else set()
    train = [d for i, d in enumerate(documents) if i not in held]
    return train, [d for i, d in enumerate(documents) if i in held]


def make_instances(
    documents: list[list[list[int]]],
    recipe: dict[str, Any],
    rng: random.Random,
    tokenizer: Any,
    random_documents: list[list[list[int]]] | None = None,
) -> list[tuple]:
    """One copy's instances of `documents` in the recipe's format (bertkit.data.formats)."""
    return get_format(recipe["instance_format"]).make(documents, recipe, rng, tokenizer.cls_token_id,
                                                      special_token_id(tokenizer, "sep"), random_documents)


def _stream(seed: int, slice_index: int, copy: int, purpose: int) -> random.Random:
    """The random stream of one (seed, slice, copy, purpose)."""
    state = np.random.SeedSequence([seed, slice_index, copy, purpose]).generate_state(4, np.uint64)
    return random.Random(int.from_bytes(state.tobytes(), "little"))


def _check_int(name: str, value: Any, minimum: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ConfigError(f"{name}={value!r} must be an integer >= {minimum}")


def _check_special_tokens(tokenizer: Any, tokenizer_dir: Any, format_roles: tuple[str, ...], static: bool) -> None:
    """The roles the format inserts, pad, and mask when masking here (dynamic: the objective that masks checks)."""
    needed = (*format_roles, "pad", *(("mask",) if static else ()))
    for role in needed:
        if special_token_id(tokenizer, role) is None:
            stand_in = f" or {ROLE_FALLBACKS[role]}" if role in ROLE_FALLBACKS else ""
            raise BertkitError(
                f"{tokenizer_dir}: the tokenizer has no {role}{stand_in} token; this build needs "
                f"{', '.join(needed)} tokens (set {role}_token in tokenizer_config.json)"
            )


def _reusable(output: Path, k: int, meta: dict[str, Any], recipe: dict[str, Any]) -> bool:
    """Whether the finished train shard of slice k (and its eval shard) belong to this recipe."""
    if meta.get("recipe") != recipe:
        return False
    return not meta.get("eval_instances") or (output / shard_name("eval", k) / "shard.json").is_file()


def _prepare_output(output: Path, recipe: dict[str, Any], num_jobs: int, job_index: int, overwrite: bool) -> None:
    """Refuse (or, with `overwrite`, clear) a directory holding another recipe's dataset."""
    shards = scan_shards(output)
    markers = scan_job_markers(output)
    foreign = [(f"{split}-{k:05d}", meta["recipe"]) for (split, k), meta in sorted(shards.items())
               if meta.get("recipe") != recipe]
    foreign += [(name, marker.get("recipe", {})) for name, marker in markers.items() if marker.get("recipe") != recipe]
    if foreign and not overwrite:
        name, other = foreign[0]
        raise BertkitError(
            f"{output}: already holds a dataset built with {describe_difference(other, recipe, 'this build')} "
            f"({name}); use --overwrite to replace it, or another --output directory"
        )
    if not overwrite:
        return
    for name, _ in foreign:
        _remove(output / name)
    for (split, k), meta in shards.items():  # this job's own slices are rebuilt
        if k % num_jobs == job_index and meta.get("recipe") == recipe:
            _remove(output / shard_name(split, k))
    _remove(output / job_marker_name(job_index, num_jobs))
    saved = output / TOKENIZER_DIR
    if saved.is_dir():
        try:
            from bertkit.tokenization import Tokenizer

            same = tokenizer_fingerprint(Tokenizer.from_pretrained(saved)) == recipe["tokenizer"]["fingerprint"]
        except BertkitError:
            same = False
        if not same:
            _remove(saved)


def _save_tokenizer(tokenizer: Any, output: Path) -> None:
    """Save the tokenizer to output/tokenizer (or check the copy there is the same one)."""
    from bertkit.tokenization import Tokenizer

    saved = output / TOKENIZER_DIR
    fingerprint = tokenizer_fingerprint(tokenizer)
    if saved.is_dir():
        try:
            if tokenizer_fingerprint(Tokenizer.from_pretrained(saved)) == fingerprint:
                return
        except BertkitError:
            pass
        if scan_shards(output):
            raise BertkitError(f"{saved}: another tokenizer is saved there; use --overwrite or another --output")
    output.mkdir(parents=True, exist_ok=True)
    tokenizer.save_pretrained(saved)
    if tokenizer_fingerprint(Tokenizer.from_pretrained(saved)) != fingerprint:
        raise BertkitError(f"{saved}: the saved tokenizer does not reload identically; cannot build with it")


def _remove_temporaries(output: Path, k: int) -> None:
    """Delete leftovers of a killed earlier attempt at slice k (only this job builds slice k)."""
    if not output.is_dir():
        return
    for split in ("train", "eval"):
        for path in output.glob(f"{TMP_PREFIX}{shard_name(split, k)}-*"):
            shutil.rmtree(path, ignore_errors=True)


def _remove(path: Path) -> None:
    if path.is_dir():
        shutil.rmtree(path)
    elif path.exists():
        path.unlink()

