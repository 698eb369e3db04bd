"""Engine-specific migration hooks: work on their engine, nothing on the other, and an
engine no schema knows is refused before any statement runs."""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import pytest

from supervisor.errors import StoreError
from supervisor.store import REGISTRATION_COLUMNS
from supervisor.store.dialect import POSTGRESQL, SQLITE, Dialect
from supervisor.store.schema.active import create_active_log
from supervisor.store.schema.history import create_history_triggers
from supervisor.store.schema.history_pg import create_pg_history_log
from supervisor.store.schema.hooks import MigrationConn
from supervisor.store.schema.stamps import create_stamp_batches

pytestmark = pytest.mark.anyio

Hook = Callable[[MigrationConn], Awaitable[None]]
#: Each hook and the engine it builds for.
HOOKS: list[tuple[Hook, Dialect]] = [
    (create_active_log, SQLITE),
    (create_history_triggers, SQLITE),
    (create_stamp_batches, SQLITE),
    (create_pg_history_log, POSTGRESQL),
]
UNKNOWN = dataclasses.replace(SQLITE, name="mysql")


class _Recording:
    """A migration connection that runs nothing and records every statement."""

    def __init__(self, dialect: Dialect) -> None:
        self.dialect = dialect
        self.statements: list[str] = []

    async def query(self, statement: str, params: Sequence[Any] = ()) -> list[Sequence[Any]]:
        self.statements.append(statement)
        return [("public",)]

    async def run(self, statement: str, params: Sequence[Any] = ()) -> None:
        self.statements.append(statement)

    async def table_columns(self, table: str) -> list[str]:
        return list(REGISTRATION_COLUMNS)


@pytest.mark.parametrize(("hook", "engine"), HOOKS)
async def test_a_hook_builds_on_its_own_engine_only(hook: Hook, engine: Dialect) -> None:
    own, other = _Recording(engine), _Recording(POSTGRESQL if engine is SQLITE else SQLITE)
    await hook(own)
    await hook(other)
    assert own.statements
    assert other.statements == []


@pytest.mark.parametrize(("hook", "engine"), HOOKS)
async def test_an_unknown_engine_is_refused_before_anything_runs(
    hook: Hook, engine: Dialect
) -> None:
    conn = _Recording(UNKNOWN)
    with pytest.raises(StoreError, match="for mysql"):
        await hook(conn)
    assert conn.statements == []
