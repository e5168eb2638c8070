"""Atomic writes: files get the usual permissions, and a failed write leaves the old file."""

from __future__ import annotations

import stat

import pytest

from bertkit.atomic import atomic_path, write_text_atomic


def test_written_file_has_the_mode_a_plain_open_gives(tmp_path):
    plain = tmp_path / "plain.txt"
    plain.write_text("x")
    write_text_atomic(tmp_path / "atomic.txt", "x")
    assert stat.S_IMODE((tmp_path / "atomic.txt").stat().st_mode) == stat.S_IMODE(plain.stat().st_mode)


def test_failed_write_keeps_the_old_file_and_leaves_no_temp(tmp_path):
    target = tmp_path / "weights.bin"
    target.write_text("old")
    with pytest.raises(RuntimeError):
        with atomic_path(target) as tmp:
            tmp.write_text("half")
            raise RuntimeError("crash mid-save")
    assert target.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["weights.bin"]
