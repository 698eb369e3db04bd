"""The heartbeat actor's inbox: register, heartbeat (alone or grouped) and release."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from actors.mailbox import Reply
from actors.replies import (
    HeartbeatResult,
    RegisterResult,
    WriteAck,
)
from supervisor.policy.fast_init import fast_init

__all__ = [
    "BeatClaim",
    "Heartbeat",
    "HeartbeatGroup",
    "HeartbeatInbox",
    "Register",
    "Release",
    "ReleaseClaim",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class Register:
    """A worker asks to join; the supervisor fills identity and fencing itself."""

    pid: int
    claims: Mapping[str, Any]
    reply: Reply[RegisterResult]


@fast_init
@dataclass(frozen=True, slots=True, kw_only=True)
class Heartbeat:
    worker_identity: str
    pid: int
    generation_id: str
    fencing_epoch: int
    reply: Reply[HeartbeatResult]


class BeatClaim(Protocol):
    """What one heartbeat claims: the registration it names and its fencing."""

    @property
    def worker_identity(self) -> str: ...
    @property
    def pid(self) -> int: ...
    @property
    def generation_id(self) -> str: ...
    @property
    def fencing_epoch(self) -> int: ...


@dataclass(frozen=True, slots=True, kw_only=True)
class HeartbeatGroup:
    """Several beats with one answer slot (a pipelining peer's): each beat is still judged
    on its own claim, and the answer holds one result per claim, in order."""

    claims: tuple[BeatClaim, ...]
    reply: Reply[tuple[HeartbeatResult, ...]]


@dataclass(frozen=True, slots=True, kw_only=True)
class ReleaseClaim:
    """A release names its registration in full: a fencing that no longer matches is refused
    (the writer's ``ReleaseRegistration`` carries the same claim)."""

    worker_identity: str
    pid: int
    generation_id: str
    fencing_epoch: int


@dataclass(frozen=True, slots=True, kw_only=True)
class Release(ReleaseClaim):
    reply: Reply[WriteAck]


HeartbeatInbox = Register | Heartbeat | HeartbeatGroup | Release
