"""The store factory: SQLite at the path by default, PostgreSQL when a URL is configured."""

from __future__ import annotations

from pathlib import Path

import pytest

from supervisor.errors import StoreError
from supervisor.store.factory import describe_store, open_store
from supervisor.store.postgres.store import PostgresStore
from supervisor.store.sqlite.store import SQLiteStore
from tests.store.rowdata import registration

pytestmark = pytest.mark.anyio


async def test_no_url_opens_the_sqlite_file_creating_its_directory(tmp_path: Path) -> None:
    path = tmp_path / "state" / "registry.sqlite3"
    store = await open_store(url=None, path=path, busy_timeout_ms=100)
    try:
        assert isinstance(store, SQLiteStore)
        assert store.dialect == "sqlite"
    finally:
        await store.close()
    assert path.exists()


async def test_a_url_opens_postgresql_and_never_touches_the_path(
    tmp_path: Path, pg_url: str
) -> None:
    path = tmp_path / "unused" / "registry.sqlite3"
    store = await open_store(url=pg_url, path=path, busy_timeout_ms=5000)
    try:
        assert isinstance(store, PostgresStore)
        async with store.write() as tx:
            await tx.insert_registration(registration("w-1"))
        assert [r["worker_identity"] for r in await store.read_registrations()] == ["w-1"]
    finally:
        await store.close()
    assert not path.parent.exists()


async def test_an_unreachable_server_is_a_store_error_without_the_password(
    tmp_path: Path,
) -> None:
    url = f"postgresql://fleet:s3cret@/fleet?host={tmp_path}"
    with pytest.raises(StoreError) as caught:
        await open_store(url=url, path=tmp_path / "x.db", busy_timeout_ms=1000)
    assert "s3cret" not in str(caught.value)
    assert "***" in describe_store(url=url, path=tmp_path)
