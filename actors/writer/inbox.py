"""The registry writer's inbox: registrations, beats, releases, leases, audit and apply."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from actors.control.inbox import ControlWrite
from actors.heartbeat.inbox import ReleaseClaim
from actors.host_lease.writes import HostWrite
from actors.mailbox import Outbox, Reply, ask
from actors.replies import (
    HeartbeatResult,
    WriteAck,
)
from actors.retirement.apply_tx import ApplyRetirement
from actors.writer.observed import RecordObservedServers
from supervisor.errors import SupervisorError
from supervisor.policy.fast_init import fast_init

__all__ = [
    "AppendAudit",
    "ExpireLeases",
    "HeartbeatWrite",
    "InsertRegistration",
    "ReleaseRegistration",
    "SetMassGuard",
    "Single",
    "TouchHeartbeats",
    "UpsertLease",
    "WriterInbox",
    "ask_writer",
]


@fast_init
@dataclass(frozen=True, slots=True, kw_only=True)
class HeartbeatWrite:
    """One coalesced beat: the identity it claims and the stamp to record."""

    worker_identity: str
    pid: int
    generation_id: str
    fencing_epoch: int
    stamp: str


@dataclass(frozen=True, slots=True, kw_only=True)
class InsertRegistration:
    row: Mapping[str, Any]
    reply: Reply[WriteAck]


@fast_init
@dataclass(frozen=True, slots=True, kw_only=True)
class TouchHeartbeats:
    beats: tuple[HeartbeatWrite, ...]
    #: One result per beat, in the order of ``beats``.
    reply: Reply[tuple[HeartbeatResult, ...]]


@dataclass(frozen=True, slots=True, kw_only=True)
class ReleaseRegistration(ReleaseClaim):
    stamp: str
    reply: Reply[WriteAck]
    #: Written in the release's own transaction (the server guard's exit record), so the
    #: row never leaves ``active`` without the reason being on file.
    audit: Mapping[str, Any] | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ExpireLeases:
    now_stamp: str
    reply: Reply[WriteAck]


@dataclass(frozen=True, slots=True, kw_only=True)
class UpsertLease:
    lease: Mapping[str, Any]
    reply: Reply[WriteAck]


@dataclass(frozen=True, slots=True, kw_only=True)
class AppendAudit:
    event: Mapping[str, Any]
    reply: Reply[WriteAck] | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class SetMassGuard:
    """Reloaded settings: the mass guard of every apply from now on (none in flight)."""

    mass_guard_share: float
    mass_guard_floor: int
    reply: Reply[None]


#: Messages that share a group-commit transaction one by one (heartbeats are judged as a
#: batch; an apply always runs alone). Control-plane messages (control/inbox.py) are
#: among them, so a lease grant, an expiry and a heartbeat batch share the same
#: serialized, group-committed path, and every write is serialized with an apply.
Single = (
    InsertRegistration
    | ReleaseRegistration
    | ExpireLeases
    | UpsertLease
    | AppendAudit
    | ControlWrite
    | HostWrite
    | RecordObservedServers
)
#: An apply and new settings are each handled alone, after the writes before them.
WriterInbox = Single | TouchHeartbeats | ApplyRetirement | SetMassGuard


async def ask_writer(
    writer: Outbox[WriterInbox], build: Callable[[Reply[WriteAck]], WriterInbox]
) -> WriteAck:
    """Ask the registry writer for one write; a writer that is not running answers as a
    refusal ack with the error's code and detail, so callers handle one kind of "no"."""
    try:
        return await ask(writer, build, actor="registry_writer")
    except SupervisorError as exc:
        return WriteAck(ok=False, code=exc.code, detail=exc.detail)
