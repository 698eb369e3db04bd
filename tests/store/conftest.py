"""Fixtures for store tests: a database path and an opened, always-closed SQLite store."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from supervisor.store import SQLiteStore, sqlite_store


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "registry.db"


@pytest.fixture
async def store(db_path: Path) -> AsyncIterator[SQLiteStore]:
    async with sqlite_store(db_path) as opened:
        yield opened
