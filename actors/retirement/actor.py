"""Snapshot, plan and apply: permission gates, fresh evidence and the audit trail."""

from __future__ import annotations

from collections.abc import Awaitable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, assert_never

from anyio.abc import TaskGroup

from actors.audit import audit_event, mark_unrecorded, write_audit
from actors.calls import Call
from actors.lease_watch import LeaseWatchInbox
from actors.liveness.inbox import LivenessInbox
from actors.mailbox import Actor, Inbox, Outbox, Reply, ask, reply_with
from actors.replies import ApplyOutcome, FleetCounts
from actors.retirement.apply_gates import plan_actions, token_of
from actors.retirement.apply_tx import ApplyRetirement
from actors.retirement.counts import KeptCounts
from actors.retirement.evidence import Facts
from actors.retirement.inbox import AutoRetireTick, FleetCountsQuery, RetirementInbox
from actors.retirement.plan_columns import PlanColumns
from actors.retirement.plan_reads import (
    HistoryReads,
    PlanInputs,
    entry_builder,
    list_entries,
    read_plan_inputs,
    rescope,
)
from actors.retirement.records import Refused as _Refused
from actors.retirement.records import orphan_fields, post_apply_view
from actors.retirement.records import refusal as _refusal
from actors.writer.inbox import WriterInbox
from supervisor.clock import Clock
from supervisor.errors import SupervisorError
from supervisor.observe.logs import get_logger
from supervisor.observe.metrics import Metrics
from supervisor.operations.declared import ApplyRequest, SnapshotRequest
from supervisor.operations.grants import ProfileLookup, grant, regrant_later
from supervisor.operations.requests import given, request
from supervisor.policy.control.permissions import Profile
from supervisor.policy.evidence import PidEvidence
from supervisor.policy.fleet.snapshot import FleetSnapshot, snapshot_fleet
from supervisor.policy.incremental.memo import PlanMemo
from supervisor.policy.incremental.planner import plan_retirement
from supervisor.policy.render import (
    plan_view_dict,
    snapshot_dict,
)
from supervisor.policy.retirement.fingerprints import registry_fingerprint
from supervisor.store.base import Store
from supervisor.system.gc_pause import gc_paused
from supervisor.system.probes import ProbeBackend
from supervisor.wire import PlanQuery

__all__ = ["RetirementActor", "RetirementSettings"]

_log = get_logger()


@dataclass(frozen=True, slots=True, kw_only=True)
class RetirementSettings:
    canonical_repository: str | None = None
    auto_enabled: bool = False
    auto_interval_seconds: float = 300.0
    auto_profile: str = "supervisor"


