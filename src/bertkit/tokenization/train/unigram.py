"""Unigram (SentencePiece-style) tokenizers on the `tokenizers` library's UnigramTrainer.

Pipeline: NFKC (then lowercasing if asked) -> split on whitespace, "▁" before every word
(Metaspace) -> Unigram model (the most likely segmentation under learned piece
log-probabilities) -> the layout's template. bertkit counts the words (corpus.py, scheme
"metaspace": "▁word" with its count) and the trainer learns the pieces from them.

A layout decides the special tokens, their ids and the input template, as Hugging Face's
tokenizers of those models have them:

  xlnet   <unk>=0 <s> </s> <cls> <sep> <pad> <mask> <eod> <eop>=8
          A <sep> <cls> / A <sep> B <sep> <cls>, type ids 0 / 1 and 2 at <cls>;
          padding on the LEFT (the summary token <cls> stays the last position)
  t5      <pad>=0 </s>=1 <unk>=2; A </s> / A </s> B </s>, type ids 0
  albert  <pad>=0 <unk>=1 [CLS]=2 [SEP]=3 [MASK]=4; [CLS] A [SEP] / [CLS] A [SEP] B [SEP]

`sentinels=K` puts <extra_id_0>..<extra_id_{K-1}> at the TOP of the vocabulary in
reverse, <extra_id_0> the highest id (T5's span-corruption sentinels, taken from the top
down). `vocab_size` counts every id: specials, learned pieces and sentinels.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Mapping

from tokenizers import AddedToken, Tokenizer, models, pre_tokenizers, processors, trainers

from bertkit.errors import BertkitError, ConfigError
from bertkit.tokenization.metaspace import metaspace_pipeline
from bertkit.tokenization.train.feed import word_stream

MAX_PIECE_LENGTH = 16  # SentencePiece's default max_sentencepiece_length
SCORE_TIE = 1e-7  # scores closer than this are one score (the trainer's float noise is ~1e-11)
SCORE_DIGITS = 6
CHAR_PENALTY_STEP = 1e-4  # the trainer's score step between the characters it appends


@dataclass(frozen=True)
class UnigramLayout:
    """One model family's special tokens (in id order) by role, and its input template."""

    name: str
    tokens: tuple[str, ...]  # the special tokens opening the vocabulary, ids 0, 1, ...
    roles: Mapping[str, str]  # "unk_token" -> "<unk>", ... (HF tokenizer_config.json names)
    single: str  # TemplateProcessing templates
    pair: str
    padding_side: str = "right"
    lowercase: bool = False  # the layout's default (ALBERT lowercases; XLNet and T5 are cased)

    @property
    def additional_special_tokens(self) -> list[str]:
        """The layout's special tokens that play no role (XLNet's <eod> <eop>), in id order."""
        roles = set(self.roles.values())
        return [t for t in self.tokens if t not in roles]

    def template(self, tokenizer: Tokenizer) -> processors.TemplateProcessing:
        used = [t for t in self.tokens if t in self.single or t in self.pair]
        return processors.TemplateProcessing(
            single=self.single, pair=self.pair, special_tokens=[(t, tokenizer.token_to_id(t)) for t in used]
        )


LAYOUTS = {
    "xlnet": UnigramLayout(
        "xlnet",
        ("<unk>", "<s>", "</s>", "<cls>", "<sep>", "<pad>", "<mask>", "<eod>", "<eop>"),
        {
            "unk_token": "<unk>",
            "bos_token": "<s>",
            "eos_token": "</s>",
            "cls_token": "<cls>",
            "sep_token": "<sep>",
            "pad_token": "<pad>",
            "mask_token": "<mask>",
        },
        single="$A:0 <sep>:0 <cls>:2",
        pair="$A:0 <sep>:0 $B:1 <sep>:1 <cls>:2",
        padding_side="left",
    ),
    "t5": UnigramLayout(
        "t5",
        ("<pad>", "</s>", "<unk>"),
        {"pad_token": "<pad>", "eos_token": "</s>", "unk_token": "<unk>"},
        single="$A:0 </s>:0",
        pair="$A:0 </s>:0 $B:0 </s>:0",
    ),
    "albert": UnigramLayout(
        "albert",
        ("<pad>", "<unk>", "[CLS]", "[SEP]", "[MASK]"),
        {"pad_token": "<pad>", "unk_token": "<unk>", "cls_token": "[CLS]", "sep_token": "[SEP]", "mask_token": "[MASK]"},
        single="[CLS]:0 $A:0 [SEP]:0",
        pair="[CLS]:0 $A:0 [SEP]:0 $B:1 [SEP]:1",
        lowercase=True,
    ),
}


def resolve_layout(layout: str | None, sentinels: int) -> UnigramLayout:
    """The named layout; None: t5 when sentinels are asked for, else xlnet."""
    name = layout or ("t5" if sentinels else "xlnet")
    if name not in LAYOUTS:
        raise ConfigError(f"layout={name!r} is unknown (allowed: {', '.join(LAYOUTS)})")
    return LAYOUTS[name]


def sentinel_tokens(count: int) -> list[str]:
    """<extra_id_0> .. <extra_id_{count-1}>."""
    return [f"<extra_id_{i}>" for i in range(count)]


