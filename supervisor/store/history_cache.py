"""The engine-neutral history cache: fold change-log entries, keep scope lookups current."""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from typing import Any

from supervisor.policy.retirement.fingerprints import identity_keys, row_digest, row_unit
from supervisor.policy.retirement.history import HistoryFold, HistorySummary
from supervisor.store.base import Row
from supervisor.store.schema.history import CHANGE_COLUMNS

__all__ = [
    "KEY_COLUMNS",
    "Base",
    "Change",
    "Held",
    "HistoryCache",
    "change_row",
    "columns_for",
    "probe_rows",
    "rescope",
    "scope_digests",
    "scope_rows",
]

#: Identity key name -> the column its value is compared with (the instance key
#: is looked up by instance id and checked exactly in Python).
KEY_COLUMNS = {
    "worker_identity": "worker_identity",
    "session_id": "session_id",
    "generation_id": "generation_id",
    "process_identity": "process_identity",
    "pid": "pid",
    "instance_namespace": "client_instance_id",
}
#: Scope lookups remembered between plans (one list of rows per identity key).
_MAX_CACHED_KEYS = 200_000

#: The digest row: (row_count, irregular_count, product hex, through position).
Base = tuple[int, int, str, int]
#: One historical row in the scope cache: its token text and its identity keys.
Held = tuple[bytes, frozenset[tuple[str, str]]]
#: One change-log entry: (change_id, sign, *CHANGE_COLUMNS).
Change = Sequence[Any]
Scope = dict[tuple[str, str], list[Held]]


def change_row(change: Change) -> tuple[int, Row]:
    """(sign, row with the token columns) of one change-log entry."""
    return int(change[1]), dict(zip(CHANGE_COLUMNS, change[2:], strict=True))


class HistoryCache:
    """The history digest folded up to one position, plus remembered scope lookups.

    Lives in the store object: every change in the log is folded once per
    process, whichever connection read it first. Scope entries are the
    historical rows (token columns only) carrying one identity key, kept current
    from the same changes, so a plan asks the database only about new keys
    (PostgreSQL only: on SQLite, where a lookup is an indexed read on the
    reader's thread, remembering them moved no benchmark figure, so every
    lookup reads its rows afresh).
    What a position means is the engine's: the largest folded change id on
    SQLite (ids commit in order there), a transaction-id horizon on PostgreSQL.
    """

    __slots__ = ("compacted_through", "fold", "scope", "through")

    def __init__(self) -> None:
        self.fold: HistoryFold | None = None
        self.through = -1
        self.compacted_through = -1
        #: Identity key -> (row_digest, identity keys) of each historical row carrying it.
        self.scope: Scope = {}

    def _start(self, base: Base) -> tuple[HistoryFold, int]:
        count, irregular, product, through = base
        if self.fold is None or self.through < through:
            # Someone compacted past what this cache saw: start from the digest row.
            self.scope.clear()
            summary = HistorySummary(
                count=count, irregular_count=irregular, product=int(product, 16)
            )
            return HistoryFold(summary), through
        return self.fold.copy(), self.through

    def _keep(self, fold: HistoryFold, at: int, touched: list[tuple[int, Row]]) -> None:
        self.fold, self.through = fold, at
        if self.scope:
            for sign, row in touched:
                rescope(self.scope, sign, row)

    def advance(self, base: Base, changes: Iterable[Change]) -> HistorySummary:
        """Fold ``changes`` (read with ``base``) past the cached change id; the summary."""
        fold, at = self._start(base)
        touched: list[tuple[int, Row]] = []
        for change in changes:
            change_id = int(change[0])
            if change_id <= at:
                continue
            sign, row = change_row(change)
            fold.add(row_unit(row), row.get("worker_identity"), sign)
            touched.append((sign, row))
            at = change_id
        self._keep(fold, at, touched)
        return fold.summary()

    def settle(self, base: Base, changes: Iterable[Change], horizon: int) -> None:
        """Fold ``changes``: every change below ``horizon`` the cache has not folded
        (the caller picked them, read with ``base``); the position becomes ``horizon``."""
        fold, at = self._start(base)
        touched = [change_row(change) for change in changes]
        for sign, row in touched:
            fold.add(row_unit(row), row.get("worker_identity"), sign)
        self._keep(fold, max(at, horizon), touched)

    def with_pending(self, changes: Iterable[Change]) -> HistorySummary:
        """The folded summary plus ``changes`` not folded (yet), the cache unchanged."""
        fold = self.fold.copy() if self.fold is not None else HistoryFold()
        for change in changes:
            sign, row = change_row(change)
            fold.add(row_unit(row), row.get("worker_identity"), sign)
        return fold.summary()

    def remember(self, found: Scope) -> None:
        if len(self.scope) + len(found) > _MAX_CACHED_KEYS:
            self.scope.clear()
        self.scope.update(found)


