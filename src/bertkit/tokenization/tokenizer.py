"""The encoding `Tokenizer`: BERT WordPiece (or any `tokenizers` model) with a HF-style API.

A thin layer over a Rust `tokenizers.Tokenizer` ("backend"): the backend does all the
per-text work (normalize, pre-tokenize, sub-word model, [CLS]/[SEP] template,
truncation, overflow windows) in parallel; this class loads and saves checkpoints,
checks arguments, and assembles and pads the output like Hugging Face fast tokenizers
(encoding.py; padding there is faster than Rust's, see docs/benchmarks.md).

Loading a directory (`Tokenizer.from_pretrained`):
  * vocab.txt only                    -> the BERT pipeline is built from vocab.txt and
                                         tokenizer_config.json (HF defaults when absent).
  * tokenizer.json holding the standard BERT pipeline (WordPiece + BertPreTokenizer +
    a BERT normalizer) and a tokenizer_config.json (or options passed to
    `from_pretrained`) -> the pipeline is rebuilt from the vocabulary (vocab.txt, else
    the one inside tokenizer.json) and the config. The config is the authority for the
    text options (lowercasing, accents, CJK), as in HF's BertTokenizer; where it does not
    say `nfkc` or `keep_hangul_syllables`, tokenizer.json's normalizer decides (HF
    configs never say; a plain BertNormalizer means no NFKC and Hangul as BERT treats
    it). Added tokens of tokenizer.json that are not in the vocabulary are carried over.
  * any other tokenizer.json (BPE, byte-level BPE, Unigram, a WordPiece with a custom
    normalizer or pre-tokenizer, or no config) -> used exactly as serialized; the config
    only supplies special-token names, model_max_length and the morpheme option.
The truncation/padding settings a tokenizer.json may carry are dropped: they are chosen
per call.

Korean: uncased BERT strips accents through NFD, which also splits Hangul syllables
into jamo. With `keep_hangul_syllables=True` the normalizer recomposes them, so Korean
words stay whole: tokenizers that bertkit trains record it in tokenizer_config.json.
Where neither the config nor tokenizer.json says so (every HF checkpoint), the pipeline
is BERT's own, bit-exact with transformers' BertTokenizer on every text: a checkpoint
is tokenized as it was trained (an uncased multilingual BERT learned jamo pieces), or its
embeddings mean nothing. Pass `keep_hangul_syllables=True` to `from_pretrained` to
override (for a vocabulary that holds syllables).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

from tokenizers import AddedToken, Encoding
from tokenizers import Tokenizer as RustTokenizer

from bertkit.atomic import write_text_atomic
from bertkit.errors import BertkitError
from bertkit.tokenization.decoding import default_decoder
from bertkit.tokenization.encoding import BatchEncoding, Padding, assemble, pad_encoded, unbatch
from bertkit.tokenization.files import (
    CONFIG_FILE,
    LEFT_PADDING_MODEL_TYPES,
    PADDING_SIDES,
    SPECIAL_CANDIDATES,
    SPECIAL_ROLES,
    SPECIAL_TOKENS_MAP_FILE,
    TOKENIZER_FILE,
    VOCAB_FILE,
    TokenizerConfig,
    bert_pipeline_options,
    is_hf_bert_pipeline,
    parse_json,
    read_json,
    read_text,
    read_vocab_txt,
    vocab_txt,
)
from bertkit.tokenization.hf_conventions import clean_up_tokenization_spaces, model_input_names
from bertkit.tokenization.normalizers import bert_normalizer
from bertkit.tokenization.wordpiece import (
    MAX_INPUT_CHARS_PER_WORD,
    WORDPIECE_PREFIX,
    bert_template,
    wordpiece_backend,
)

TRUNCATION_VALUES = (False, True, "longest_first", "only_first", "only_second", "do_not_truncate")
PADDING_VALUES = (False, True, "longest", "max_length", "do_not_pad")
RETURN_TENSORS_VALUES = (None, "pt", "np")


class Tokenizer:
    """Text -> token ids for BERT-style models, HF-compatible in behaviour and files.

    Build with `Tokenizer.from_pretrained(dir)`, `Tokenizer.from_wordpiece_vocab(vocab)`
    or `Tokenizer(backend)` around any `tokenizers.Tokenizer`. Call it like a HF fast
    tokenizer: `tok(texts, pairs, truncation=True, max_length=128, padding=True,
    return_tensors="pt")`.
    """

    def __init__(self, backend: RustTokenizer, config: TokenizerConfig | None = None):
        self._backend = backend
        self.config = config or TokenizerConfig()
        backend.no_truncation()  # the resting state: __call__ sets truncation per call
        backend.no_padding()  # padding is done when assembling the output (encoding.py)
        if backend.decoder is None and (decoder := default_decoder(backend)) is not None:
            backend.decoder = decoder  # decode "##ly", "Ġcity", "▁city" as text, not raw token strings
        vocab = backend.get_vocab(with_added_tokens=True)
        self._special = _resolve_special_tokens(self.config, vocab, source="tokenizer config")
        wanted = [*(tok for tok in self._special.values() if tok is not None), *self.config.additional_special_tokens]
        new_specials = [tok for tok in dict.fromkeys(wanted) if not _is_special(backend, tok)]
        if new_specials:
            backend.add_special_tokens([AddedToken(tok, special=True, normalized=False) for tok in new_specials])
        if backend.post_processor is None and self.cls_token and self.sep_token:
            backend.post_processor = bert_template(
                self.cls_token, self.cls_token_id, self.sep_token, self.sep_token_id
            )
        self._split_morphemes: Callable[[str], str] | None = None
        if self.config.pretokenize_morphemes:
            from bertkit.tokenization.morphemes import morpheme_splitter  # kiwipiepy is an optional extra

            self._split_morphemes = morpheme_splitter()
        # the inputs a call returns: the config's, else what the pipeline implies (saved either way)
        self.config = replace(self.config, model_input_names=model_input_names(backend, self.config.model_input_names))
        # Single texts get type id 0 on every token with the usual post-processors; knowing it
        # lets __call__ skip reading token_type_ids back from Rust.
        try:
            self._single_type_ids_zero = not any(backend.encode("a").type_ids)
        except Exception:  # a model that cannot encode "a" (no unk): read type ids back instead
            self._single_type_ids_zero = False

    # ------------------------------------------------------------------ construction

    @classmethod
    def from_wordpiece_vocab(
        cls,
        vocab: Mapping[str, int] | Sequence[str],
        config: TokenizerConfig | None = None,
        *,
        continuing_subword_prefix: str = WORDPIECE_PREFIX,
        max_input_chars_per_word: int = MAX_INPUT_CHARS_PER_WORD,
        source: str | Path = "WordPiece vocabulary",
        **options: Any,
    ) -> Tokenizer:
        """The BERT encoding pipeline over a WordPiece vocabulary (token -> id, or tokens in id order).

        Pipeline: `bert_normalizer` (clean text, lowercase/accents per config, spaces around
        CJK, Hangul kept whole only with `keep_hangul_syllables=True`) -> BertPreTokenizer
        (whitespace and punctuation) -> WordPiece (greedy longest match, "##" pieces, [UNK]
        for unspellable words or words over 100 characters) -> `[CLS] A [SEP] (B [SEP])`.
        `options` are TokenizerConfig fields overriding `config`; `source` names the
        vocabulary in errors (its file, when it came from one).
        """
        config = (config or TokenizerConfig()).with_options(options)
        vocab_map = dict(vocab) if isinstance(vocab, Mapping) else {tok: i for i, tok in enumerate(vocab)}
        special = _resolve_special_tokens(config, vocab_map, source=str(source))
        for role in ("unk_token", "cls_token", "sep_token"):
            if special[role] is None:
                raise BertkitError(
                    f"{source}: no {role} (none of {SPECIAL_CANDIDATES[role]} is in it; "
                    f"set {role} in {CONFIG_FILE})"
                )
        normalizer = bert_normalizer(
            lowercase=config.do_lower_case,
            strip_accents=config.strip_accents,
            handle_chinese_chars=config.tokenize_chinese_chars,
            clean_text=True,
            keep_hangul=config.keep_hangul_syllables,
            nfkc=config.nfkc,
        )
        backend = wordpiece_backend(
            vocab_map,
            special["unk_token"],
            normalizer,
            prefix=continuing_subword_prefix,
            max_input_chars_per_word=max_input_chars_per_word,
        )
        cls_token, sep_token = special["cls_token"], special["sep_token"]
        backend.post_processor = bert_template(cls_token, vocab_map[cls_token], sep_token, vocab_map[sep_token])
        return cls(backend, config)

    @classmethod
    def from_pretrained(cls, directory: str | Path, **options: Any) -> Tokenizer:
        """Load from a checkpoint directory (see the module docstring for which file wins).

        `options` are TokenizerConfig fields overriding tokenizer_config.json, e.g.
        `keep_hangul_syllables=False`.
        """
        directory = Path(directory)
        if not directory.is_dir():
            from bertkit.interop.hub_cache import cached_snapshot, looks_like_model_id

            snapshot = cached_snapshot(str(directory)) if looks_like_model_id(str(directory)) else None
            if snapshot is None:
                raise BertkitError(f"{directory}: no such tokenizer directory")
            directory = snapshot  # a Hugging Face id in the local cache
        vocab_path, json_path, config_path = directory / VOCAB_FILE, directory / TOKENIZER_FILE, directory / CONFIG_FILE
        if not vocab_path.is_file() and not json_path.is_file():
            raise BertkitError(f"{directory}: no {VOCAB_FILE} or {TOKENIZER_FILE} in this directory")

        raw: dict[str, Any] = {}
        specials_path = directory / SPECIAL_TOKENS_MAP_FILE
        if specials_path.is_file():
            raw.update({k: v for k, v in read_json(specials_path).items() if k in SPECIAL_ROLES})
        if config_path.is_file():
            raw.update(read_json(config_path))
        if "tokenizer_class" not in raw and _model_type(directory) in LEFT_PADDING_MODEL_TYPES:
            raw.setdefault("padding_side", "left")  # AutoTokenizer would pick XLNet's class by config.json
        config = TokenizerConfig.from_dict(raw, str(config_path)).with_options(options)
        has_config = config_path.is_file() or bool(options)

        if not json_path.is_file():
            return cls.from_wordpiece_vocab(read_vocab_txt(vocab_path), config, source=vocab_path)
        serialized = read_text(json_path)
        spec = parse_json(serialized, json_path)
        model = spec.get("model")
        if not isinstance(model, dict):
            raise BertkitError(f'{json_path}: not a tokenizers serialization (no "model" object)')
        standard_options = bert_pipeline_options(spec)
        if standard_options is not None and has_config:
            for name in ("nfkc", "keep_hangul_syllables"):  # HF configs cannot say; the file can
                if name not in raw and name not in options and name in standard_options:
                    config = replace(config, **{name: standard_options[name]})
            vocab = read_vocab_txt(vocab_path) if vocab_path.is_file() else model.get("vocab")
            if not isinstance(vocab, dict):
                raise BertkitError(f"{json_path}: WordPiece model without a vocabulary")
            tokenizer = cls.from_wordpiece_vocab(
                vocab,
                config,
                source=vocab_path if vocab_path.is_file() else json_path,
                continuing_subword_prefix=model.get("continuing_subword_prefix") or WORDPIECE_PREFIX,
                max_input_chars_per_word=model.get("max_input_chars_per_word") or MAX_INPUT_CHARS_PER_WORD,
            )
            tokenizer._carry_added_tokens(spec.get("added_tokens") or [], json_path)
            return tokenizer
        try:
            backend = RustTokenizer.from_str(serialized)
        except Exception as exc:  # the Rust parser raises a plain Exception
            raise BertkitError(f"{json_path}: not a valid tokenizer file ({exc})") from exc
        if standard_options is not None:  # keep the config consistent with what the file does
            config = TokenizerConfig(**{**asdict(config), **standard_options})
        return cls(backend, config)

    def _carry_added_tokens(self, added: list[dict[str, Any]], source: Path) -> None:
        """Re-register tokenizer.json's added tokens (beyond the specials) with their ids."""
        known = self._backend.get_added_tokens_decoder()
        known_contents = {tok.content for tok in known.values()}
        for entry in sorted(added, key=lambda e: e.get("id", 0)):
            content = entry.get("content")
            if not isinstance(content, str) or content in known_contents:
                continue
            token = AddedToken(
                content,
                single_word=bool(entry.get("single_word")),
                lstrip=bool(entry.get("lstrip")),
                rstrip=bool(entry.get("rstrip")),
                normalized=bool(entry.get("normalized", True)),
                special=bool(entry.get("special")),
            )
            (self._backend.add_special_tokens if token.special else self._backend.add_tokens)([token])
            if self._backend.token_to_id(content) != entry.get("id"):
                raise BertkitError(
                    f"{source}: added token {content!r} has id {entry.get('id')} but the vocabulary "
                    f"puts it at {self._backend.token_to_id(content)}"
                )

    # ------------------------------------------------------------------ saving

    def save_pretrained(self, directory: str | Path) -> list[Path]:
        """Write tokenizer.json, tokenizer_config.json (and vocab.txt for WordPiece) to `directory`.

        The files load in bertkit and in transformers (`AutoTokenizer`, `BertTokenizer`,
        `BertTokenizerFast`). The config names `BertTokenizer` only when the pipeline is
        exactly HF's BERT pipeline; otherwise (e.g. Hangul kept whole, BPE) it names the
        generic `PreTrainedTokenizerFast`, which runs tokenizer.json as is, so
        `AutoTokenizer` reproduces bertkit exactly. Each file is written atomically.
        """
        directory = Path(directory)
        try:
            directory.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise BertkitError(f"{directory}: cannot create directory ({exc.strerror or exc})") from exc
        spec = json.loads(self._backend.to_str())
        written: list[Path] = []
        if spec["model"]["type"] == "WordPiece":
            write_text_atomic(directory / VOCAB_FILE, vocab_txt(spec["model"]["vocab"]))
            written.append(directory / VOCAB_FILE)
        write_text_atomic(directory / TOKENIZER_FILE, self._backend.to_str(pretty=True))
        written.append(directory / TOKENIZER_FILE)
        hf_bert = is_hf_bert_pipeline(spec)
        config = {"tokenizer_class": "BertTokenizer" if hf_bert else "PreTrainedTokenizerFast"}
        config.update(asdict(self.config))
        config.update(bert_pipeline_options(spec) or {})  # what the pipeline really does, if it is BERT's
        config.update(self._special)
        config["additional_special_tokens"] = self.additional_special_tokens
        config["model_max_length"] = self.model_max_length
        config["clean_up_tokenization_spaces"] = clean_up_tokenization_spaces(self._backend)
        config["model_input_names"] = list(self.model_input_names)
        write_text_atomic(directory / CONFIG_FILE, json.dumps(config, indent=2, ensure_ascii=False) + "\n")
        written.append(directory / CONFIG_FILE)
        return written

    # ------------------------------------------------------------------ vocabulary

    @property
    def backend(self) -> RustTokenizer:
        """The underlying `tokenizers.Tokenizer` (its truncation/padding are off between calls)."""
        return self._backend

    @property
    def model_type(self) -> str:
        """The sub-word model: "WordPiece", "BPE", "Unigram" or "WordLevel"."""
        return type(self._backend.model).__name__

    @property
    def vocab_size(self) -> int:
        """Number of token ids, added tokens included (the embedding-matrix size)."""
        return self._backend.get_vocab_size(with_added_tokens=True)

    def __len__(self) -> int:
        return self.vocab_size

    @property
    def model_max_length(self) -> int:
        return self.config.model_max_length

    def get_vocab(self) -> dict[str, int]:
        """token -> id, added tokens included."""
        return self._backend.get_vocab(with_added_tokens=True)

    def convert_tokens_to_ids(self, tokens: str | Sequence[str]) -> int | list[int]:
        """Token(s) to id(s); unknown tokens give the unk id (as in HF)."""
        if isinstance(tokens, str):
            return self._token_id(tokens)
        return [self._token_id(tok) for tok in tokens]

    def _token_id(self, token: str) -> int:
        token_id = self._backend.token_to_id(token)
        if token_id is None:
            if self.unk_token_id is None:
                raise BertkitError(f"token {token!r} is not in the vocabulary and there is no unk_token")
            return self.unk_token_id
        return token_id

    def convert_ids_to_tokens(self, ids: int | Sequence[int]) -> str | list[str]:
        """Id(s) to token string(s): an int (or 0-d array) gives a str, a sequence a list.

        An id outside the vocabulary is an error.
        """
        if hasattr(ids, "tolist"):  # numpy / torch, including 0-d scalars
            ids = ids.tolist()
        if isinstance(ids, int) and not isinstance(ids, bool):
            return self._id_token(ids)
        return [self._id_token(i) for i in _as_id_list(ids, "ids")]

    def _id_token(self, token_id: int) -> str:
        token = self._backend.id_to_token(token_id) if token_id >= 0 else None
        if token is None:
            raise BertkitError(f"id {token_id} is outside the vocabulary (size {self.vocab_size})")
        return token

    @property
    def unk_token(self) -> str | None:
        return self._special["unk_token"]

    @property
    def cls_token(self) -> str | None:
        return self._special["cls_token"]

    @property
    def sep_token(self) -> str | None:
        return self._special["sep_token"]

    @property
    def pad_token(self) -> str | None:
        return self._special["pad_token"]

    @property
    def mask_token(self) -> str | None:
        return self._special["mask_token"]

    @property
    def bos_token(self) -> str | None:
        return self._special["bos_token"]

    @property
    def eos_token(self) -> str | None:
        return self._special["eos_token"]

    def _special_id(self, role: str) -> int | None:
        token = self._special[role]
        return None if token is None else self._backend.token_to_id(token)

    @property
    def unk_token_id(self) -> int | None:
        return self._special_id("unk_token")

    @property
    def cls_token_id(self) -> int | None:
        return self._special_id("cls_token")

    @property
    def sep_token_id(self) -> int | None:
        return self._special_id("sep_token")

    @property
    def pad_token_id(self) -> int | None:
        return self._special_id("pad_token")

    @property
    def mask_token_id(self) -> int | None:
        return self._special_id("mask_token")

    @property
    def bos_token_id(self) -> int | None:
        return self._special_id("bos_token")

    @property
    def eos_token_id(self) -> int | None:
        return self._special_id("eos_token")

    def with_eos_padding(self, eos_token_id: int | None = None) -> Tokenizer:
        """This tokenizer, padding with EOS where it has no pad token (GPT-2's), as transformers
        does for decoders (`tok.pad_token = tok.eos_token`); self when it has a pad token or no EOS.
        `eos_token_id` (the model config's) names EOS when the tokenizer config does not.
        For inference only: the attention mask hides the padding, so no real token's state
        changes, whereas training data that ends in EOS would lose its end to a padding mask."""
        eos = self.eos_token
        if eos is None and eos_token_id is not None:
            eos = self._backend.id_to_token(eos_token_id)
        if self.pad_token is not None or eos is None:
            return self
        return Tokenizer(RustTokenizer.from_str(self._backend.to_str()), replace(self.config, pad_token=eos))

    @property
    def model_input_names(self) -> tuple[str, ...]:
        """The inputs a call returns (transformers' key): token_type_ids only for BERT-style pipelines."""
        return self.config.model_input_names

    @property
    def padding_side(self) -> str:
        """"right", or "left" (XLNet): where padding goes, from tokenizer_config.json."""
        return self.config.padding_side

    @property
    def additional_special_tokens(self) -> list[str]:
        """Special tokens beyond the role tokens (XLNet's <eop> <eod>, T5's sentinels): the config's
        list first, in its order, then any other special added token in id order."""
        roles = set(self._special.values())
        decoder = self._backend.get_added_tokens_decoder()
        others = [decoder[i].content for i in sorted(decoder) if decoder[i].special and decoder[i].content not in roles]
        listed = [t for t in self.config.additional_special_tokens if t not in roles]
        return list(dict.fromkeys(listed + others))

    def get_sentinel_tokens(self) -> list[str]:
        """T5's span-corruption sentinels `<extra_id_0>`, `<extra_id_1>`, ... in index order
        (ids descend from the top of the vocabulary in T5's layout)."""
        vocab = self._backend.get_vocab(with_added_tokens=True)
        tokens = []
        while (token := f"<extra_id_{len(tokens)}>") in vocab:
            tokens.append(token)
        return tokens

    def get_sentinel_token_ids(self) -> list[int]:
        """Ids of `get_sentinel_tokens()`, sentinel 0 first."""
        return [self._backend.token_to_id(token) for token in self.get_sentinel_tokens()]

    @property
    def all_special_tokens(self) -> list[str]:
        """Every special token (the five roles and any other special added token)."""
        return sorted({tok.content for tok in self._backend.get_added_tokens_decoder().values() if tok.special})

    @property
    def all_special_ids(self) -> list[int]:
        return sorted(i for i, tok in self._backend.get_added_tokens_decoder().items() if tok.special)

    def __repr__(self) -> str:
        return (
            f"Tokenizer({self.model_type}, vocab_size={self.vocab_size}, lowercase={self.config.do_lower_case}, "
            f"keep_hangul_syllables={self.config.keep_hangul_syllables}, model_max_length={self.model_max_length})"
        )

    # ------------------------------------------------------------------ encoding

    def __call__(
        self,
        texts: str | Sequence[str] | Sequence[Sequence[str]],
        text_pairs: str | Sequence[str] | Sequence[Sequence[str]] | None = None,
        *,
        max_length: int | None = None,
        truncation: bool | str | None = None,
        padding: bool | str = False,
        return_tensors: str | None = None,
        return_offsets_mapping: bool = False,
        stride: int = 0,
        return_overflowing_tokens: bool = False,
        add_special_tokens: bool = True,
        is_split_into_words: bool = False,
        pad_to_multiple_of: int | None = None,
        return_special_tokens_mask: bool = False,
        padding_side: str | None = None,
        return_token_type_ids: bool | None = None,
    ) -> BatchEncoding:
        """Encode one text (flat lists out) or a batch (lists of lists / (B, T) int64 tensors).

        texts, text_pairs: str or list of str (with `is_split_into_words`: a list of words,
            or a list of such lists). Pairs become `[CLS] A [SEP] B [SEP]`, type ids 0/1.
        truncation: False; True/"longest_first" (trim the longer text token by token),
            "only_first", "only_second". None (default) truncates only when max_length is
            given. The limit is max_length, else model_max_length.
        padding: False; True/"longest" (to the longest row); "max_length".
        padding_side: "right" or "left"; None: the tokenizer's `padding_side`.
        stride, return_overflowing_tokens: keep the truncated-away tokens as extra rows
            (windows overlapping by `stride` tokens, e.g. SQuAD doc-stride with
            "only_second"); `overflow_to_sample_mapping` gives each row's input index.
        return_offsets_mapping: per token (start, end) character span in its own text.
        return_token_type_ids: None (default): when `model_input_names` lists them (BERT-style
            tokenizers, not GPT/RoBERTa/BART ones), as in transformers.
        Returns a BatchEncoding with input_ids, (token_type_ids,) attention_mask
        (+ offset_mapping, overflow_to_sample_mapping, special_tokens_mask on request).
        """
        batched, batch = self._as_batch(texts, "texts", is_split_into_words)
        pairs = None
        if text_pairs is not None:
            pairs_batched, pairs = self._as_batch(text_pairs, "text_pairs", is_split_into_words)
            if pairs_batched != batched or len(pairs) != len(batch):
                raise BertkitError(
                    f"text_pairs must match texts: got {len(pairs)} pair(s) for {len(batch)} text(s)"
                    if pairs_batched == batched
                    else "text_pairs must be a single text when texts is one, and a list when texts is a list"
                )
        strategy = _truncation_strategy(truncation, max_length)
        pad_mode = _padding_mode(padding)
        _check_output_options(return_tensors, max_length, pad_to_multiple_of)
        if isinstance(stride, bool) or not isinstance(stride, int) or stride < 0:
            raise BertkitError(f"stride={stride!r} must be a non-negative integer")
        if strategy == "only_second" and pairs is None:
            raise BertkitError("truncation='only_second' needs text_pairs (it truncates the second text)")
        limit = max_length or self.model_max_length

        originals = (batch, pairs)
        if self._split_morphemes is not None:
            batch = self._apply_morphemes(batch, is_split_into_words)
            pairs = None if pairs is None else self._apply_morphemes(pairs, is_split_into_words)
        inputs: list[Any] = batch if pairs is None else list(zip(batch, pairs, strict=True))

        padding_spec = self._padding_spec(pad_mode, limit, pad_to_multiple_of, padding_side)

        backend = self._backend
        try:
            if strategy is not None:
                backend.enable_truncation(limit, stride=stride, strategy=strategy, direction="right")
            encodings = backend.encode_batch(
                inputs, is_pretokenized=is_split_into_words, add_special_tokens=add_special_tokens
            )
        except Exception as exc:  # truncation impossible, e.g. the first text alone exceeds max_length
            raise BertkitError(
                f"cannot encode with truncation={strategy!r}, max_length={limit}, stride={stride}: {exc}"
            ) from exc
        finally:
            backend.no_truncation()

        sample_mapping = None
        if return_overflowing_tokens:
            rows: list[Encoding] = []
            sample_mapping = []
            for index, encoding in enumerate(encodings):
                windows = [encoding, *encoding.overflowing]
                rows += windows
                sample_mapping += [index] * len(windows)
            encodings = rows
        offsets = None
        if return_offsets_mapping:
            offsets = [e.offsets for e in encodings]
            if self._split_morphemes is not None and not is_split_into_words:
                offsets = self._offsets_to_original(offsets, encodings, sample_mapping, originals, (batch, pairs))
        wants_types = self._wants_token_types(return_token_type_ids)
        result = assemble(
            encodings,
            return_tensors=return_tensors,
            padding=padding_spec,
            zero_type_ids=not wants_types or (pairs is None and self._single_type_ids_zero),
            offsets=offsets,
            sample_mapping=sample_mapping,
            special_tokens_mask=return_special_tokens_mask,
        )
        if not wants_types:
            del result["token_type_ids"]
        if not batched and return_tensors is None and not return_overflowing_tokens:
            return unbatch(result)
        return result

    def pad(
        self,
        features: Mapping[str, Any],
        padding: bool | str = True,
        *,
        max_length: int | None = None,
        pad_to_multiple_of: int | None = None,
        return_tensors: str | None = None,
        padding_side: str | None = None,
    ) -> BatchEncoding:
        """Pad rows encoded earlier, e.g. regrouped into new batches (HF's `tokenizer.pad`).

        features: `input_ids` as a list of id lists, optionally `token_type_ids` and
        `special_tokens_mask`; the attention mask is rebuilt. `padding` and the rest as in
        `__call__` ("max_length" pads to `max_length`, else model_max_length).
        """
        pad_mode = _padding_mode(padding)
        _check_output_options(return_tensors, max_length, pad_to_multiple_of)
        spec = self._padding_spec(pad_mode, max_length or self.model_max_length, pad_to_multiple_of, padding_side)
        result = pad_encoded(features, spec, return_tensors)
        if "token_type_ids" not in features and not self._wants_token_types(None):
            del result["token_type_ids"]
        return result

    def _wants_token_types(self, requested: bool | None) -> bool:
        return "token_type_ids" in self.model_input_names if requested is None else requested

    def _padding_spec(
        self, pad_mode: str | None, limit: int, pad_to_multiple_of: int | None, side: str | None
    ) -> Padding | None:
        if side is not None and side not in PADDING_SIDES:
            raise BertkitError(f"padding_side={side!r} is not one of 'right', 'left'")
        if pad_mode is None:
            return None
        if self.pad_token is None:
            raise BertkitError("padding needs a pad_token; this tokenizer has none (set pad_token in the config)")
        return Padding(pad_mode, limit, self.pad_token_id, self.pad_token, pad_to_multiple_of, side or self.padding_side)

    def encode(
        self,
        text: str,
        text_pair: str | None = None,
        *,
        add_special_tokens: bool = True,
        max_length: int | None = None,
        truncation: bool | str | None = None,
    ) -> list[int]:
        """Token ids of one text (or pair), with [CLS]/[SEP] unless `add_special_tokens=False`."""
        if not isinstance(text, str):
            raise BertkitError(f"text must be a str, got {type(text).__name__}")
        return self(
            text, text_pair, add_special_tokens=add_special_tokens, max_length=max_length, truncation=truncation
        )["input_ids"]

    def tokenize(self, text: str) -> list[str]:
        """Sub-word tokens of `text`, no special tokens: "pretraining" -> ["pre", "##train", "##ing"]."""
        if not isinstance(text, str):
            raise BertkitError(f"text must be a str, got {type(text).__name__}")
        if self._split_morphemes is not None:
            text = self._split_morphemes(text)
        return self._backend.encode(text, add_special_tokens=False).tokens

    def decode(self, ids: Sequence[int] | Any, skip_special_tokens: bool = True) -> str:
        """Ids (list, 1-D numpy array or tensor) back to text with the pipeline's decoder: "##" pieces
        joined (WordPiece), "Ġ" / "▁" as spaces (byte-level BPE, SentencePiece)."""
        return self._backend.decode(_as_id_list(ids, "ids"), skip_special_tokens=skip_special_tokens)

    def batch_decode(self, batch_ids: Iterable[Sequence[int]] | Any, skip_special_tokens: bool = True) -> list[str]:
        """`decode` for each row of a list of id lists or a (B, T) array/tensor."""
        rows = batch_ids.tolist() if hasattr(batch_ids, "tolist") else list(batch_ids)
        return self._backend.decode_batch(
            [_as_id_list(r, "batch_ids row") for r in rows], skip_special_tokens=skip_special_tokens
        )

    # ------------------------------------------------------------------ helpers

    @staticmethod
    def _as_batch(value: Any, name: str, split_words: bool) -> tuple[bool, list[Any]]:
        """(was it a batch?, the batch as a list); checks every item's type."""

        def check_words(words: Any, where: str) -> list[str]:
            if not isinstance(words, (list, tuple)):
                raise BertkitError(
                    f"{where} must be a list of words (str) with is_split_into_words=True, got {type(words).__name__}"
                )
            for j, word in enumerate(words):
                if not isinstance(word, str):
                    raise BertkitError(f"{where}[{j}] is {type(word).__name__}, expected str")
            return list(words)

        if split_words:
            if isinstance(value, (list, tuple)) and value and all(isinstance(v, (list, tuple)) for v in value):
                return True, [check_words(v, f"{name}[{i}]") for i, v in enumerate(value)]
            return False, [check_words(value, name)]
        if isinstance(value, str):
            return False, [value]
        if not isinstance(value, (list, tuple)):
            raise BertkitError(f"{name} must be a str or a list of str, got {type(value).__name__}")
        for i, item in enumerate(value):
            if not isinstance(item, str):
                raise BertkitError(f"{name}[{i}] is {type(item).__name__}, expected str")
        return True, list(value)

    def _apply_morphemes(self, batch: list[Any], split_words: bool) -> list[Any]:
        split = self._split_morphemes
        if split_words:
            return [[split(word) for word in words] for words in batch]
        return [split(text) for text in batch]

    @staticmethod
    def _offsets_to_original(
        offsets: list[list[tuple[int, int]]],
        encodings: list[Encoding],
        sample_mapping: list[int] | None,
        originals: tuple[list[str], list[str] | None],
        splits: tuple[list[str], list[str] | None],
    ) -> list[list[tuple[int, int]]]:
        """Map offsets into morpheme-split texts back to the texts the caller passed."""
        maps: dict[tuple[int, int], tuple[list[int], list[int]]] = {}
        restored = []
        for row, (row_offsets, encoding) in enumerate(zip(offsets, encodings, strict=True)):
            sample = sample_mapping[row] if sample_mapping is not None else row
            new_row = []
            for (start, end), seq in zip(row_offsets, encoding.sequence_ids, strict=True):
                if seq is None or end <= start:
                    new_row.append((start, end))
                    continue
                key = (seq, sample)
                if key not in maps:
                    maps[key] = _alignment(originals[seq][sample], splits[seq][sample])
                starts, ends = maps[key]
                new_row.append((starts[start], ends[end]))
            restored.append(new_row)
        return restored


