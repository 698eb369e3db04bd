"""Host lease calls: the grant first (``grant``), then one message to the host lease keeper."""

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
from actors.writer.inbox import WriterInbox
from supervisor.clock import Clock
from supervisor.handle.checks import WriterCalls
from supervisor.policy.control.permissions import Profile
from supervisor.policy.retirement.host_leases import HostRetirementPlan

__all__ = ["HostLeaseCalls"]


class HostLeaseCalls(WriterCalls):
    """This host's lease status, and the plan/apply that retires a silent host's rows."""

    def __init__(
        self,
        keeper: MemoryObjectSendStream[HostLeaseInbox],
        *,
        writer: MemoryObjectSendStream[WriterInbox],
        clock: Clock,
    ) -> None:
        self._keeper = keeper
        self._writer = writer
        self._clock = clock

    async def _denied(self, profile: Profile | None, op: str) -> WriteAck | None:
        """The handle's denial (``WriterCalls.deny``: decided and audited there) as the
        host ops answer it, a ``permission_denied`` ack naming what was missing."""
        answer = await self.deny(profile, op)
        if answer is None:
            return None
        data = {"permission": answer["permission"]}
        if "audit_recorded" in answer:
            data["audit_recorded"] = False
        return WriteAck(ok=False, code=answer["code"], detail=answer["reasons"][0], data=data)

    async def status(self) -> HostLeaseStatus:
        return await ask(
            self._keeper, lambda reply: HostLeaseStatusQuery(reply=reply), actor="host_lease"
        )

    async def plan_retirement(
        self, profile: Profile | None, host_id: str
    ) -> HostRetirementPlan | WriteAck:
        """The plan, or a ``permission_denied`` WriteAck naming what was missing."""
        if (denied := await self._denied(profile, "host_plan")) is not None:
            return denied
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
        if (denied := await self._denied(profile, "host_apply")) is not None:
            return denied
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
