"""History answers computed from every row: for a store without the maintained digest yet."""

from __future__ import annotations

from collections.abc import Collection, Sequence

from supervisor.policy.canonical import canon
from supervisor.policy.fingerprints import history_summary, identity_keys, is_history, row_unit
from supervisor.store.base import RegistryView, Row

__all__ = ["page_of_history", "scope_rows_of", "scope_units_of", "view_of"]

# The PostgreSQL store has no change-log triggers yet, so it answers the history
# reads from a full read: correct, and as slow as history is long (the plan's cost
# then grows with history again). Porting schema_history's triggers to plpgsql and
# sqlite_history's fold is what makes it incremental there too.


def view_of(rows: Sequence[Row]) -> RegistryView:
    """Active rows and the history summary from one read of every row."""
    return RegistryView(
        active=[row for row in rows if not is_history(row)], history=history_summary(rows)
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
