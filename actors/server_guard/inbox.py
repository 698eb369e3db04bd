"""The server guard's inbox: a wrapper asks to have its server watched."""

from __future__ import annotations

from dataclasses import dataclass

from actors.mailbox import Reply
from actors.replies import AdoptResult
from supervisor.policy.servers.census import ProcessRef

__all__ = ["AdoptServer", "ServerGuardInbox", "StopForBudget"]


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


@dataclass(frozen=True, slots=True, kw_only=True)
class StopForBudget:
    """The census found this wrapped server past its ``[servers.budgets]`` budget: stop its
    tree as any wrapped server is stopped (only the incarnation named, only if watched)."""

    process: ProcessRef
    #: ``memory_budget`` or ``idle_budget``: the audit's outcome of its exit.
    reason: str
    detail: str


ServerGuardInbox = AdoptServer | StopForBudget
