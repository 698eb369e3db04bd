"""Registrations, heartbeats and releases: validated, coalesced per worker, sent to the writer."""

from __future__ import annotations

import secrets
from collections.abc import Mapping, Sequence
from dataclasses import InitVar, dataclass, field
from functools import partial
from typing import Any, assert_never

import anyio
from anyio.abc import TaskGroup

from actors.heartbeat.inbox import (
    BeatClaim,
    Heartbeat,
    HeartbeatGroup,
    HeartbeatInbox,
    Register,
    Release,
)
from actors.liveness.inbox import LivenessInbox, Watch
from actors.mailbox import Actor, Inbox, Outbox, Reply, ask, reply_with, take_waiting, tell
from actors.replies import HeartbeatResult, RegisterResult, WriteAck
from actors.writer.inbox import (
    HeartbeatWrite,
    InsertRegistration,
    ReleaseRegistration,
    TouchHeartbeats,
    WriterInbox,
    ask_writer,
)
from supervisor.clock import Clock
from supervisor.errors import SupervisorError
from supervisor.observe.logs import get_logger
from supervisor.observe.metrics import Metrics
from supervisor.policy.fleet.liveness import STATUS_ACTIVE
from supervisor.policy.identity.instance import assess_instance_identity
from supervisor.policy.identity.worker_env import NAMESPACES
from supervisor.policy.incarnation import same_incarnation
from supervisor.policy.stamps import format_stamp
from supervisor.system.probes import ProbeBackend

__all__ = ["CLAIM_FIELDS", "HeartbeatActor", "HeartbeatSettings"]

_log = get_logger()

#: What a worker may declare about itself. Identity, generation, fencing and
#: the process quadruple are never taken from the worker: the supervisor mints
#: or probes them.
CLAIM_FIELDS: tuple[str, ...] = (
    "client_name",
    "client_instance_id",
    "session_id",
    "namespace",
    "role",
    "profile",
    "remote",
    "repository_binding",
    "transport",
    "fleet_run_id",
    "authenticated_account",
    "heartbeat_ttl_seconds",
    # The process that launched an exec sidecar (its MCP client): recorded so a worker
    # that outlives it is reported orphaned. Only ever a finding about the claimant's
    # own row, never a reason to retire anything.
    "client_pid",
    "client_process_start_time",
)


@dataclass(frozen=True, slots=True, kw_only=True)
class HeartbeatSettings:
    ttl_seconds: float = 30.0
    min_ttl_seconds: float = 1.0
    max_ttl_seconds: float = 3600.0
    max_batch: int = 4096
    max_in_flight: int = 4