def rescope(scope: Scope, sign: int, row: Row) -> None:
    """Apply one change of a historical row (``sign`` +1 in, -1 out) to ``scope``'s lists."""
    keys = frozenset(identity_keys(row))
    if keys.isdisjoint(scope):
        return
    item = (row_digest(row), keys)
    for key in keys:
        held = scope.get(key)
        if held is None:
            continue
        if sign >= 0:
            held.append(item)
        else:
            for index, seen in enumerate(held):
                if seen[0] == item[0]:
                    del held[index]
                    break


def columns_for(keys: Collection[tuple[str, str]]) -> dict[str, list[str]]:
    """Column -> values to look up: a superset of the rows carrying any of ``keys``."""
    by_column: dict[str, list[str]] = {}
    for name, value in keys:
        column = KEY_COLUMNS.get(name)
        if column is None:
            continue
        if name == "instance_namespace":
            # "instance/namespace": the instance id is some prefix before a "/".
            cuts = [i for i, char in enumerate(value) if char == "/"]
            by_column.setdefault(column, []).extend(value[:i] for i in cuts)
        else:
            by_column.setdefault(column, []).append(value)
    return by_column


def probe_rows(hits: Iterable[tuple[Any, Row]], keys: Collection[tuple[str, str]]) -> Scope:
    """The rows of ``hits`` ((row id, row) from a ``columns_for`` lookup) under each key."""
    wanted = set(keys)
    found: Scope = {key: [] for key in keys}
    seen: set[Any] = set()
    for row_id, row in hits:
        if row_id in seen:
            continue
        carried = frozenset(identity_keys(row))
        shared = carried & wanted
        if shared:
            # One entry under every key it carries; found once per row id.
            seen.add(row_id)
            item = (row_digest(row), carried)
            for key in shared:
                found[key].append(item)
    return found


def scope_rows(hits: Iterable[tuple[Any, Row]], keys: Collection[tuple[str, str]]) -> list[Row]:
    """The rows of ``hits`` carrying any of ``keys``, each once."""
    wanted = set(keys)
    out: list[Row] = []
    seen: set[Any] = set()
    for row_id, row in hits:
        if row_id not in seen and not wanted.isdisjoint(identity_keys(row)):
            seen.add(row_id)
            out.append(row)
    return out


def scope_digests(found: Scope) -> list[bytes]:
    """Each row's digest once, however many of the looked-up keys it carries.

    A row sits in the list of every looked-up key it carries, and the lists may
    hold separate copies of it (one from the table, one from the change log), so
    rows are counted by content: equal digests carry equal keys, and ``n`` rows
    with one digest appear ``n`` times per key they share with the lookup.
    """
    wanted = set(found)
    seen: dict[bytes, list[Held]] = {}
    for items in found.values():
        for item in items:
            seen.setdefault(item[0], []).append(item)
    out: list[bytes] = []
    for digest, held in seen.items():
        per_row = len(held[0][1] & wanted) or 1
        out.extend([digest] * (len(held) // per_row))
    return out
