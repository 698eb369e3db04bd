"""What a control-plane step needs from the writer: the time, lease lengths, fresh ids, events."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from actors.replies import WriteAck
from supervisor.clock import Clock
from supervisor.policy.control.plane import (
    DEFAULT_LEASE_TTL_SECONDS,
    MAX_LEASE_TTL_SECONDS,
    check_ttl,
)
from supervisor.policy.stamps import format_stamp
from supervisor.store.base import ControlTx

__all__ = [
    "ControlClock",
    "ControlContext",
    "ControlSettings",
    "event",
    "new_id",
    "refusal",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class ControlSettings:
    default_lease_ttl_seconds: float = DEFAULT_LEASE_TTL_SECONDS
    max_lease_ttl_seconds: float = MAX_LEASE_TTL_SECONDS


def new_id(prefix: str) -> str:
    """A fresh, never reused id: leases and assignments are history, not slots."""
    return f"{prefix}-{uuid.uuid4().hex[:24]}"


class ControlContext(Protocol):
    """The little every control-plane step takes from the writer (not the writer itself)."""

    def now(self) -> tuple[datetime, str]:
        """The moment, and its stamp."""
        ...

    def ttl(self, value: float | None) -> float:
        """A lease length checked against the settings (None: the default)."""
        ...

    def make_id(self, prefix: str) -> str: ...


class ControlClock:
    """The writer's ``ControlContext``: its clock, the lease settings and ``new_id``."""

    def __init__(
        self,
        *,
        clock: Clock,
        settings: ControlSettings | None = None,
        make_id: Callable[[str], str] = new_id,
    ) -> None:
        self._clock = clock
        self.settings = settings or ControlSettings()
        self._make_id = make_id

    def now(self) -> tuple[datetime, str]:
        moment = self._clock.now()
        return moment, format_stamp(moment)

    def ttl(self, value: float | None) -> float:
        return check_ttl(
            value,
            default=self.settings.default_lease_ttl_seconds,
            maximum=self.settings.max_lease_ttl_seconds,
        )

    def make_id(self, prefix: str) -> str:
        return self._make_id(prefix)


def refusal(code: str, detail: str, **data: Any) -> WriteAck:
    return WriteAck(ok=False, code=code, detail=detail, data={"success": False, **data})


async def event(
    control: ControlTx,
    stamp: str,
    kind: str,
    *,
    work_item_key: str | None = None,
    session_id: str | None = None,
    lease_id: str | None = None,
    **detail: Any,
) -> None:
    """One control event: every state transition appends exactly one."""
    await control.append_event(
        {
            "at": stamp,
            "kind": kind,
            "work_item_key": work_item_key,
            "session_id": session_id,
            "lease_id": lease_id,
            "detail": detail or None,
        }
    )
