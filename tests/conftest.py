"""Shared pytest configuration: anyio on asyncio, and a real PostgreSQL for tests that need one."""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterator

import pytest

from tests.pg_server import PgServer, find_pg_bindir, missing_binaries_verdict, start_pg_server

_database_numbers = itertools.count(1)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="session")
def pg_server() -> Iterator[PgServer]:
    """One PostgreSQL server for the whole session, started from the machine's binaries.

    Without binaries CI fails loudly (a silently skipped backend would pass as green);
    only a local run without PostgreSQL installed may skip, and says why.
    """
    bindir = find_pg_bindir()
    if bindir is None:
        verdict, reason = missing_binaries_verdict(os.environ)
        if verdict == "fail":
            pytest.fail(reason)
        pytest.skip(reason)
    server = start_pg_server(bindir)
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def pg_url(pg_server: PgServer) -> Iterator[str]:
    """A fresh, empty schema of its own on the session's server; dropped afterwards.

    A schema (picked by ``search_path`` in the URL) is a database of its own for every
    table the store uses, and costs a fraction of a CREATE DATABASE. Synchronous (psql),
    so an async fixture may pick it with ``getfixturevalue``.
    """
    name = f"t{os.getpid()}_{next(_database_numbers)}"
    pg_server.sql(f"CREATE SCHEMA {name}")
    try:
        yield f"{pg_server.url()}&search_path={name}"
    finally:
        pg_server.sql(f"DROP SCHEMA IF EXISTS {name} CASCADE")
