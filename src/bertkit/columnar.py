"""Parquet and Arrow inputs: the formats public corpora and Hugging Face datasets ship in.

An input may be a `.parquet` file, a folder of them, or a folder written by `datasets`'
`save_to_disk` (Arrow IPC stream files `data-*.arrow` beside `dataset_info.json` and
`state.json`, whose `_data_files` give their order); `expand_inputs` turns each folder into
its data files. Reading goes through pyarrow (`pip install 'bertkit[arrow]'`) a record batch
at a time (`iter_batches`, `RecordBatchStreamReader`), so memory holds one batch of the
columns asked for, never the file. Rows are numbered from 1 in each file, and errors name
the file and the column (`train.parquet: no column 'text' (columns: 'sentence', 'label')`).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from bertkit.errors import BertkitError

PARQUET_SUFFIX = ".parquet"
ARROW_SUFFIX = ".arrow"
BATCH_ROWS = 1024  # rows per record batch read: memory holds one batch of the columns read
DATASET_FILES = ("state.json", "dataset_info.json")  # what `datasets.save_to_disk` writes beside the data


def is_columnar(path: str | Path) -> bool:
    """A Parquet or Arrow file, or a folder holding them (`expand_inputs` lists which)."""
    path = Path(path)
    if path.is_dir():
        return bool(_folder_files(path))
    return path.suffix in (PARQUET_SUFFIX, ARROW_SUFFIX)


def _folder_files(folder: Path) -> list[Path]:
    state = folder / "state.json"
    if state.is_file():  # datasets.save_to_disk: its own order
        try:
            names = [entry["filename"] for entry in json.loads(state.read_text(encoding="utf-8"))["_data_files"]]
        except (ValueError, KeyError, TypeError) as exc:
            raise BertkitError(f"{state}: not a datasets state file ({exc})") from None
        return [folder / name for name in names]
    parquet = sorted(folder.glob(f"*{PARQUET_SUFFIX}"))
    return parquet or sorted(folder.glob(f"*{ARROW_SUFFIX}"))


def expand_inputs(paths: Sequence[str | Path]) -> list[str]:
    """The input paths with each folder of Parquet / Arrow files replaced by its files, in order."""
    files: list[str] = []
    for path in paths:
        path = Path(path)
        if path.is_dir():
            found = _folder_files(path)
            if not found:
                raise BertkitError(f"{path}: a folder without .parquet files or a datasets save_to_disk layout "
                                   f"({' + '.join(DATASET_FILES)} + .arrow files)")
            files.extend(str(f) for f in found)
        else:
            files.append(str(path))
    return files


def _pyarrow():
    try:
        import pyarrow
        import pyarrow.ipc
        import pyarrow.parquet
    except ImportError:
        raise BertkitError("reading Parquet / Arrow needs pyarrow: pip install 'bertkit[arrow]'") from None
    return pyarrow


def column_names(path: str | Path) -> list[str]:
    """The columns of a Parquet or Arrow file (its schema, without reading rows)."""
    pa = _pyarrow()
    path = Path(path)
    try:
        if path.suffix == PARQUET_SUFFIX:
            return list(pa.parquet.ParquetFile(path).schema_arrow.names)
        with pa.memory_map(str(path)) as source:
            return list(pa.ipc.open_stream(source).schema.names)
    except (OSError, pa.ArrowException) as exc:
        raise BertkitError(f"{path}: cannot read as {_kind(path)} ({_reason(exc)})") from None


def _kind(path: Path) -> str:
    return "Parquet" if path.suffix == PARQUET_SUFFIX else "an Arrow stream (datasets save_to_disk)"


def _reason(exc: Exception) -> str:
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__


def iter_records(path: str | Path, columns: Sequence[str]) -> Iterator[tuple[int, dict[str, Any]]]:
    """(row number from 1, {column: value}) of every row of a Parquet or Arrow file, reading
    only `columns` a batch at a time; a missing column is one error naming file and column."""
    pa = _pyarrow()
    path = Path(path)
    if not path.is_file():
        raise BertkitError(f"{path}: no such file")
    names = column_names(path)
    missing = [c for c in columns if c not in names]
    if missing:
        raise BertkitError(f"{path}: no column {missing[0]!r} (columns: {', '.join(map(repr, names))})")
    row = 0
    try:
        for batch in _batches(pa, path, list(columns)):
            for record in batch.select(list(columns)).to_pylist():
                row += 1
                yield row, record
    except (OSError, pa.ArrowException) as exc:
        raise BertkitError(f"{path}: cannot read as {_kind(path)} after row {row} ({_reason(exc)})") from None


def _batches(pa, path: Path, columns: list[str]) -> Iterator[Any]:
    if path.suffix == PARQUET_SUFFIX:
        yield from pa.parquet.ParquetFile(path).iter_batches(batch_size=BATCH_ROWS, columns=columns)
        return
    with pa.memory_map(str(path)) as source:  # mapped, not read: the OS pages in one batch at a time
        yield from pa.ipc.open_stream(source)


def cell_text(value: Any) -> str:
    """A cell as the text a CSV would hold: strings as they are, numbers as written, None empty,
    nested values (lists, structs) as JSON."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return str(value)
    return json.dumps(value, ensure_ascii=False)


def iter_column_texts(path: str | Path, column: str) -> Iterator[tuple[int, str]]:
    """(row number, text) of `column` in every row; a value that is not a string (or null,
    read as empty) is an error naming the file, the row and the column."""
    for row, record in iter_records(path, [column]):
        value = record[column]
        if value is None:
            yield row, ""
        elif isinstance(value, str):
            yield row, value
        else:
            raise BertkitError(f"{path}: row {row}: column {column!r} holds {type(value).__name__}, expected text")


def read_columns(path: str | Path) -> tuple[list[str], Iterator[tuple[int, list[str]]]]:
    """(header, rows as cell texts) of a Parquet or Arrow file: a table as a CSV reader gives it."""
    header = column_names(path)
    return header, ((row, [cell_text(record[name]) for name in header]) for row, record in iter_records(path, header))
