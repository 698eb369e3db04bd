"""The façade surfaces and tests use: each call sends one actor message and awaits the answer."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from anyio.streams.memory import MemoryObjectSendStream

from actors.calls import ask_call
from actors.census.inbox import CensusInbox, ReportCensus, TakeCensus
from actors.control.allocate import AllocateWork
from actors.control.assign import Assign, CheckAssignment
from actors.control.inbox import ControlWrite
from actors.control.lifecycle import GetTerminalLock, HeartbeatLease, ReleaseLease, SetTerminalLock
from actors.control.links import (
    GetIncidentLinks,
    NamespaceHealthGate,
    RecordNamespaceHealth,
    UpsertIncidentLink,
)
from actors.control.sessions import UpsertSession, UpsertWorkItem
from actors.heartbeat.inbox import (
    BeatClaim,
    Heartbeat,
    HeartbeatGroup,
    HeartbeatInbox,
    Register,
    Release,
)
from actors.lease_watch import LeaseOwnersQuery, LeaseWatchInbox
from actors.liveness.inbox import LivenessCountsQuery, LivenessInbox, LivenessStatusQuery
from actors.mailbox import Reply, ask, post
from actors.reap.inbox import ReapInbox
from actors.replies import (
    FleetCounts,
    HeartbeatResult,
    LeaseOwners,
    LivenessCounts,
    LivenessStatus,
    RegisterResult,
    WriteAck,
)
from actors.retirement.inbox import AutoRetireTick, FleetCountsQuery, RetirementInbox
from actors.writer.inbox import SetMassGuard, UpsertLease, WriterInbox
from supervisor.clock import Clock, SystemClock
from supervisor.errors import ProtocolError, SupervisorError
from supervisor.handle.declared import ControlCalls, FleetCalls, LinkCalls, ReapCalls
from supervisor.handle.queries import Query
from supervisor.handle.refusals import ControlCheck, WriterCalls, control_answer
from supervisor.operations.declared import ReapPlanRequest
from supervisor.operations.grants import ProfileLookup, regrant_later
from supervisor.operations.registry import OPERATIONS
from supervisor.operations.requests import Request, request
from supervisor.policy.control.permissions import Profile
from supervisor.policy.control.plane import ControlPlaneRefusal
from supervisor.policy.refusal import refused
from supervisor.policy.servers.census import Census
from supervisor.policy.servers.view import CensusView, snapshot_part
from supervisor.wire import PlanQuery, query_args

__all__ = ["REAP_INCLUDE", "SupervisorHandle"]

#: What ``reap plan --include`` may name: kept servers the user may ask to plan too.
REAP_INCLUDE = ("superseded",)

_Route = Callable[["SupervisorHandle", Profile | None, Request], Awaitable[Any]]


@dataclass(frozen=True, slots=True)
class _Fenced:
    """The registration a heartbeat or release names, in full; each builds its message."""

    worker_identity: str
    pid: int
    generation_id: str
    fencing_epoch: int

    def heartbeat(self, reply: Reply[HeartbeatResult]) -> Heartbeat:
        return Heartbeat(**asdict(self), reply=reply)

    def release(self, reply: Reply[WriteAck]) -> Release:
        return Release(**asdict(self), reply=reply)


class SupervisorHandle(FleetCalls, ControlCalls, LinkCalls, ReapCalls, WriterCalls):
    """Translates calls into actor messages; holds no state of its own.

    Every declared op is answered by ``call`` (its request, whichever surface parsed it);
    its keyword call (``handle.apply(profile, candidate_fingerprint=...)``) is generated
    from the declarations (``handle/declared/``). The rest are the workers' own ops and
    the daemon's queries of its actors.
    """

    def __init__(
        self,
        *,
        heartbeat: MemoryObjectSendStream[HeartbeatInbox],
        retirement: MemoryObjectSendStream[RetirementInbox],
        liveness: MemoryObjectSendStream[LivenessInbox],
        lease_watch: MemoryObjectSendStream[LeaseWatchInbox],
        writer: MemoryObjectSendStream[WriterInbox],
        reap: MemoryObjectSendStream[ReapInbox],
        clock: Clock | None = None,
        census: MemoryObjectSendStream[CensusInbox] | None = None,
        profiles: ProfileLookup | None = None,
    ) -> None:
        self._clock: Clock = clock or SystemClock()
        #: Where a control op's grant is read again before its write (``regrant``); None:
        #: no source to read again, so the grant decided at entry stands.
        self._profiles = profiles
        self._heartbeat = heartbeat
        self._retirement = retirement
        self._liveness = liveness
        self._lease_watch = lease_watch
        self._writer = writer
        self._reap_outbox = reap
        self._census = census

    async def register(self, pid: int, claims: Mapping[str, Any]) -> RegisterResult:
        return await ask(
            self._heartbeat,
            lambda reply: Register(pid=pid, claims=dict(claims), reply=reply),
            actor="heartbeat",
        )

    async def heartbeat(
        self, worker_identity: str, *, pid: int, generation_id: str, fencing_epoch: int
    ) -> HeartbeatResult:
        fenced = _Fenced(worker_identity, pid, generation_id, fencing_epoch)
        return await ask(self._heartbeat, fenced.heartbeat, actor="heartbeat")

    async def heartbeat_many(
        self,
        claims: Sequence[BeatClaim],
        *,
        timeout: float,  # noqa: ASYNC109 - a timer, not a scope: see Reply.wait
    ) -> list[HeartbeatResult]:
        """Several beats at once (a pipelining peer's), answered in order within ``timeout``
        seconds (else ``TimeoutError``; the beats may still land).

        One message for all of them, so they can share a write batch; each beat is still
        judged on its own claim and gets its own result.
        """
        if not claims:
            return []
        reply: Reply[tuple[HeartbeatResult, ...]] = Reply()
        await post(
            self._heartbeat,
            HeartbeatGroup(claims=tuple(claims), reply=reply),
            actor="heartbeat",
        )
        return list(await reply.wait(actor="heartbeat", timeout=timeout))

    async def release(
        self, worker_identity: str, *, pid: int, generation_id: str, fencing_epoch: int
    ) -> WriteAck:
        fenced = _Fenced(worker_identity, pid, generation_id, fencing_epoch)
        return await ask(self._heartbeat, fenced.release, actor="heartbeat")

    # --- the one dispatch of a declared op's request --------------------------------------

    async def call(self, profile: Profile | None, request: Request) -> Any:
        """Answer ``request`` for ``profile``: the grant first (``deny``: decided by
        ``grants.grant`` and audited, the one place), then the op's route to its actor.
        The socket, both MCP surfaces, the page and every keyword call come through here."""
        op = request.op
        if OPERATIONS[op].tasks:
            extra = _DENIED_WITH.get(op, {})
            denied = await self.deny(profile, op, task=_task_of(request), **extra)
            if denied is not None:
                return denied
        route = _ROUTES.get(op)
        if route is None:
            # The workers' ops, status and host ops have paths of their own (see the socket).
            raise ProtocolError(f"op {op!r} is not answered through the handle's call")
        return await route(self, profile, request)

    async def plan(
        self,
        profile: Profile | None,
        *,
        canonical_repository: str | None = None,
        query: PlanQuery | None = None,
    ) -> Mapping[str, Any]:
        """``plan``, with its listing as the one value the wire's listing fields make."""
        listing = query_args(query)
        answer: Mapping[str, Any] = await self.call(
            profile, request("plan", canonical_repository=canonical_repository, **listing)
        )
        return answer

    async def _snapshot(self, profile: Profile | None, request: Request) -> Mapping[str, Any]:
        fleet: Mapping[str, Any] = await self._ask_retirement(profile, request)
        if not fleet.get("success", True):
            return fleet
        try:
            servers = snapshot_part(await self.census_report())
        except SupervisorError as exc:
            servers = {"mcp_server_summary": {"available": False, "detail": exc.detail}}
        return {**fleet, **servers}

    async def _ask_retirement(self, profile: Profile | None, request: Request) -> Any:
        """The retirement actor's answer to a snapshot, plan or apply."""
        return await ask_call(self._retirement, profile, request, actor="retirement")

    async def _reap(self, profile: Profile | None, request: Request) -> Mapping[str, Any]:
        """The reap actor's answer to a plan or apply; the actor decides and audits its own
        refusals, and reads the apply's grant again (``regrant``) before any signal."""
        if isinstance(request, ReapPlanRequest):
            unknown = sorted(set(request.include or ()) - set(REAP_INCLUDE))
            if unknown:
                detail = f"args.include may name only {list(REAP_INCLUDE)}, got {unknown}"
                raise ProtocolError(detail)
        answer: Mapping[str, Any] = await ask_call(
            self._reap_outbox, profile, request, actor="reap"
        )
        return answer

    async def _control(
        self, profile: Profile | None, request: Request, entry: ControlCheck
    ) -> Mapping[str, Any]:
        """A control op: the op's own check reads the request and makes the op
        (``Assign.check``, in ``actors/control/assign.py`` beside its ``write``); the writer
        reads the grant again and carries the op out in one transaction (``ControlWrite``).
        Nothing is sent for a refused call, and every refusal, the writer's included, is
        audited before it is answered."""
        op = request.op
        try:
            checked = entry.check(request, profile)
        except ControlPlaneRefusal as exc:
            answer = refused(exc.code, exc.detail, **dict(entry.refusal))
            return await self._refuse(profile, op, answer)
        if isinstance(checked, dict):
            return await self._refuse(profile, op, checked)
        recheck = None
        if self._profiles is not None:
            name = profile.name if profile else None
            recheck = regrant_later(self._profiles, name, op, task=_task_of(request))
        ack: WriteAck = await ask(
            self._writer,
            lambda reply: ControlWrite(op=checked, recheck_grant=recheck, reply=reply),
            actor="registry_writer",
        )
        answer = control_answer(ack)
        if not ack.ok:
            await self.audit_refusal(profile, op, answer)
        return answer

    # --- the daemon's queries of its actors: each a message of its own --------------------

    auto_retire = Query[Mapping[str, Any]]("_retirement", "retirement", AutoRetireTick)
    fleet_counts = Query[FleetCounts]("_retirement", "retirement", FleetCountsQuery)
    liveness_status = Query[LivenessStatus]("_liveness", "liveness", LivenessStatusQuery)
    #: ``liveness_status`` without the verdicts: what ``status`` and health read.
    liveness_counts = Query[LivenessCounts]("_liveness", "liveness", LivenessCountsQuery)
    #: Every MCP server on this host (``fresh=True``: swept now, not at the last sweep).
    census = Query[Census]("_census", "census", TakeCensus)
    #: The census with its counts, duplicates, rollups and history.
    census_report = Query[CensusView]("_census", "census", ReportCensus)
    lease_owners = Query[LeaseOwners]("_lease_watch", "lease_watch", LeaseOwnersQuery)

    async def upsert_lease(self, lease: Mapping[str, Any]) -> WriteAck:
        return await ask(
            self._writer,
            lambda reply: UpsertLease(lease=dict(lease), reply=reply),
            actor="registry_writer",
        )

    async def set_mass_guard(self, *, share: float, floor: int) -> None:
        """Reloaded settings: every apply from now on is guarded by these numbers."""
        await ask(
            self._writer,
            lambda reply: SetMassGuard(mass_guard_share=share, mass_guard_floor=floor, reply=reply),
            actor="registry_writer",
        )


def _control_route(entry: ControlCheck) -> _Route:
    async def route(handle: SupervisorHandle, profile: Profile | None, request: Request) -> Any:
        return await handle._control(profile, request, entry)

    return route


_NOT_ALLOWED = (("allowed", False),)
#: Each control op -> the op its request becomes (its ``check``), and what its refusals say
#: besides the code and reasons.
_CONTROL: Mapping[str, ControlCheck] = {
    "session_upsert": ControlCheck(UpsertSession.check),
    "allocate": ControlCheck(AllocateWork.check),
    "work_item_upsert": ControlCheck(UpsertWorkItem.check),
    "assign": ControlCheck(Assign.check),
    "assignment_check": ControlCheck(CheckAssignment.check, refusal=_NOT_ALLOWED),
    "lease_heartbeat": ControlCheck(HeartbeatLease.check),
    "lease_release": ControlCheck(ReleaseLease.check),
    "terminal_lock_set": ControlCheck(SetTerminalLock.check),
    "terminal_lock_get": ControlCheck(GetTerminalLock.check),
    "namespace_health_assess": ControlCheck(RecordNamespaceHealth.check),
    "namespace_health_gate": ControlCheck(NamespaceHealthGate.check, refusal=_NOT_ALLOWED),
    "incident_link_upsert": ControlCheck(UpsertIncidentLink.check),
    "incident_link_get": ControlCheck(GetIncidentLinks.check),
}


#: Each declared op the handle answers -> its route to the actor that answers it.
_ROUTES: Mapping[str, _Route] = {
    "snapshot": SupervisorHandle._snapshot,
    "plan": SupervisorHandle._ask_retirement,
    "apply": SupervisorHandle._ask_retirement,
    "reap_plan": SupervisorHandle._reap,
    "reap_apply": SupervisorHandle._reap,
    **{op: _control_route(entry) for op, entry in _CONTROL.items()},
}
#: Ops that declare two tasks: the one a request asks for.
_TASK_OF: Mapping[str, Callable[[Any], str]] = {
    "allocate": lambda r: "allocate_apply" if r.apply else "allocate_preview",
}


def _task_of(request: Request) -> str | None:
    """The task ``request`` asks about, where its op declares two (else the op's one)."""
    pick = _TASK_OF.get(request.op)
    return pick(request) if pick is not None else None


#: What a denial of a retirement op says besides its code (as its other refusals do).
_DENIED_WITH: Mapping[str, Mapping[str, Any]] = {
    op: {"retired_count": 0} for op in ("snapshot", "plan", "apply")
}
