"""The reap actor: plan from a census taken now, apply as a compare-and-swap on the plan token.

Apply takes a fresh census, recomputes the plan and reaps nothing unless its token is the
one the caller reviewed; then, past the mass guard and a fresh check of the caller's grant,
it reaps every target at once (each verified against its planned incarnation just before
its first signal, SIGTERM, the grace, SIGKILL) and commits one audit event per target
before it answers. The periodic round, off by default, is the same plan and apply under
the supervisor's own profile, never past the mass guard.
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import InitVar, dataclass
from typing import Any, assert_never

import anyio
from anyio.abc import TaskGroup

from actors.audit import audit_refusal, mark_unrecorded, write_audit
from actors.calls import Call
from actors.census.inbox import CensusInbox, TakeCensus
from actors.mailbox import Actor, Inbox, Outbox, Reply, post, reply_with
from actors.reap.inbox import (
    ReapInbox,
    ReapTick,
    SupersededTick,
)
from actors.reap.records import (
    REAP_ACTION,
    applied_answer,
    reap_refusal,
    target_event,
)
from actors.reap.trees import LocalProcesses, ProcessOps, TargetResult, reap_target
from actors.retirement.records import Refused
from actors.writer.inbox import WriterInbox
from supervisor.clock import Clock
from supervisor.errors import PermissionDenied, SupervisorError
from supervisor.observe.logs import get_logger
from supervisor.operations.declared import ReapApplyRequest, ReapPlanRequest
from supervisor.operations.grants import ProfileLookup, regrant
from supervisor.policy.control.permissions import Profile
from supervisor.policy.retirement.apply_rules import (
    DEFAULT_MASS_GUARD_FLOOR,
    DEFAULT_MASS_GUARD_SHARE,
)
from supervisor.policy.servers.census import Census
from supervisor.policy.servers.reap_plan import (
    ReapEntry,
    ReapPlan,
    plan_reap,
    plan_superseded_stop,
    token_includes_superseded,
)
from supervisor.policy.servers.reap_rules import (
    CODE_CENSUS_UNAVAILABLE,
    CODE_MASS_GUARD,
    CODE_PLAN_CHANGED,
    OUTCOME_NOTHING_TO_REAP,
    check_reap_guard,
    plan_changed_reasons,
)
from supervisor.policy.servers.reap_view import reap_plan_dict

__all__ = ["ReapActor", "ReapSettings"]

_log = get_logger()

#: The permission task whose grant an apply needs, re-read just before the first signal:
#: the retirement apply's (the retire grant).
_APPLY_TASK = "apply"


@dataclass(frozen=True, slots=True, kw_only=True)
class ReapSettings:
    grace_seconds: float = 5.0
    kill_wait_seconds: float = 5.0
    poll_seconds: float = 0.05
    auto_enabled: bool = False
    auto_interval_seconds: float = 300.0
    auto_profile: str = "supervisor"
    mass_guard_share: float = DEFAULT_MASS_GUARD_SHARE
    mass_guard_floor: int = DEFAULT_MASS_GUARD_FLOOR
    #: Targets reaped at once; each waits out its own grace, so an apply of many orphans
    #: takes about one grace, not one per target.
    concurrency: int = 64
    #: How long a census may take before the plan or apply is refused (a hang guard: a
    #: census that never answers must not wedge the reap).
    census_timeout_seconds: float = 60.0
    #: ``[servers] stop_superseded_after_seconds``: stop a superseded copy once it has been
    #: idle this long since its newer copy started (0: off, only reported).
    stop_superseded_after_seconds: float = 0.0
    #: How often the opt-in looks for superseded copies that are due.
    superseded_check_seconds: float = 30.0


@dataclass(kw_only=True, eq=False, repr=False)
class ReapActor(Actor[ReapInbox]):
    """Answers reap plans and applies; asks the census for the facts, the writer for audit."""

    inbox: Inbox[ReapInbox]
    census: Outbox[CensusInbox] | None
    writer: Outbox[WriterInbox]
    clock: Clock
    profiles: ProfileLookup
    settings: InitVar[ReapSettings | None] = None
    processes: InitVar[ProcessOps | None] = None
    protected: InitVar[frozenset[int] | None] = None

    def __post_init__(
        self,
        settings: ReapSettings | None,
        processes: ProcessOps | None,
        protected: frozenset[int] | None,
    ) -> None:
        self._settings = settings or ReapSettings()
        self._processes = processes or LocalProcesses()
        # The supervisor and whatever started it are never part of a reaped tree.
        self._protected = protected if protected is not None else frozenset(_own_pids())
        # One apply at a time, manual or periodic: each compares against the host as it is.
        self._applying = anyio.Lock()

    async def on_start(self, tg: TaskGroup) -> None:
        # The periodic round is a task of its own: a plan asked meanwhile is still answered.
        if self._settings.auto_enabled:
            tg.start_soon(self._auto_timer)
        if self._settings.stop_superseded_after_seconds > 0:
            tg.start_soon(self._superseded_timer)

    async def on_receive(self, message: ReapInbox, tg: TaskGroup) -> None:
        match message:
            case Call(op="reap_plan"):
                work = self.plan(message)
            case Call():
                work = self.apply(message)
            case ReapTick():
                work = self.auto_reap()
            case SupersededTick():
                work = self.stop_superseded()
            case _:
                assert_never(message)
        if message.reply is None:
            await self._refused_as_answer(work)
            return
        # A failure closes the slot unanswered: the asker raises ActorStopped.
        await reply_with(message.reply, self._refused_as_answer(work))

    @staticmethod
    async def _refused_as_answer(work: Awaitable[Mapping[str, Any]]) -> Mapping[str, Any]:
        try:
            return await work
        except Refused as refused:
            return refused.result

    # --- plan ---------------------------------------------------------------------------

    async def plan(self, call: Call) -> Mapping[str, Any]:
        """The plan of a census taken now (the caller's read grant was decided at entry);
        ``include`` names the kinds of kept servers to plan too (superseded)."""
        include = call.request_as(ReapPlanRequest).include
        superseded = "superseded" in (include or ())
        plan = await self._plan(call.profile, include_superseded=superseded)
        answer = reap_plan_dict(plan)
        answer["profile"] = call.profile.name if call.profile else None
        return answer

    async def _plan(self, profile: Profile | None, *, include_superseded: bool) -> ReapPlan:
        census = await self._take_census(profile)
        return plan_reap(census, protected=self._protected, include_superseded=include_superseded)

    async def _take_census(self, profile: Profile | None) -> Census:
        if self.census is None:
            reason = "server discovery (the census) does not run in this supervisor"
        else:
            reply: Reply[Census] = Reply()
            try:
                await post(self.census, TakeCensus(fresh=True, reply=reply), actor="census")
                timeout = self._settings.census_timeout_seconds
                return await reply.wait(actor="census", timeout=timeout)
            except SupervisorError as exc:
                reason = f"the census could not be taken: {exc.code}: {exc.detail}"
            except TimeoutError as exc:
                reason = f"the census could not be taken: {exc}"
        raise await self._refused(profile, reap_refusal(CODE_CENSUS_UNAVAILABLE, [reason]))

    async def _refused(self, profile: Profile | None, answer: dict[str, Any]) -> Refused:
        """The refusal ``answer``, audited (committed), to raise as the answer."""
        _log.warning("reap_refused", code=answer["code"], reasons=answer["reasons"])
        await audit_refusal(self.writer, profile, REAP_ACTION, answer, at=self.clock.now())
        return Refused(answer)

    # --- apply --------------------------------------------------------------------------

    async def apply(self, call: Call) -> Mapping[str, Any]:
        request = call.request_as(ReapApplyRequest)
        async with self._applying:
            return await self._apply(
                call.profile, request.plan_token, override=bool(request.override_mass_guard)
            )

    async def _apply(
        self, profile: Profile | None, token: str, *, override: bool, planner: _Planner = None
    ) -> Mapping[str, Any]:
        # The token says whether its plan included superseded servers: the same plan again
        # (the opt-in stop passes its own planner: the same plan as its round's).
        if planner is None:
            plan = await self._plan(profile, include_superseded=token_includes_superseded(token))
        else:
            plan = await planner(profile)
        moved = plan_changed_reasons(token, plan)
        if moved is not None:
            refused = reap_refusal(
                CODE_PLAN_CHANGED,
                moved,
                current_plan_token=plan.plan_token,
                current_target_count=len(plan.targets),
            )
            raise await self._refused(profile, refused)
        if not plan.targets:
            return _nothing_to_reap(plan)
        s = self._settings
        guard = check_reap_guard(plan, max_share=s.mass_guard_share, floor=s.mass_guard_floor)
        if guard is not None and not override:
            numbers = {"would_reap": guard.would_reap, "servers": guard.servers}
            raise await self._refused(
                profile, reap_refusal(CODE_MASS_GUARD, [guard.reason], **numbers)
            )
        denied = regrant(self.profiles, profile.name if profile else None, REAP_ACTION)
        if denied is not None:
            reason = f"{_APPLY_TASK} refused just before the first signal: {denied}"
            raise await self._refused(
                profile, reap_refusal(PermissionDenied.code, [reason], denied=True)
            )
        results = await self._reap_all(plan.targets)
        answer = applied_answer(token, results)
        if guard is not None:
            answer["mass_guard_overridden"] = True
        await self._audit_targets(profile, token, results, answer)
        return answer

    async def _reap_all(self, targets: Sequence[ReapEntry]) -> list[TargetResult]:
        s = self._settings
        results: list[TargetResult | None] = [None] * len(targets)
        limiter = anyio.CapacityLimiter(s.concurrency)

        async def one(index: int, entry: ReapEntry) -> None:
            async with limiter:
                results[index] = await reap_target(
                    entry,
                    ops=self._processes,
                    clock=self.clock,
                    grace=s.grace_seconds,
                    kill_wait=s.kill_wait_seconds,
                    poll=s.poll_seconds,
                )

        async with anyio.create_task_group() as tg:
            for index, entry in enumerate(targets):
                tg.start_soon(one, index, entry)
        return [r for r in results if r is not None]

    async def _audit_targets(
        self,
        profile: Profile | None,
        token: str,
        results: Sequence[TargetResult],
        answer: dict[str, Any],
    ) -> None:
        """One committed audit event per target, written together (one group commit)."""
        failures: list[str | None] = [None] * len(results)

        async def one(index: int, result: TargetResult) -> None:
            pid = result.entry.server.process.pid
            _log.info("reap_target", pid=pid, outcome=result.outcome, signals=result.signals)
            event = target_event(profile, result, plan_token=token, at=self.clock.now())
            failures[index] = await write_audit(self.writer, event)

        async with anyio.create_task_group() as tg:
            for index, result in enumerate(results):
                tg.start_soon(one, index, result)
        for shown, failure in zip(answer["targets"], failures, strict=True):
            if failure is not None:
                shown["audit_recorded"] = False
                mark_unrecorded(answer, "reap", failure)

    # --- the periodic round -------------------------------------------------------------

    async def _auto_timer(self) -> None:
        while True:
            await self.clock.sleep(self._settings.auto_interval_seconds)
            await self._refused_as_answer(self.auto_reap())

    async def auto_reap(self) -> Mapping[str, Any]:
        """Plan, then apply that plan's token under the supervisor's own profile: the same
        compare-and-swap, guard and grant check as an operator's apply, never overridden."""
        profile = self.profiles.get(self._settings.auto_profile)
        async with self._applying:
            # Never the superseded: stopping those on its own is the guard's opt-in.
            plan = await self._plan(profile, include_superseded=False)
            if not plan.targets:
                return _nothing_to_reap(plan)
            return await self._apply(profile, plan.plan_token, override=False)

    async def _superseded_timer(self) -> None:
        while True:
            await self.clock.sleep(self._settings.superseded_check_seconds)
            await self._refused_as_answer(self.stop_superseded())

    async def stop_superseded(self) -> Mapping[str, Any]:
        """The opt-in stop: plan the superseded copies idle past the configured time since
        their newer copy started, then apply that plan under the supervisor's own profile,
        with the same compare-and-swap, guard and grant check as any apply."""
        after = self._settings.stop_superseded_after_seconds
        if after <= 0:  # off: the copies are only reported
            return _nothing_to_reap(plan_reap(Census(servers=(), taken_at=0.0)))

        async def planner(profile: Profile | None) -> ReapPlan:
            census = await self._take_census(profile)
            return plan_superseded_stop(census, after_seconds=after, protected=self._protected)

        profile = self.profiles.get(self._settings.auto_profile)
        async with self._applying:
            plan = await planner(profile)
            if not plan.targets:
                return _nothing_to_reap(plan)
            return await self._apply(profile, plan.plan_token, override=False, planner=planner)


_Planner = Callable[[Profile | None], Awaitable[ReapPlan]] | None


def _nothing_to_reap(plan: ReapPlan) -> dict[str, Any]:
    return {
        "success": True,
        "outcome": OUTCOME_NOTHING_TO_REAP,
        "plan_token": plan.plan_token,
        "target_count": 0,
        "reaped_count": 0,
        "rss_bytes_freed": 0,
        "targets": [],
        "mutation_performed": False,
    }


def _own_pids() -> set[int]:
    """This process and its parent (a wrapper, a service manager, a test runner)."""
    return {pid for pid in (os.getpid(), os.getppid()) if pid > 1}
