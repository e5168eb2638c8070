"""ELMo's biLM objective (Peters et al. 2018): forward and backward next-word losses over a word softmax.

Words. Each instance of a built data directory (any single- or pair-segment format: the
specials are dropped) is read back as words by the data's own tokenizer
(bertkit.data.words: the tokenizer's pre-tokenization, whole words, decoded), wrapped in
<S> ... </S>; the model reads each word's characters (AllenNLP's ids, at most 50, a longer
word cut and counted in `cut_words`). Nothing is stored at build time: one `packed`
directory serves this objective and the Transformer ones.

Targets. A full softmax over a word vocabulary: <S>, </S>, <UNK> and the `softmax_words`
most frequent whole words of the training data that the tokenizer spells as one token
(counted once per run from the token ids, ties by id, so a resumed run gets the same list),
or a vocabulary file (`word_vocab`: one word a line, <UNK> required). The forward LM at word
t predicts word t + 1 (</S> after the last), the backward LM word t - 1 (<S> before the
first); a word outside the vocabulary is scored as <UNK>. Loss = mean forward NLL + mean
backward NLL (normalised by the global counts of each direction); held-out perplexity is
reported per direction. A sampled softmax was measured against the full one and not taken
(docs/benchmarks.md: at 8,192 words the softmax is 2% of an elmo-small step on a CPU).

No randomness: an example is a function of its index alone, so resuming is exact.
The saved model (final/, checkpoints) carries `elmo_words.txt`, the softmax's rows in order.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from bertkit.atomic import write_text_atomic
from bertkit.data.dataset import PretrainingDataset
from bertkit.data.words import TokenWords
from bertkit.errors import BertkitError, ConfigError
from bertkit.evaluation.metrics import percent
from bertkit.model.elmo import ElmoBiLM, ElmoConfig
from bertkit.model.elmo.characters import BOS, EOS, CharacterMapper
from bertkit.model.elmo.modeling import word_targets
from bertkit.model.families import model_inputs
from bertkit.model.losses import IGNORE_INDEX
from bertkit.objectives.base import PretrainingObjective
from bertkit.objectives.settings import ObjectiveSettings, setting
from bertkit.training.config import EVAL_SEED

WORDS_FILE = "elmo_words.txt"
UNK = "<UNK>"
MARKERS = ("<S>", "</S>", UNK)  # bilm-tf's vocabulary starts with these


@dataclass(frozen=True)
class BilmSettings(ObjectiveSettings):
    softmax_words: int = setting(8192, "bilm: words of the softmax: the most frequent whole words of the "
                                       "training data (+ <S>, </S>, <UNK>)")
    word_vocab: str | None = setting(None, "bilm: a word vocabulary file (one word a line, <UNK> among them) "
                                           "instead of counting the data's words")

    def check(self) -> None:
        if self.softmax_words < 1:
            raise ConfigError(f"field 'softmax_words' must be positive, got {self.softmax_words}")


class WordVocabulary:
    """The softmax's words in row order; `index(word)`: its row, <UNK>'s for any other word."""

    def __init__(self, words: list[str], source: str = "the word vocabulary"):
        if UNK not in words:
            raise BertkitError(f"{source}: the word vocabulary has no {UNK} line (the word every word outside it "
                               "is scored as); add one")
        self.words = words
        self.rows = {word: row for row, word in enumerate(words)}
        self.unk = self.rows[UNK]
        self.bos = self.rows.get("<S>", self.unk)
        self.eos = self.rows.get("</S>", self.unk)

    def __len__(self) -> int:
        return len(self.words)

    def index(self, word: str) -> int:
        if word is BOS:
            return self.bos
        if word is EOS:
            return self.eos
        return self.rows.get(word, self.unk)

    def save(self, directory: Path) -> None:
        write_text_atomic(Path(directory) / WORDS_FILE, "".join(word + "\n" for word in self.words))

    @classmethod
    def read(cls, path: str | Path) -> "WordVocabulary":
        """One word a line (UTF-8); a bad line or a missing <UNK> is one line naming the file (and line)."""
        path = Path(path)
        try:
            raw = path.read_bytes()
        except OSError as exc:
            raise BertkitError(f"{path}: cannot read the word vocabulary ({exc.strerror})") from None
        words = []
        for number, line in enumerate(raw.splitlines(), start=1):
            try:
                word = line.decode("utf-8").strip()
            except UnicodeDecodeError:
                raise BertkitError(f"{path}:{number}: not UTF-8 text (the word vocabulary must be UTF-8)") from None
            if not word:
                raise BertkitError(f"{path}:{number}: an empty line (one word a line)")
            words.append(word)
        return cls(words, str(path))


def count_vocabulary(data: PretrainingDataset, words: TokenWords, size: int) -> WordVocabulary:
    """<S>, </S>, <UNK> and the `size` most frequent one-token words of `data` (ties by token id)."""
    counts = np.zeros(len(words.starts), dtype=np.int64)
    for index in range(len(data)):
        ids = data[index]["input_ids"]
        counts += np.bincount(words.single_token_words(ids), minlength=len(counts))
    seen = np.flatnonzero(counts)
    order = seen[np.lexsort((seen, -counts[seen]))][:size]  # most frequent first, then by id
    texts = words.tokenizer.backend.decode_batch([[int(i)] for i in order], skip_special_tokens=False)
    chosen = list(MARKERS)
    for text in (t.strip() for t in texts):
        if text and text not in chosen:
            chosen.append(text)
    return WordVocabulary(chosen, f"{data.directory}")


@functools.lru_cache(maxsize=4)
def _vocabulary(directory: str, split: str, size: int, path: str | None) -> WordVocabulary:
    if path is not None:
        return WordVocabulary.read(path)
    data = PretrainingDataset.open(directory, split)
    return count_vocabulary(data, TokenWords(data.tokenizer()), size)


def word_vocabulary(data: PretrainingDataset, settings: BilmSettings) -> WordVocabulary:
    """The run's vocabulary (computed once per process for the same data and settings)."""
    return _vocabulary(str(data.directory), data.split, settings.softmax_words, settings.word_vocab)


