"""The one atomic-replace helper: mode, cleanup on refusal, exclusive creation."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from supervisor.system.atomic_file import create_file, replace_atomically


def test_the_new_bytes_replace_the_file_with_the_mode_given(tmp_path: Path) -> None:
    target = tmp_path / "config.json"
    target.write_bytes(b"old")
    replace_atomically(target, b"new \xc3\xa9", mode=0o640)
    assert target.read_bytes() == b"new \xc3\xa9"
    assert stat.S_IMODE(target.stat().st_mode) == 0o640
    assert [p.name for p in tmp_path.iterdir()] == ["config.json"]


def test_without_a_mode_the_new_file_is_private(tmp_path: Path) -> None:
    target = tmp_path / "profiles.toml"
    replace_atomically(target, b"x")
    assert stat.S_IMODE(target.stat().st_mode) == 0o600


def test_a_refusal_before_the_rename_leaves_the_file_and_no_temporary(tmp_path: Path) -> None:
    target = tmp_path / "config.json"
    target.write_bytes(b"old")
    seen: list[list[str]] = []

    def refuse() -> None:
        seen.append(sorted(p.name for p in tmp_path.iterdir()))
        raise RuntimeError("changed")

    with pytest.raises(RuntimeError, match="changed"):
        replace_atomically(target, b"new", before_rename=refuse)
    assert target.read_bytes() == b"old"
    assert [p.name for p in tmp_path.iterdir()] == ["config.json"]
    (names,) = seen
    assert len(names) == 2, "the new bytes were on disk beside the file when it ran"


def test_create_file_never_overwrites(tmp_path: Path) -> None:
    path = tmp_path / "backup.bak"
    create_file(path, b"one", 0o644)
    assert stat.S_IMODE(path.stat().st_mode) == 0o644
    with pytest.raises(FileExistsError):
        create_file(path, b"two", 0o644)
    assert path.read_bytes() == b"one"
