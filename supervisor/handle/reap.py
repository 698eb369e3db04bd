"""The reap ops' route: the kinds a plan may include are checked, then one reap message."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from anyio.streams.memory import MemoryObjectSendStream

from actors.calls import ask_call
from actors.reap.inbox import ReapInbox
from supervisor.errors import ProtocolError
from supervisor.operations.requests import Request
from supervisor.policy.control.permissions import Profile

__all__ = ["REAP_INCLUDE", "ask_reap"]

#: What ``reap plan --include`` may name: kept servers the user may ask to plan too.
REAP_INCLUDE = ("superseded",)


async def ask_reap(
    reap: MemoryObjectSendStream[ReapInbox], profile: Profile | None, request: Request
) -> Mapping[str, Any]:
    """The reap actor's answer to a plan or apply; the actor decides and audits its own
    refusals, and reads the apply's grant again (``regrant``) before any signal."""
    include: Any = request
    if request.op == "reap_plan":
        unknown = sorted(set(include.include or ()) - set(REAP_INCLUDE))
        if unknown:
            raise ProtocolError(f"args.include may name only {list(REAP_INCLUDE)}, got {unknown}")
    answer: Mapping[str, Any] = await ask_call(reap, profile, request, actor="reap")
    return answer
