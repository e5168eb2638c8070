"""`bertkit embed`: contextual feature vectors for texts, as JSONL or .npy."""

from __future__ import annotations

import argparse
import io
import json
import sys
from pathlib import Path

from bertkit.atomic import write_bytes_atomic
from bertkit.commands import add_precision_argument, add_runtime_options, add_skip_bad_lines_argument
from bertkit.errors import BertkitError
from bertkit.feature_choices import LAYER_CHOICES, POOLING_CHOICES


def add_parser(subparsers) -> None:
    p = subparsers.add_parser("embed", help="contextual embeddings for texts (feature-based BERT)",
                              description="Embed texts given as arguments, read from --file (txt/jsonl/.gz, one text a line) or from stdin.")
    p.add_argument("texts", nargs="*", metavar="TEXT", help="texts to embed (default: read stdin)")
    p.add_argument("--model", required=True, help="checkpoint directory (config.json, model.safetensors, vocab.txt)")
    p.add_argument("--file", help="read texts from this file, one per line (JSONL: --text-field)")
    p.add_argument("--text-field", default="text", help="JSONL field holding the text (default: text)")
    add_skip_bad_lines_argument(p)
    p.add_argument("--output", "-o", help="write .npy (array N x D) or .jsonl; default: JSONL on stdout")
    p.add_argument("--pooling", choices=POOLING_CHOICES, default=None,
                   help="default: the Pooling of a sentence-transformers checkpoint (modules.json), else mean")
    p.add_argument("--layers", choices=LAYER_CHOICES, default="last", help="which layers (BERT paper Table 7)")
    p.add_argument("--layer-weights", help="comma-separated weights for --layers weighted_sum (L+1 values)")
    p.add_argument("--batch-size", type=int, default=64)
    add_precision_argument(p)
    p.add_argument("--max-length", type=int, default=None)
    p.add_argument("--normalize", action=argparse.BooleanOptionalAction, default=None,
                   help="L2-normalize each vector (default: on when the checkpoint's modules.json has a Normalize "
                        "module, as SentenceTransformer.encode; --no-normalize gives the raw vectors)")
    add_runtime_options(p)
    p.set_defaults(func=run)


def read_texts(texts: list[str], file: str | None, text_field: str = "text", skip_bad: bool = False) -> list[str]:
    """Texts from arguments, else from `file`, else from stdin; never silently empty."""
    from bertkit.textio import iter_lines, iter_stream_lines

    if texts and file:
        raise BertkitError("give texts as arguments or --file, not both")
    if texts:
        return texts
    if file:
        lines = [text for _, text in iter_lines(file, text_field=text_field, skip_bad=skip_bad)]
        if not lines:
            raise BertkitError(f"{file}: empty file, no texts to process")
        return lines
    if sys.stdin.isatty():
        raise BertkitError("no input texts: give TEXT arguments, --file, or pipe text on stdin")
    lines = [text for _, text in iter_stream_lines(sys.stdin.buffer, skip_bad=skip_bad)]
    if not lines:
        raise BertkitError("<stdin>: empty input, no texts to process")
    return lines


def _parse_weights(raw: str | None) -> list[float] | None:
    if raw is None:
        return None
    try:
        return [float(w) for w in raw.split(",")]
    except ValueError:
        raise BertkitError(f"--layer-weights: expected comma-separated numbers, got {raw!r}") from None


def run(args: argparse.Namespace) -> int:
    import numpy as np

    from bertkit.inference.embedding import embed

    if args.output and not args.output.endswith((".npy", ".jsonl")):
        raise BertkitError(f"--output {args.output}: expected a .npy or .jsonl file name")
    if args.output and args.output.endswith(".npy") and args.pooling == "none":
        raise BertkitError("--output .npy needs one vector per text; use .jsonl with --pooling none")
    texts = read_texts(args.texts, args.file, args.text_field, args.skip_bad_lines)
    vectors = embed(texts, model=args.model, pooling=args.pooling, layers=args.layers,
                    layer_weights=_parse_weights(args.layer_weights), batch_size=args.batch_size,
                    max_length=args.max_length, normalize=args.normalize, precision=args.precision,
                    progress=False if args.no_progress else None)
    if args.output and args.output.endswith(".npy"):
        buffer = io.BytesIO()
        np.save(buffer, vectors)
        write_bytes_atomic(args.output, buffer.getvalue())
        print(f"wrote {' x '.join(str(n) for n in vectors.shape)} float32 to {args.output}", file=sys.stderr)
        return 0
    lines = "".join(json.dumps({"text": t, "embedding": np.round(v.astype(np.float64), 6).tolist()}, ensure_ascii=False) + "\n"
                    for t, v in zip(texts, vectors))
    if args.output:
        Path(args.output).parent.mkdir(parents=True, exist_ok=True)
        write_bytes_atomic(args.output, lines.encode("utf-8"))
        print(f"wrote {len(texts)} embeddings to {args.output}", file=sys.stderr)
    else:
        sys.stdout.write(lines)
    return 0