def train_unigram(
    word_counts: Mapping[str, int],
    layout: UnigramLayout,
    *,
    vocab_size: int,
    lowercase: bool,
    sentinels: int = 0,
    extra: tuple[str, ...] = (),
    show_progress: bool = False,
) -> Tokenizer:
    """A Unigram tokenizer from "▁word" counts (corpus.count_words, scheme "metaspace").

    Vocabulary: the layout's special tokens, `extra` special tokens, learned pieces (best
    score first, as the trainer orders them), then the sentinels from <extra_id_{K-1}>
    up to <extra_id_0> at the top.
    """
    if not word_counts:
        raise BertkitError("empty corpus: no words to build a vocabulary from")
    specials = list(layout.tokens) + [t for t in extra if t not in layout.tokens]
    reserved = len(specials) + sentinels
    alphabet = {c for word in word_counts for c in word}
    if vocab_size < reserved + len(alphabet):
        raise BertkitError(
            f"vocab_size={vocab_size} is smaller than the {reserved} special tokens and sentinels + "
            f"{len(alphabet)} characters of this corpus (use vocab_size >= {reserved + len(alphabet)})"
        )
    draft = Tokenizer(models.Unigram())
    draft.pre_tokenizer = pre_tokenizers.WhitespaceSplit()  # the words are normalized and "▁"-marked already
    trainer = trainers.UnigramTrainer(
        vocab_size=vocab_size - sentinels,
        special_tokens=specials,
        unk_token=layout.roles["unk_token"],
        max_piece_length=MAX_PIECE_LENGTH,
        show_progress=show_progress,
    )
    try:
        draft.train_from_iterator(word_stream(word_counts), trainer)
    except Exception as exc:  # the Rust trainer raises a plain Exception
        raise BertkitError(f"unigram training failed: {exc}") from exc
    learned = deterministic_scores([(p, s) for p, s in _model_vocab(draft) if p not in set(specials)])
    top = [(token, 0.0) for token in reversed(sentinel_tokens(sentinels))]
    vocab = [(token, 0.0) for token in specials] + learned + top
    unk_id = specials.index(layout.roles["unk_token"])
    tokenizer = metaspace_pipeline(Tokenizer(models.Unigram(vocab, unk_id=unk_id, byte_fallback=False)), lowercase)
    mask = layout.roles.get("mask_token")
    tokenizer.add_special_tokens(
        [AddedToken(t, special=True, normalized=False, lstrip=t == mask) for t in specials + sentinel_tokens(sentinels)]
    )
    tokenizer.post_processor = layout.template(tokenizer)
    return tokenizer


def unigram_config(
    layout: UnigramLayout, lowercase: bool, sentinels: int, extra: tuple[str, ...], morphemes: str | None = None
) -> dict:
    """tokenizer_config.json keys for a trained Unigram tokenizer (bertkit's training record aside).

    `tokenizer_class` is PreTrainedTokenizerFast: transformers 5's XLNet/T5/ALBERT classes
    rebuild their own normalizer around the vocabulary (XLNet's strips accents through
    NFKD, which takes Hangul apart), while PreTrainedTokenizerFast runs tokenizer.json as
    it is; the roles and padding side below give it the family's behaviour.
    """
    additional = layout.additional_special_tokens + [t for t in extra if t not in layout.tokens]
    config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "do_lower_case": lowercase,
        **layout.roles,
        "additional_special_tokens": additional + sentinel_tokens(sentinels),
        "padding_side": layout.padding_side,
    }
    if sentinels:
        config["extra_ids"] = sentinels
    if morphemes:  # bertkit splits morphemes before encoding, as in training (transformers cannot)
        config["pretokenize_morphemes"] = morphemes
    return config


def deterministic_scores(pieces: list[tuple[str, float]]) -> list[tuple[str, float]]:
    """The pieces with scores and order that do not change from run to run.

    The trainer sums in hash-map order, so equal scores (pieces seen equally often) come
    out a few 1e-11 apart and tied pieces in any order. Scores closer than `SCORE_TIE` to
    the best of their run count as one score (rounded to `SCORE_DIGITS`), and tied pieces
    are ordered by their text. The characters the trainer adds so that every character
    stays spellable get scores min, min + 1e-4, min + 2e-4, ... (min: the lowest learned
    score, which rare learned characters share) in hash-set order: here those characters
    and the learned ones at min get the same scores in the order of their text.
    """
    low = min(score for _, score in pieces)
    on_grid: dict[int, list[int]] = {}  # k -> indices of single characters scored low + k * step
    for index, (piece, score) in enumerate(pieces):
        steps = (score - low) / CHAR_PENALTY_STEP
        if len(piece) == 1 and abs(steps - round(steps)) * CHAR_PENALTY_STEP < 1e-9:
            on_grid.setdefault(round(steps), []).append(index)
    # the run k = 1, 2, ... one character each (a learned character elsewhere on the grid is
    # not in it), and every character at k = 0, where the first added one ties with learned ones
    added, k = list(on_grid.get(0, [])), 1
    while len(on_grid.get(k, ())) == 1:
        added += on_grid[k]
        k += 1
    chars = sorted(pieces[i][0] for i in added)
    scores = sorted((pieces[i][1] for i in added), reverse=True)
    pieces = list(pieces)
    for index, char, score in zip(sorted(added, key=lambda i: -pieces[i][1]), chars, scores, strict=True):
        pieces[index] = (char, score)
    ranked = sorted(pieces, key=lambda item: -item[1])
    result: list[tuple[str, float]] = []
    group: list[str] = []
    top = None
    for piece, score in ranked:
        if top is not None and top - score > SCORE_TIE:
            result += [(p, round(top, SCORE_DIGITS)) for p in sorted(group)]
            group = []
        if not group:
            top = score
        group.append(piece)
    result += [(p, round(top, SCORE_DIGITS)) for p in sorted(group)]
    return result


def _model_vocab(tokenizer: Tokenizer) -> list[tuple[str, float]]:
    return [(piece, score) for piece, score in json.loads(tokenizer.to_str())["model"]["vocab"]]
