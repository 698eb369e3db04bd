"""The portable half of a write transaction: the WriteTx operations whose SQL both engines share."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any, ClassVar, Generic, TypeVar

import anyio

from supervisor.errors import StoreError
from supervisor.store import rows as rowmap
from supervisor.store import sql
from supervisor.store.base import Row
from supervisor.store.dialect import Dialect
from supervisor.store.schema.tables import LEASE_COLUMNS, REGISTRATION_COLUMNS

__all__ = ["RETIRE_IDENTITY_PARAM", "PortableWriteTx"]

#: Position of worker_identity in rowmap.retire_params' tuple.
RETIRE_IDENTITY_PARAM = 3

C = TypeVar("C")


class PortableWriteTx(Generic[C]):
    """One transaction on a backend's write connection ``C`` (see base.WriteTx).

    A backend says how to run a statement on ``C`` (``_fetch``, ``_execute``,
    ``_command``) and whether ``C`` is still inside its transaction; the operations
    whose statements come from the portable builders in ``sql`` live here once.
    """

    #: The engine the portable statements are built for.
    dialect: ClassVar[Dialect]
    #: The engines spell the savepoint statements differently; the texts stay as they were.
    _ROLLBACK_TO: ClassVar[str]
    _RELEASE: ClassVar[str]
    #: Why ``_live`` refuses once the engine has left the transaction.
    _NOT_IN_TRANSACTION: ClassVar[str]

    def __init__(self, conn: C) -> None:
        self._conn = conn
        self._open = True
        self._savepoints = 0

    def _in_transaction(self, conn: C) -> bool:
        raise NotImplementedError

    async def _fetch(self, statement: str, params: Sequence[Any]) -> Sequence[Sequence[Any]]:
        raise NotImplementedError

    async def _execute(self, statement: str, params: Sequence[Any]) -> int:
        raise NotImplementedError

    async def _command(self, conn: C, statement: str) -> None:
        raise NotImplementedError

    def finish(self) -> None:
        """Called by the store when the transaction ends; later use is an error."""
        self._open = False

    def _live(self) -> C:
        if not self._open:
            raise StoreError("write transaction already finished")
        if not self._in_transaction(self._conn):
            raise StoreError(self._NOT_IN_TRANSACTION)
        return self._conn

    @asynccontextmanager
    async def savepoint(self) -> AsyncIterator[None]:
        """SAVEPOINT sN ... RELEASE; on exception ROLLBACK TO sN + RELEASE, then re-raise."""
        conn = self._live()
        self._savepoints += 1
        name = f"s{self._savepoints}"  # unique per transaction, so nesting is safe
        with anyio.CancelScope(shield=True):
            await self._command(conn, f"SAVEPOINT {name}")
        try:
            yield
        except BaseException:
            with anyio.CancelScope(shield=True):
                # If the engine already discarded the whole transaction the savepoint is
                # gone too; the outer write() reports that, so just re-raise. On
                # PostgreSQL this also undoes the "transaction aborted" state of a failed
                # statement, so the rest of the group commit can go on.
                if self._open and self._in_transaction(conn):
                    await self._command(conn, f"{self._ROLLBACK_TO} {name}")
                    await self._command(conn, f"{self._RELEASE} {name}")
            raise
        with anyio.CancelScope(shield=True):
            await self._command(self._live(), f"{self._RELEASE} {name}")

    async def max_fencing_epoch(self, *, client_instance_id: str, namespace: str) -> int:
        rows = await self._fetch(
            sql.max_fencing_epoch(self.dialect), (client_instance_id, namespace)
        )
        value = rows[0][0] if rows else None
        return int(value) if value is not None else 0

    async def active_by_pid(self, pid: int) -> list[Row]:
        rows = await self._fetch(sql.select_active_by_pid(self.dialect), (pid,))
        return rowmap.as_dicts(REGISTRATION_COLUMNS, rows)

    async def insert_registration(self, row: Mapping[str, Any]) -> None:
        columns, values = rowmap.registration_params(row)
        await self._execute(sql.insert_registration(self.dialect, columns), values)

    async def set_status(
        self,
        worker_identity: str,
        *,
        expected_status: str,
        new_status: str,
        stamp_column: str | None,
        stamp: str | None,
    ) -> bool:
        params = rowmap.status_params(
            worker_identity,
            expected_status=expected_status,
            new_status=new_status,
            stamp_column=stamp_column,
            stamp=stamp,
        )
        statement = sql.set_status(self.dialect, stamp_column=stamp_column)
        return await self._execute(statement, params) == 1

    async def retire_guarded(
        self, expected: Mapping[str, Any], *, retired_at: str, retired_by: str, reason: str
    ) -> bool:
        params = rowmap.retire_params(
            expected, retired_at=retired_at, retired_by=retired_by, reason=reason
        )
        return await self._execute(sql.retire_guarded(self.dialect), params) == 1

    async def retire_guarded_many(
        self,
        expected: Sequence[Mapping[str, Any]],
        *,
        retired_at: str,
        retired_by: str,
        reason: str,
    ) -> list[bool]:
        params = [
            rowmap.retire_params(row, retired_at=retired_at, retired_by=retired_by, reason=reason)
            for row in expected
        ]
        if not params:
            return []
        if len({p[RETIRE_IDENTITY_PARAM] for p in params}) != len(params):
            # Both engines learn which rows matched per identity (a row count, or the
            # identities a statement returns): a repeated identity would let one row's
            # match stand in for another's.
            raise StoreError("retire_guarded_many needs distinct worker identities")
        return await self._retire_rows(params, (retired_at, retired_by, reason))

    async def _retire_rows(
        self, params: list[tuple[Any, ...]], stamp: tuple[str, str, str]
    ) -> list[bool]:
        """The engine's batched guarded retirement of distinct, non-empty ``params``;
        ``stamp`` is (retired_at, retired_by, reason), as in each parameter row."""
        raise NotImplementedError

    async def leases(self, *, status: str | None = None) -> list[Row]:
        statement = sql.select_leases(self.dialect, by_status=status is not None)
        params = (status,) if status is not None else ()
        return rowmap.as_dicts(LEASE_COLUMNS, await self._fetch(statement, params))

    async def upsert_lease(self, lease: Mapping[str, Any]) -> None:
        columns, values = rowmap.lease_params(lease)
        await self._execute(sql.upsert_lease(self.dialect, columns), values)

    async def append_audit(self, event: Mapping[str, Any]) -> None:
        await self._execute(sql.insert_audit(self.dialect), rowmap.audit_params(event))
