"""Fresh facts for a retirement decision: probes via liveness, lease owners via the lease watch."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from actors.lease_watch import LeaseOwnersQuery, LeaseWatchInbox
from actors.liveness.inbox import LivenessInbox, LivenessStatusQuery, ProbeNow
from actors.mailbox import Outbox, ask
from actors.replies import LeaseOwners, LivenessStatus
from actors.retirement.apply_gates import check_cohort, check_fencing
from actors.retirement.plan_columns import active_pid
from actors.retirement.records import Refused, refusal
from supervisor.policy.evidence import PidEvidence
from supervisor.policy.fleet.liveness import STATUS_ACTIVE
from supervisor.policy.fleet.orphans import OrphanFinding, client_pids, find_orphans
from supervisor.policy.retirement.plan import FencingContext
from supervisor.store.base import Row, Store
from supervisor.system.probes import ProbeBackend

__all__ = ["Facts", "OrphanList"]

OrphanList = tuple[OrphanFinding, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class Facts:
    """What the retirement actor asks the other actors and the host before it decides."""

    liveness: Outbox[LivenessInbox]
    lease_watch: Outbox[LeaseWatchInbox]
    store: Store
    probes: ProbeBackend

    def fencing(self) -> FencingContext:
        return FencingContext(host_id=self.probes.host_id(), boot_id=self.probes.boot_id())

    async def for_rows(self, rows: Sequence[Mapping[str, Any]]) -> Mapping[int, PidEvidence]:
        """Fresh probes of every active row's pid, and of their launching clients' pids."""
        workers = {pid for row in rows if (pid := active_pid(row)) is not None}
        clients = client_pids(rows, current_host_id=self.probes.host_id())
        return await self.probe(tuple(sorted(workers | clients)))

    async def probe(self, pids: tuple[int, ...]) -> Mapping[int, PidEvidence]:
        evidence: Mapping[int, PidEvidence] = await ask(
            self.liveness, lambda reply: ProbeNow(pids=pids, reply=reply), actor="liveness"
        )
        return evidence

    async def owners(self) -> LeaseOwners:
        owners: LeaseOwners = await ask(
            self.lease_watch, lambda reply: LeaseOwnersQuery(reply=reply), actor="lease_watch"
        )
        if not owners.readable:
            # Unknown owners are not "no owners": planning on an empty set could
            # retire a worker that holds a lease.
            raise Refused(
                refusal(
                    "lease_owners_unknown",
                    f"active lease owners are unknown (fail closed): {owners.detail}",
                )
            )
        return owners

    def orphans(
        self,
        rows: Sequence[Row],
        evidence: Mapping[int, PidEvidence],
        clients: Sequence[int | None] | None = None,
    ) -> OrphanList:
        return find_orphans(
            rows, evidence=evidence, current_host_id=self.probes.host_id(), clients=clients
        )

    async def gates(self) -> None:
        """Refuse before any transaction when the supervisor cannot vouch for its evidence."""
        fencing = self.fencing()
        check_fencing(fencing)
        status: LivenessStatus = await ask(
            self.liveness, lambda reply: LivenessStatusQuery(reply=reply), actor="liveness"
        )
        if status.sweeps_completed < 1:
            raise Refused(
                refusal("liveness_not_ready", "no liveness sweep has completed yet (fail closed)")
            )
        await self.owners()
        active = await self.store.read_registrations(status=STATUS_ACTIVE)
        check_cohort(active, await self.for_rows(active), fencing.host_id)
