"""`bertkit data build|info`: pre-training instances from a corpus; what a data directory holds."""

from __future__ import annotations

import argparse
import sys

from bertkit.commands import add_runtime_options, add_skip_bad_lines_argument
from bertkit.errors import BertkitError



def add_parser(subparsers) -> None:
    parser = subparsers.add_parser("data", help="build pre-training data (NSP / SOP / packed shards); inspect it")
    commands = parser.add_subparsers(dest="data_command", metavar="{build,info}")
    parser.set_defaults(func=lambda args: parser.print_help() or 2)
    _add_build(commands)
    _add_info(commands)


def _add_build(commands) -> None:
    p = commands.add_parser(
        "build",
        help="tokenize a corpus into pre-training instances",
        description="Turn a corpus into tokenized pre-training instances, written as shards to --output. "
        "Input: text with one sentence or paragraph per line and a blank line between documents, or JSONL "
        "(one document per object); any may be .gz. Running the same command again resumes an interrupted build.",
    )
    p.add_argument("files", nargs="+", metavar="FILE", help="corpus files (.txt, .jsonl, optionally .gz)")
    p.add_argument("--tokenizer", required=True, metavar="DIR", help="tokenizer directory (saved into OUTPUT/tokenizer)")
    p.add_argument("--output", "-o", required=True, metavar="DIR", help="data directory to write")
    p.add_argument("--max-seq-length", type=int, default=128, metavar="N",
                   help="tokens per instance including [CLS]/[SEP] (default: 128)")
    from bertkit.data.formats import FORMATS, get_format

    p.add_argument("--format", choices=list(FORMATS), default="nsp",
                   help="; ".join(f"{name}: {get_format(name).help}" for name in FORMATS))
    p.add_argument("--masking", choices=("dynamic", "static"), default="dynamic",
                   help="dynamic: a new mask every epoch at training time (default); static: mask now and store "
                   "the labels, --dupe-factor copies (original BERT)")
    p.add_argument("--dupe-factor", type=int, metavar="N",
                   help="copies of the corpus, each with its own instances and masks (default: 5 static, 1 dynamic)")
    p.add_argument("--short-seq-prob", type=float, default=0.1, metavar="P",
                   help="probability of a shorter target length for a document's instances (default: 0.1)")
    p.add_argument("--max-predictions-per-seq", type=int, metavar="N",
                   help="static masking: most masked positions per instance (default: round(0.15 * max length))")
    p.add_argument("--whole-word-masking", action="store_true", help="static masking: mask all pieces of a word together")
    p.add_argument("--seed", type=int, default=12345, help="random seed (default: 12345)")
    p.add_argument("--eval-fraction", type=float, default=0.01, metavar="F",
                   help="fraction of documents held out as the eval split (default: 0.01; at least one document "
                   "when there are enough, 0 for none)")
    p.add_argument("--text-field", default="text", metavar="NAME", help="JSONL field holding the text (default: text)")
    p.add_argument("--no-sentence-split", action="store_true",
                   help="take each line as one sentence (default: split lines into sentences)")
    add_skip_bad_lines_argument(p)
    p.add_argument("--workers", type=int, metavar="N", help="worker processes (default: --threads)")
    p.add_argument("--num-shards", type=int, default=1, metavar="N",
                   help="split the build into N jobs (e.g. on N machines) writing into the same --output")
    p.add_argument("--shard-index", type=int, default=0, metavar="I", help="which of the --num-shards jobs this is (0-based)")
    p.add_argument("--slice-chars", type=int, metavar="N",
                   help="characters of text per unit of work and shard (default: 1,000,000); part of the recipe")
    p.add_argument("--overwrite", action="store_true",
                   help="replace a dataset of another recipe in --output (and rebuild this job's shards)")
    add_runtime_options(p)
    p.set_defaults(func=run_build)


def _add_info(commands) -> None:
    p = commands.add_parser("info", help="summarize a data directory", description="Print what a data directory holds.")
    p.add_argument("directory", metavar="DIR", help="data directory written by `bertkit data build`")
    p.set_defaults(func=run_info)


MORPHEME_SAMPLE_BYTES = 64 * 1024  # text tokenized up front to time a morpheme-aware build


