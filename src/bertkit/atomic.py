"""Atomic file writes: a temporary file in the target directory, then `os.replace`.

A crash or Ctrl-C mid-save leaves the previous file intact, never a half-written one.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


def write_text_atomic(path: str | os.PathLike, text: str) -> None:
    """Write `text` to `path` via a temporary file and `os.replace` (never half-written)."""
    write_bytes_atomic(path, text.encode("utf-8"))


def write_bytes_atomic(path: str | os.PathLike, data: bytes) -> None:
    """Write `data` to `path` atomically (temp file in the same directory + os.replace)."""
    with atomic_path(path) as tmp:
        with open(tmp, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())


@contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[Path]:
    """A temporary path next to `path` for a writer that wants a file name (e.g. safetensors).

    On a clean exit the temporary file replaces `path`; on any error it is removed and
    `path` is left as it was.
    """
    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(fd)
    try:
        yield Path(tmp)
        # mkstemp makes it owner-only, and some writers (safetensors) recreate the file
        # owner-only too; a normal file would have the umask's mode
        os.chmod(tmp, default_mode())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def default_mode(directory: bool = False) -> int:
    """The mode `open()` (or `mkdir`) would give a new file (folder): 0o666 (0o777) less the umask."""
    umask = os.umask(0)
    os.umask(umask)
    return (0o777 if directory else 0o666) & ~umask
