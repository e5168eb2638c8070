"""Reading task files as records: TSV, CSV and JSONL rows with their line numbers.

Shared by the task families so every one reports bad input the same way: one line
naming the file and the line (`dev.tsv:17: expected 4 tab-separated fields ...`).
Lines are decoded one at a time by bertkit.textio (UTF-8, a BOM on the first line
dropped, CRLF accepted, `.gz` read transparently).

- TSV (`.tsv`, `.txt`): fields split on tabs, no quoting — the GLUE convention, where
  quotes are ordinary characters in the text.
- CSV (`.csv`): Python's csv dialect (quoted fields may hold commas and newlines).
- JSONL (`.jsonl`, `.json`): one JSON object per line, or a file holding one JSON array of
  objects (KLUE); a dotted field name (`labels.label`) reaches into nested objects.
"""

from __future__ import annotations

import csv
import difflib
import json
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from bertkit.columnar import column_names, expand_inputs, is_columnar, read_columns
from bertkit.errors import BertkitError
from bertkit.textio import (SkippedLines, is_jsonl, iter_stream_lines, lone_surrogate, open_binary, surrogate_error,
                            warn_skipped)


def file_kind(path: str | Path) -> str:
    """"jsonl", "csv", "table" (Parquet, Arrow, or a folder of them: bertkit.columnar; read with
    columns as a CSV) or "tsv" from the file name (`.gz` ignored); anything else is read as TSV."""
    if is_columnar(path):
        return "table"
    name = Path(path).name.removesuffix(".gz")
    if is_jsonl(name):
        return "jsonl"
    return "csv" if name.endswith(".csv") else "tsv"


def iter_lines(path: str | Path, skip_bad: bool = False, skip_advice: bool = False) -> Iterator[tuple[int, str]]:
    """(line number, text) of every line, newline stripped (any file kind; JSON not parsed).
    `skip_bad`: undecodable lines are skipped (a warning counts them); `skip_advice`: an
    error advises --skip-bad-lines (only where the command has it; task files do not)."""
    with open_binary(path) as handle:
        yield from iter_stream_lines(handle, str(path), skip_bad=skip_bad, skip_advice=skip_advice)


def iter_rows(path: str | Path) -> Iterator[tuple[int, list[str]]]:
    """(line number, fields) of every non-blank row of a TSV or CSV file.

    For CSV the line number is where the row starts (a quoted field may span lines).
    """
    if file_kind(path) == "csv":
        yield from _csv_rows(path)
        return
    for line_no, line in iter_lines(path):
        if line.strip():
            yield line_no, line.split("\t")


def _csv_rows(path: str | Path) -> Iterator[tuple[int, list[str]]]:
    numbers: list[int] = []

    def lines() -> Iterator[str]:
        for line_no, line in iter_lines(path):
            numbers.append(line_no)
            yield line + "\n"

    reader = csv.reader(lines(), strict=True)
    start = 1
    while True:
        try:
            fields = next(reader)
        except StopIteration:
            return
        except csv.Error as exc:
            raise BertkitError(f"{path}:{numbers[-1] if numbers else 1}: malformed CSV ({exc})") from None
        if any(field.strip() for field in fields):
            yield start, fields
        start = numbers[-1] + 1 if numbers else 1


def read_table(path: str | Path, has_header: bool = True) -> tuple[list[str] | None, list[tuple[int, list[str]]]]:
    """(header, rows) of a TSV/CSV file; every row must have as many fields as the header
    (or, without a header, as the first row). Raises on an empty file. A Parquet / Arrow file or
    folder (bertkit.columnar) is a table too: its column names are the header, its cells text."""
    if file_kind(path) == "table":
        return _read_columnar_table(path, has_header)
    rows = iter_rows(path)
    first = next(rows, None)
    if first is None:
        raise BertkitError(f"{path}: empty file (no rows)")
    header = [name.strip() for name in first[1]] if has_header else None
    body = [] if has_header else [first]
    width = len(first[1])
    what = "comma" if file_kind(path) == "csv" else "tab"
    for line_no, fields in rows:
        if len(fields) != width:
            reference = "the header" if has_header else f"line {first[0]}"
            raise BertkitError(
                f"{path}:{line_no}: expected {width} {what}-separated fields (as {reference}), found {len(fields)}"
            )
        body.append((line_no, fields))
    return header, body


def _read_columnar_table(path: str | Path, has_header: bool) -> tuple[list[str] | None, list[tuple[int, list[str]]]]:
    files = expand_inputs([path])
    header = column_names(files[0])
    body: list[tuple[int, list[str]]] = []
    for file in files:  # a folder's files are one table: rows numbered on across them
        names, rows = read_columns(file)
        if names != header:
            raise BertkitError(f"{file}: columns {names} differ from {files[0]}'s {header}")
        body.extend((len(body) + 1, cells) for _, cells in rows)
    if not body:
        raise BertkitError(f"{path}: empty table (no rows)")
    return (header if has_header else None), body


