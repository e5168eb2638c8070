"""Writing a trained tokenizer as a Hugging Face compatible directory.

  tokenizer.json           the full `tokenizers` pipeline (normalizer, pre-tokenizer, model,
                           post-processor with the special tokens, decoder)
  vocab.txt                WordPiece: one token per line, id = line number - 1
  vocab.json, merges.txt   BPE / byte-level BPE (GPT-2 layout); Unigram has its vocabulary
                           (pieces with scores) in tokenizer.json only
  tokenizer_config.json    HF keys (tokenizer_class, do_lower_case, strip_accents,
                           tokenize_chinese_chars, special tokens, model_max_length) and
                           bertkit's: keep_hangul_syllables, pretokenize_morphemes, nfkc,
                           bertkit_training (how it was trained)
  special_tokens_map.json  the special tokens by role

`tokenizer_class` is "BertTokenizer" when transformers' BertTokenizer, which rebuilds the
pipeline from vocab.txt and the config, reproduces training exactly; otherwise
"PreTrainedTokenizerFast", which runs tokenizer.json as is: NFKC, Hangul kept whole while
accents are stripped (with Hangul in the vocabulary), and all BPE variants.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Sequence

from tokenizers import Tokenizer

from bertkit.atomic import write_text_atomic
from bertkit.errors import BertkitError
from bertkit.tokenization.hf_conventions import clean_up_tokenization_spaces, model_input_names
from bertkit.tokenization.train.options import SPECIAL_ROLES, TrainOptions
from bertkit.tokenization.train.unigram import resolve_layout, unigram_config


def save_tokenizer(tokenizer: Tokenizer, directory: Path, options: TrainOptions, files: Sequence[str]) -> list[Path]:
    """Write the tokenizer files to `directory` (created if needed); returns the paths written."""
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise BertkitError(f"{directory}: cannot create the output directory ({exc.strerror or exc})") from exc
    vocab = tokenizer.get_vocab(with_added_tokens=False)
    written = []

    def write(name: str, text: str) -> None:
        write_text_atomic(directory / name, text)
        written.append(directory / name)

    write("tokenizer.json", tokenizer.to_str(pretty=True))
    by_id = sorted(vocab, key=vocab.__getitem__)
    if options.algorithm == "unigram":
        config = unigram_config(
            resolve_layout(options.layout, options.sentinels),
            options.text.lowercase,
            options.sentinels,
            options.special_tokens.extra,
            options.text.morphemes,
        )
        config.update(model_max_length=options.model_max_length, **pipeline_keys(tokenizer),
                      bertkit_training=training_record(options, files))
        write("tokenizer_config.json", json.dumps(config, indent=2, ensure_ascii=False) + "\n")
        special_map = {k: v for k, v in config.items() if k.endswith("_token") or k == "additional_special_tokens"}
        write("special_tokens_map.json", json.dumps(special_map, indent=2, ensure_ascii=False) + "\n")
        return written
    if options.algorithm in ("wordpiece", "wordpiece-freq"):
        write("vocab.txt", "".join(f"{token}\n" for token in by_id))
    elif options.decoder_layout is not None:
        return written + _save_decoder_files(tokenizer, directory, options, files)
    else:
        model = json.loads(tokenizer.to_str())["model"]
        write("vocab.json", json.dumps(model["vocab"], ensure_ascii=False) + "\n")
        merges = ["#version: 0.2"] + [m if isinstance(m, str) else " ".join(m) for m in model["merges"]]
        write("merges.txt", "\n".join(merges) + "\n")
    config = {**tokenizer_config(options, by_id, files), **pipeline_keys(tokenizer)}
    write("tokenizer_config.json", json.dumps(config, indent=2, ensure_ascii=False) + "\n")
    specials = options.special_tokens
    special_map = {f"{role}_token": specials.role(role) for role in SPECIAL_ROLES}
    if options.has_bos_eos:
        special_map.update(bos_token=specials.cls, eos_token=specials.sep)
    write("special_tokens_map.json", json.dumps(special_map, indent=2, ensure_ascii=False) + "\n")
    return written


def _save_decoder_files(tokenizer: Tokenizer, directory: Path, options: TrainOptions, files: Sequence[str]) -> list[Path]:
    """vocab.json, merges.txt, and the decoder layout's tokenizer_config.json / special_tokens_map.json."""
    layout = options.decoder_layout
    model = json.loads(tokenizer.to_str())["model"]
    merges = ["#version: 0.2"] + [m if isinstance(m, str) else " ".join(m) for m in model["merges"]]
    config = layout.config()
    config["additional_special_tokens"] += [t for t in options.special_tokens.extra if t not in layout.tokens]
    config.update(
        do_lower_case=options.text.lowercase,
        add_prefix_space=True,
        model_max_length=options.model_max_length,
        **pipeline_keys(tokenizer),
        bertkit_training=training_record(options, files),
    )
    special_map = {k: v for k, v in config.items() if k.endswith("_token") or k == "additional_special_tokens"}
    contents = {
        "vocab.json": json.dumps(model["vocab"], ensure_ascii=False) + "\n",
        "merges.txt": "\n".join(merges) + "\n",
        "tokenizer_config.json": json.dumps(config, indent=2, ensure_ascii=False) + "\n",
        "special_tokens_map.json": json.dumps(special_map, indent=2, ensure_ascii=False) + "\n",
    }
    for name, text in contents.items():
        write_text_atomic(directory / name, text)
    return [directory / name for name in contents]


