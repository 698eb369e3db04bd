"""Reap calls of the handle: the grant first (denials audited), then one reap actor message."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from anyio.streams.memory import MemoryObjectSendStream

from actors.mailbox import Reply, ask
from actors.reap.inbox import ReapApplyRequest, ReapInbox, ReapPlanRequest
from supervisor.errors import ProtocolError
from supervisor.handle.checks import WriterCalls
from supervisor.policy.control.permissions import Profile

__all__ = ["REAP_INCLUDE", "ReapCalls"]

#: What ``reap plan --include`` may name: kept servers the user may ask to plan too.
REAP_INCLUDE = ("superseded",)

_Answer = Mapping[str, Any]


class ReapCalls(WriterCalls):
    """Mixed into SupervisorHandle: ``reap_plan`` and ``reap_apply``. The grant is decided
    here; the actor decides and audits its own refusals, and reads the apply's grant again
    (``regrant``) before any signal."""

    _reap: MemoryObjectSendStream[ReapInbox]

    async def _ask_reap(
        self, op: str, profile: Profile | None, build: Callable[[Reply[_Answer]], ReapInbox]
    ) -> _Answer:
        if (denied := await self.deny(profile, op)) is not None:
            return denied
        return await ask(self._reap, build, actor="reap")

    async def reap_plan(
        self, profile: Profile | None, *, include: Sequence[str] | None = None
    ) -> _Answer:
        """``include``: kinds of kept servers to plan too; ``superseded`` is the one kind."""
        include = include or ()
        unknown = sorted(set(include) - set(REAP_INCLUDE))
        if unknown:
            raise ProtocolError(f"args.include may name only {list(REAP_INCLUDE)}, got {unknown}")
        with_superseded = "superseded" in include
        return await self._ask_reap(
            "reap_plan",
            profile,
            lambda reply: ReapPlanRequest(
                profile=profile, include_superseded=with_superseded, reply=reply
            ),
        )

    async def reap_apply(
        self, profile: Profile | None, *, plan_token: str, override_mass_guard: bool = False
    ) -> _Answer:
        return await self._ask_reap(
            "reap_apply",
            profile,
            lambda reply: ReapApplyRequest(
                profile=profile,
                plan_token=plan_token,
                override_mass_guard=override_mass_guard,
                reply=reply,
            ),
        )