def morpheme_build_notice(tokenizer_dir: str, files: list[str], workers: int | None) -> str | None:
    """For a tokenizer that splits Korean into morphemes before sub-words (kiwi), a note that the
    build is slower than a plain one (about 11x: 17.6k vs 194k tokens/s measured on 2 cores) and
    how long this one should take: a sample of the first file timed here, scaled to the files'
    size. None for any other tokenizer."""
    import json
    import os
    import time
    from pathlib import Path

    from bertkit.tokenization.files import CONFIG_FILE

    config_path = Path(tokenizer_dir) / CONFIG_FILE
    try:
        morphemes = json.loads(config_path.read_text(encoding="utf-8")).get("pretokenize_morphemes")
    except (OSError, ValueError, AttributeError):
        return None
    if not morphemes:
        return None
    from bertkit.textio import open_binary
    from bertkit.tokenization import Tokenizer

    tokenizer = Tokenizer.from_pretrained(tokenizer_dir)
    with open_binary(files[0]) as handle:
        sample = handle.read(MORPHEME_SAMPLE_BYTES).decode("utf-8", errors="ignore").splitlines()[:-1] or [""]
    start = time.perf_counter()
    tokenizer(sample, add_special_tokens=False)
    seconds = max(time.perf_counter() - start, 1e-6)
    rate = sum(len(line.encode("utf-8")) + 1 for line in sample) / seconds  # bytes/s on one worker
    total = sum(os.path.getsize(f) * (3 if f.endswith(".gz") else 1) for f in files if os.path.isfile(f))
    expected = total / (rate * max(1, workers or 1))
    return (f"{tokenizer_dir} splits text into {morphemes} morphemes before sub-words: a build about 11x slower "
            f"than a plain one; {rate / 1024:,.0f} KB/s per worker measured on the first file, so about "
            f"{expected / 60:,.1f} minutes for {total / 2**20:,.1f} MB of text")


def run_build(args: argparse.Namespace) -> int:
    from bertkit.commands import note
    from bertkit.data.build import BuildOptions, build_dataset
    from bertkit.data.corpus import SLICE_CHARS

    notice = morpheme_build_notice(args.tokenizer, args.files, args.workers or args.threads)
    if notice:
        note(notice)  # before the build starts: the person knows how long to wait

    options = BuildOptions(
        instance_format=args.format,
        max_seq_length=args.max_seq_length,
        masking=args.masking,
        dupe_factor=args.dupe_factor,
        short_seq_prob=args.short_seq_prob,
        max_predictions_per_seq=args.max_predictions_per_seq,
        whole_word_masking=args.whole_word_masking,
        seed=args.seed,
        eval_fraction=args.eval_fraction,
        sentence_split=not args.no_sentence_split,
        text_field=args.text_field,
        skip_bad_lines=args.skip_bad_lines,
        slice_chars=args.slice_chars or SLICE_CHARS,
    )
    result = build_dataset(
        args.files,
        args.tokenizer,
        args.output,
        options,
        workers=args.workers or args.threads,
        num_jobs=args.num_shards,
        job_index=args.shard_index,
        overwrite=args.overwrite,
        show_progress=not args.no_progress,
    )
    rate = result.train_tokens / result.seconds if result.seconds else 0.0
    job = f" (job {args.shard_index} of {args.num_shards})" if args.num_shards > 1 else ""
    kept = f", {result.resumed} kept from an earlier run" if result.resumed else ""
    print(
        f"{args.format}{job}: {result.train_instances:,} train instances ({result.train_tokens:,} tokens), "
        f"{result.eval_instances:,} eval, {result.built} of {result.num_slices} slices built{kept} in "
        f"{result.seconds:.1f}s ({rate:,.0f} tokens/s) -> {result.output_dir}"
    )
    return 0


def run_info(args: argparse.Namespace) -> int:
    from bertkit.data.dataset import TOKENIZER_DIR, PretrainingDataset

    train = PretrainingDataset.open(args.directory, "train")
    try:
        evaluation = PretrainingDataset.open(args.directory, "eval")
    except BertkitError:
        evaluation = None
    info = train.info
    tokenizer = train.tokenizer()
    lines = [
        f"directory      {train.directory}",
        f"format         {info.instance_format}, max_seq_length {info.max_seq_length}",
        f"masking        {info.masking}" + (
            f" (dupe factor {info.dupe_factor}, at most {info.max_predictions_per_seq} predictions"
            f"{', whole words' if info.whole_word_masking else ''})" if info.masking == "static" else ""),
        f"train          {info.num_instances:,} instances, {info.num_tokens:,} tokens, {info.num_shards} shards",
        f"eval           " + (f"{evaluation.info.num_instances:,} instances, {evaluation.info.num_tokens:,} tokens, "
                              f"{evaluation.info.num_shards} shards" if evaluation else "none"),
        f"tokenizer      {train.directory / TOKENIZER_DIR}: {tokenizer.model_type}, {info.vocab_size:,} tokens, "
        f"fingerprint {info.tokenizer_fingerprint[:12]}",
        f"seed           {info.seed}",
    ]
    sys.stdout.write("\n".join(lines) + "\n")
    return 0
