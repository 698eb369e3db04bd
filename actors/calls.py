"""A declared operation's request on its way to the actor that answers it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, TypeVar

from actors.mailbox import Outbox, Reply, ask
from supervisor.operations.requests import Request, request_as
from supervisor.policy.control.permissions import Profile

__all__ = ["Call", "ask_call"]

_R = TypeVar("_R", bound=Request)


@dataclass(frozen=True, slots=True, kw_only=True)
class Call:
    """The request of an op whose grant the handle decided at entry (``grants.grant``),
    for the caller ``profile``; the actor answers on ``reply``."""

    profile: Profile | None
    request: Request
    reply: Reply[Any]

    @property
    def op(self) -> str:
        return self.request.op

    def request_as(self, kind: type[_R]) -> _R:
        """The request as ``kind``, the request type of the op the actor is answering."""
        return request_as(self.request, kind)


async def ask_call(
    outbox: Outbox[Any], profile: Profile | None, request: Request, *, actor: str
) -> Any:
    """The answer of the actor behind ``outbox`` to ``request``, asked for ``profile``."""
    return await ask(
        outbox, lambda reply: Call(profile=profile, request=request, reply=reply), actor=actor
    )
