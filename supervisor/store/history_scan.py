"""History answers computed from every row: for a store without the maintained digest yet."""

from __future__ import annotations

import hashlib
from collections.abc import Collection, Sequence

from supervisor.policy.canonical import canon
from supervisor.policy.fingerprints import identity_keys, is_history, row_unit
from supervisor.policy.history import EMPTY_HISTORY, HistorySummary, fold_history
from supervisor.store.base import RegistryView, Row

__all__ = ["ScanMemo", "page_of_history", "scope_rows_of", "scope_units_of", "view_of"]

# The PostgreSQL store has no change-log triggers yet, so it answers the history
# reads from a full read: correct, and as slow as history is long (the plan's cost
# then grows with history again). Porting schema_history's triggers to plpgsql and
# sqlite_history's fold is what makes it incremental there too.


class ScanMemo:
    """The last history summary, reused while the historical rows are the same.

    The fold costs a 3072-bit multiplication per row; telling whether history
    changed costs a sort and a sha256 of the rows' texts, a small part of that,
    and only the 32-byte digest is kept.
    """

    __slots__ = ("_key", "_summary")

    def __init__(self) -> None:
        self._key = b""
        self._summary: HistorySummary = EMPTY_HISTORY

    def summary(self, rows: Sequence[Row]) -> HistorySummary:
        past = [row for row in rows if is_history(row)]
        units = [row_unit(row) for row in past]
        identities = [row.get("worker_identity") for row in past]
        # The identities take part too: they decide the irregular count.
        key = hashlib.sha256(
            "\x1e".join(sorted(units)).encode() + repr(sorted(map(repr, identities))).encode()
        ).digest()
        if key != self._key:
            self._summary = fold_history(units, identities)
            self._key = key
        return self._summary


def view_of(rows: Sequence[Row], memo: ScanMemo | None = None) -> RegistryView:
    """Active rows and the history summary from one read of every row."""
    return RegistryView(
        active=[row for row in rows if not is_history(row)],
        history=(memo or ScanMemo()).summary(rows),
    )


def scope_rows_of(rows: Sequence[Row], keys: Collection[tuple[str, str]]) -> list[Row]:
    wanted = set(keys)
    return [row for row in rows if is_history(row) and not wanted.isdisjoint(identity_keys(row))]


def scope_units_of(rows: Sequence[Row], keys: Collection[tuple[str, str]]) -> list[str]:
    return [row_unit(row) for row in scope_rows_of(rows, keys)]


def page_of_history(
    rows: Sequence[Row], *, after: str | None, limit: int, needle: str | None
) -> list[Row]:
    """``Store.read_history`` over rows already in identity order."""
    out: list[Row] = []
    for row in rows:
        identity = row.get("worker_identity")
        if not is_history(row) or identity is None or (after is not None and identity <= after):
            continue
        if (
            needle
            and needle not in canon(row.get("client_instance_id"))
            and needle not in canon(row.get("namespace"))
        ):
            continue
        out.append(row)
        if len(out) >= limit:
            break
    return out