def column_index(header: Sequence[str], name: str, path: str | Path) -> int:
    """Position of column `name` in `header`; a typo gets the nearest name suggested."""
    if name in header:
        return list(header).index(name)
    hint = difflib.get_close_matches(name, list(header), n=1)
    suggestion = f" (did you mean {hint[0]!r}?)" if hint else ""
    raise BertkitError(f"{path}:1: no column {name!r}{suggestion}; the columns are {', '.join(map(repr, header))}")


def iter_jsonl(path: str | Path, skip_bad: bool = False, skip_advice: bool = False) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, object) of every non-blank line of a JSONL file — or of every element
    of a JSON file holding one array of objects (KLUE's `*_dev.json`; the line number is
    where the object starts). `skip_bad`, `skip_advice`: as `iter_lines` (a JSONL line
    that is not one JSON object is skipped too, and counted)."""
    lines = iter_lines(path, skip_bad, skip_advice)
    skipped = SkippedLines()
    for line_no, line in lines:
        if not line.strip():
            continue
        if line.lstrip().startswith("["):
            yield from _json_array(path, line_no, [line, *(text for _, text in lines)])
            return
        try:
            record = json.loads(line)
            if not isinstance(record, dict):
                raise BertkitError(f"{path}:{line_no}: expected a JSON object, got {type(record).__name__}")
            escape = lone_surrogate(line, record)
            if escape is not None:
                raise surrogate_error(f"{path}:{line_no}", escape)
        except json.JSONDecodeError as exc:
            if not skip_bad:
                raise BertkitError(f"{path}:{line_no}: malformed JSON ({exc.msg} at column {exc.colno})") from None
            skipped.add(line_no)
            continue
        except BertkitError:
            if not skip_bad:
                raise
            skipped.add(line_no)
            continue
        yield line_no, record
    warn_skipped(str(path), skipped)


def _json_array(path: str | Path, first_line: int, lines: list[str]) -> Iterator[tuple[int, dict[str, Any]]]:
    """The objects of a JSON array whose text is `lines` (starting at line `first_line`)."""
    text = "\n".join(lines)
    decoder = json.JSONDecoder()
    position = text.index("[") + 1
    counted = [0, first_line]  # line_at's last (offset, line): offsets only grow, so counting is linear

    def skip_space(start: int) -> int:
        while start < len(text) and text[start] in " \t\r\n":
            start += 1
        return start

    def line_at(start: int) -> int:
        counted[1] += text.count("\n", counted[0], start)
        counted[0] = start
        return counted[1]

    position = skip_space(position)
    if text.startswith("]", position):
        return
    while True:
        line_no = line_at(position)
        try:
            record, end = decoder.raw_decode(text, position)
        except json.JSONDecodeError as exc:
            raise BertkitError(f"{path}:{first_line + exc.lineno - 1}: malformed JSON ({exc.msg})") from None
        if not isinstance(record, dict):
            raise BertkitError(f"{path}:{line_no}: expected a JSON object in the array, got {type(record).__name__}")
        escape = lone_surrogate(text[position:end], record)
        if escape is not None:
            raise surrogate_error(f"{path}:{line_no}", escape)
        yield line_no, record
        position = skip_space(end)
        if text.startswith(",", position):
            position = skip_space(position + 1)
        elif text.startswith("]", position):
            rest = skip_space(position + 1)
            if rest != len(text):
                raise BertkitError(f"{path}:{line_at(rest)}: text after the JSON array's closing ']'")
            return
        else:
            raise BertkitError(f"{path}:{line_at(position)}: malformed JSON array (expected ',' or ']')")


def record_field(record: dict[str, Any], name: str) -> tuple[bool, Any]:
    """(found, value) of field `name` of a JSON object; a dotted name that is not a key
    reaches into nested objects (`labels.label` of KLUE-STS)."""
    if name in record:
        return True, record[name]
    value: Any = record
    for part in name.split("."):
        if not isinstance(value, dict) or part not in value:
            return False, None
        value = value[part]
    return True, value


def missing_field(path: str | Path, line_no: int, names: Sequence[str], record: dict[str, Any]) -> BertkitError:
    """The error for a JSONL object that has none of `names` (suggesting a near key)."""
    hint = difflib.get_close_matches(names[0], list(record), n=1)
    suggestion = f" (did you mean {hint[0]!r}?)" if hint else ""
    wanted = " or ".join(repr(n) for n in names)
    return BertkitError(
        f"{path}:{line_no}: no field {wanted}{suggestion}; the object has {', '.join(map(repr, record)) or 'no fields'}"
    )


def as_text(value: Any, path: str | Path, line_no: int, name: str) -> str:
    """A JSON value that must be a string (numbers are accepted and written out)."""
    if isinstance(value, str):
        return value
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return str(value)
    raise BertkitError(f"{path}:{line_no}: field {name!r} must be text, got {type(value).__name__}")