class BilmObjective(PretrainingObjective):
    name = "bilm"
    data_formats = ("packed", "nsp", "sop")
    settings_class = BilmSettings
    config_class = ElmoConfig
    model_class = ElmoBiLM
    needs_dynamic_masking = "reads unmasked text"
    progress_keys = ("forward_perplexity", "backward_perplexity")
    plot_panels = [("Loss (forward + backward)", ["loss", "eval_loss"]),
                   ("Perplexity", ["forward_perplexity", "backward_perplexity",
                                   "eval_forward_perplexity", "eval_backward_perplexity"])]

    def __init__(self, model, train, eval_data, masking, seed, eval_seed=EVAL_SEED, settings=None):
        super().__init__(model, train, eval_data, masking, seed, eval_seed, settings)
        self.words = TokenWords(self.tokenizer)
        self.vocabulary = word_vocabulary(train, self.settings)
        size = model.config.n_tokens_vocab
        if size != len(self.vocabulary):
            raise BertkitError(f"the model's softmax has {size} words (n_tokens_vocab) but this run's word vocabulary "
                               f"has {len(self.vocabulary)}: train with the same data and softmax_words / word_vocab")
        self.mapper = CharacterMapper(model.config.max_characters_per_token)

    @classmethod
    def model_config(cls, preset: str, data: PretrainingDataset, overrides: dict[str, Any],
                     settings: ObjectiveSettings | None = None) -> ElmoConfig:
        """The preset, its softmax as wide as the word vocabulary; no token vocabulary or length."""
        vocabulary = word_vocabulary(data, settings or BilmSettings())
        return ElmoConfig.from_preset(preset, **{"n_tokens_vocab": len(vocabulary), **overrides})

    def save_pretrained(self, model, directory: Path, state_dict=None) -> None:
        super().save_pretrained(model, directory, state_dict)
        self.vocabulary.save(directory)

    # ---- data -------------------------------------------------------------------------------
    def example(self, data: PretrainingDataset, index: int, epoch: int, seed: int) -> dict[str, Any]:
        """Instance `index` as <S> words </S>: character ids (W, C) and the softmax rows each
        position predicts forward and backward (the same every epoch)."""
        words = self.words.words(data[index]["input_ids"])
        sentence = [BOS, *words, EOS]
        before = self.mapper.cut_words
        character_ids = self.mapper.sentence_ids(sentence, f"{data.directory} instance {index}")
        rows = np.array([self.vocabulary.index(word) for word in sentence], dtype=np.int64)
        next_ids, previous_ids = word_targets(rows)
        return {"character_ids": character_ids, "next_word_ids": next_ids, "previous_word_ids": previous_ids,
                "cut_words": self.mapper.cut_words - before, "unknown_words": int((rows == self.vocabulary.unk).sum())}

    def collate(self, examples: list[dict[str, Any]]) -> dict[str, torch.Tensor]:
        """(B, W, C) character ids (0 = no word), (B, W) targets (-100 = none) and attention_mask,
        (B,) cut and unknown word counts; W = the longest sentence (no rounding: an LSTM step each)."""
        width = max(len(e["next_word_ids"]) for e in examples)
        chars = np.zeros((len(examples), width, examples[0]["character_ids"].shape[1]), dtype=np.int64)
        targets = {key: np.full((len(examples), width), IGNORE_INDEX, dtype=np.int64)
                   for key in ("next_word_ids", "previous_word_ids")}
        mask = np.zeros((len(examples), width), dtype=np.int64)
        for row, example in enumerate(examples):
            length = len(example["next_word_ids"])
            chars[row, :length] = example["character_ids"]
            mask[row, :length] = 1
            for key, array in targets.items():
                array[row, :length] = example[key]
        return {"character_ids": torch.from_numpy(chars), "attention_mask": torch.from_numpy(mask),
                **{key: torch.from_numpy(array) for key, array in targets.items()},
                "cut_words": torch.tensor([e["cut_words"] for e in examples]),
                "unknown_words": torch.tensor([e["unknown_words"] for e in examples])}

    # ---- loss ------------------------------------------------------------------------------
    def loss_counts(self, batch: dict[str, torch.Tensor]) -> dict[str, float]:
        return {"forward": float((batch["next_word_ids"] != IGNORE_INDEX).sum()),
                "backward": float((batch["previous_word_ids"] != IGNORE_INDEX).sum())}

    def compute_loss(self, model, batch, totals) -> tuple[torch.Tensor, dict[str, Any]]:
        out = model(**model_inputs(model, batch), next_word_ids=batch["next_word_ids"],
                    previous_word_ids=batch["previous_word_ids"])
        loss = (out.forward_loss_sum / max(totals["forward"], 1.0)
                + out.backward_loss_sum / max(totals["backward"], 1.0))
        stats = {"forward_loss_sum": float(out.forward_loss_sum.detach()), "forward_count": float(out.forward_count),
                 "forward_correct": float(out.forward_correct), "backward_correct": float(out.backward_correct),
                 "backward_loss_sum": float(out.backward_loss_sum.detach()), "backward_count": float(out.backward_count),
                 "cut_words": float(batch["cut_words"].sum()), "unknown_words": float(batch["unknown_words"].sum())}
        return loss, stats

    def held_out_targets(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        """The forward targets (the backward LM scores the same words, shifted): `unigram_loss` is
        per direction, beside `forward_loss` and `backward_loss`."""
        targets = batch["next_word_ids"]
        return targets[targets != IGNORE_INDEX]

    def summarize(self, stats: dict[str, float]) -> dict[str, float]:
        metrics: dict[str, float] = {}
        for direction in ("forward", "backward"):
            count = stats.get(f"{direction}_count", 0.0)
            if not count:
                return {}
            mean = stats[f"{direction}_loss_sum"] / count
            metrics[f"{direction}_loss"] = mean
            metrics[f"{direction}_perplexity"] = math.exp(min(mean, 50.0))
            metrics[f"{direction}_accuracy"] = percent(stats[f"{direction}_correct"], count)
        metrics["loss"] = metrics["forward_loss"] + metrics["backward_loss"]
        words = stats["forward_count"]  # one forward target per word and </S>
        metrics["unknown_word_rate"] = percent(stats.get("unknown_words", 0.0), words)
        metrics["cut_words"] = stats.get("cut_words", 0.0)
        return metrics

    def describe_masking(self, run_config: Any) -> str:
        return (f"none: next-word targets both ways over {len(self.vocabulary):,} words "
                f"({'from ' + self.settings.word_vocab if self.settings.word_vocab else 'counted in the data'})")

    def describe_eval_masks(self) -> str:
        return "none (the held-out words as they are)"
