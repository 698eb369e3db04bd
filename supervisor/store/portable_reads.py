"""The portable half of a store's reads: the Store reads whose SQL both engines share."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

from supervisor.errors import StoreError
from supervisor.store import rows as rowmap
from supervisor.store import sql
from supervisor.store.base import Row
from supervisor.store.dialect import Dialect
from supervisor.store.schema.tables import LEASE_COLUMNS

__all__ = ["PortableReads"]


class PortableReads:
    """Store reads built from the portable statements of ``sql`` (see base.Store).

    A store says which dialect its statements take (``sql_dialect``) and how it runs
    a query on its read connection (``_read``); these reads live here once.
    """

    sql_dialect: ClassVar[Dialect]

    async def _read(self, statement: str, params: tuple[Any, ...]) -> Sequence[Sequence[Any]]:
        raise NotImplementedError

    async def read_leases(self, *, status: str | None = None) -> list[Row]:
        statement = sql.select_leases(self.sql_dialect, by_status=status is not None)
        rows = await self._read(statement, (status,) if status is not None else ())
        return rowmap.as_dicts(LEASE_COLUMNS, rows)

    async def read_audit(self, *, limit: int = 100) -> list[Row]:
        if limit < 0:
            raise StoreError(f"limit must be >= 0, got {limit}")
        newest_first = await self._read(sql.select_audit(self.sql_dialect), (limit,))
        return rowmap.audit_rows(reversed(newest_first))
