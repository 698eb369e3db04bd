"""The engine-neutral store interface the actors program against (SQLite and PostgreSQL)."""

from __future__ import annotations

from collections.abc import (
    AsyncIterator,
    Awaitable,
    Callable,
    Collection,
    Iterable,
    Mapping,
    Sequence,
)
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from typing import Any, Protocol, TypeAlias, TypeVar

import anyio

from supervisor.errors import StoreError
from supervisor.policy.retirement.history import HistorySummary
from supervisor.store.control_base import ControlTx
from supervisor.store.host_leases import HostLeases
from supervisor.store.observed_servers import ObservedServers

__all__ = [
    "ActiveChanges",
    "CommitChain",
    "ControlTx",
    "HostLeases",
    "ObservedServers",
    "RegistryView",
    "Row",
    "RowVersions",
    "Store",
    "WriteTx",
    "close_connections",
    "opened",
    "row_key",
]

Row = dict[str, Any]
"""A row as the store returns it: column name to value, numbers kept as stored."""

RowVersions: TypeAlias = list[Row]
"""Rows handed out as versions: the contract an incremental reader may build on.

* Every dict is one version of its row and is never mutated once handed out: not
  by the store, and not by a reader (copy before changing one). The list itself is
  new on every read and belongs to the caller.
* So a dict that is the very object (``is``) a reader was handed before holds what
  it held then: identity proves "unchanged" without reading a column.
* A changed row is always a new dict. A store may hand out the identical dict again
  for a row unchanged since its previous read (SQLite's cached view does; that is
  what makes comparing by identity cheap); a store that reads afresh hands out new
  dicts every time (PostgreSQL), which keeps the contract trivially.

Who builds on it: the retirement actor's ``PlanMemo(trust_identity=True)`` and its
``RowColumn`` per-row caches (``supervisor.policy.incremental``).
``tests/store/test_row_versions.py`` holds every store to it.
"""


@dataclass(frozen=True, slots=True)
class RegistryView:
    """The active rows and the digest of every other row, read in one transaction."""

    #: Under the ``RowVersions`` contract.
    active: RowVersions
    history: HistorySummary


class WriteTx(Protocol):
    """Operations inside one read-modify-write transaction opened by ``Store.write()``.

    Reads through a WriteTx see the transaction's own uncommitted writes. Every
    failure surfaces as ``supervisor.errors.StoreError``. Stamps that the store
    compares (``expires_at``, ``now_stamp``, ``retired_at``) must be fixed-width UTC
    text ``YYYY-MM-DDTHH:MM:SS.ffffffZ`` (``supervisor.store.stamps.format_stamp``),
    because deadlines are compared as text.
    """

    def savepoint(self) -> AbstractAsyncContextManager[None]:
        """A nested unit: on exception only its own writes are undone, then it re-raises.

        Lets one message of a group commit fail without undoing the others.
        """
        ...

    async def registrations(
        self, *, status: str | None = None, worker_identities: Sequence[str] | None = None
    ) -> list[Row]:
        """Registration rows ordered by worker_identity, optionally filtered."""
        ...

    async def history_summary(self) -> HistorySummary:
        """The maintained digest of every historical (non-active) row, as this
        transaction sees the registry (its own writes included)."""
        ...

    async def history_scope(self, keys: Collection[tuple[str, str]]) -> list[Row]:
        """Every historical row carrying one of these identity keys
        (``fingerprints.identity_keys``), each once; token columns only."""
        ...

    async def max_fencing_epoch(self, *, client_instance_id: str, namespace: str) -> int:
        """The highest fencing epoch ever given to this slot (0 if none), any status."""
        ...

    async def active_by_pid(self, pid: int) -> list[Row]:
        """Active rows naming this pid number."""
        ...

    async def insert_registration(self, row: Mapping[str, Any]) -> None:
        """Insert one registration; unknown keys or a duplicate identity raise StoreError."""
        ...

    async def touch_heartbeats(self, beats: Sequence[tuple[str, str]]) -> int:
        """Set last_heartbeat_at for (worker_identity, stamp) pairs on active rows only.

        One batched statement; returns how many rows were updated in total.
        """
        ...

    async def set_status(
        self,
        worker_identity: str,
        *,
        expected_status: str,
        new_status: str,
        stamp_column: str | None,
        stamp: str | None,
    ) -> bool:
        """Change status only if it is still ``expected_status``; optionally stamp
        ``released_at``. Retiring is refused here (use ``retire_guarded``)."""
        ...

    async def retire_guarded(
        self, expected: Mapping[str, Any], *, retired_at: str, retired_by: str, reason: str
    ) -> bool:
        """Compare-and-swap retirement: True only if the row still equals ``expected`` on
        worker_identity and every GUARD_COLUMN (NULL matches NULL only)."""
        ...

    async def retire_guarded_many(
        self,
        expected: Sequence[Mapping[str, Any]],
        *,
        retired_at: str,
        retired_by: str,
        reason: str,
    ) -> list[bool]:
        """``retire_guarded`` for each row, in order, in a few round trips instead of one
        per row. Element i is True only if row i matched; its compare-and-swap is exactly
        ``retire_guarded``'s. The worker identities must be distinct."""
        ...

    async def leases(self, *, status: str | None = None) -> list[Row]:
        """Lease rows ordered by lease_id, optionally filtered by status."""
        ...

    async def upsert_lease(self, lease: Mapping[str, Any]) -> None:
        """Insert a lease, or update only the given columns of an existing one.

        lease_id, work_item_key and status are always required (NOT NULL columns).
        """
        ...

    async def expire_leases(self, *, now_stamp: str) -> list[Row]:
        """Mark active leases with expires_at <= now_stamp expired; return them as they
        were before the update."""
        ...

    async def append_audit(self, event: Mapping[str, Any]) -> None:
        """Append one audit event; ``detail`` is stored as JSON with sorted keys."""
        ...

    def control(self) -> ControlTx:
        """The control-plane tables (sessions, work items, assignments, ...) in this
        same transaction, so a lease grant and its assignment commit or roll back together."""
        ...

    def hosts(self) -> HostLeases:
        """The host leases of the supervisors sharing this registry, in this transaction."""
        ...

    def observed(self) -> ObservedServers:
        """The MCP servers discovery found on the hosts, in this transaction."""
        ...