def tokenizer_config(options: TrainOptions, vocab: Sequence[str], files: Sequence[str]) -> dict:
    """The tokenizer_config.json content for a run that produced `vocab`."""
    text, specials = options.text, options.special_tokens
    config = {
        "tokenizer_class": tokenizer_class(options, vocab),
        "do_lower_case": text.lowercase,
        "strip_accents": text.strip_accents,
        "tokenize_chinese_chars": text.tokenize_chinese_chars,
        "keep_hangul_syllables": text.keep_hangul,
        "pretokenize_morphemes": text.morphemes,
        "nfkc": text.nfkc,
        "unk_token": specials.unk,
        "cls_token": specials.cls,
        "sep_token": specials.sep,
        "pad_token": specials.pad,
        "mask_token": specials.mask,
        "model_max_length": options.model_max_length,
    }
    if options.has_bos_eos:
        config.update(bos_token=specials.cls, eos_token=specials.sep)
    if options.algorithm == "bbpe":
        config.update(add_prefix_space=True)
    extra = list(specials.extra) + [f"[unused{i}]" for i in range(specials.unused)]
    if extra:
        config["additional_special_tokens"] = extra
    config["bertkit_training"] = training_record(options, files)
    return config


def pipeline_keys(tokenizer: Tokenizer) -> dict:
    """The config keys the trained pipeline decides, by the rules `Tokenizer` loads and saves with."""
    return {
        "model_input_names": list(model_input_names(tokenizer)),
        "clean_up_tokenization_spaces": clean_up_tokenization_spaces(tokenizer),
    }


def training_record(options: TrainOptions, files: Sequence[str]) -> dict:
    """How the tokenizer was trained (tokenizer_config.json's "bertkit_training")."""
    record = {
        "algorithm": options.algorithm,
        "vocab_size": options.vocab_size,
        "score": options.merge_score,  # null for the frequency-rule algorithms
        "min_frequency": options.min_frequency,
        "limit_alphabet": options.limit_alphabet,
        "files": [Path(f).name for f in files],
    }
    if options.decoder_layout is not None:
        record["layout"] = options.decoder_layout.name
    if options.algorithm == "unigram":
        del record["score"], record["min_frequency"], record["limit_alphabet"]
        record.update(layout=resolve_layout(options.layout, options.sentinels).name, sentinels=options.sentinels)
    elif options.layout is not None:
        record.update(layout=options.layout)
    return record


def tokenizer_class(options: TrainOptions, vocab: Sequence[str]) -> str:
    """ "BertTokenizer" when transformers' BertTokenizer rebuilds this pipeline exactly."""
    text = options.text
    if options.algorithm not in ("wordpiece", "wordpiece-freq") or text.nfkc:
        return "PreTrainedTokenizerFast"
    # BertTokenizer's accent stripping would turn Hangul syllables into jamo
    if text.strips_accents and text.keep_hangul and any(_has_hangul_syllable(token) for token in vocab):
        return "PreTrainedTokenizerFast"
    return "BertTokenizer"


def _has_hangul_syllable(token: str) -> bool:
    return any("\uac00" <= c <= "\ud7a3" for c in token)
