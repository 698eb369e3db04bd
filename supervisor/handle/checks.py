"""Answers and argument checks shared by the handle's control-plane calls."""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable, Coroutine, Mapping, Sequence
from typing import Any, Concatenate, ParamSpec, TypedDict, TypeVar

from anyio.streams.memory import MemoryObjectSendStream

from actors.audit import audit_refusal
from actors.mailbox import Reply, ask
from actors.replies import WriteAck
from actors.writer.inbox import WriterInbox
from supervisor.clock import Clock
from supervisor.operations.grants import PERMISSION_DENIED, grant
from supervisor.operations.registry import operation
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
    "PERMISSION_DENIED",
    "RepositoryArgs",
    "WorkItemArgs",
    "WriterCalls",
    "WriterMessage",
    "actions_arg",
    "control_answer",
    "ineligible",
    "optional_text",
    "pid_arg",
    "ttl_arg",
    "writer_call",
]

_MAX_TEXT = 200

#: A writer message waiting for its reply channel (what a checked call sends).
WriterMessage = Callable[[Reply[WriteAck]], WriterInbox]


class RepositoryArgs(TypedDict):
    """The repository a call names, as its keyword arguments (checked by ``check_repository``)."""

    remote: str
    org: str
    repo: str


class WorkItemArgs(RepositoryArgs):
    """The work item a call names: its repository, kind and number (checked by ``work_ref``)."""

    kind: str
    number: int


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


_Calls = TypeVar("_Calls", bound="WriterCalls")
_P = ParamSpec("_P")


def writer_call(
    op: str, **refusal: Any
) -> Callable[
    [Callable[Concatenate[_Calls, Profile | None, _P], WriterMessage]],
    Callable[Concatenate[_Calls, Profile | None, _P], Coroutine[Any, Any, Mapping[str, Any]]],
]:
    """The async handle call of control op ``op``, made from a method that checks its
    arguments and returns the writer message: deny (the grant of the task ``op``
    declares), check (a ``ControlPlaneRefusal`` is answered as a refusal carrying
    ``refusal``), send; see ``WriterCalls._guarded``."""
    # One task per op, checked when the call is declared.
    (_task,) = operation(op).tasks

    def call(
        checked: Callable[Concatenate[_Calls, Profile | None, _P], WriterMessage],
    ) -> Callable[Concatenate[_Calls, Profile | None, _P], Coroutine[Any, Any, Mapping[str, Any]]]:
        @functools.wraps(checked)
        async def guarded(
            self: _Calls, profile: Profile | None, /, *args: _P.args, **kwargs: _P.kwargs
        ) -> Mapping[str, Any]:
            return await self._guarded(
                profile, op, lambda: checked(self, profile, *args, **kwargs), **refusal
            )

        return guarded

    return call


class WriterCalls:
    """What every control-plane call shares: the grant check and one message to the writer."""

    _writer: MemoryObjectSendStream[WriterInbox]
    _clock: Clock

    async def invoke(
        self, op: str, profile: Profile | None, values: Mapping[str, Any]
    ) -> Mapping[str, Any]:
        """Run control op ``op`` as declared (``operations``): its handle call with ``values``
        as keyword arguments. The socket and the MCP tools reach every op through here."""
        call: Callable[..., Awaitable[Mapping[str, Any]]] = getattr(self, operation(op).call)
        return await call(profile, **values)

    async def _send(self, profile: Profile | None, op: str, build: WriterMessage) -> dict[str, Any]:
        """The writer's answer to one message; a refusal is audited before it is returned."""
        ack: WriteAck = await ask(self._writer, build, actor="registry_writer")
        answer = control_answer(ack)
        if not ack.ok:
            await self.audit_refusal(profile, op, answer)
        return answer

    async def _refuse(
        self, profile: Profile | None, op: str, answer: dict[str, Any]
    ) -> dict[str, Any]:
        """``answer``, a refusal decided before anything was sent, audited first."""
        await self.audit_refusal(profile, op, answer)
        return answer

    async def _guarded(
        self,
        profile: Profile | None,
        op: str,
        checked: Callable[[], WriterMessage],
        **refusal: Any,
    ) -> Mapping[str, Any]:
        """Deny, check, send: the grant of ``op`` first, then ``checked`` validates the
        arguments and builds the writer message (a ``ControlPlaneRefusal`` is answered as a
        refusal carrying ``refusal``); nothing is sent for a refused call. Every refusal,
        the writer's included, is audited as a refusal of op before it is answered."""
        if (denied := await self.deny(profile, op)) is not None:
            return denied
        try:
            message = checked()
        except ControlPlaneRefusal as exc:
            return await self._refuse(profile, op, refused(exc.code, exc.detail, **refusal))
        return await self._send(profile, op, message)

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
