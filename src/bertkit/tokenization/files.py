"""Tokenizer checkpoint files: `tokenizer_config.json` options, vocab.txt, tokenizer.json.

A tokenizer directory holds (HF layout) `tokenizer.json` (a `tokenizers` serialization),
`vocab.txt` (WordPiece: one token per line, id = line index) and `tokenizer_config.json`
(text options and special tokens, HF key names plus bertkit's extras). Everything a
user can get wrong here raises `BertkitError` naming the file.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

from bertkit.errors import BertkitError
from bertkit.tokenization.wordpiece import MAX_INPUT_CHARS_PER_WORD, WORDPIECE_PREFIX

VOCAB_FILE = "vocab.txt"
TOKENIZER_FILE = "tokenizer.json"
CONFIG_FILE = "tokenizer_config.json"
SPECIAL_TOKENS_MAP_FILE = "special_tokens_map.json"

SPECIAL_ROLES = ("unk_token", "cls_token", "sep_token", "pad_token", "mask_token", "bos_token", "eos_token")
# When the config does not name a special token: the first candidate present in the vocabulary.
SPECIAL_CANDIDATES = {
    "unk_token": ("[UNK]", "<unk>"),
    "cls_token": ("[CLS]", "<s>"),
    "sep_token": ("[SEP]", "</s>"),
    "pad_token": ("[PAD]", "<pad>"),
    "mask_token": ("[MASK]", "<mask>"),
    "bos_token": ("<s>",),
    "eos_token": ("</s>",),
}
PADDING_SIDES = ("right", "left")
# transformers classes that pad on the left by a class attribute (their configs do not say),
# and the model types whose tokenizer AutoTokenizer picks by config.json when no class is named
LEFT_PADDING_CLASSES = ("XLNetTokenizer", "XLNetTokenizerFast")
LEFT_PADDING_MODEL_TYPES = ("xlnet",)
MORPHEME_SPLITTERS = (None, "kiwi")
_MAX_LENGTH_CAP = 2**31 - 1  # HF writes ~1e30 for "no limit"; the Rust side needs a usize


@dataclass
class TokenizerConfig:
    """Text options and special tokens, with the HF `tokenizer_config.json` key names.

    `strip_accents=None` follows `do_lower_case`. Special tokens left None are found in
    the vocabulary (BERT names first, then RoBERTa names: `<s> </s> <pad> <unk> <mask>`).
    `additional_special_tokens` are registered as special (never split, skipped when
    decoding); ones missing from the vocabulary are appended, as in HF.
    bertkit extras: `keep_hangul_syllables` (recompose Hangul syllables after accent
    stripping; tokenizers bertkit trains record true; where a config does not say it is
    false, transformers' behaviour, so a checkpoint made elsewhere is tokenized as it was
    trained: uncased BERT turns Hangul into jamo), `pretokenize_morphemes` (None or
    "kiwi": split Korean morphemes before encoding),
    `nfkc` (Unicode NFKC before everything else, e.g. full-width forms).
    `padding_side`: "right", or "left" (XLNet: the text ends at the last position, where
    its classification token sits).
    `model_input_names`: the inputs a call returns (HF's key; token_type_ids only if listed).
    """

    do_lower_case: bool = True
    strip_accents: bool | None = None
    tokenize_chinese_chars: bool = True
    keep_hangul_syllables: bool = False
    pretokenize_morphemes: str | None = None
    nfkc: bool = False
    model_max_length: int = 512
    unk_token: str | None = None
    cls_token: str | None = None
    sep_token: str | None = None
    pad_token: str | None = None
    mask_token: str | None = None
    bos_token: str | None = None
    eos_token: str | None = None
    additional_special_tokens: tuple[str, ...] = ()
    padding_side: str = "right"
    model_input_names: tuple[str, ...] | None = None  # None: what the pipeline implies (hf_conventions.py)

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any], source: str) -> TokenizerConfig:
        """Pick and check the known keys of `raw` (others, e.g. HF bookkeeping, are ignored).

        HF conventions kept: transformers 5 writes `extra_special_tokens` for
        `additional_special_tokens`; XLNet's classes pad on the left without saying so.
        """
        raw = dict(raw)
        if isinstance(raw.get("extra_special_tokens"), list):
            raw.setdefault("additional_special_tokens", raw["extra_special_tokens"])
        if raw.get("tokenizer_class") in LEFT_PADDING_CLASSES:
            raw.setdefault("padding_side", "left")
        return cls(**{f.name: _checked(f.name, raw[f.name], source) for f in fields(cls) if f.name in raw})

    def with_options(self, options: Mapping[str, Any]) -> TokenizerConfig:
        """A copy with `options` (field name -> value) applied; unknown names are an error."""
        if not options:
            return self
        allowed = sorted(f.name for f in fields(self))
        unknown = sorted(set(options) - set(allowed))
        if unknown:
            raise BertkitError(f"unknown tokenizer option(s) {', '.join(unknown)} (allowed: {', '.join(allowed)})")
        return TokenizerConfig.from_dict({**asdict(self), **options}, source="tokenizer options")


def _checked(name: str, value: Any, source: str) -> Any:
    def bad(expected: str) -> BertkitError:
        return BertkitError(f"{source}: {name}={value!r} is invalid (expected {expected})")

    if name in ("do_lower_case", "tokenize_chinese_chars", "keep_hangul_syllables", "nfkc"):
        if not isinstance(value, bool):
            raise bad("true or false")
        return value
    if name == "strip_accents":
        if value is not None and not isinstance(value, bool):
            raise bad("true, false or null")
        return value
    if name == "pretokenize_morphemes":
        if value not in MORPHEME_SPLITTERS:
            raise bad('null or "kiwi"')
        return value
    if name == "model_max_length":
        numeric = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
        if not numeric or value != int(value) or value < 1:
            raise bad("a positive integer")
        return min(int(value), _MAX_LENGTH_CAP)
    if name == "padding_side":
        if value not in PADDING_SIDES:
            raise bad('"right" or "left"')
        return value
    if name == "model_input_names":
        if value is None:
            return None
        if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value) or "input_ids" not in value:
            raise bad('a list of input names including "input_ids"')
        return tuple(value)
    if name == "additional_special_tokens":
        if not isinstance(value, (list, tuple)):
            raise bad("a list of token strings")
        return tuple(_checked("additional special token", item, source) for item in value)
    # special tokens: a string, HF's AddedToken dict {"content": ...}, or null
    if isinstance(value, dict):
        value = value.get("content")
    if value is not None and (not isinstance(value, str) or not value):
        raise bad("a non-empty token string or null")
    return value


def bert_pipeline_options(spec: Mapping[str, Any]) -> dict[str, Any] | None:
    """The text options of a serialized standard BERT pipeline, or None for any other pipeline.

    Standard: WordPiece + BertPreTokenizer + what `bert_normalizer` builds (HF's plain
    `BertNormalizer`, or the Hangul-keeping Sequence; either after an optional NFKC).
    Returns TokenizerConfig field values (`keep_hangul_syllables` only where the
    normalizer decides it).
    """
    normalizer, pre_tokenizer = spec.get("normalizer"), spec.get("pre_tokenizer") or {}
    if spec.get("model", {}).get("type") != "WordPiece" or pre_tokenizer.get("type") != "BertPreTokenizer":
        return None
    is_sequence = isinstance(normalizer, dict) and normalizer.get("type") == "Sequence"
    steps = normalizer.get("normalizers", []) if is_sequence else [normalizer]
    types = [step.get("type") if isinstance(step, dict) else None for step in steps]
    nfkc = types[:1] == ["NFKC"]
    if nfkc:
        steps, types = steps[1:], types[1:]
    if not steps or types[0] != "BertNormalizer":
        return None
    bert = steps[0]
    options = {
        "nfkc": nfkc,
        "do_lower_case": bool(bert.get("lowercase")),
        "strip_accents": bert.get("strip_accents"),
        "tokenize_chinese_chars": bool(bert.get("handle_chinese_chars", True)),
    }
    if types == ["BertNormalizer"]:
        strips = options["strip_accents"] if options["strip_accents"] is not None else options["do_lower_case"]
        if strips:  # accents stripped the BERT way: Hangul is split (without stripping the option is moot)
            options["keep_hangul_syllables"] = False
    elif types[1:2] == ["NFC"] and all(t == "Replace" for t in types[2:]):
        options["keep_hangul_syllables"] = True
        options["strip_accents"] = None if options["do_lower_case"] else True  # None: "follows lowercasing"
    else:
        return None
    return options


def is_hf_bert_pipeline(spec: Mapping[str, Any]) -> bool:
    """True when transformers' BertTokenizer rebuilds exactly this serialized pipeline from the config."""
    normalizer, pre_tokenizer, model = spec.get("normalizer") or {}, spec.get("pre_tokenizer") or {}, spec["model"]
    return (
        model["type"] == "WordPiece"
        and normalizer.get("type") == "BertNormalizer"
        and normalizer.get("clean_text", True)
        and pre_tokenizer.get("type") == "BertPreTokenizer"
        and model.get("continuing_subword_prefix") == WORDPIECE_PREFIX
        and model.get("max_input_chars_per_word") == MAX_INPUT_CHARS_PER_WORD
    )


def vocab_txt(vocab: Mapping[str, int]) -> str:
    """The vocab.txt text for token -> id (ids must be 0..n-1)."""
    by_id = sorted(vocab.items(), key=lambda item: item[1])
    if [i for _, i in by_id] != list(range(len(by_id))):
        raise BertkitError("cannot write vocab.txt: the WordPiece ids are not contiguous from 0")
    return "".join(f"{token}\n" for token, _ in by_id)


def read_text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise BertkitError(f"{path}: not valid UTF-8 (byte offset {exc.start})") from exc
    except OSError as exc:
        raise BertkitError(f"{path}: cannot read ({exc.strerror or exc})") from exc


def read_json(path: Path) -> dict[str, Any]:
    return parse_json(read_text(path), path)


def parse_json(text: str, path: Path) -> dict[str, Any]:
    """The JSON object in `text` (read from `path`, named in errors)."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise BertkitError(f"{path}: corrupt JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})") from exc
    if not isinstance(data, dict):
        raise BertkitError(f"{path}: expected a JSON object, got {type(data).__name__}")
    return data


def read_vocab_txt(path: Path) -> dict[str, int]:
    """vocab.txt as token -> id: one token per line, id = line number - 1 (final newline optional).

    A repeated token is an error (HF would silently give it the later id and leave a hole).
    """
    lines = read_text(path).split("\n")  # not splitlines(): tokens may be exotic separators
    if lines and lines[-1] == "":
        lines.pop()
    vocab: dict[str, int] = {}
    for index, line in enumerate(lines):
        token = line.removesuffix("\r")
        if token in vocab:
            raise BertkitError(f"{path}:{index + 1}: token {token!r} repeats line {vocab[token] + 1}")
        vocab[token] = index
    if not vocab:
        raise BertkitError(f"{path}: empty vocabulary")
    return vocab
