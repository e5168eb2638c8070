"""Documents from corpus files, grouped into slices: the units of work of a data build.

Input formats (each may be `.gz`; reading is streaming, via `bertkit.textio`):
  * text: one sentence (BERT corpus format) or one paragraph per line, a blank line
    between documents; the end of a file ends a document too.
  * JSONL (`.jsonl`/`.json`): one document per object, its `text_field`; newlines in
    the text separate paragraphs.
  * Parquet / Arrow (`.parquet`, a `datasets.save_to_disk` folder's `.arrow` files; the
    build expands folders, bertkit.columnar): one document per row, its `text_field`
    column, read a record batch at a time.

A document is its list of non-blank lines, not yet sentence-split (workers do that).
A document longer than `max_document_chars` is cut at line boundaries into pieces that
count as separate documents, and a line longer than that at spaces, so memory never holds
more than a slice of text however the corpus is laid out (a file without blank lines, or
without line breaks: only the reader's current line is held whole).

Slices group consecutive documents up to about `slice_chars` characters. They depend
only on the corpus and `slice_chars` (never on the number of workers or jobs), and each
is built independently from its own random streams, so a dataset is the same however
its slices are spread over processes and machines.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Iterator, Sequence

from bertkit.columnar import is_columnar, iter_column_texts
from bertkit.textio import cut_long_line, is_jsonl, iter_lines

SLICE_CHARS = 1_000_000  # characters of text per slice (one unit of work, one shard)


@dataclass
class Slice:
    """Consecutive documents of the corpus: `index` counts slices from 0 in corpus order."""

    index: int
    documents: list[list[str]]
    chars: int


def iter_documents(
    files: Sequence[str],
    *,
    text_field: str = "text",
    skip_bad_lines: bool = False,
    max_document_chars: int = SLICE_CHARS,
) -> Iterator[list[str]]:
    """Every document of every file in order, as its non-blank lines (stripped).

    Errors (unreadable file, invalid UTF-8, malformed JSONL) raise `BertkitError` naming
    file and line.
    """
    for path in files:
        columnar = is_columnar(path)
        jsonl = columnar or is_jsonl(path)  # a row is a document, as a JSONL object is
        lines: list[str] = []
        chars = 0
        rows = (iter_column_texts(path, text_field) if columnar
                else iter_lines(path, text_field=text_field, skip_bad=skip_bad_lines))
        for _, text in rows:
            if jsonl:
                paragraphs = [p.strip() for p in text.splitlines()]
                document = [piece for p in paragraphs if p for piece in cut_long_line(p, max_document_chars)]
                yield from _pieces(document, max_document_chars)
                continue
            line = text.strip()
            if not line:
                if lines:
                    yield lines
                lines, chars = [], 0
                continue
            for piece in cut_long_line(line, max_document_chars):
                if chars and chars + len(piece) > max_document_chars:
                    yield lines  # cut an overlong document at a line boundary
                    lines, chars = [], 0
                lines.append(piece)
                chars += len(piece)
        if lines:
            yield lines



def _pieces(document: list[str], max_chars: int) -> Iterator[list[str]]:
    """`document` (if not empty), cut at line boundaries into pieces of at most ~max_chars."""
    piece: list[str] = []
    chars = 0
    for line in document:
        if chars and chars + len(line) > max_chars:
            yield piece
            piece, chars = [], 0
        piece.append(line)
        chars += len(line)
    if piece:
        yield piece


def iter_slices(documents: Iterable[list[str]], slice_chars: int = SLICE_CHARS) -> Iterator[Slice]:
    """Group documents into slices of at least `slice_chars` characters and 2 documents.

    A slice closes at the first document boundary past `slice_chars`; the last slice is
    merged into the one before when it holds a single document (so NotNext pairs always
    have another document to come from, unless the whole corpus is one document).
    """
    pending: Slice | None = None
    current = Slice(0, [], 0)
    for document in documents:
        current.documents.append(document)
        current.chars += sum(len(line) for line in document)
        if current.chars >= slice_chars and len(current.documents) >= 2:
            if pending is not None:
                yield pending
            pending, current = current, Slice(current.index + 1, [], 0)
    if pending is not None and len(current.documents) == 1:
        pending.documents += current.documents
        pending.chars += current.chars
        current = Slice(current.index + 1, [], 0)
    if pending is not None:
        yield pending
    if current.documents:
        yield current
