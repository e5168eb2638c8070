"""Where an inference command's texts come from: TEXT arguments, --file, or stdin.

Every text keeps where it came from ("texts.txt:3", "<stdin>:2", "TEXT 2", a JSONL
record's "in.jsonl:7") so a check made later — an empty line, a text without the mask
token — names the line. Files: one text a line (txt, .gz), or JSONL objects with a text
field; bad bytes and malformed JSON are one-line errors naming file and line
(bertkit.textio, bertkit.tasks.records). Used by `predict` and `fill-mask`.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

from bertkit.errors import BertkitError


@dataclass(frozen=True)
class SourcedText:
    source: str  # "path:N", "<stdin>:N" or "TEXT N"
    text: str


def check_one_source(texts: list[str], file: str | None) -> None:
    if texts and file:
        raise BertkitError("give inputs as arguments or --file, not both")


def numbered_lines(file: str | None, skip_bad: bool = False) -> list[SourcedText]:
    """Every line of `file` (any kind, JSON not parsed) or, with file=None, of stdin; blank lines too.
    `skip_bad` (--skip-bad-lines): undecodable lines are skipped, and a warning counts them."""
    if file is not None:
        from bertkit.tasks.records import iter_lines

        return [SourcedText(f"{file}:{n}", text) for n, text in iter_lines(file, skip_bad, skip_advice=True)]
    if sys.stdin.isatty():
        raise BertkitError("no inputs: give TEXT arguments, --file, or pipe lines on stdin")
    from bertkit.textio import iter_stream_lines

    return [SourcedText(f"<stdin>:{n}", text) for n, text in iter_stream_lines(sys.stdin.buffer, skip_bad=skip_bad)]


def jsonl_texts(path: str, text_field: str, skip_bad: bool = False) -> list[SourcedText]:
    """The `text_field` of every object of a JSONL file (a missing or non-text field names the line;
    with `skip_bad` such a line is a bad line too: skipped and counted in one warning)."""
    from bertkit.tasks.records import as_text, iter_jsonl, missing_field
    from bertkit.textio import SkippedLines, warn_skipped

    texts, skipped = [], SkippedLines()
    for line_no, record in iter_jsonl(path, skip_bad, skip_advice=True):
        try:
            if text_field not in record:
                raise missing_field(path, line_no, [text_field], record)
            texts.append(SourcedText(f"{path}:{line_no}", as_text(record[text_field], path, line_no, text_field)))
        except BertkitError:
            if not skip_bad:
                raise
            skipped.add(line_no)
    warn_skipped(path, skipped)
    return texts


def table_texts(path: str, text_field: str) -> list[SourcedText]:
    """The `text_field` column of a Parquet / Arrow file or folder, row by row."""
    from bertkit.columnar import expand_inputs, iter_column_texts

    return [SourcedText(f"{file}:row {row}", text) for file in expand_inputs([path])
            for row, text in iter_column_texts(file, text_field)]


def read_texts(texts: list[str], file: str | None, text_field: str = "text", skip_bad: bool = False) -> list[SourcedText]:
    """One text per TEXT argument, per line of a text file or stdin, or per JSONL object; never empty.

    Blank lines are kept (with their line number) for the command to judge. `skip_bad`:
    --skip-bad-lines (undecodable or malformed lines skipped and counted in a warning)."""
    from bertkit.tasks.records import file_kind

    check_one_source(texts, file)
    if texts:
        return [SourcedText(f"TEXT {n}", text) for n, text in enumerate(texts, start=1)]
    kind = file_kind(file) if file else None
    if kind == "table":  # Parquet / Arrow: the --text-field column (bertkit.columnar)
        found = table_texts(file, text_field)
    else:
        found = jsonl_texts(file, text_field, skip_bad) if kind == "jsonl" else numbered_lines(file, skip_bad)
    if not found:
        raise BertkitError(f"{file or '<stdin>'}: empty input, no texts")
    return found
