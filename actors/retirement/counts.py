"""The fleet counts the metrics and ``status`` show, kept from changes rather than recounted."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from actors.liveness.inbox import LivenessInbox, TakeDead
from actors.mailbox import Outbox, ask
from actors.replies import DeadChanges, FleetCounts
from actors.retirement.evidence import Facts
from supervisor.clock import Clock
from supervisor.policy.fleet.orphans import find_orphans
from supervisor.policy.fleet.worker_view import OWNERSHIP_HISTORICAL
from supervisor.policy.incremental.fleet_tally import FleetTally
from supervisor.store.base import Store

__all__ = ["KeptCounts"]

_HISTORICAL = (OWNERSHIP_HISTORICAL, OWNERSHIP_HISTORICAL, "")


@dataclass(slots=True, kw_only=True)
class KeptCounts:
    """A ``FleetTally`` fed by the store's and the liveness actor's change feeds.

    Each read folds what changed since the last (rows put or dropped, verdicts turned
    dead or back) and counts: the cost follows the changes, not the fleet. What a
    snapshot probes afresh, the counts take from the liveness actor's standing
    verdicts (a sweep every few seconds, a pidfd exit at once). Orphans are judged as a
    snapshot judges them, with fresh probes, but only over the rows that name a
    launching client this host can probe (workers started through the wrapper).
    """

    store: Store
    liveness: Outbox[LivenessInbox]
    facts: Facts
    clock: Clock
    host_id: Callable[[], str | None]
    _tally: FleetTally | None = field(default=None, init=False)
    _rows_cursor: int = field(default=0, init=False)
    _dead_cursor: int = field(default=0, init=False)

    async def read(self) -> FleetCounts:
        """Registrations by (status, ownership, namespace) now, and the orphan count."""
        host = self.host_id()
        tally = self._tally
        if tally is None or tally.host_id != host:
            tally = self._tally = FleetTally(host)
            self._rows_cursor = self._dead_cursor = 0
        try:
            rows = await self.store.read_active_changes(self._rows_cursor)
            tally.apply_rows(rows.rows, reset=rows.complete)
            self._rows_cursor = rows.cursor
            dead: DeadChanges = await ask(
                self.liveness,
                lambda reply: TakeDead(cursor=self._dead_cursor, reply=reply),
                actor="liveness",
            )
            tally.apply_dead(dead.changes, reset=dead.complete)
            self._dead_cursor = dead.cursor
        except BaseException:
            # A half-folded take must not be built on: the next read starts over.
            self._tally = None
            self._rows_cursor = self._dead_cursor = 0
            raise
        workers = tally.counts(self.clock.now())
        if rows.history.count:
            workers[_HISTORICAL] = workers.get(_HISTORICAL, 0) + rows.history.count
        clients = sorted(tally.client_rows(), key=lambda row: str(row.get("worker_identity")))
        orphaned = 0
        if clients:
            evidence = await self.facts.for_rows(clients)
            orphaned = len(find_orphans(clients, evidence=evidence, current_host_id=host))
        return FleetCounts(workers=workers, orphaned=orphaned)
