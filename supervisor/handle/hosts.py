"""Host lease calls: turn requests into messages to the host lease keeper actor."""

from __future__ import annotations

from collections.abc import Sequence

from anyio.streams.memory import MemoryObjectSendStream

from actors.host_lease import (
    ApplyHostRetirementRequest,
    HostLeaseInbox,
    HostLeaseStatusQuery,
    PlanHostRetirementRequest,
)
from actors.mailbox import ask
from actors.replies import HostLeaseStatus, WriteAck
from supervisor.policy.control.permissions import Profile
from supervisor.policy.retirement.host_leases import HostRetirementPlan

__all__ = ["HostLeaseCalls"]


class HostLeaseCalls:
    """This host's lease status, and the plan/apply that retires a silent host's rows."""

    def __init__(self, keeper: MemoryObjectSendStream[HostLeaseInbox]) -> None:
        self._keeper = keeper

    async def status(self) -> HostLeaseStatus:
        return await ask(
            self._keeper, lambda reply: HostLeaseStatusQuery(reply=reply), actor="host_lease"
        )

    async def plan_retirement(
        self, profile: Profile | None, host_id: str
    ) -> HostRetirementPlan | WriteAck:
        """The plan, or a ``permission_denied`` WriteAck naming what was missing."""
        return await ask(
            self._keeper,
            lambda reply: PlanHostRetirementRequest(profile=profile, host_id=host_id, reply=reply),
            actor="host_lease",
        )

    async def apply_retirement(
        self,
        profile: Profile | None,
        *,
        host_id: str,
        host_token: str,
        candidate_fingerprint: str,
        worker_identities: Sequence[str],
    ) -> WriteAck:
        return await ask(
            self._keeper,
            lambda reply: ApplyHostRetirementRequest(
                profile=profile,
                host_id=host_id,
                host_token=host_token,
                candidate_fingerprint=candidate_fingerprint,
                worker_identities=tuple(worker_identities),
                reply=reply,
            ),
            actor="host_lease",
        )