# ---------------------------------------------------------------------- module helpers


def _alignment(original: str, split: str) -> tuple[list[int], list[int]]:
    """Position maps from `split` (original with spaces inserted) back to `original`.

    starts[j]: original index of split char j (an inserted space maps to the next real
    char); ends[j]: original end position for a span ending before split char j.
    """
    starts, ends = [0] * (len(split) + 1), [0] * (len(split) + 1)
    i = 0
    for j, char in enumerate(split):
        while i < len(original) and original[i] != char and original[i].isspace():
            i += 1  # whitespace the splitter dropped
        starts[j] = min(i, len(original))
        if i < len(original) and (original[i] == char or not char.isspace()):
            i += 1  # matched (or substituted) a real character
        ends[j + 1] = min(i, len(original))
    starts[len(split)] = len(original)
    return starts, ends


def _check_output_options(return_tensors: Any, max_length: Any, pad_to_multiple_of: Any) -> None:
    if return_tensors not in RETURN_TENSORS_VALUES:
        raise BertkitError(f"return_tensors={return_tensors!r} is not one of None, 'pt', 'np'")
    for name, value in (("max_length", max_length), ("pad_to_multiple_of", pad_to_multiple_of)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
            raise BertkitError(f"{name}={value!r} must be a positive integer or None")


def _truncation_strategy(truncation: Any, max_length: int | None) -> str | None:
    if truncation is None:
        return "longest_first" if max_length is not None else None
    if truncation not in TRUNCATION_VALUES or (not isinstance(truncation, (bool, str))):
        allowed = ", ".join(repr(v) for v in TRUNCATION_VALUES)
        raise BertkitError(f"truncation={truncation!r} is not one of {allowed}")
    if truncation is False or truncation == "do_not_truncate":
        return None
    return "longest_first" if truncation is True else truncation


def _padding_mode(padding: Any) -> str | None:
    if padding is None:
        return None
    if padding not in PADDING_VALUES or not isinstance(padding, (bool, str)):
        allowed = ", ".join(repr(v) for v in PADDING_VALUES)
        raise BertkitError(f"padding={padding!r} is not one of {allowed}")
    if padding is False or padding == "do_not_pad":
        return None
    return "longest" if padding is True else padding


def _as_id_list(ids: Any, name: str) -> list[int]:
    if hasattr(ids, "tolist"):
        ids = ids.tolist()
    if isinstance(ids, int):
        ids = [ids]
    if not isinstance(ids, (list, tuple)) or not all(isinstance(i, int) and not isinstance(i, bool) for i in ids):
        raise BertkitError(f"{name} must be a flat list of int token ids (or a 1-D array/tensor)")
    return list(ids)


def _model_type(directory: Path) -> str | None:
    """config.json's model_type next to the tokenizer files (a model checkpoint), if readable."""
    path = directory / "config.json"
    if not path.is_file():
        return None
    try:
        value = json.loads(path.read_text(encoding="utf-8")).get("model_type")
    except (OSError, ValueError, AttributeError):
        return None  # a model config is not the tokenizer's business: its loader reports problems
    return value if isinstance(value, str) else None


def _is_special(backend: RustTokenizer, token: str) -> bool:
    return any(t.content == token and t.special for t in backend.get_added_tokens_decoder().values())


def _resolve_special_tokens(config: TokenizerConfig, vocab: Mapping[str, int], source: str) -> dict[str, str | None]:
    """role -> token: the configured one (must be in `vocab`) or the first candidate found.

    A decoder's tokenizer (GPT-2's, KoGPT2's: it names a bos_token but neither cls_token
    nor sep_token) frames nothing, so no [CLS]/[SEP] is guessed for it: KoGPT2's vocabulary
    holds <s> and </s>, and guessing them would wrap every text in `<s> A </s>`."""
    decoder = config.bos_token is not None and config.cls_token is None and config.sep_token is None
    special: dict[str, str | None] = {}
    for role in SPECIAL_ROLES:
        token = getattr(config, role)
        if token is not None and token not in vocab:
            raise BertkitError(f"{source}: {role}={token!r} is not in the vocabulary")
        if token is None and decoder and role in ("cls_token", "sep_token"):
            special[role] = None
            continue
        if token is None:
            token = next((c for c in SPECIAL_CANDIDATES[role] if c in vocab), None)
        special[role] = token
    return special

