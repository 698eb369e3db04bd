"""What the writer carries out for the control plane: ``ControlWrite``, one op in a transaction."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from actors.control.context import ControlContext, refusal
from actors.mailbox import Reply
from actors.replies import WriteAck
from supervisor.policy.control.plane import ControlPlaneRefusal, WorkRef
from supervisor.store.base import ControlTx, WriteTx
from supervisor.wire import PERMISSION_DENIED

__all__ = [
    "AssignTerms",
    "ControlOp",
    "ControlWrite",
    "ItemFacts",
    "LeaseClaim",
    "RepoScope",
]

# Every op arrives validated: the handle makes it with the op's own ``check`` from the
# op's request (the policy's checks: WorkRef, Candidate, check_role, ...) and refuses
# before sending. Each op's class holds its ``check`` and its ``write`` (assign.py,
# lifecycle.py, links.py, sessions.py, allocate.py), so its fields, checks and writes are
# read in one file.


class ControlOp(Protocol):
    """One control-plane op: ``write`` carries it out in the writer's transaction; its
    answer's ``data`` is the structured result (see policy/control/render)."""

    async def write(self, ctx: ControlContext, control: ControlTx) -> WriteAck: ...


@dataclass(frozen=True, slots=True, kw_only=True)
class ControlWrite:
    """A control-plane op for the writer: it calls ``run`` in the batch's transaction (under
    a savepoint of its own, like every message), which reads the caller's grant again and
    then carries the op out."""

    op: ControlOp
    #: Re-resolves the caller's grant from its source (the refusal's line, or None), immediately
    #: before the op's writes; None for the supervisor's own writes, which no caller asked for.
    recheck_grant: Callable[[], str | None] | None = None
    reply: Reply[WriteAck]

    async def run(self, ctx: ControlContext, tx: WriteTx) -> WriteAck:
        """The op's answer; a refusal decided before any write (a revoked grant, or a
        ``ControlPlaneRefusal`` a step raises) is answered with nothing written."""
        if self.recheck_grant is not None:
            denial = self.recheck_grant()
            if denial is not None:
                return refusal(PERMISSION_DENIED, denial)
        try:
            return await self.op.write(ctx, tx.control())
        except ControlPlaneRefusal as refused:
            return refusal(refused.code, refused.detail)


@dataclass(frozen=True, slots=True, kw_only=True)
class ItemFacts:
    """What Gitea says about an item now; None fields keep what is stored."""

    ref: WorkRef
    state: str | None = None
    current_head_sha: str | None = None
    title: str | None = None
    priority: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class AssignTerms:
    """Who takes which item, on what terms: asked for (Assign) or the allocator's pick."""

    session_id: str
    role: str
    ref: WorkRef
    expected_head_sha: str | None
    #: None means the role's default action matrix.
    allowed_actions: tuple[str, ...] | None = None
    forbidden_actions: tuple[str, ...] | None = None
    phase: str = "assigned"
    owner_pid: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class LeaseClaim:
    """A lease as a session names it: refused unless that session owns it."""

    session_id: str
    lease_id: str


@dataclass(frozen=True, slots=True, kw_only=True)
class RepoScope:
    """The repository a terminal-review lock or an allocation is about."""

    remote: str
    org: str
    repo: str

    def where(self) -> dict[str, str]:
        """The repository as keyword arguments (the store's lock lookup, the views)."""
        return {"remote": self.remote, "org": self.org, "repo": self.repo}
