"""A registry database this process cannot write is refused when the store opens."""

from __future__ import annotations

import os
import stat
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from supervisor.errors import StoreError, StoreUnwritable
from supervisor.store.sqlite.open import open_sqlite_store, sqlite_store

pytestmark = pytest.mark.anyio


@contextmanager
def _unwritable(path: Path) -> Iterator[None]:
    """Make ``path`` (a file or a directory) unwritable for this process, for real.

    Permission bits do not bind root, so as root the file is made immutable instead,
    which the kernel refuses to let anyone change.
    """
    if os.geteuid() == 0:
        subprocess.run(["chattr", "+i", str(path)], check=True)
        try:
            yield
        finally:
            subprocess.run(["chattr", "-i", str(path)], check=True)
        return
    mode = stat.S_IMODE(path.stat().st_mode)
    path.chmod(mode & ~(stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH))
    try:
        yield
    finally:
        path.chmod(mode)


async def _created(path: Path) -> None:
    async with sqlite_store(path):
        pass


async def test_a_read_only_database_file_is_refused_at_open(db_path: Path) -> None:
    await _created(db_path)
    with _unwritable(db_path), pytest.raises(StoreUnwritable) as refused:
        await open_sqlite_store(db_path)
    detail = refused.value.detail
    assert refused.value.code == "store_unwritable"
    assert str(db_path) in detail
    assert "cannot be opened for writing" in detail
    assert "\n" not in detail


async def test_a_database_in_a_read_only_directory_is_refused_at_open(tmp_path: Path) -> None:
    directory = tmp_path / "state"
    directory.mkdir()
    existing = directory / "registry.db"
    await _created(existing)
    with _unwritable(directory):
        for path in (existing, directory / "new.db"):
            with pytest.raises(StoreUnwritable) as refused:
                await open_sqlite_store(path)
            assert str(directory) in refused.value.detail
            assert "\n" not in refused.value.detail


async def test_other_open_failures_keep_their_own_error(tmp_path: Path) -> None:
    garbage = tmp_path / "not-a-database.db"
    garbage.write_bytes(b"this is not an SQLite file" * 100)
    with pytest.raises(StoreError) as failed:
        await open_sqlite_store(garbage)
    assert not isinstance(failed.value, StoreUnwritable)