@dataclass(kw_only=True, eq=False, repr=False)
class RetirementActor(Actor[RetirementInbox]):
    """Answers snapshot, plan and apply; the writer runs apply's transaction."""

    inbox: Inbox[RetirementInbox]
    writer: Outbox[WriterInbox]
    liveness: Outbox[LivenessInbox]
    lease_watch: Outbox[LeaseWatchInbox]
    store: Store
    clock: Clock
    probes: ProbeBackend
    profiles: ProfileLookup
    settings: RetirementSettings = field(default_factory=RetirementSettings)
    metrics: Metrics = field(default_factory=Metrics)

    def __post_init__(self) -> None:
        self._facts = Facts(
            liveness=self.liveness,
            lease_watch=self.lease_watch,
            store=self.store,
            probes=self.probes,
        )
        # Row facts from earlier plans: rows unchanged since then are not re-derived.
        # Identity is trusted: the store hands out a new mapping for every new row
        # version and nothing here edits one (Store.read_registry_view).
        self._plan_memo = PlanMemo(trust_identity=True)
        # Per-row inputs of the evidence request, kept between plans the same way.
        self._plan_columns = PlanColumns()
        self._history_reads = HistoryReads()
        self._counts = KeptCounts(
            store=self.store,
            liveness=self.liveness,
            facts=self._facts,
            clock=self.clock,
            host_id=self.probes.host_id,
        )

    async def on_start(self, tg: TaskGroup) -> None:
        if self.settings.auto_enabled:
            tg.start_soon(self._auto_timer)

    async def on_receive(self, message: RetirementInbox, tg: TaskGroup) -> None:
        match message:
            case Call(op="snapshot"):
                await reply_with(message.reply, self._guarded(self.snapshot(message)))
            case Call():  # plan or apply
                with message.reply:
                    op = message.op
                    work = self.plan(message) if op == "plan" else self.apply(message)
                    result = await self._guarded(work)
                    self.metrics.count_outcome(op, result.get("outcome"))
                    message.reply.send(result)
            case FleetCountsQuery():
                with message.reply:
                    try:
                        counts = await self.fleet_counts()
                    except Exception as exc:
                        # A scrape must not crash the actor: unanswered, the asker
                        # gets ActorStopped and renders the gauges as unavailable.
                        _log.warning("fleet_counts_failed", error=repr(exc))
                    else:
                        message.reply.send(counts)
            case AutoRetireTick():
                result = await self._guarded(self.auto_retire())
                # A round that stopped at its plan is counted as a plan, else as an apply.
                kind = "plan" if "candidate_count" in result else "apply"
                self.metrics.count_outcome(kind, result.get("outcome"))
                if message.reply is not None:
                    with message.reply:
                        message.reply.send(result)
            case _:
                assert_never(message)

    @staticmethod
    async def _guarded(work: Awaitable[Mapping[str, Any]]) -> Mapping[str, Any]:
        try:
            result = await work
        except _Refused as refused:
            return refused.result
        except SupervisorError as exc:
            return _refusal(exc.code, f"{exc.code}: {exc.detail}")
        return result

    async def _authorize(self, profile: Profile | None, op: str) -> None:
        """The automatic round's own entry: its profile's grant, as every caller's is."""
        denial = grant(profile, op)
        if denial is not None:
            refused = _Refused(denial.refusal(retired_count=0))
            await self._audit_refusal(profile, op, refused)
            raise refused

    async def _audit(
        self, profile: Profile | None, action: str, result: Mapping[str, Any]
    ) -> str | None:
        """Write one audit event; None once committed, else why it could not be."""
        event = audit_event(profile, action, result, at=self.clock.now())
        detail = event["detail"]
        _log.info("audit", **{**detail, **{k: v for k, v in event.items() if k != "detail"}})
        return await write_audit(self.writer, event)

    async def _audit_refusal(self, profile: Profile | None, action: str, refused: _Refused) -> None:
        failure = await self._audit(profile, action, refused.result)
        if failure is not None:
            mark_unrecorded(refused.result, "refusal", failure)

    # --- requests -------------------------------------------------------------------

    async def snapshot(self, call: Call) -> Mapping[str, Any]:
        """The fleet classified (the caller's grant was decided at entry: ``grant``)."""
        request = call.request_as(SnapshotRequest)
        if request.include_history:
            # Every row, so historical_workers lists them; history=None says so.
            inputs = PlanInputs(rows=await self.store.read_registrations(), history=None)
        else:
            inputs = await read_plan_inputs(self.store)
        evidence = await self._facts.for_rows(inputs.rows)
        snap = await self._snapshot(
            inputs,
            canonical_repository=request.canonical_repository,
            expected_live_revision=request.expected_live_revision,
            manifest=tuple(request.expected_manifest or ()),
            evidence=evidence,
        )
        result = snapshot_dict(snap)
        result.update(orphan_fields(self._facts.orphans(inputs.rows, evidence)))
        result["registry_fingerprint"] = registry_fingerprint(inputs.rows, inputs.history)
        return result

    async def fleet_counts(self) -> FleetCounts:
        """Registrations by status, ownership and namespace: the metrics gauges' source."""
        return await self._counts.read()

    async def _snapshot(
        self,
        inputs: PlanInputs,
        *,
        canonical_repository: str | None,
        expected_live_revision: str | None = None,
        manifest: Sequence[Any] = (),
        evidence: Mapping[int, PidEvidence] | None = None,
    ) -> FleetSnapshot:
        if evidence is None:
            evidence = await self._facts.for_rows(inputs.rows)
        with gc_paused():
            return snapshot_fleet(
                inputs.rows,
                now=self.clock.now(),
                evidence=evidence,
                current_host_id=self.probes.host_id(),
                canonical_repository=canonical_repository or self.settings.canonical_repository,
                expected_live_revision=expected_live_revision,
                expected_manifest=manifest,
                historical_count=inputs.history.count if inputs.history else 0,
            )

    async def plan(self, call: Call) -> Mapping[str, Any]:
        listing = given(call.request)
        repository = listing.pop("canonical_repository", None)
        profile = call.profile
        try:
            result = await self._plan(repository, PlanQuery(**listing))
        except _Refused as refused:
            await self._audit_refusal(profile, "plan", refused)
            raise
        result["profile"] = profile.name if profile else None
        result["role_kind"] = profile.role_kind if profile else None
        failure = await self._audit(profile, "plan", result)
        if failure is not None:
            # Every plan is in the trail; one that cannot be is not handed out.
            raise _Refused(
                _refusal(
                    "audit_unrecorded",
                    f"the plan could not be written to the audit trail (fail closed): {failure}",
                    audit_recorded=False,
                )
            )
        return result

    async def _plan(self, canonical_repository: str | None, query: PlanQuery) -> dict[str, Any]:
        owners = await self._facts.owners()
        inputs = await read_plan_inputs(self.store, self._plan_columns.irregular)
        canon_repo = canonical_repository or self.settings.canonical_repository
        pids, clients = self._plan_columns.probe_list(inputs.rows, self.probes.host_id())
        evidence = await self._facts.probe(pids)
        now, fencing = self.clock.now(), self._facts.fencing()
        with gc_paused():
            plan = plan_retirement(
                inputs.rows,
                now=now,
                evidence=evidence,
                fencing=fencing,
                canonical_repository=canon_repo,
                protected=owners.owners,
                memo=self._plan_memo,
                history=inputs.history,
            )
        plan = await rescope(self.store, plan, inputs, self._plan_memo, self._history_reads)
        build = entry_builder(
            now=now, evidence=evidence, fencing=fencing, canonical_repository=canon_repo
        )
        reads = None if inputs.history is None else (self._history_reads, inputs.history)
        listing = await list_entries(self.store, plan, query, build, reads)
        with gc_paused():
            result = plan_view_dict(
                plan,
                query,
                listed=listing.listed,
                next_cursor=listing.next_cursor,
                extra_examples=listing.extra_examples,
            )
        # A finding, not a retirement: a live orphan stays preserved by its live pid.
        result.update(orphan_fields(self._facts.orphans(inputs.rows, evidence, clients)))
        result.update(plan_actions(plan, owners))
        return result

    async def apply(self, call: Call) -> Mapping[str, Any]:
        request = call.request_as(ApplyRequest)
        profile = call.profile
        try:
            mode, token = token_of(request)
            await self._facts.gates()
        except _Refused as refused:
            await self._audit_refusal(profile, "apply", refused)
            raise
        profile_name = profile.name if profile else ""
        outcome: ApplyOutcome = await ask(
            self.writer,
            lambda reply: ApplyRetirement(
                mode=mode,
                expected_token=token,
                expected_candidate_fingerprint=request.candidate_fingerprint,
                worker_identities=tuple(request.worker_identities or ()),
                canonical_repository=request.canonical_repository
                or self.settings.canonical_repository,
                retired_by=profile_name or "unknown",
                override_mass_guard=bool(request.override_mass_guard),
                recheck_grant=regrant_later(self.profiles, profile_name, "apply"),
                audit=lambda result: audit_event(profile, "apply", result, at=self.clock.now()),
                reply=reply,
            ),
            actor="registry_writer",
        )
        result = dict(outcome.result)
        result["profile"] = profile_name or None
        result["role_kind"] = profile.role_kind if profile else None
        if not outcome.audited:
            # Nothing committed, so the trail has no row of this apply yet: add one.
            failure = await self._audit(profile, "apply", result)
            if failure is not None:
                mark_unrecorded(result, "apply", failure)
        result["post_apply"] = await self._post_apply(result, request.canonical_repository)
        return result

    async def _post_apply(
        self, result: Mapping[str, Any], canonical_repository: str | None
    ) -> dict[str, Any]:
        try:
            inputs = await read_plan_inputs(self.store)
            snap = await self._snapshot(inputs, canonical_repository=canonical_repository)
        except Exception as exc:
            return {"available": False, "reasons": [f"post-apply view unavailable: {exc}"]}
        return post_apply_view(registry_fingerprint(inputs.rows, inputs.history), snap, result)

    # --- automatic retirement -----------------------------------------------------

    async def _auto_timer(self) -> None:
        while True:
            await self.clock.sleep(self.settings.auto_interval_seconds)
            await self._guarded(self.auto_retire())

    async def auto_retire(self) -> Mapping[str, Any]:
        """Plan then apply under the supervisor's own profile: same gates, same guard."""
        profile = self.profiles.get(self.settings.auto_profile)
        await self._authorize(profile, "plan")
        own = Call(profile=profile, request=request("plan"), reply=Reply.discarding())
        plan = await self.plan(own)
        if not plan.get("success") or not plan.get("candidate_count"):
            return plan
        # Scoped: in a fleet that heartbeats, the whole-registry token moves
        # between any plan and apply, so a strict automatic apply would almost
        # never pass.
        await self._authorize(profile, "apply")
        scoped = request(
            "apply",
            scope_fingerprint=str(plan["scope_fingerprint"]),
            candidate_fingerprint=str(plan["candidate_fingerprint"]),
            worker_identities=tuple(plan["candidate_worker_identities"]),
        )
        return await self.apply(Call(profile=profile, request=scoped, reply=Reply.discarding()))
