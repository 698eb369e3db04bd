"""One asyncpg connection as the store uses it: cached statements, SQLite-like values."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from functools import lru_cache
from typing import Any

import anyio
import asyncpg

from supervisor.errors import StoreError

__all__ = ["PgConnection", "coercer", "connect", "redact_url", "to_dollar_params"]

Coerce = Callable[[Any], Any]

#: Errors a driver call can raise that are the database's (or the link's), not ours.
_DRIVER_ERRORS: tuple[type[BaseException], ...] = (
    asyncpg.PostgresError,
    asyncpg.InterfaceError,
    # E.g. "another operation is in progress" on a link that broke mid-operation.
    asyncpg.InternalClientError,
    OSError,
)


def _text(value: Any) -> Any:
    # SQLite's TEXT affinity stores a number bound to a TEXT column as its text; the
    # same row must read back the same from either engine.
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, int | float):
        return str(value)
    return value


def _integer(value: Any) -> Any:
    # INTEGER affinity: integral text or floats become integers; anything else is left
    # for the driver to refuse (a StoreError, where SQLite would store the text).
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str):
        return _converted(int, value)
    return value


def _real(value: Any) -> Any:
    if isinstance(value, int | str) and not isinstance(value, bool):
        return _converted(float, value)
    return value


def _converted(convert: Coerce, value: Any) -> Any:
    # A value that does not convert is left for the driver to refuse.
    try:
        return convert(value)
    except ValueError:
        return value


def _same(value: Any) -> Any:
    return value


_COERCE: dict[str, Coerce] = {
    "text": _text,
    "varchar": _text,
    "int2": _integer,
    "int4": _integer,
    "int8": _integer,
    "float4": _real,
    "float8": _real,
}


def coercer(type_name: str) -> Coerce:
    """How a value bound to a parameter of this PostgreSQL type is made SQLite-alike."""
    return _COERCE.get(type_name, _same)


_PLACEHOLDER = re.compile(r"\?(\d+)")


@lru_cache(maxsize=512)
def to_dollar_params(statement: str) -> str:
    """``?1`` placeholders (SQLite's numbered form) as ``$1`` (PostgreSQL's)."""
    return _PLACEHOLDER.sub(r"$\1", statement)


def redact_url(url: str) -> str:
    """The URL without its password, for logs and errors."""
    return re.sub(r"(://[^:/@]*:)[^@]*@", r"\1***@", url)


def _rowcount(status: str | None) -> int:
    # "UPDATE 3", "INSERT 0 1", "DELETE 2", "SELECT 5": the count is the last word.
    if not status:
        return 0
    last = status.rsplit(" ", 1)[-1]
    return int(last) if last.isdigit() else 0


class PgConnection:
    """A single asyncpg connection with one statement cache of its own.

    Each statement text is prepared once; its parameter types then say how to coerce
    values the way SQLite's column affinity would (asyncpg refuses an int for a text
    parameter). Only one operation runs on the connection at a time: asyncpg refuses
    overlapping calls, so the store serializes them with its locks.
    """

    def __init__(self, raw: asyncpg.Connection, *, read_only: bool = False) -> None:
        self.raw = raw
        self.read_only = read_only
        self._prepared: dict[str, tuple[Any, tuple[Coerce, ...]]] = {}

    async def _statement(self, query: str) -> tuple[Any, tuple[Coerce, ...]]:
        cached = self._prepared.get(query)
        if cached is None:
            statement = await self.raw.prepare(query)
            coercers = tuple(_COERCE.get(t.name, _same) for t in statement.get_parameters())
            cached = (statement, coercers)
            self._prepared[query] = cached
        return cached

    @staticmethod
    def _args(coercers: tuple[Coerce, ...], params: Sequence[Any]) -> list[Any]:
        if len(params) != len(coercers):
            raise StoreError(f"statement takes {len(coercers)} parameters, got {len(params)}")
        return [c(v) for c, v in zip(coercers, params, strict=True)]

    async def fetch(self, query: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """Every row of a query, as plain tuples."""
        try:
            statement, coercers = await self._statement(query)
            records = await statement.fetch(*self._args(coercers, params))
        except _DRIVER_ERRORS as exc:
            raise _store_error("query", exc) from exc
        return [tuple(r) for r in records]

    async def execute(self, query: str, params: Sequence[Any] = ()) -> int:
        """Run one statement; return the number of rows it touched."""
        try:
            statement, coercers = await self._statement(query)
            await statement.fetch(*self._args(coercers, params))
            return _rowcount(statement.get_statusmsg())
        except _DRIVER_ERRORS as exc:
            raise _store_error("statement", exc) from exc

    async def executemany(self, query: str, seq: Iterable[Sequence[Any]]) -> None:
        """One statement for every parameter tuple, pipelined in one round trip."""
        try:
            statement, coercers = await self._statement(query)
            await statement.executemany([self._args(coercers, p) for p in seq])
        except _DRIVER_ERRORS as exc:
            raise _store_error("batch statement", exc) from exc

    async def command(self, text: str) -> str:
        """A parameterless command (BEGIN, COMMIT, SAVEPOINT ...); returns its status."""
        try:
            return str(await self.raw.execute(text))
        except _DRIVER_ERRORS as exc:
            raise _store_error("command", exc) from exc

    def in_transaction(self) -> bool:
        return bool(self.raw.is_in_transaction())

    def discard(self) -> None:
        """Drop a connection whose state is unknown; the store opens a new one next time."""
        self.raw.terminate()

    async def rollback_or_discard(self) -> None:
        """ROLLBACK if a transaction is open; a link that cannot even do that is dropped,
        so no later transaction can run on top of a half-finished one."""
        if self.raw.is_closed():
            return
        try:
            if self.in_transaction():
                await self.command("ROLLBACK")
        except StoreError:
            self.discard()

    async def close(self) -> None:
        with anyio.CancelScope(shield=True):
            try:
                await self.raw.close(timeout=5)
            except _DRIVER_ERRORS:
                # A link that is already gone cannot be closed politely; drop it.
                self.raw.terminate()


def _store_error(what: str, exc: BaseException) -> StoreError:
    name = type(exc).__name__
    return StoreError(f"PostgreSQL {what} failed: {name}: {exc}")


async def connect(url: str, *, connect_timeout: float, read_only: bool = False) -> PgConnection:
    """Open one connection; every failure is a StoreError naming the (redacted) URL.

    ``read_only``: every transaction on it is read-only (defence in depth for the
    snapshot connection, as ``query_only`` is on SQLite's).
    """
    settings = {"default_transaction_read_only": "on"} if read_only else None
    try:
        # statement_cache_size=0: PgConnection keeps its own prepared statements.
        raw = await asyncpg.connect(
            url, timeout=connect_timeout, statement_cache_size=0, server_settings=settings
        )
    except (asyncpg.PostgresError, asyncpg.InterfaceError, OSError, ValueError) as exc:
        raise StoreError(f"cannot connect to PostgreSQL at {redact_url(url)}: {exc}") from exc
    return PgConnection(raw, read_only=read_only)
