"""Lock files: exclusive while held (even within one process), holder named, freed on exit."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from supervisor.errors import ConfigError
from supervisor.system.lockfile import DatabaseLocked, acquire, database_lock, exclusive, holder


def test_a_held_lock_cannot_be_taken_again_and_names_its_holder(tmp_path: Path) -> None:
    path = tmp_path / "x.lock"
    fd = acquire(path)
    assert fd is not None
    try:
        # flock belongs to the open file description, so a second open in this very
        # process is refused just as another process would be.
        assert acquire(path) is None
        assert holder(path) == os.getpid()
    finally:
        os.close(fd)
    again = acquire(path)
    assert again is not None
    os.close(again)
    assert path.exists()  # left in place on purpose


def test_holder_of_a_foreign_or_missing_file_is_unknown(tmp_path: Path) -> None:
    assert holder(tmp_path / "missing.lock") is None
    (tmp_path / "junk.lock").write_text("not a pid\n")
    assert holder(tmp_path / "junk.lock") is None


def test_unopenable_lock_file_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot open lock file"):
        acquire(tmp_path / "no-such-dir" / "x.lock")


def test_database_lock_excludes_a_second_holder_until_released(tmp_path: Path) -> None:
    db = tmp_path / "registry.sqlite3"
    with database_lock(db) as lock:
        assert lock == tmp_path / "registry.sqlite3.lock"
        second = database_lock(db)
        with pytest.raises(DatabaseLocked, match=rf"pid {os.getpid()}\b.*{db}") as refused:
            second.__enter__()
        assert refused.value.code == "database_locked"
    with database_lock(db):
        pass


def test_exclusive_holds_the_lock_for_the_block_only(tmp_path: Path) -> None:
    path = tmp_path / "w.lock"
    with exclusive(path):
        assert acquire(path) is None
    free = acquire(path)
    assert free is not None
    os.close(free)
    missing_dir = tmp_path / "no" / "x.lock"
    with pytest.raises(ConfigError, match="cannot open lock file"), exclusive(missing_dir):
        pass
