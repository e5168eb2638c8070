"""What a tokenizer training run is asked to do: algorithm, sizes, text options, specials.

Plain frozen dataclasses checked on construction; a bad value raises `ConfigError`
naming the field and what is allowed.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from bertkit.errors import BertkitError, ConfigError
from bertkit.tokenization.files import MORPHEME_SPLITTERS
from bertkit.tokenization.train.decoder_layouts import BBPE_LAYOUTS, DecoderLayout, decoder_layout
from bertkit.tokenization.train.unigram import resolve_layout
from bertkit.tokenization.train.wordpiece_likelihood import DEFAULT_SCORE, SCORES

ALGORITHMS = ("wordpiece", "wordpiece-freq", "bpe", "bbpe", "unigram")
SPECIAL_ROLES = ("pad", "unk", "cls", "sep", "mask")


@dataclass(frozen=True)
class SpecialTokens:
    """Special tokens by role, and the order in which they open the vocabulary (ids 0, 1, ...).

    `order` lists the five roles, and may place `extra` tokens among them by name
    (KoBART's <usr> at id 2); the other `extra` tokens come after, then `unused`
    placeholder slots `[unused0]`, `[unused1]`, ... (BERT reserves such slots for later use).
    """

    pad: str = "[PAD]"
    unk: str = "[UNK]"
    cls: str = "[CLS]"
    sep: str = "[SEP]"
    mask: str = "[MASK]"
    extra: tuple[str, ...] = ()
    unused: int = 0
    order: tuple[str, ...] = SPECIAL_ROLES

    def __post_init__(self) -> None:
        roles = [name for name in self.order if name in SPECIAL_ROLES]
        placed = [name for name in self.order if name not in SPECIAL_ROLES]
        if sorted(roles) != sorted(SPECIAL_ROLES) or any(name not in self.extra for name in placed):
            raise ConfigError(f"special token order={self.order!r} must list each of {SPECIAL_ROLES} once "
                              "(and may place extra tokens by name)")
        if not isinstance(self.unused, int) or self.unused < 0:
            raise ConfigError(f"unused={self.unused!r} must be an integer >= 0")
        tokens = self.tokens()
        for token in tokens:
            if not isinstance(token, str) or not token.strip() or any(c.isspace() for c in token):
                raise ConfigError(f"special token {token!r} must be a non-empty string without whitespace")
        repeated = sorted({t for t in tokens if tokens.count(t) > 1})
        if repeated:
            raise ConfigError(f"special tokens must be distinct; repeated: {', '.join(repeated)}")

    def role(self, name: str) -> str:
        return getattr(self, name)

    def tokens(self) -> list[str]:
        """All special tokens in vocabulary order."""
        unused = [f"[unused{i}]" for i in range(self.unused)]
        ordered = [self.role(name) if name in SPECIAL_ROLES else name for name in self.order]
        return ordered + [t for t in self.extra if t not in self.order] + unused


BERT_SPECIALS = SpecialTokens()
# RoBERTa's names and ids: <s>=0 <pad>=1 </s>=2 <unk>=3 <mask>=4; <s>/</s> play [CLS]/[SEP].
ROBERTA_SPECIALS = SpecialTokens(
    pad="<pad>", unk="<unk>", cls="<s>", sep="</s>", mask="<mask>", order=("cls", "pad", "sep", "unk", "mask")
)


# KoBART's (gogamza/kobart-base-v2): <s>=0 </s>=1 <usr>=2 <pad>=3 <sys>=4 <unk>=5 <mask>=6
KOBART_SPECIALS = SpecialTokens(
    pad="<pad>", unk="<unk>", cls="<s>", sep="</s>", mask="<mask>", extra=("<usr>", "<sys>"),
    order=("cls", "sep", "<usr>", "pad", "<sys>", "unk", "mask"),
)
# --layout for the BPE algorithms: BART's specials are RoBERTa's (bbpe's default), KoBART's its own;
# <s> / </s> play BOS / EOS ([CLS] / [SEP]): `<s> A </s>`, `<s> A </s> B </s>`
SPECIAL_LAYOUTS = {"bart": ROBERTA_SPECIALS, "kobart": KOBART_SPECIALS}
SPECIAL_LAYOUT_ALGORITHMS = ("bpe", "bbpe")


def default_specials(algorithm: str) -> SpecialTokens:
    """BERT names for the WordPiece and BPE variants, RoBERTa names for byte-level BPE."""
    return ROBERTA_SPECIALS if algorithm == "bbpe" else BERT_SPECIALS


@dataclass(frozen=True)
class TextOptions:
    """Normalization and pre-tokenization shared by training and encoding.

    `lowercase=None`: the algorithm's default (resolved by `TrainOptions`): lowercase,
    except unigram's xlnet and t5 layouts (cased, as those models); standalone, None
    means lowercase. `strip_accents=None` follows `lowercase` (BERT's rule). `tokenize_chinese_chars`
    (spaces around CJK ideographs) None means on, except for bbpe (RoBERTa does not).
    `keep_hangul` recomposes Hangul syllables after accent stripping (False = original
    BERT, which leaves jamo). `morphemes="kiwi"` splits Korean words into morphemes
    (kiwipiepy) before anything else.
    """

    lowercase: bool | None = None
    strip_accents: bool | None = None
    nfkc: bool = False
    tokenize_chinese_chars: bool | None = None
    keep_hangul: bool = True
    morphemes: str | None = None

    def __post_init__(self) -> None:
        if self.morphemes not in MORPHEME_SPLITTERS:
            raise ConfigError(f"morphemes={self.morphemes!r} is not supported (allowed: none, kiwi)")

    @property
    def strips_accents(self) -> bool:
        return (self.lowercase is not False) if self.strip_accents is None else self.strip_accents


@dataclass(frozen=True)
class TrainOptions:
    """One training run. `vocab_size` counts specials + alphabet + learned tokens.

    `score` (wordpiece only): the merge score, "gain" (log-likelihood change, count
    weighted; the default) or "pmi" (count(st) / (count(s) count(t))); None = the
    default. `min_frequency`: a pair needs at least this (word-frequency weighted) count
    to be merged. `limit_alphabet`: keep only the most frequent characters; words with other
    characters are left out (encoding makes them the unknown token). Not for bbpe, whose
    alphabet is the 256 bytes. `workers`: processes for word counting (None = all cores).
    bbpe: `layout` "roberta" (None: the default), "gpt2" or "kogpt2" (decoder_layouts.py:
    a decoder's specials, no template, cased by default; `specials` other than `extra` do
    not apply). unigram: `layout` ("xlnet", "t5", "albert"; None: t5 with sentinels, else xlnet)
    decides the special tokens and template (unigram.py); `sentinels` T5 sentinels at
    the top of the vocabulary; only `specials.extra` of `specials` applies (more special
    tokens after the layout's); `min_frequency` does not apply; text: NFKC always,
    lowercasing as `text.lowercase` (the accent/CJK/Hangul options do not apply).
    """

    algorithm: str = "wordpiece"
    vocab_size: int = 30000
    score: str | None = None
    min_frequency: int = 2
    limit_alphabet: int | None = None
    text: TextOptions = field(default_factory=TextOptions)
    specials: SpecialTokens | None = None  # None: default_specials(algorithm)
    model_max_length: int = 512
    text_field: str = "text"
    skip_bad_lines: bool = False
    workers: int | None = None
    show_progress: bool = True
    layout: str | None = None
    sentinels: int = 0

    def __post_init__(self) -> None:
        if self.algorithm not in ALGORITHMS:
            raise ConfigError(f"algorithm={self.algorithm!r} is unknown (allowed: {', '.join(ALGORITHMS)})")
        _positive_int("vocab_size", self.vocab_size)
        if self.score is not None:
            if self.score not in SCORES:
                raise ConfigError(f"score={self.score!r} is unknown (allowed: {', '.join(SCORES)})")
            if self.algorithm != "wordpiece":
                raise ConfigError(
                    f"score={self.score!r} applies only to algorithm='wordpiece' "
                    f"({self.algorithm} merges by frequency)"
                )
        _positive_int("min_frequency", self.min_frequency)
        _positive_int("model_max_length", self.model_max_length)
        if self.limit_alphabet is not None:
            _positive_int("limit_alphabet", self.limit_alphabet)
            if self.algorithm == "bbpe":
                raise ConfigError("limit_alphabet does not apply to bbpe (its alphabet is the 256 byte symbols)")
        if self.workers is not None:
            _positive_int("workers", self.workers)
        if isinstance(self.sentinels, bool) or not isinstance(self.sentinels, int) or self.sentinels < 0:
            raise ConfigError(f"sentinels={self.sentinels!r} must be an integer >= 0")
        if self.algorithm == "unigram":
            resolve_layout(self.layout, self.sentinels)  # checks the name
            if self.limit_alphabet is not None:
                raise ConfigError("limit_alphabet does not apply to unigram (the trainer keeps every character)")
            text = self.text
            for name, flag, unset in (
                ("strip_accents", "--strip-accents", text.strip_accents is None),
                ("tokenize_chinese_chars", "--cjk-split", text.tokenize_chinese_chars is None),
                ("keep_hangul", "--decompose-hangul", text.keep_hangul),
            ):
                if not unset:
                    raise ConfigError(
                        f"text.{name} ({flag}) does not apply to unigram (its text pipeline: NFKC, then case)"
                    )
        elif self.sentinels:
            raise ConfigError(f"sentinels apply only to algorithm='unigram', not {self.algorithm!r}")
        elif self.layout is not None:
            decoder = self.algorithm == "bbpe" and self.layout in BBPE_LAYOUTS
            seq2seq = self.algorithm in SPECIAL_LAYOUT_ALGORITHMS and self.layout in SPECIAL_LAYOUTS
            if not (decoder or seq2seq):
                raise ConfigError(f"layout={self.layout!r} does not apply to algorithm={self.algorithm!r} (unigram: "
                                  f"xlnet, t5, albert; bbpe: {', '.join(BBPE_LAYOUTS)}; "
                                  f"{', '.join(SPECIAL_LAYOUT_ALGORITHMS)}: {', '.join(SPECIAL_LAYOUTS)})")
            if self.decoder_layout is not None and self.specials is not None and self.specials.unused:
                raise ConfigError(f"unused tokens do not apply to layout={self.layout!r} (it has its own specials)")
        if not self.text_field:
            raise ConfigError("text_field must be a non-empty JSON key")
        if self.text.lowercase is None:  # resolve the per-algorithm default once
            if self.algorithm == "unigram":
                lowercase = resolve_layout(self.layout, self.sentinels).lowercase
            else:
                # GPT-2, KoGPT2, BART and KoBART are cased, as their published vocabularies
                lowercase = self.decoder_layout is None and self.layout not in SPECIAL_LAYOUTS
            object.__setattr__(self, "text", replace(self.text, lowercase=lowercase))
        if self.text.tokenize_chinese_chars is None:  # resolve the per-algorithm default once
            object.__setattr__(self, "text", replace(self.text, tokenize_chinese_chars=self.algorithm != "bbpe"))

    @property
    def merge_score(self) -> str | None:
        """The likelihood trainer's score ("gain" or "pmi"); None for the frequency-rule algorithms."""
        if self.algorithm != "wordpiece":
            return None
        return self.score or DEFAULT_SCORE

    @property
    def special_tokens(self) -> SpecialTokens:
        if self.specials is not None:
            return self.specials
        return SPECIAL_LAYOUTS[self.layout] if self.layout in SPECIAL_LAYOUTS else default_specials(self.algorithm)

    @property
    def has_bos_eos(self) -> bool:
        """Whether [CLS] / [SEP] are also written as BOS / EOS (byte-level BPE, the bart / kobart layouts)."""
        return self.algorithm == "bbpe" or self.layout in SPECIAL_LAYOUTS

    @property
    def decoder_layout(self) -> DecoderLayout | None:
        """bbpe's decoder layout (gpt2, kogpt2); None for the encoder layouts."""
        return decoder_layout(self.layout) if self.algorithm == "bbpe" else None

    def reserved_tokens(self) -> list[str]:
        """The special tokens opening the vocabulary, in id order."""
        layout = self.decoder_layout
        if layout is not None:
            return layout.reserved_tokens(self.special_tokens.extra)
        return self.special_tokens.tokens()

    def room_to_learn(self, alphabet_size: int) -> int:
        """Tokens left to learn after the specials and the alphabet; an error when negative."""
        reserved = len(self.reserved_tokens())
        room = self.vocab_size - reserved - alphabet_size
        if room < 0:
            hint = "" if self.algorithm == "bbpe" else " or a limit_alphabet"
            raise BertkitError(
                f"vocab_size={self.vocab_size} is smaller than the {reserved} special tokens + {alphabet_size} "
                f"alphabet symbols of this corpus (use vocab_size >= {reserved + alphabet_size}{hint})"
            )
        return room


def _positive_int(name: str, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(f"{name}={value!r} must be a positive integer")