@dataclass(kw_only=True, eq=False, repr=False)
class HeartbeatActor(Actor[HeartbeatInbox]):
    """Front door for workers; the writer is the only place their rows change."""

    #: In-flight batches finish (and answer) before the actor returns.
    finish_tasks = True

    inbox: Inbox[HeartbeatInbox]
    writer: Outbox[WriterInbox]
    liveness: Outbox[LivenessInbox] | None
    clock: Clock
    probes: ProbeBackend
    #: None: the defaults.
    settings: InitVar[HeartbeatSettings | None] = None
    metrics: Metrics = field(default_factory=Metrics)

    def __post_init__(self, settings: HeartbeatSettings | None) -> None:
        self._settings = settings or HeartbeatSettings()
        self._in_flight = anyio.Semaphore(self._settings.max_in_flight)

    async def on_receive(self, message: HeartbeatInbox, tg: TaskGroup) -> None:
        batch = [message]
        take_waiting(self.inbox, batch, self._settings.max_batch)
        beats = [m for m in batch if isinstance(m, Heartbeat | HeartbeatGroup)]
        if beats:
            await self._in_flight.acquire()
            tg.start_soon(self._flush, beats)
        for each in batch:
            if isinstance(each, Register | Release):
                tg.start_soon(self._handle, each)

    async def _handle(self, message: Register | Release) -> None:
        match message:
            case Register():
                await reply_with(message.reply, self._register(message))
            case Release():
                await reply_with(message.reply, self._release(message))
            case _:
                assert_never(message)

    async def _flush(self, beats: Sequence[Heartbeat | HeartbeatGroup]) -> None:
        try:
            stamp = format_stamp(self.clock.now())
            # Beats with identical claims collapse into one write; beats of one
            # worker with different claims stay apart so each is judged alone.
            slot: dict[tuple[str, int, str, int], int] = {}
            writes: list[HeartbeatWrite] = []
            positions: list[list[int]] = []
            answered = 0
            for message in beats:
                claims = message.claims if isinstance(message, HeartbeatGroup) else (message,)
                mine: list[int] = []
                for beat in claims:
                    claim = (beat.worker_identity, beat.pid, beat.generation_id, beat.fencing_epoch)
                    position = slot.get(claim)
                    if position is None:
                        position = slot[claim] = len(writes)
                        writes.append(_as_write(beat, stamp))
                    mine.append(position)
                positions.append(mine)
                answered += len(mine)
            results: Sequence[HeartbeatResult]
            try:
                results = await self._write(writes)
            except SupervisorError as exc:
                results = [
                    HeartbeatResult(
                        ok=False,
                        code=exc.code,
                        detail=exc.detail,
                        worker_identity=w.worker_identity,
                    )
                    for w in writes
                ]
            self._count(results, positions, answered)
            for message, mine in zip(beats, positions, strict=True):
                with message.reply:
                    if isinstance(message, HeartbeatGroup):
                        message.reply.send(tuple(results[p] for p in mine))
                    else:
                        message.reply.send(results[mine[0]])
        finally:
            self._in_flight.release()

    def _count(
        self, results: Sequence[HeartbeatResult], positions: list[list[int]], answered: int
    ) -> None:
        """Every answered beat counted by outcome: while all are accepted that is one pass
        over the distinct writes and one counter update; refusals take a per-beat tally."""
        # A list, then all(): a generator would cost a resumption per beat.
        oks = [r.ok for r in results]
        if not all(oks):
            self.metrics.count_heartbeats(results[p] for mine in positions for p in mine)
        else:
            self.metrics.accept_heartbeats(answered)

    async def _write(self, writes: Sequence[HeartbeatWrite]) -> list[HeartbeatResult]:
        """One writer message per ``max_batch`` beats: a group from a pipelining peer may
        hold more beats than one write is allowed."""
        size = self._settings.max_batch
        results: list[HeartbeatResult] = []
        for start in range(0, len(writes), size):
            answered: tuple[HeartbeatResult, ...] = await ask(
                self.writer,
                partial(_touch, tuple(writes[start : start + size])),
                actor="registry_writer",
            )
            results.extend(answered)
        return results

    async def _register(self, message: Register) -> RegisterResult:
        problem = _claim_problem(message.claims, self._settings)
        if problem:
            return RegisterResult(ok=False, code="invalid_registration", detail=problem)
        # Identified, not just probed: the token names this process even against another
        # that gets its pid within one clock tick (its pidfd inode, where the kernel has one).
        seen = self.probes.identify(message.pid)
        if not seen.alive or not seen.start_time:
            return RegisterResult(
                ok=False,
                code="process_unverifiable",
                detail=f"pid {message.pid} cannot be probed on this host; refusing to register it",
            )
        host_id = self.probes.host_id()
        if not host_id:
            return RegisterResult(
                ok=False, code="host_unknown", detail="the supervisor cannot establish its host id"
            )
        problem = self._client_problem(message.claims)
        if problem:
            return RegisterResult(ok=False, code="invalid_registration", detail=problem)
        row = self._row(message, host_id=host_id, start_time=seen.start_time)
        ack = await ask_writer(self.writer, lambda reply: InsertRegistration(row=row, reply=reply))
        if not ack.ok:
            return RegisterResult(ok=False, code=ack.code, detail=ack.detail)
        registration = dict(ack.data.get("registration", row))
        if self.liveness is not None:
            try:
                await tell(
                    self.liveness,
                    Watch(
                        worker_identity=str(registration["worker_identity"]),
                        pid=message.pid,
                        start_time=seen.start_time,
                    ),
                    actor="liveness",
                )
            except SupervisorError:
                _log.warning("liveness_not_told", worker_identity=registration["worker_identity"])
        _log.info(
            "registered",
            worker_identity=registration["worker_identity"],
            pid=message.pid,
            namespace=registration.get("namespace"),
        )
        ttl = float(registration["heartbeat_ttl_seconds"])
        registration["heartbeat_interval_seconds"] = round(ttl / 3, 3)
        return RegisterResult(ok=True, code="registered", detail="", registration=registration)

    def _client_problem(self, claims: Mapping[str, Any]) -> str | None:
        """A claimed launching client that still runs must be the incarnation claimed."""
        pid, claimed = claims.get("client_pid"), claims.get("client_process_start_time")
        if pid is None:
            return "client_process_start_time needs client_pid" if claimed else None
        seen = self.probes.probe(int(pid))
        if (
            seen.alive
            and seen.start_time
            and claimed
            and not same_incarnation(seen.start_time, str(claimed))
        ):
            return (
                f"client_pid {pid} runs with start time {seen.start_time!r}, "
                f"not the claimed {claimed!r}"
            )
        return None

    def _row(self, message: Register, *, host_id: str, start_time: str) -> dict[str, Any]:
        claims = message.claims
        stamp = format_stamp(self.clock.now())
        ttl = claims.get("heartbeat_ttl_seconds") or self._settings.ttl_seconds
        binding = claims.get("repository_binding") or self.probes.process_cwd(message.pid)
        identity = assess_instance_identity(claims.get("client_instance_id"))
        row: dict[str, Any] = {name: claims.get(name) for name in CLAIM_FIELDS}
        row.update(
            {
                "worker_identity": f"wkr-{secrets.token_hex(12)}",
                "generation_id": f"gen-{secrets.token_hex(8)}",
                "fencing_epoch": 1,
                "pid": message.pid,
                "process_identity": f"{host_id}:{message.pid}:{start_time}",
                "host_id": host_id,
                "boot_id": self.probes.boot_id(),
                "process_start_time": start_time,
                "repository_binding": binding,
                "heartbeat_ttl_seconds": float(ttl),
                "instance_id_provenance": identity.provenance,
                "started_at": stamp,
                "last_heartbeat_at": stamp,
                "status": STATUS_ACTIVE,
            }
        )
        return row

    async def _release(self, message: Release) -> WriteAck:
        stamp = format_stamp(self.clock.now())
        return await ask_writer(
            self.writer,
            lambda reply: ReleaseRegistration(
                worker_identity=message.worker_identity,
                pid=message.pid,
                generation_id=message.generation_id,
                fencing_epoch=message.fencing_epoch,
                stamp=stamp,
                reply=reply,
            ),
        )


