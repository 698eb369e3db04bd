"""Host lease calls: the grant first (``grant``), then one message to the host lease keeper."""

from __future__ import annotations

from typing import Any

from anyio.streams.memory import MemoryObjectSendStream

from actors.calls import ask_call
from actors.host_lease.actor import HostLeaseInbox, HostLeaseStatusQuery
from actors.mailbox import ask
from actors.replies import HostLeaseStatus, WriteAck
from actors.writer.inbox import WriterInbox
from supervisor.clock import Clock
from supervisor.handle.declared import HostCalls
from supervisor.handle.refusals import WriterCalls
from supervisor.operations.requests import Request
from supervisor.policy.control.permissions import Profile

__all__ = ["HostLeaseCalls"]


class HostLeaseCalls(HostCalls, WriterCalls):
    """This host's lease status, and the plan/apply that retires a silent host's rows
    (``plan_retirement`` and ``apply_retirement``: their keyword calls are generated)."""

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

    async def status(self) -> HostLeaseStatus:
        """This host's lease: any authenticated caller may look."""
        return await ask(
            self._keeper, lambda reply: HostLeaseStatusQuery(reply=reply), actor="host_lease"
        )

    async def call(self, profile: Profile | None, request: Request) -> Any:
        """A host plan (a plan, or a refusal ack) or apply (an ack): the grant first (a
        ``permission_denied`` ack naming what was missing), then the keeper's answer."""
        if request.op == "host_status":
            return await self.status()
        answer = await self.deny(profile, request.op)
        if answer is not None:
            data = {"permission": answer["permission"]}
            if "audit_recorded" in answer:
                data["audit_recorded"] = False
            return WriteAck(ok=False, code=answer["code"], detail=answer["reasons"][0], data=data)
        return await ask_call(self._keeper, profile, request, actor="host_lease")
