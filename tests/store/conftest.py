"""Fixtures for store tests: every store test runs on SQLite and on a real PostgreSQL.

A test that also asks for ``db_path`` reads or shapes the SQLite file directly, and a
test marked ``sqlite_only`` checks SQLite machinery, so those run on SQLite only; every
other test that takes ``store`` runs once per backend.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from supervisor.store.postgres.open import postgres_store
from supervisor.store.sqlite.open import sqlite_store

BACKENDS = ("sqlite", "postgresql")


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "store" not in metafunc.fixturenames:
        return
    sqlite_only = "db_path" in metafunc.fixturenames or bool(
        metafunc.definition.get_closest_marker("sqlite_only")
    )
    metafunc.parametrize("backend", ("sqlite",) if sqlite_only else BACKENDS)


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "registry.db"


@pytest.fixture
def backend_url(backend: str, request: pytest.FixtureRequest) -> str | None:
    """The PostgreSQL database of this test, or None on SQLite (no server needed)."""
    if backend != "postgresql":
        return None
    url: str = request.getfixturevalue("pg_url")
    return url


@pytest.fixture
async def store(backend_url: str | None, tmp_path: Path) -> AsyncIterator[Any]:
    if backend_url is not None:
        url = backend_url
        async with postgres_store(url) as opened_pg:
            yield opened_pg
        return
    async with sqlite_store(tmp_path / "registry.db") as opened:
        yield opened
