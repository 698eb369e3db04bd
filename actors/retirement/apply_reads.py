"""The authoritative re-read inside the apply transaction, without a pass over history."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from supervisor.policy.canonical import canon
from supervisor.policy.retirement.fingerprints import identity_keys, is_history
from supervisor.policy.retirement.history import HistorySummary, identity_irregular
from supervisor.store.base import Row, WriteTx

__all__ = ["ApplyReread", "reread_for_apply"]


@dataclass(frozen=True, slots=True)
class ApplyReread:
    """Rows for the compare-and-swap checks and the history digest they pair with.

    ``history`` is ``None`` when ``rows`` is the whole registry (history must be
    planned row by row); otherwise ``rows`` are the active rows plus every
    historical row that is requested or shares an identity key with one, which
    is all either token and every per-target check reads.
    """

    rows: list[Row]
    history: HistorySummary | None
    requested_history: list[Row]


async def reread_for_apply(tx: WriteTx, requested: Sequence[str]) -> ApplyReread:
    active = await tx.registrations(status="active")
    summary = await tx.history_summary()
    if summary.irregular_count or any(
        identity_irregular(row.get("worker_identity")) for row in active
    ):
        return ApplyReread(rows=await tx.registrations(), history=None, requested_history=[])
    named = [r for r in await tx.registrations(worker_identities=requested) if is_history(r)]
    anchors = set(requested)
    keys = {
        key
        for row in (*active, *named)
        if canon(row.get("worker_identity")) in anchors
        for key in identity_keys(row)
    }
    # Full rows of the requested historical rows first, so they are the ones kept.
    seen = {canon(row.get("worker_identity")) for row in named}
    extra = list(named)
    if keys and summary.count:
        for row in await tx.history_scope(keys):
            identity = canon(row.get("worker_identity"))
            if identity not in seen:
                seen.add(identity)
                extra.append(row)
    return ApplyReread(rows=[*active, *extra], history=summary, requested_history=named)
