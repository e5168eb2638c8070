"""T5's span corruption (Raffel et al. 2020, section 3.1.4) on the encoder-decoder `T5ForConditionalGeneration`.

Each example is a raw chunk of text (`TextChunks` over `packed` data: the text tokens
in corpus order, the [CLS]/[SEP]-style specials the format added dropped). A noise mask
covers round(L * noise_density) of its L tokens in round(noise / mean_noise_span_length)
spans, as T5's `random_spans_noise_mask`: both numbers fixed per sequence (at least one
each), the span lengths from a uniform random segmentation, noise and non-noise spans
alternating and starting with non-noise (so the chunk ends inside noise). Span k becomes
the sentinel <extra_id_k> (T5's sentinels count down from the top of the vocabulary):

    input_ids = the non-noise tokens, each noise span replaced by its sentinel, then EOS
    labels    = each span's sentinel followed by the span's tokens, then EOS

The raw chunk length L is T5's `compute_input_and_target_lengths` (random_spans_helper):
the longest L whose corrupted input fits `max_seq_length`, so inputs are exactly
max_seq_length long (128 -> L = 141, 29 target tokens). Loss: cross-entropy over the
target tokens (the decoder reads the labels shifted right, as transformers' T5 does).

Counts are computed in float64 (Python's round, half to even), as T5's length helper
and transformers' Flax port do; T5's TensorFlow mask rounds in float32, which differs
from float64 at a few lengths (L = 190, 350, ...), never at the lengths the helper picks
for 128 or 512 — float64 throughout keeps inputs exactly max_seq_length long.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from bertkit.data.chunks import TextChunks
from bertkit.data.dataset import TOKENIZER_DIR, PretrainingDataset
from bertkit.data.masking import example_rng
from bertkit.errors import BertkitError, ConfigError
from bertkit.labels import IGNORE_INDEX
from bertkit.model.t5 import T5Config, T5ForConditionalGeneration
from bertkit.objectives.base import EVAL_EPOCH, PretrainingObjective, TargetTokensLoss
from bertkit.objectives.settings import ObjectiveSettings, setting
from bertkit.training.config import EVAL_SEED


# ---- the noise mask and the lengths (pure functions of their arguments) -------------------------
def noise_counts(length: int, noise_density: float, mean_noise_span_length: float) -> tuple[int, int]:
    """(noise tokens, noise spans) of a `length`-token sequence, as T5: round(length * density)
    tokens, at least 1 and at most length - 1, in round(tokens / mean) spans, at least 1."""
    num_noise = min(max(round(length * noise_density), 1), length - 1)
    num_spans = max(round(num_noise / mean_noise_span_length), 1)
    return num_noise, num_spans


def random_segmentation(num_items: int, num_segments: int, rng: np.random.Generator) -> np.ndarray:
    """(num_segments,) positive lengths summing to `num_items`: the segment starts are 0 and
    num_segments - 1 distinct positions of 1..num_items-1 drawn uniformly (T5's shuffled indicator)."""
    first_in_segment = np.zeros(num_items, dtype=np.int64)
    first_in_segment[1:] = rng.permutation(np.arange(num_items - 1) < num_segments - 1)
    segment_id = np.cumsum(first_in_segment)  # (num_items,)
    return np.bincount(segment_id, minlength=num_segments)


def random_spans_noise_mask(length: int, noise_density: float, mean_noise_span_length: float,
                            rng: np.random.Generator) -> np.ndarray:
    """(length,) bool, True on noise: T5's `random_spans_noise_mask` (no random roll)."""
    padded = max(length, 2)  # T5 lengthens a 1-token sequence to avoid degeneracy, then cuts back
    num_noise, num_spans = noise_counts(padded, noise_density, mean_noise_span_length)
    noise_lengths = random_segmentation(num_noise, num_spans, rng)
    nonnoise_lengths = random_segmentation(padded - num_noise, num_spans, rng)
    interleaved = np.stack([nonnoise_lengths, noise_lengths], axis=1).reshape(-1)  # (2 * spans,) non-noise first
    span_starts = np.cumsum(interleaved)[:-1]
    start_indicator = np.zeros(padded, dtype=np.int64)
    start_indicator[span_starts] = 1
    return (np.cumsum(start_indicator) % 2 == 1)[:length]


def input_and_target_lengths(max_seq_length: int, noise_density: float, mean_noise_span_length: float) -> tuple[int, int]:
    """(raw tokens, target tokens): the longest raw length whose corrupted input (non-noise
    tokens + one sentinel per span + EOS) is at most `max_seq_length`, and its target length
    (one sentinel per span + noise tokens + EOS). T5's `compute_input_and_target_lengths`."""

    def corrupted(raw: int) -> tuple[int, int]:
        num_noise, num_spans = noise_counts(raw, noise_density, mean_noise_span_length)
        return raw - num_noise + num_spans + 1, num_noise + num_spans + 1

    raw = max_seq_length - 1
    while corrupted(raw + 1)[0] <= max_seq_length:
        raw += 1
    inputs_length, targets_length = corrupted(raw)
    if noise_density == 0.5 and targets_length > inputs_length:  # T5's tweak: targets no longer than inputs
        raw -= 1
        targets_length -= 1
    return raw, targets_length


def span_corrupt(tokens: np.ndarray, noise_mask: np.ndarray, sentinel_ids: np.ndarray,
                 eos_id: int) -> tuple[np.ndarray, np.ndarray]:
    """(input_ids, labels), int64: `tokens` (L,) with each noise span of `noise_mask` (L,) replaced
    by the next sentinel (`sentinel_ids[k]` for span k), + EOS; the labels hold each span's
    sentinel then its tokens (the non-noise runs replaced by sentinels in turn), + EOS."""

    def replace_spans(mask: np.ndarray) -> np.ndarray:
        previous = np.concatenate([[False], mask[:-1]])
        first = mask & ~previous  # the first token of each masked run
        span_index = np.cumsum(first) - 1  # (L,) run number k at and after its first token
        out = np.where(first, sentinel_ids[np.maximum(span_index, 0)], tokens)
        return np.concatenate([out[~(mask & previous)], [eos_id]]).astype(np.int64)

    return replace_spans(noise_mask), replace_spans(~noise_mask)


def t5_special_ids(tokenizer: Any, source: str) -> tuple[np.ndarray, int]:
    """(sentinel ids, k -> id of <extra_id_k>; the EOS id) of `tokenizer`; one line naming
    `source` (the tokenizer's directory) when it has no sentinels or no EOS."""
    sentinels = tokenizer.get_sentinel_token_ids()
    if not sentinels:
        raise BertkitError(f"{source}: the tokenizer has no sentinel tokens <extra_id_0>, <extra_id_1>, ... that "
                           "objective 't5' replaces spans with (train one with bertkit tokenizer train --algorithm "
                           "unigram --sentinels 100)")
    if tokenizer.eos_token_id is None:
        raise BertkitError(f"{source}: the tokenizer has no end-of-sequence token (eos_token, e.g. </s>) that "
                           "objective 't5' ends inputs and targets with")
    return np.array(sentinels, dtype=np.int64), int(tokenizer.eos_token_id)


# ---- the objective ------------------------------------------------------------------------------
@dataclass(frozen=True)
class T5Settings(ObjectiveSettings):
    """The noise: the share of tokens corrupted and the mean length of a span (T5's 0.15 and 3)."""

    noise_density: float = setting(0.15, "t5: share of each raw chunk's tokens replaced by spans, in (0, 1)")
    mean_noise_span_length: float = setting(3.0, "t5: mean length of a corrupted span, in tokens (>= 1)")

    def check(self) -> None:
        if not 0.0 < self.noise_density < 1.0:
            raise ConfigError(f"field 'noise_density' must be in (0, 1), got {self.noise_density}")
        if self.mean_noise_span_length < 1.0:
            raise ConfigError(f"field 'mean_noise_span_length' must be at least 1, got {self.mean_noise_span_length}")


class T5Objective(TargetTokensLoss, PretrainingObjective):
    name = "t5"
    data_formats = ("packed",)  # one stream of text: paired (nsp / sop) data is refused
    settings_class = T5Settings
    config_class = T5Config
    model_class = T5ForConditionalGeneration
    needs_dynamic_masking = "corrupts raw text as it loads"
    config_defaults: dict[str, Any] = {"preset": "t5-mini"}

    def __init__(self, model, train, eval_data, masking, seed, eval_seed: int = EVAL_SEED,
                 settings: T5Settings | None = None):
        super().__init__(model, train, eval_data, masking, seed, eval_seed, settings)
        self.sentinel_ids, self.eos_id = t5_special_ids(self.tokenizer, self.tokenizer_source(train))
        s = self.settings
        self.max_seq_length = train.info.max_seq_length
        self.raw_length, self.target_length = input_and_target_lengths(
            self.max_seq_length, s.noise_density, s.mean_noise_span_length)
        self.check_sentinels(train)
        info = train.info
        drop = {info.cls_token_id, info.sep_token_id, info.pad_token_id, self.eos_id, *self.sentinel_ids.tolist()}
        drop.discard(None)
        self.train_chunks = self.chunks(train, drop)
        self.eval_chunks = self.chunks(eval_data, drop) if eval_data is not None else None

    @staticmethod
    def tokenizer_source(data: PretrainingDataset) -> str:
        return str(data.directory / TOKENIZER_DIR)

    @classmethod
    def model_config(cls, preset: str, data: PretrainingDataset, overrides: dict[str, Any],
                     settings: T5Settings | None = None) -> T5Config:
        """The preset with the tokenizer's EOS, and the pad id starting the decoder (as T5)."""
        _, eos_id = t5_special_ids(data.tokenizer(), cls.tokenizer_source(data))
        ids = {"eos_token_id": eos_id, "decoder_start_token_id": data.info.pad_token_id}
        return super().model_config(preset, data, {**ids, **overrides}, settings)

    @classmethod
    def check_data(cls, data: PretrainingDataset) -> None:
        """The format and masking (base), then the tokenizer: sentinels and EOS, before any model is built."""
        super().check_data(data)
        t5_special_ids(data.tokenizer(), cls.tokenizer_source(data))

    def check_sentinels(self, data: PretrainingDataset) -> None:
        _, num_spans = noise_counts(self.raw_length, self.settings.noise_density, self.settings.mean_noise_span_length)
        if num_spans > len(self.sentinel_ids):
            raise BertkitError(f"{self.tokenizer_source(data)}: {len(self.sentinel_ids)} sentinel tokens, but chunks of "
                               f"{self.raw_length} tokens (max_seq_length {self.max_seq_length}) have {num_spans} spans")

    def chunks(self, data: PretrainingDataset, drop: set[int]) -> TextChunks:
        chunks = TextChunks(data, self.raw_length, drop)
        if data is self.train and len(chunks) == 0:
            raise BertkitError(f"{data.directory}: {chunks.num_tokens} text tokens, fewer than one raw chunk of "
                               f"{self.raw_length} tokens (what objective 't5' corrupts to max_seq_length "
                               f"{self.max_seq_length})")
        return chunks

    def describe_masking(self, run_config: Any) -> str:
        s = self.settings
        return (f"span corruption, noise density {s.noise_density:g}, mean span {s.mean_noise_span_length:g} "
                f"({self.raw_length} raw -> {self.max_seq_length} input, {self.target_length} target tokens)")

    # ---- examples and batches ------------------------------------------------------------
    def num_train_examples(self) -> int:
        return len(self.train_chunks)

    def num_eval_examples(self) -> int:
        return 0 if self.eval_chunks is None else len(self.eval_chunks)

    def train_example(self, index: int, epoch: int) -> dict[str, Any]:
        return self.example(self.train_chunks, index, epoch, self.seed)

    def eval_example(self, index: int) -> dict[str, Any]:
        return self.example(self.eval_chunks, index, EVAL_EPOCH, self.eval_seed)

    def baseline_example(self, index: int) -> dict[str, Any]:
        return self.example(self.train_chunks, index, EVAL_EPOCH, self.eval_seed)

    def example(self, data: TextChunks, index: int, epoch: int, seed: int) -> dict[str, Any]:
        """Raw chunk `index` of `data` corrupted with a noise mask drawn from (seed, epoch, index):
        input_ids (max_seq_length,), labels (target length,)."""
        tokens = data[index]
        s = self.settings
        mask = random_spans_noise_mask(len(tokens), s.noise_density, s.mean_noise_span_length,
                                       example_rng(seed, epoch, index))
        input_ids, labels = span_corrupt(tokens, mask, self.sentinel_ids, self.eos_id)
        return {"input_ids": input_ids, "labels": labels}

    def collate(self, examples: list[dict[str, Any]]) -> dict[str, torch.Tensor]:
        """input_ids, attention_mask (B, T) padded with the pad id; labels (B, T_target) padded with -100."""
        inputs = np.full((len(examples), max(len(e["input_ids"]) for e in examples)), self.pad_id, dtype=np.int64)
        attention = np.zeros_like(inputs)
        labels = np.full((len(examples), max(len(e["labels"]) for e in examples)), IGNORE_INDEX, dtype=np.int64)
        for row, example in enumerate(examples):
            inputs[row, :len(example["input_ids"])] = example["input_ids"]
            attention[row, :len(example["input_ids"])] = 1
            labels[row, :len(example["labels"])] = example["labels"]
        return {"input_ids": torch.from_numpy(inputs), "attention_mask": torch.from_numpy(attention),
                "labels": torch.from_numpy(labels)}
