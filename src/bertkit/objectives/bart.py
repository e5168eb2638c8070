"""BART's denoising (Lewis et al. 2019) on the encoder-decoder `BartForConditionalGeneration`.

Each example is one `packed` instance, `<s> text </s>` (document breaks inside it are
`</s>` too), noised by bertkit.data.denoising in fairseq's order — sentence permutation,
then text infilling (or token masking) with its zero-length insertions, then insertion,
then rotation — every random choice from (seed, epoch, index):

    input_ids = the noised document (BOS first, EOS last)
    labels    = the clean document; the decoder reads it shifted right after EOS (BART's start)

The published recipe (the defaults): infilling with Poisson(3) spans over 30% of the
tokens, each span one <mask>, 10% of them a random token instead, and every sentence
permuted; rotation and insertion off. Loss: cross-entropy over every target token.

Sentences: `packed` data keeps no sentence boundaries (whole sentences are concatenated),
so a sentence here ends after a token whose text ends in . ! ? … or a CJK full stop, or
at a document break (fairseq's multilingual denoising counts `</s>` as a full stop too).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import partial
from typing import Any

import numpy as np
import torch

from bertkit.data.collate import collate
from bertkit.data.dataset import TOKENIZER_DIR, PretrainingDataset
from bertkit.data.denoising import (full_stop_ids, insert_noise, mask_spans, permute_sentences, poisson_span_lengths,
                                    rotate, sentence_bounds)
from bertkit.data.masking import example_rng
from bertkit.errors import BertkitError, ConfigError
from bertkit.model.bart import BartConfig, BartForConditionalGeneration
from bertkit.model.losses import IGNORE_INDEX
from bertkit.objectives.base import PretrainingObjective, TargetTokensLoss
from bertkit.objectives.settings import ObjectiveSettings, setting
from bertkit.training.config import EVAL_SEED

SENTENCE_SCAN = 200  # instances checked for a second sentence when permute_sentences > 0


@dataclass(frozen=True)
class BartSettings(ObjectiveSettings):
    """fairseq's denoising options under their BART names (the paper's recipe as defaults)."""

    mask_ratio: float = setting(0.3, "bart: share of each document's tokens masked (in spans), in [0, 1)")
    poisson_lambda: float = setting(3.0, "bart: mean span length of text infilling, Poisson(lambda) (> 0)")
    mask_length: str = setting("span-poisson", "bart: span-poisson (text infilling) or token (token masking)",
                               choices=("span-poisson", "token"))
    replace_length: int = setting(1, "bart: a masked span becomes 1 <mask> (1), nothing (0: deletion) or one "
                                     "<mask> per token (-1)")
    permute_sentences: float = setting(1.0, "bart: share of each document's sentences permuted, in [0, 1]")
    rotate: float = setting(0.0, "bart: probability of rotating a document to a random start, in [0, 1]")
    insert: float = setting(0.0, "bart: random insertions, as a share of the document's tokens, in [0, 1)")
    mask_random: float = setting(0.1, "bart: share of masked spans given a random token instead of <mask>, in [0, 1]")

    def check(self) -> None:
        for name, closed in (("mask_ratio", False), ("insert", False), ("permute_sentences", True), ("rotate", True),
                             ("mask_random", True)):
            value = getattr(self, name)
            if not (0.0 <= value <= 1.0 if closed else 0.0 <= value < 1.0):
                raise ConfigError(f"field {name!r} must be in [0, 1{']' if closed else ')'}, got {value}")
        if self.poisson_lambda <= 0:
            raise ConfigError(f"field 'poisson_lambda' must be > 0, got {self.poisson_lambda}")
        if self.replace_length not in (-1, 0, 1):
            raise ConfigError(f"field 'replace_length' must be -1, 0 or 1, got {self.replace_length}")


def bart_special_ids(tokenizer: Any, source: str) -> tuple[int, int, int]:
    """(BOS, EOS, <mask>) ids of `tokenizer`; one line naming `source` when one is missing."""
    for role, what in (("mask_token", "mask token (<mask>) that text infilling writes"),
                       ("eos_token", "end-of-sequence token (</s>) that BART's documents end with"),
                       ("bos_token", "beginning-of-sequence token (<s>) that BART's documents start with")):
        if getattr(tokenizer, f"{role}_id") is None:
            raise BertkitError(f"{source}: the tokenizer has no {what} (train one with bertkit tokenizer train "
                               "--algorithm bbpe --layout bart)")
    return int(tokenizer.bos_token_id), int(tokenizer.eos_token_id), int(tokenizer.mask_token_id)


class BartObjective(TargetTokensLoss, PretrainingObjective):
    name = "bart"
    data_formats = ("packed",)  # whole documents: paired (nsp / sop) data is refused
    settings_class = BartSettings
    config_class = BartConfig
    model_class = BartForConditionalGeneration
    needs_dynamic_masking = "noises documents as it loads"
    config_defaults: dict[str, Any] = {"preset": "bart-mini"}

    def __init__(self, model, train, eval_data, masking, seed, eval_seed: int = EVAL_SEED,
                 settings: BartSettings | None = None):
        super().__init__(model, train, eval_data, masking, seed, eval_seed, settings)
        self.bos_id, self.eos_id, self.mask_id = bart_special_ids(self.tokenizer, self.tokenizer_source(train))
        vocab = [self.tokenizer.decode([i]) for i in range(self.tokenizer.vocab_size)]
        special = np.array(sorted(set(self.tokenizer.all_special_ids)), dtype=np.int64)
        self.special_ids = special
        self.full_stops = np.union1d(np.setdiff1d(full_stop_ids(vocab), special), [self.eos_id])
        self.random_ids = np.setdiff1d(np.arange(self.tokenizer.vocab_size), special)
        config = getattr(model, "config", None)
        self.max_length = config.max_position_embeddings if config is not None else None
        self.check_sentences(train)

    @staticmethod
    def tokenizer_source(data: PretrainingDataset) -> str:
        return str(data.directory / TOKENIZER_DIR)

    @classmethod
    def check_data(cls, data: PretrainingDataset) -> None:
        """The format and masking (base); the tokenizer's BOS, EOS and <mask>; documents that
        start with BOS and end with EOS (the format's [CLS] / [SEP] must be them)."""
        super().check_data(data)
        bos, eos, _ = bart_special_ids(data.tokenizer(), cls.tokenizer_source(data))
        info = data.info
        if info.cls_token_id != bos or info.sep_token_id != eos:
            raise BertkitError(f"{cls.tokenizer_source(data)}: the data's instances are not <s> ... </s> (its "
                               "[CLS] / [SEP] are not its BOS / EOS); train the tokenizer with --layout bart or kobart")

    @classmethod
    def model_config(cls, preset: str, data: PretrainingDataset, overrides: dict[str, Any],
                     settings: BartSettings | None = None) -> BartConfig:
        """The preset with the tokenizer's ids: EOS starts the decoder and is forced last, BOS forced first."""
        bos, eos, _ = bart_special_ids(data.tokenizer(), cls.tokenizer_source(data))
        ids = {"bos_token_id": bos, "eos_token_id": eos, "decoder_start_token_id": eos, "forced_bos_token_id": bos,
               "forced_eos_token_id": eos}
        config = super().model_config(preset, data, {**ids, **overrides}, settings)
        if data.info.max_seq_length > config.max_position_embeddings:
            raise ConfigError(f"field 'model.max_position_embeddings' ({config.max_position_embeddings}) is shorter "
                              f"than the data's documents (max_seq_length {data.info.max_seq_length}): BART's "
                              "target is the whole document")
        return config

    def check_sentences(self, data: PretrainingDataset) -> None:
        """With permutation on, some document must hold two sentences (a one-sentence document is
        left as it is; data where none has two would train permutation on nothing)."""
        if self.settings.permute_sentences == 0 or len(data) == 0:
            return
        for index in range(min(len(data), SENTENCE_SCAN)):
            tokens = data[index]["input_ids"]
            if len(sentence_bounds(tokens, np.isin(tokens, self.full_stops))) > 2:
                return
        raise BertkitError(f"{data.directory}: none of the first {min(len(data), SENTENCE_SCAN)} documents holds two "
                           "sentences (no token ending in . ! ? and no document break), so field "
                           "'objective.permute_sentences' would permute nothing: set it to 0")

    def describe_masking(self, run_config: Any) -> str:
        s = self.settings
        spans = f"Poisson({s.poisson_lambda:g}) spans" if s.mask_length == "span-poisson" else "single tokens"
        return (f"denoising: {s.mask_ratio:.0%} masked in {spans} (replace_length {s.replace_length}, "
                f"{s.mask_random:.0%} random), {s.permute_sentences:.0%} of sentences permuted, rotate {s.rotate:g}, "
                f"insert {s.insert:g}")

    # ---- examples and batches ------------------------------------------------------------
    def noise(self, tokens: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """The noised `tokens` (L,) int64 `<s> ... </s>` in fairseq's order (module docstring)."""
        s = self.settings
        noised = tokens
        if s.permute_sentences > 0:
            bounds = sentence_bounds(noised, np.isin(noised, self.full_stops))
            noised = permute_sentences(noised, bounds, s.permute_sentences, rng)
        if s.mask_ratio > 0:
            candidates = ~np.isin(noised, self.special_ids)
            candidates[0] = candidates[-1] = False
            lengths = partial(poisson_span_lengths, lam=s.poisson_lambda) if s.mask_length == "span-poisson" else None
            noised, inserts = mask_spans(noised, candidates, s.mask_ratio, lengths, self.mask_id, s.mask_random,
                                         self.random_ids, s.replace_length, rng)
            noised = insert_noise(noised, inserts, self.mask_id, s.mask_random, self.random_ids, rng)
        if s.insert > 0:
            noised = insert_noise(noised, math.ceil(len(noised) * s.insert), self.mask_id, s.mask_random,
                                  self.random_ids, rng)
        if s.rotate > 0 and rng.random() < s.rotate:
            noised = rotate(noised, rng)
        if self.max_length is not None and len(noised) > self.max_length:  # insertions past the position table
            noised = np.concatenate([noised[:self.max_length - 1], noised[-1:]])
        return noised

    def example(self, data: PretrainingDataset, index: int, epoch: int, seed: int) -> dict[str, Any]:
        """Document `index` of `data` noised with draws from (seed, epoch, index): input_ids (S,), labels (T,)."""
        clean = data[index]["input_ids"]
        return {"input_ids": self.noise(clean, example_rng(seed, epoch, index)), "labels": clean}

    def collate(self, examples: list[dict[str, Any]]) -> dict[str, torch.Tensor]:
        """input_ids, attention_mask (B, S) padded with the pad id; labels (B, T) padded with -100."""
        inputs = collate([{"input_ids": e["input_ids"]} for e in examples], self.pad_id)
        labels = collate([{"input_ids": e["labels"]} for e in examples], IGNORE_INDEX)["input_ids"]
        return {"input_ids": inputs["input_ids"], "attention_mask": inputs["attention_mask"], "labels": labels}
