"""Answers and argument checks shared by the handle's control-plane calls."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from anyio.streams.memory import MemoryObjectSendStream

from actors.audit import audit_refusal
from actors.control.inbox import ControlOp
from actors.replies import WriteAck
from actors.writer.inbox import WriterInbox
from supervisor.clock import Clock
from supervisor.operations.grants import grant
from supervisor.policy.control.allocation import OUTCOME_ROLE_INELIGIBLE
from supervisor.policy.control.permissions import Profile
from supervisor.policy.control.plane import (
    MAX_LEASE_TTL_SECONDS,
    ControlPlaneRefusal,
    check_actions,
    check_ttl,
)
from supervisor.policy.refusal import refused

__all__ = [
    "ControlStep",
    "WriterCalls",
    "actions_arg",
    "control_answer",
    "ineligible",
    "optional_text",
    "pid_arg",
    "ttl_arg",
]

_MAX_TEXT = 200


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


def optional_text(value: object, what: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not 0 < len(value.strip()) <= _MAX_TEXT:
        raise ControlPlaneRefusal("invalid_argument", f"{what} must be 1-{_MAX_TEXT} characters")
    return value.strip()


def pid_arg(value: object) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 0 < value < 2**31:
        raise ControlPlaneRefusal("invalid_argument", "pid must be a positive integer")
    return value


def ttl_arg(value: object) -> float | None:
    """None (the writer's default) or a TTL within the hard bound; the writer applies its own."""
    if value is None:
        return None
    return check_ttl(value, default=0.0, maximum=MAX_LEASE_TTL_SECONDS)


def actions_arg(value: Sequence[object] | None, what: str) -> tuple[str, ...] | None:
    return None if value is None else check_actions(value, what)


def ineligible(reason: str, role: object) -> dict[str, Any]:
    return refused(
        OUTCOME_ROLE_INELIGIBLE,
        reason,
        outcome=OUTCOME_ROLE_INELIGIBLE,
        role=role,
        selected=None,
        skipped=[],
        assignment=None,
    )


@dataclass(frozen=True, slots=True)
class ControlStep:
    """A control op's step: ``check`` reads the op's request (its policy checks; a
    ``ControlPlaneRefusal`` refuses it) and returns the one op the writer carries out, or
    the refusal it decided itself; ``refusal`` is what every refusal of the op says besides
    its code and reasons."""

    check: Callable[[Any, Profile | None], ControlOp | dict[str, Any]]
    refusal: tuple[tuple[str, Any], ...] = ()


class WriterCalls:
    """What every handle shares: the grant check at entry, and refusals audited through the
    writer before they are answered."""

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
