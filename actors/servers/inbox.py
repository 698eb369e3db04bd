"""The server guard's inbox: a wrapper asks to have its server watched."""

from __future__ import annotations

from dataclasses import dataclass

from actors.mailbox import Reply
from actors.replies import AdoptResult

__all__ = ["AdoptServer", "ServerGuardInbox"]


@dataclass(frozen=True, slots=True, kw_only=True)
class AdoptServer:
    """Register and watch the process at ``pid`` (the exec socket's peer, about to become
    the server). Identity is derived by the guard from the process tree, never taken from
    the request; ``client``, ``name`` and ``namespace`` are labels only."""

    pid: int
    client: str
    name: str
    namespace: str
    ttl: float | None
    #: A duplicate of the server's stdin, owned by the message from here on: the guard
    #: keeps it to see the client hang up, or closes it.
    stdin_fd: int | None
    reply: Reply[AdoptResult]


ServerGuardInbox = AdoptServer
