"""The repository's own text: no file that git tracks keeps an unresolved merge."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
CONFLICT_MARKER = re.compile(r"^(<{7} |={7}$|>{7} )", re.MULTILINE)


def tracked_text_files() -> list[Path]:
    try:
        listed = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout")
    files = [REPO / name for name in listed.decode().split("\0") if name]
    return [f for f in files if f.suffix in {".py", ".md", ".toml", ".txt", ".sh", ".cfg", ".json", ".yaml", ".yml", ""}
            and f.is_file() and f.stat().st_size < 2_000_000]


def test_no_tracked_file_holds_merge_conflict_markers():
    conflicted = []
    for path in tracked_text_files():
        text = path.read_text(encoding="utf-8", errors="replace")
        for match in CONFLICT_MARKER.finditer(text):
            conflicted.append(f"{path.relative_to(REPO)}:{text.count(chr(10), 0, match.start()) + 1}")
    assert not conflicted, "unresolved merge: " + ", ".join(conflicted[:10])
