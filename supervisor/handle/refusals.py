"""The handle's refusals: the grant decided at entry, and every refusal audited (committed)
before it is answered; the control writer's ack as an answer."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from anyio.streams.memory import MemoryObjectSendStream

from actors.audit import audit_event, audit_refusal, write_audit
from actors.control.inbox import ControlOp
from actors.replies import WriteAck
from actors.writer.inbox import WriterInbox
from supervisor.clock import Clock
from supervisor.errors import PermissionDenied, ProfilesUnreadable
from supervisor.observe.logs import get_logger
from supervisor.operations.grants import grant
from supervisor.policy.control.permissions import Profile
from supervisor.policy.refusal import refused
from supervisor.wire import UNAUTHENTICATED

__all__ = ["ControlCheck", "WriterCalls", "control_answer"]

_log = get_logger()


def control_answer(ack: WriteAck) -> dict[str, Any]:
    """The writer's ack as the dict every surface returns (success, outcome, reasons)."""
    data = dict(ack.data)
    if ack.ok:
        data.setdefault("success", True)
        if ack.code != "ok":
            data.setdefault("code", ack.code)
        return data
    # What the writer said of the refusal wins over the defaults, but never its success.
    return {**refused(ack.code, *([ack.detail] if ack.detail else [])), **data, "success": False}


@dataclass(frozen=True, slots=True)
class ControlCheck:
    """How the handle takes a control op: ``check`` (the op's own, ``Assign.check``) reads
    the op's request with the policy's checks (a ``ControlPlaneRefusal`` refuses it) and
    returns the one op the writer carries out, or the refusal it decided itself;
    ``refusal`` is what every refusal of the op says besides its code and reasons."""

    check: Callable[[Any, Profile | None], ControlOp | dict[str, Any]]
    refusal: tuple[tuple[str, Any], ...] = ()


class WriterCalls:
    """What every handle shares: the grant check at entry, and refusals audited through the
    writer before they are answered (a grant's, a control op's, and the callers the socket
    refuses before any op: no token, an unreadable profiles file, a peer that may not act
    for a pid)."""

    _writer: MemoryObjectSendStream[WriterInbox]
    _clock: Clock

    async def _refuse(
        self, profile: Profile | None, op: str, answer: dict[str, Any]
    ) -> dict[str, Any]:
        """``answer``, a refusal decided before anything was sent, audited first."""
        await self.audit_refusal(profile, op, answer)
        return answer

    async def deny(
        self, profile: Profile | None, op: str, *, task: str | None = None, **extra: Any
    ) -> dict[str, Any] | None:
        """None when ``profile`` may run ``op`` (``grant``); else the denial (with
        ``extra``), audited as a refusal of ``op`` before it is answered. Every call of the
        handle that needs a grant is refused here, and only here."""
        denial = grant(profile, op, task=task)
        if denial is None:
            return None
        return await self._refuse(profile, op, denial.refusal(**extra))

    async def audit_refusal(
        self, profile: Profile | None, action: str, result: dict[str, Any]
    ) -> None:
        """Put the refusal ``result`` on the audit trail, committed before it is answered."""
        await audit_refusal(self._writer, profile, action, result, at=self._clock.now())

    async def audit_unauthenticated(
        self, *, surface: str, action: str, reason: str, peer_pid: int | None = None
    ) -> None:
        """Log and audit a request whose token proved no profile, before it is refused.

        Written through the registry writer like every audit event and committed before
        the refusal goes out. The token itself is never recorded. A failed write is
        logged, not raised: the caller is refused either way.
        """
        # The audit outcome is the code the caller is refused with.
        await self._audit_caller(
            UNAUTHENTICATED, surface=surface, action=action, reason=reason, peer=peer_pid
        )

    async def audit_profiles_unreadable(
        self, *, surface: str, action: str, reason: str, peer_pid: int | None = None
    ) -> None:
        """Log and audit a request with a token refused because the profiles file cannot
        be read (so no token can be proved), as ``audit_unauthenticated`` does."""
        await self._audit_caller(
            ProfilesUnreadable.code, surface=surface, action=action, reason=reason, peer=peer_pid
        )

    async def audit_peer_denied(
        self, *, surface: str, action: str, reason: str, peer_pid: int | None = None
    ) -> None:
        """Log and audit a worker op refused because the peer may not act for the pid it
        names (peer credentials, not a token), as ``audit_unauthenticated`` does."""
        await self._audit_caller(
            "refused",
            surface=surface,
            action=action,
            reason=reason,
            peer=peer_pid,
            code=PermissionDenied.code,
        )

    async def _audit_caller(
        self,
        outcome: str,
        *,
        surface: str,
        action: str,
        reason: str,
        peer: int | None,
        code: str | None = None,
    ) -> None:
        code = code or outcome
        result = {"outcome": outcome, "code": code, "mutation_performed": False}
        event = audit_event(None, action, {**result, "reasons": [reason]}, at=self._clock.now())
        event["detail"] = {**event["detail"], "surface": surface, "peer_pid": peer}
        # The event names are fixed words: unauthenticated_request,
        # profiles_unreadable_request, permission_denied_request.
        _log.warning(
            f"{code}_request", surface=surface, action=action, reason=reason, peer_pid=peer
        )
        await write_audit(self._writer, event)
