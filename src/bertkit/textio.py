"""Reading user text files: plain text, JSONL (with a text field) and their .gz forms.

Every reader streams line by line and reports bad input as a `BertkitError` naming the
file and the line, so a non-UTF-8 byte in line 81,237 of a corpus is one clear message.
Lines are decoded one at a time (not in buffered chunks) so the line number is exact.
"""

from __future__ import annotations

import gzip
import json
import os
import re
import warnings
from pathlib import Path
from typing import BinaryIO, Iterator

from bertkit.errors import BertkitError


_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")
_SURROGATE = re.compile("[\ud800-\udfff]")


def lone_surrogate(raw_json: str, value: object) -> str | None:
    """A lone surrogate (e.g. "\\ud800") in the strings of `value`, which was parsed from
    `raw_json`, as an escape to show the user; None when there is none. JSON can spell
    one as an escape, but it is not a character: no tokenizer (nor UTF-8) can take it.
    Escaped surrogate pairs (an emoji written ASCII-only) decode to one valid character."""
    if not _SURROGATE_ESCAPE.search(raw_json):
        return None  # the cheap test: only an escape can produce a surrogate
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            found = _SURROGATE.search(item)
            if found:
                return f"\\u{ord(found.group()):04x}"
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return None


def surrogate_error(where: str, escape: str) -> BertkitError:
    return BertkitError(f"{where}: the text holds a lone surrogate {escape} (a JSON escape that is not a Unicode "
                        "character); fix the file's encoding")


def check_readable(path: str | Path) -> Path:
    """`path` as a Path, checked to be a readable file (errors name it)."""
    path = Path(path)
    if not path.exists():
        raise BertkitError(f"{path}: no such file")
    if path.is_dir():
        raise BertkitError(f"{path}: is a directory, expected a file")
    if not os.access(path, os.R_OK):
        raise BertkitError(f"{path}: cannot read (permission denied)")
    return path


def open_binary(path: str | Path) -> BinaryIO:
    """Open `path` (transparently gunzipping `.gz`) for reading bytes; errors name the file."""
    path = check_readable(path)
    try:
        return gzip.open(path, "rb") if path.suffix == ".gz" else open(path, "rb")
    except OSError as exc:
        raise BertkitError(f"{path}: cannot open ({exc.strerror or exc})") from exc


def is_jsonl(path: str | Path) -> bool:
    name = Path(path).name.removesuffix(".gz")
    return name.endswith(".jsonl") or name.endswith(".json")


SKIP_FLAG = "--skip-bad-lines"


class SkippedLines:
    """The lines of one file skipped as undecodable or malformed: how many, and the first."""

    def __init__(self) -> None:
        self.count, self.first = 0, 0

    def add(self, line_no: int) -> None:
        self.count += 1
        self.first = self.first or line_no


def warn_skipped(name: str, skipped: SkippedLines) -> None:
    """A warning (one `bertkit: warning:` line on the command line) saying how many lines of
    `name` were skipped, and the first of them; nothing when none was."""
    if skipped.count:
        warnings.warn(f"{name}: skipped {skipped.count:,} undecodable or malformed "
                      f"line{'s' if skipped.count > 1 else ''} ({SKIP_FLAG}; the first: line {skipped.first})",
                      stacklevel=2)


def iter_lines(path: str | Path, text_field: str = "text", skip_bad: bool = False,
               skip_advice: bool = True) -> Iterator[tuple[int, str]]:
    """Yield `(line_number, text)` for every line (1-based), newline stripped.

    JSONL files (`.jsonl`, `.json`, optionally `.gz`) yield the `text_field` of each
    object. Blank lines are yielded as "" (they separate documents in BERT corpora).
    With `skip_bad`, undecodable or malformed lines are skipped instead of raising, and a
    warning says how many (`warn_skipped`). `skip_advice`: whether an error advises
    --skip-bad-lines (False where the command offers no such flag).
    """
    with open_binary(path) as handle:
        yield from iter_stream_lines(handle, str(path), jsonl=is_jsonl(path), text_field=text_field, skip_bad=skip_bad,
                                     skip_advice=skip_advice)


def iter_stream_lines(
    stream: BinaryIO, name: str = "<stdin>", *, jsonl: bool = False, text_field: str = "text", skip_bad: bool = False,
    skip_advice: bool = True,
) -> Iterator[tuple[int, str]]:
    """`iter_lines` for an open binary stream (e.g. `sys.stdin.buffer`); errors say `name`."""
    skipped = SkippedLines()
    try:
        yield from _stream_lines(stream, name, jsonl, text_field, skip_bad, skip_advice, skipped)
    finally:
        warn_skipped(name, skipped)


def _stream_lines(stream: BinaryIO, name: str, jsonl: bool, text_field: str, skip_bad: bool, skip_advice: bool,
                  skipped: SkippedLines) -> Iterator[tuple[int, str]]:
    line_no = 0
    try:
        for raw in stream:
            line_no += 1
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                if skip_bad:
                    skipped.add(line_no)
                    continue
                advice = f" or pass {SKIP_FLAG}" if skip_advice else " (e.g. iconv -f latin1 -t utf-8)"
                raise BertkitError(
                    f"{name}:{line_no}: not valid UTF-8 (byte 0x{raw[exc.start]:02x} at column "
                    f"{exc.start + 1}); convert the file to UTF-8{advice}"
                ) from exc
            line = line.rstrip("\r\n")
            if line_no == 1:
                line = line.removeprefix("\ufeff")
            if not jsonl:
                yield line_no, line
                continue
            if not line.strip():
                yield line_no, ""
                continue
            text = _jsonl_text(line, text_field)
            if text is None:
                if skip_bad:
                    skipped.add(line_no)
                    continue
                raise BertkitError(
                    f"{name}:{line_no}: malformed JSONL line (expected an object with a "
                    f"string field {text_field!r})"
                )
            escape = lone_surrogate(line, text)
            if escape is not None:
                if skip_bad:
                    skipped.add(line_no)
                    continue
                raise surrogate_error(f"{name}:{line_no}", escape)
            yield line_no, text
    except (OSError, EOFError) as exc:  # truncated or corrupt .gz
        raise BertkitError(f"{name}:{line_no + 1}: cannot read ({exc})") from exc


def _jsonl_text(line: str, text_field: str) -> str | None:
    try:
        record = json.loads(line)
    except json.JSONDecodeError:
        return None
    text = record.get(text_field) if isinstance(record, dict) else None
    return text if isinstance(text, str) else None


def cut_long_line(line: str, max_chars: int) -> Iterator[str]:
    """`line`, or an overlong one (a file with no line breaks) cut at the last space before
    every `max_chars` characters (anywhere when a stretch has none): the corpus passes
    (tokenizer training, the data build) then hold about `max_chars` of text per work
    item however long a line is."""
    start = 0
    while len(line) - start > max_chars:
        cut = line.rfind(" ", start + 1, start + max_chars + 1)
        cut = cut if cut > start else start + max_chars
        yield line[start:cut]
        start = cut + (line[cut:cut + 1] == " ")
    yield line[start:]