def _touch(
    beats: tuple[HeartbeatWrite, ...], reply: Reply[tuple[HeartbeatResult, ...]]
) -> TouchHeartbeats:
    return TouchHeartbeats(beats=beats, reply=reply)


def _as_write(beat: BeatClaim, stamp: str) -> HeartbeatWrite:
    return HeartbeatWrite(
        worker_identity=beat.worker_identity,
        pid=beat.pid,
        generation_id=beat.generation_id,
        fencing_epoch=beat.fencing_epoch,
        stamp=stamp,
    )


def _claim_problem(claims: Mapping[str, Any], settings: HeartbeatSettings) -> str | None:
    unknown = sorted(set(claims) - set(CLAIM_FIELDS))
    if unknown:
        return f"unknown registration field(s): {unknown}"
    for name in CLAIM_FIELDS:
        value = claims.get(name)
        if name == "heartbeat_ttl_seconds":
            if value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, int | float):
                return "heartbeat_ttl_seconds must be a number"
            # Compared without float(): a huge integer would overflow, and NaN
            # fails both bounds, so either is refused rather than crashing.
            if not settings.min_ttl_seconds <= value <= settings.max_ttl_seconds:
                return (
                    f"heartbeat_ttl_seconds must be within [{settings.min_ttl_seconds}, "
                    f"{settings.max_ttl_seconds}]"
                )
        elif name == "client_pid":
            if value is not None and (
                isinstance(value, bool) or not isinstance(value, int) or not 0 < value < 2**31
            ):
                return "client_pid must be a positive integer"
        elif value is not None and (not isinstance(value, str) or len(value) > 512):
            return f"{name} must be a string of at most 512 characters"
    namespace = claims.get("namespace")
    if namespace is not None and namespace not in NAMESPACES:
        return f"namespace must be one of {list(NAMESPACES)}"
    return None
