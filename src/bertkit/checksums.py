"""A file's SHA-256, read in blocks: checkpoint manifests, the teacher cache's key and the
feature-based tagger's record of its encoder all name a file's content this way."""

from __future__ import annotations

import hashlib
from pathlib import Path


def file_sha256(path: str | Path, block_size: int = 1 << 20) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(block_size), b""):
            digest.update(block)
    return digest.hexdigest()