def row_key(position: int, row: Row) -> Any:
    """A row's key in ``ActiveChanges``: its ``worker_identity`` (what the liveness
    actor's verdicts name), else its position (a hand-inserted row without one)."""
    identity = row["worker_identity"]
    return identity if identity is not None else ("position", position)


@dataclass(frozen=True, slots=True)
class ActiveChanges:
    """The active rows changed since a reader's previous take, and the history digest,
    read in one transaction (``Store.read_active_changes``)."""

    #: For the reader's next take.
    cursor: int
    #: ``row_key`` -> the row now, None where it is gone or no longer active; the rows
    #: are under the ``RowVersions`` contract. With ``complete`` it is every active row and
    #: the reader starts over: the keys of earlier takes mean nothing any more.
    rows: Mapping[Any, Row | None]
    complete: bool
    history: HistorySummary


class Store(Protocol):
    """A registry database with exactly one writer per process (the registry_writer actor)."""

    dialect: str

    async def read_registrations(self, *, status: str | None = None) -> RowVersions:
        """Committed registration rows (never another transaction's pending writes),
        ordered by worker_identity. With ``status="active"`` the SQLite store answers
        from the same cache as ``read_registry_view`` (same contract: ``RowVersions``,
        the dicts are shared and must not be mutated)."""
        ...

    async def read_registry_view(self) -> RegistryView:
        """The committed active rows and the history digest, from one read transaction.

        ``active`` holds exactly what a fresh ``SELECT`` of the active rows returns
        (every column, values and types as the driver gives them), ordered by
        worker_identity (then rowid, which only matters for hand-inserted NULL
        identities), under the ``RowVersions`` contract: the list is new on every
        call; the row dicts are not: on SQLite a row unchanged since the previous
        call is the identical dict object (``is``), and a changed row is a new
        dict. Rows handed out are never mutated afterwards, by the store or by
        callers (copy before changing one). PostgreSQL reads afresh and hands out
        new dicts every call.

        The digest is maintained with every change to a historical row (schema v6's
        change log, fed on PostgreSQL from v9), so reading it costs the changes since
        the last read, never a pass over history. The active rows likewise cost the
        rows changed since the last call (schema v8's change log) and the stamps
        moved since: the store's own heartbeat batches hand theirs over in memory
        and log nothing, any other stamp write is logged (schema v10). Only when
        some stamp write is unaccounted for (another store's batches, a damaged
        schema) does it cost one pass over every active row's stamp.
        """
        ...

    async def read_active_changes(self, cursor: int) -> ActiveChanges:
        """What changed among the committed active rows since the take that returned
        ``cursor`` (0: none yet), with the history digest, from one read transaction.

        For one reader that keeps counts (the retirement actor's ``FleetTally``): on
        SQLite it costs the changes, as ``read_registry_view`` does, and hands over only
        the changed rows. A take that cannot say what changed (the first, another
        reader's in between, changes beyond about twice the rows) is ``complete``.
        PostgreSQL reads afresh and always answers ``complete``.
        """
        ...

    async def read_history_scope(self, keys: Collection[tuple[str, str]]) -> list[bytes]:
        """The ``fingerprints.row_digest`` of each committed historical row carrying one
        of these identity keys, once per row; answered from a cache the change log keeps
        current, so a plan asks the database only about keys it has not asked before."""
        ...

    async def read_history(
        self, *, after: str | None = None, limit: int = 100, needle: str | None = None
    ) -> list[Row]:
        """Up to ``limit`` committed historical rows with ``worker_identity > after``, in
        identity order; ``needle``, when given, keeps rows whose instance id or namespace
        contains it (a superset of an exact filter)."""
        ...

    async def read_active_processes(self) -> list[tuple[str, Any, Any, Any]]:
        """(worker_identity, pid, host_id, process_start_time) of every committed active row."""
        ...

    async def read_leases(self, *, status: str | None = None) -> list[Row]:
        """Committed lease rows."""
        ...

    async def read_audit(self, *, limit: int = 100) -> list[Row]:
        """The newest ``limit`` committed audit events, oldest of them first."""
        ...

    async def read_host_leases(self) -> list[Row]:
        """Committed host lease rows, ordered by host_id."""
        ...

    async def read_observed_servers(self, host_id: str, *, live_only: bool = True) -> list[Row]:
        """Committed observed server rows of one host (live only: not seen gone), by first
        sight then pid."""
        ...

    def write(self, *, durable: bool = True) -> AbstractAsyncContextManager[WriteTx]:
        """One read-modify-write transaction.

        Commits on clean exit and rolls back on exception (the exception is re-raised);
        both are shielded from cancellation so a cancelled caller never leaves a
        half-finished transaction behind. A ``durable`` commit is on disk when it returns
        (it survives an OS crash or power loss); pass False only for writes whose loss
        fails closed (heartbeat stamps).
        """
        ...

    def submit_heartbeats(
        self, beats: Sequence[tuple[str, str]], chain: CommitChain
    ) -> Awaitable[bool]:
        """Queue one transaction that stamps each (worker_identity, stamp) row and commits.

        Queued transactions run one after another in the order submitted, so a caller
        may queue the next before the last has finished. The result is True once
        committed with every pair's active row stamped, and False when nothing was
        written: some pair matched no active row (rolled back), or an earlier
        transaction on ``chain`` failed (skipped, so nothing overtakes it). A failed
        transaction raises ``StoreError``; either failure breaks the chain. Identities
        must be distinct.
        """
        ...

    async def close(self) -> None:
        """Release every connection; safe to call more than once."""
        ...


class CommitChain:
    """Transactions queued back to back; once one fails, the rest write nothing."""

    __slots__ = ("broken",)

    def __init__(self) -> None:
        self.broken = False


class _Closable(Protocol):
    async def close(self) -> None: ...


_S = TypeVar("_S", bound=_Closable)


async def close_connections(connections: Iterable[_Closable], what: str) -> None:
    """Close every connection, shielded from cancellation, even when one fails to close;
    then ``StoreError`` names the first failure.

    A store holds two connections: the second must be closed however the first fares.
    """
    failure: Exception | None = None
    with anyio.CancelScope(shield=True):
        for connection in connections:
            try:
                await connection.close()
            except Exception as exc:
                failure = failure or exc
    if failure is not None:
        raise StoreError(f"closing {what} failed: {failure}") from failure


@asynccontextmanager
async def opened(open_store: Callable[[], Awaitable[_S]]) -> AsyncIterator[_S]:
    """The store ``open_store()`` opens on entry, closed however the block ends."""
    store = await open_store()
    try:
        yield store
    finally:
        await store.close()
