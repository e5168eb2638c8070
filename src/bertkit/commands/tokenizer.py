"""`bertkit tokenizer train|stats|encode`: train a vocabulary on a corpus; report its
quality; show what it does to texts (one JSON line per text)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from bertkit.commands import add_runtime_options, add_skip_bad_lines_argument
from bertkit.errors import BertkitError

ALGORITHM_HELP = (
    "wordpiece (likelihood rule, default; see --score), wordpiece-freq (frequency rule, tokenizers library), "
    "bpe (frequency merges, </w> suffix), bbpe (byte-level BPE, never [UNK]), "
    "unigram (SentencePiece-style: NFKC, ▁ word marks; see --layout, --sentinels)"
)


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser("tokenizer", help="train a tokenizer; report its quality; encode texts")
    commands = parser.add_subparsers(dest="tokenizer_command", metavar="{train,stats,encode}")
    parser.set_defaults(func=lambda args: parser.print_help() or 2)
    _add_train(commands)
    _add_stats(commands)
    _add_encode(commands)


def _add_input_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "files",
        nargs="+",
        metavar="FILE",
        help="text (one sentence or paragraph a line), .jsonl or .tsv; any may be .gz",
    )
    p.add_argument("--text-field", default="text", metavar="NAME", help="JSONL field holding the text (default: text)")
    p.add_argument("--tsv-column", metavar="NAME", help="read the files as TSV with a header; use this column")
    add_skip_bad_lines_argument(p)


def _add_train(commands) -> None:
    p = commands.add_parser(
        "train",
        help="train wordpiece / wordpiece-freq / bpe / bbpe / unigram",
        description="Train a tokenizer and write a Hugging Face compatible directory "
        "(tokenizer.json, vocab.txt or vocab.json+merges.txt, tokenizer_config.json).",
    )
    _add_input_options(p)
    p.add_argument("--output", "-o", required=True, metavar="DIR", help="output directory")
    p.add_argument("--algorithm", default="wordpiece", metavar="NAME", help=ALGORITHM_HELP)
    p.add_argument(
        "--vocab-size", type=int, default=30000, metavar="N", help="specials + alphabet + learned (default: 30000)"
    )
    p.add_argument(
        "--score",
        metavar="NAME",
        help="wordpiece merge score: gain (log-likelihood change, count weighted; default) "
        "or pmi (count(st) / (count(s) count(t)), favours rare pairs)",
    )
    p.add_argument(
        "--min-frequency", type=int, default=None, metavar="N",
        help="a pair needs this count to be merged (default: 2; not for unigram, whose trainer has no such limit)"
    )
    p.add_argument("--limit-alphabet", type=int, metavar="N", help="keep only the N most frequent characters")
    text = p.add_argument_group("text normalization (saved with the tokenizer; encoding does the same)")
    text.add_argument(
        "--cased", action="store_true", help="keep case (default: lowercase as uncased BERT; cased: see --lowercase)"
    )
    text.add_argument(
        "--lowercase",
        action="store_true",
        help="lowercase where the default is cased: unigram (as XLNet and T5; the albert layout lowercases) "
        "and the gpt2, kogpt2, bart and kobart layouts (as their published vocabularies)",
    )
    text.add_argument(
        "--strip-accents",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="strip accents (default: when lowercasing)",
    )
    text.add_argument("--nfkc", action="store_true", help="apply Unicode NFKC first (full-width forms etc.)")
    text.add_argument(
        "--cjk-split",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="put spaces around CJK ideographs (default: on, off for bbpe)",
    )
    text.add_argument(
        "--decompose-hangul",
        action="store_true",
        help="let accent stripping split Hangul syllables into jamo (original BERT; default: keep them)",
    )
    text.add_argument("--morphemes", metavar="kiwi", help="split Korean words into morphemes first (needs bertkit[ko])")
    special = p.add_argument_group(
        "special tokens (default: [PAD] [UNK] [CLS] [SEP] [MASK]; bbpe: <s> <pad> </s> <unk> <mask>)"
    )
    for role in ("pad", "unk", "cls", "sep", "mask"):  # options.SPECIAL_ROLES; importing it here slows --help
        special.add_argument(f"--{role}-token", metavar="TOKEN")
    special.add_argument("--extra-special-tokens", metavar="A,B", help="more special tokens, comma-separated")
    special.add_argument("--unused-tokens", type=int, default=0, metavar="N", help="reserve [unused0]..[unusedN-1]")
    unigram = p.add_argument_group("special-token layouts (docs/tokenizers.md)")
    unigram.add_argument(
        "--layout",
        metavar="NAME",
        help="unigram: xlnet (A <sep> <cls>, left padding; default), t5 (A </s>; default with --sentinels), "
        "albert ([CLS] A [SEP]); bbpe: roberta (<s> A </s>; default), gpt2 (<|endoftext|> as BOS/EOS/UNK, "
        "no template), kogpt2 (</s> as BOS and EOS, <unk> <pad> <mask> <unused0>..<unused99>); "
        "bpe / bbpe: bart (<s> <pad> </s> <unk> <mask>), kobart (<s> </s> <usr> <pad> <sys> <unk> <mask>), "
        "both <s> A </s>",
    )
    unigram.add_argument(
        "--sentinels",
        type=int,
        default=0,
        metavar="K",
        help="T5 sentinels <extra_id_0>..<extra_id_K-1> at the top of the vocabulary (counted in --vocab-size)",
    )
    p.add_argument(
        "--model-max-length", type=int, default=512, metavar="N", help="saved in tokenizer_config.json (default: 512)"
    )
    p.add_argument("--workers", type=int, metavar="N", help="processes for word counting (default: --threads)")
    add_runtime_options(p)
    p.set_defaults(func=run_train)


def _add_stats(commands) -> None:
    p = commands.add_parser(
        "stats",
        help="fertility, [UNK] rate, words kept whole, length histogram",
        description="Measure a tokenizer on held-out text: sub-words per whitespace word (fertility), "
        "unknown-token rate, share of words kept whole; writes a length-histogram PNG.",
    )
    p.add_argument("--tokenizer", required=True, metavar="DIR", help="tokenizer directory")
    _add_input_options(p)
    p.add_argument(
        "--histogram", metavar="PNG", help="where to write the PNG (default: <tokenizer dir name>-lengths.png)"
    )
    p.add_argument("--max-lines", type=int, metavar="N", help="measure only the first N lines")
    p.add_argument("--json", action="store_true", help="print the figures as one JSON object")
    add_runtime_options(p)
    p.set_defaults(func=run_stats)


def _add_encode(commands) -> None:
    p = commands.add_parser(
        "encode",
        help="tokens, ids, offsets of texts (one JSON line each)",
        description="Encode texts with any tokenizer directory (WordPiece, BPE, byte-level BPE, Unigram; "
        "bertkit's or Hugging Face's) and print one JSON object per text: tokens, ids, character "
        "offsets [start, end) into the text, token_type_ids where the tokenizer gives them (BERT-style), "
        "special-token layout included.",
    )
    p.add_argument("texts", nargs="*", metavar="TEXT", help="texts to encode (else --file, else lines on stdin)")
    p.add_argument("--tokenizer", required=True, metavar="DIR", help="tokenizer directory")
    p.add_argument(
        "--pair", action="append", metavar="TEXT", help="second text of a pair, once per TEXT in the same order"
    )
    p.add_argument("--file", help="one text a line (blank lines skipped), or JSONL; .gz too")
    p.add_argument("--text-field", default="text", metavar="NAME", help="JSONL field of the text (default: text)")
    p.add_argument(
        "--pair-field", default="pair", metavar="NAME", help="JSONL field of the second text, if any (default: pair)"
    )
    add_skip_bad_lines_argument(p)
    p.add_argument("--max-length", type=int, metavar="N", help="truncate to N tokens (longest_first)")
    p.add_argument("--no-special-tokens", action="store_true", help="leave out [CLS]/[SEP], <sep>/<cls>, </s>...")
    add_runtime_options(p)
    p.set_defaults(func=run_encode)


def run_train(args: argparse.Namespace) -> int:
    from dataclasses import replace

    from bertkit.tokenization.train import TextOptions, TrainOptions, train_tokenizer
    from bertkit.tokenization.train.decoder_layouts import BBPE_LAYOUTS
    from bertkit.tokenization.train.options import (SPECIAL_LAYOUT_ALGORITHMS, SPECIAL_LAYOUTS, SPECIAL_ROLES,
                                                    default_specials)

    overrides = {role: getattr(args, f"{role}_token") for role in SPECIAL_ROLES}
    unigram = args.algorithm == "unigram"
    if unigram and (args.unused_tokens or any(overrides.values())):
        raise BertkitError("--algorithm unigram takes its special tokens from --layout (and --extra-special-tokens)")
    decoder = args.algorithm == "bbpe" and args.layout in BBPE_LAYOUTS
    if not unigram and args.sentinels:
        raise BertkitError(f"--sentinels apply only to --algorithm unigram, not {args.algorithm}")
    if decoder and args.layout != "roberta" and (args.unused_tokens or any(overrides.values())):
        raise BertkitError(f"--layout {args.layout} has its own special tokens (only --extra-special-tokens adds more)")
    if not unigram and args.layout and not decoder and (args.algorithm not in SPECIAL_LAYOUT_ALGORITHMS
                                                        or args.layout not in SPECIAL_LAYOUTS):
        raise BertkitError(f"--layout {args.layout} does not apply to --algorithm {args.algorithm} (unigram: xlnet, "
                           f"t5, albert; bbpe: {', '.join(BBPE_LAYOUTS)}; "
                           f"{', '.join(SPECIAL_LAYOUT_ALGORITHMS)}: {', '.join(SPECIAL_LAYOUTS)})")
    specials = SPECIAL_LAYOUTS[args.layout] if args.layout in SPECIAL_LAYOUTS and not unigram \
        else default_specials(args.algorithm)
    if args.cased and args.lowercase:
        raise BertkitError("--cased and --lowercase contradict each other")
    if unigram and args.min_frequency is not None:  # tokenizers' UnigramTrainer has no count threshold
        raise BertkitError("--min-frequency does not apply to --algorithm unigram (it prunes pieces by likelihood, "
                           "not by count); drop it")
    lowercase = True if args.lowercase else False if args.cased else None  # None: the algorithm's default
    extra = specials.extra + tuple(t.strip() for t in (args.extra_special_tokens or "").split(",") if t.strip())
    specials = replace(specials, **{k: v for k, v in overrides.items() if v}, extra=extra, unused=args.unused_tokens)
    options = TrainOptions(
        algorithm=args.algorithm,
        vocab_size=args.vocab_size,
        score=args.score,
        **({"min_frequency": args.min_frequency} if args.min_frequency is not None else {}),
        limit_alphabet=args.limit_alphabet,
        text=TextOptions(
            lowercase=lowercase,
            strip_accents=args.strip_accents,
            nfkc=args.nfkc,
            tokenize_chinese_chars=args.cjk_split,
            keep_hangul=not args.decompose_hangul,
            morphemes=args.morphemes,
        ),
        specials=specials,
        model_max_length=args.model_max_length,
        text_field=args.text_field,
        skip_bad_lines=args.skip_bad_lines,
        workers=args.workers or args.threads,
        show_progress=not args.no_progress,
        layout=args.layout,
        sentinels=args.sentinels,
    )
    result = train_tokenizer(args.files, args.output, options, tsv_column=args.tsv_column)
    print(f"{options.algorithm}: {result.vocab_size:,} tokens in {result.seconds:.1f}s -> {result.output_dir}")
    return 0


def run_stats(args: argparse.Namespace) -> int:
    from itertools import islice

    from bertkit.tokenization import Tokenizer
    from bertkit.tokenization.train.corpus import CorpusSource, existing_files, iter_texts
    from bertkit.tokenization.train.stats import format_report, measure, plot_histogram

    if args.max_lines is not None and args.max_lines < 1:
        raise BertkitError(f"--max-lines={args.max_lines} must be a positive integer")
    tokenizer = Tokenizer.from_pretrained(args.tokenizer)
    source = CorpusSource(
        existing_files(args.files),
        text_field=args.text_field,
        tsv_column=args.tsv_column,
        skip_bad_lines=args.skip_bad_lines,
    )
    stats = measure(tokenizer, islice(iter_texts(source), args.max_lines), source=", ".join(source.files))
    name = Path(args.tokenizer).resolve().name
    png = Path(args.histogram) if args.histogram else Path(f"{name}-lengths.png")
    title = f"{name} on {', '.join(Path(f).name for f in source.files)}"
    plot_histogram(stats, png, title)
    if args.json:
        print(json.dumps({"tokenizer": str(args.tokenizer), **stats.summary(), "histogram": str(png)}))
    else:
        print(format_report(stats, title))
        print(f"  histogram          {png}")
    return 0


def run_encode(args: argparse.Namespace) -> int:
    import sys

    from bertkit.tokenization import Tokenizer
    from bertkit.tokenization.explain import encode_records

    if args.max_length is not None and args.max_length < 1:
        raise BertkitError(f"--max-length={args.max_length} must be a positive integer")
    if args.pair and len(args.pair) != len(args.texts):
        raise BertkitError(f"--pair given {len(args.pair)} time(s) for {len(args.texts)} TEXT argument(s): one per TEXT")
    tokenizer = Tokenizer.from_pretrained(args.tokenizer)
    inputs = _encode_inputs(args)
    records = encode_records(
        tokenizer,
        [text for _, text, _ in inputs],
        [pair for _, _, pair in inputs],
        add_special_tokens=not args.no_special_tokens,
        max_length=args.max_length,
    )
    sys.stdout.write(
        "".join(json.dumps({"source": source, **record}, ensure_ascii=False) + "\n" for (source, _, _), record in zip(inputs, records))
    )
    return 0


def _encode_inputs(args: argparse.Namespace) -> list[tuple[str, str, str | None]]:
    """(source, text, pair or None) for each input of `encode`: TEXT arguments, --file or stdin."""
    from bertkit.commands.inputs import check_one_source, numbered_lines

    check_one_source(args.texts, args.file)
    if args.texts:
        pairs = args.pair or [None] * len(args.texts)
        return [(f"TEXT {n}", text, pair) for n, (text, pair) in enumerate(zip(args.texts, pairs), start=1)]
    if args.pair:
        raise BertkitError("--pair goes with TEXT arguments; in a JSONL --file use --pair-field")
    from bertkit.tasks.records import as_text, file_kind, iter_jsonl, missing_field

    if args.file and file_kind(args.file) == "jsonl":
        inputs = []
        for line_no, record in iter_jsonl(args.file, args.skip_bad_lines, skip_advice=True):
            if args.text_field not in record:
                raise missing_field(args.file, line_no, [args.text_field], record)
            text = as_text(record[args.text_field], args.file, line_no, args.text_field)
            pair = record.get(args.pair_field)
            pair = None if pair is None else as_text(pair, args.file, line_no, args.pair_field)
            inputs.append((f"{args.file}:{line_no}", text, pair))
    else:
        inputs = [(line.source, line.text, None) for line in numbered_lines(args.file, args.skip_bad_lines)
                  if line.text.strip()]
    if not inputs:
        raise BertkitError(f"{args.file or '<stdin>'}: empty input, no texts")
    return inputs
