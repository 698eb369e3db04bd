"""Pick the store engine from the configuration: SQLite by default, PostgreSQL for a URL.

The PostgreSQL store (and asyncpg, about 3.5 MB of daemon RSS) is imported only for a URL.
"""

from __future__ import annotations

from pathlib import Path

from supervisor.store.base import Store
from supervisor.store.sqlite.open import open_sqlite_store

__all__ = ["describe_store", "open_store"]


async def open_store(*, url: str | None, path: Path, busy_timeout_ms: int) -> Store:
    """Open and migrate the configured registry; the caller must ``close()`` it.

    ``url`` (a ``postgresql://`` URL) wins over ``path``: a host joining a shared
    registry must never quietly fall back to a private SQLite file.
    """
    if url is not None:
        from supervisor.store.postgres.open import open_postgres_store

        return await open_postgres_store(url, connect_timeout=max(busy_timeout_ms, 1000) / 1000)
    path.parent.mkdir(parents=True, exist_ok=True)
    return await open_sqlite_store(path, busy_timeout_ms=busy_timeout_ms)


def describe_store(*, url: str | None, path: Path) -> str:
    """Where the registry is, for logs (a URL without its password)."""
    if url is not None:
        from supervisor.store.postgres.connection import redact_url

        return redact_url(url)
    return str(path)
