"""Shared pytest configuration: anyio on asyncio, a real PostgreSQL for tests that need one,
and the suite's two parts, online and offline (tests/offline.py)."""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.pg_server import PgServer, find_pg_bindir, missing_binaries_verdict, start_pg_server

_database_numbers = itertools.count(1)

#: Where every test starts a real MCP client (or npm's code): the offline part.
_OFFLINE_DIRS = frozenset({"realclients", "sessions"})
_TESTS = Path(__file__).resolve().parent


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--part",
        choices=("online", "offline"),
        default=None,
        help="run only the tests that start real clients (offline: tests/run.sh runs this "
        "part in a loopback-only namespace) or only the rest (online: in the host's own "
        "namespace, where the kernel's process events are); default: both",
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark the offline part, and keep only the part ``--part`` asks for."""
    for item in items:
        path = item.path.resolve()
        if path.is_relative_to(_TESTS) and path.relative_to(_TESTS).parts[0] in _OFFLINE_DIRS:
            item.add_marker(pytest.mark.offline)
    part = config.getoption("--part")
    if part is None:
        return
    wanted = part == "offline"
    keep: list[pytest.Item] = []
    drop: list[pytest.Item] = []
    for item in items:
        (keep if (item.get_closest_marker("offline") is not None) == wanted else drop).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


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
