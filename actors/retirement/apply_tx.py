"""The retirement compare-and-swap transaction the registry writer runs (docs/operations.md)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from actors.mailbox import Reply
from actors.replies import ApplyOutcome
from actors.retirement.apply_reads import reread_for_apply
from supervisor.clock import Clock
from supervisor.errors import PermissionDenied
from supervisor.policy.evidence import PidEvidence, row_pid
from supervisor.policy.fleet.liveness import STATUS_ACTIVE
from supervisor.policy.retirement.apply_rules import (
    DEFAULT_MASS_GUARD_FLOOR,
    DEFAULT_MASS_GUARD_SHARE,
    MASS_GUARD_FLOOR_KEY,
    MASS_GUARD_SHARE_KEY,
    TargetVerdict,
    TokenMode,
    check_mass_guard,
    precheck_apply,
    reprobe_verdict,
)
from supervisor.policy.retirement.fingerprints import is_history, lease_fingerprint
from supervisor.policy.retirement.pages import terminal_entries
from supervisor.policy.retirement.plan import FencingContext, PlanEntry, protected_from_leases
from supervisor.policy.retirement.planner import plan_retirement
from supervisor.policy.retirement.reasons import (
    OUTCOME_ALREADY_RETIRED,
    OUTCOME_APPLIED,
    OUTCOME_MASS_GUARD,
    OUTCOME_NOTHING_REQUESTED,
    OUTCOME_REFUSED,
    OUTCOME_TRANSACTION_FAILED,
    REASON_ELIGIBLE,
    REASON_ROW_CHANGED,
)
from supervisor.policy.stamps import format_stamp
from supervisor.store.base import Store, WriteTx
from supervisor.system.gc_pause import gc_paused
from supervisor.system.probes import ProbeBackend

__all__ = ["ApplyRetirement", "ApplySettings", "LeaseFenceMoved", "run_apply"]


@dataclass(frozen=True, slots=True, kw_only=True)
class ApplyRetirement:
    """Run the whole compare-and-swap apply in one writer transaction: the writer hands
    this message to ``run_apply`` (below), alone, after the writes queued before it."""

    mode: TokenMode
    expected_token: str
    expected_candidate_fingerprint: str
    worker_identities: tuple[str, ...]
    canonical_repository: str | None
    retired_by: str
    #: Retire even when the mass guard would refuse (recorded in the result and audit).
    override_mass_guard: bool = False
    #: Re-reads the caller's grant; returns a denial reason or ``None``. Called
    #: inside the transaction immediately before the first write, so revoking
    #: the grant mid-call still denies.
    recheck_grant: Callable[[], str | None]
    #: Builds the apply's audit event from its result. The writer appends it inside the
    #: apply's own transaction, so the trail records the retirements exactly when they
    #: commit, and an audit write that fails rolls them back.
    audit: Callable[[Mapping[str, Any]], Mapping[str, Any]]
    reply: Reply[ApplyOutcome]


@dataclass(frozen=True, slots=True, kw_only=True)
class ApplySettings:
    mass_guard_share: float = DEFAULT_MASS_GUARD_SHARE
    mass_guard_floor: int = DEFAULT_MASS_GUARD_FLOOR
    #: Targets re-probed, lease-fenced and written per batch: a handful of round trips
    #: to the database thread per batch instead of two per target.
    write_chunk: int = 128


@dataclass(frozen=True, slots=True, kw_only=True)
class _Env:
    clock: Clock
    probes: ProbeBackend
    settings: ApplySettings


class LeaseFenceMoved(RuntimeError):
    """Leases changed while the transaction was deciding; every remaining decision is void."""


def _base(msg: ApplyRetirement, outcome: str) -> dict[str, Any]:
    token_name = "registry_fingerprint" if msg.mode == "strict" else "scope_fingerprint"
    # Every answer that retired nothing it was asked to carries its stable code.
    code = {} if outcome in (OUTCOME_APPLIED, OUTCOME_ALREADY_RETIRED) else {"code": outcome}
    return {
        "success": True,
        "outcome": outcome,
        **code,
        "mutation_performed": False,
        "retired": [],
        "retired_count": 0,
        "preserved": [],
        "preserved_count": 0,
        "requested_count": len(msg.worker_identities),
        "compared_token": token_name,
        f"expected_{token_name}": msg.expected_token,
        "expected_candidate_fingerprint": msg.expected_candidate_fingerprint,
        "acting_identity": msg.retired_by,
        "reasons": [],
    }


def _verdict_dict(verdict: TargetVerdict) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "worker_identity": verdict.worker_identity,
        "reason_code": verdict.reason_code,
        "detail": verdict.detail,
    }
    if verdict.evidence is not None:
        entry["evidence"] = dict(verdict.evidence)
    return entry


def _evidence_map(
    probes: ProbeBackend, rows: Sequence[Mapping[str, Any]]
) -> dict[int, PidEvidence]:
    pids = sorted(
        {
            pid
            for row in rows
            if str(row.get("status") or "") == STATUS_ACTIVE and (pid := row_pid(row)) is not None
        }
    )
    return {
        seen.pid: PidEvidence(alive=seen.alive, start_time=seen.start_time)
        for seen in probes.probe_many(pids)
    }


async def _write_chunk(
    targets: Sequence[tuple[Mapping[str, Any], PlanEntry]],
    *,
    tx: WriteTx,
    probes: ProbeBackend,
    fence: str,
    stamp: str,
    retired_by: str,
    retired: list[dict[str, Any]],
    preserved: list[dict[str, Any]],
) -> None:
    """Re-probe, lease-fence and CAS-write one batch of targets; results in target order.

    Every target is re-probed just before the batch's writes, and the fence is
    re-checked after the last re-probe and before the first write, so each write
    still follows its own re-probe and a fence check; in between there are only
    other targets' probes and guarded registration writes, none of which can
    move a lease. A probe that says "gone" cannot go stale: the registered
    incarnation, once dead, never runs again.
    """
    refusals: list[dict[str, Any] | None] = []
    writable: list[Mapping[str, Any]] = []
    for row, _entry in targets:
        pid = row_pid(row)
        seen = probes.probe(pid) if pid is not None else None
        refusal = reprobe_verdict(
            row,
            PidEvidence(alive=seen.alive, start_time=seen.start_time)
            if seen is not None
            else PidEvidence(alive=None),
        )
        refusals.append(None if refusal is None else _verdict_dict(refusal))
        if refusal is None:
            writable.append(row)
    if not writable:
        preserved.extend(r for r in refusals if r is not None)
        return
    if lease_fingerprint(await tx.leases(status="active")) != fence:
        raise LeaseFenceMoved("active leases changed inside the retirement transaction")
    matched = iter(
        await tx.retire_guarded_many(
            writable, retired_at=stamp, retired_by=retired_by, reason=REASON_ELIGIBLE
        )
    )
    for (_row, entry), refused in zip(targets, refusals, strict=True):
        if refused is not None:
            preserved.append(refused)
        elif next(matched):
            retired.append(
                {
                    "worker_identity": entry.worker_identity,
                    "reason_code": entry.reason_code,
                    "retired_at": stamp,
                    "retired_by": retired_by,
                    "evidence": dict(entry.evidence),
                }
            )
        else:
            preserved.append(
                {
                    "worker_identity": entry.worker_identity,
                    "reason_code": REASON_ROW_CHANGED,
                    "detail": "guarded update matched no row; the registration changed",
                }
            )


async def run_apply(
    msg: ApplyRetirement,
    *,
    store: Store,
    clock: Clock,
    probes: ProbeBackend,
    settings: ApplySettings,
) -> ApplyOutcome:
    """Everything from the authoritative re-read to the last guarded write, and the audit
    event, in one transaction.

    Any exception, a failed audit write included, rolls the whole transaction back
    and is reported as ``transaction_failed``: a partial write can never be reported
    as success, and no retirement commits without its audit row.
    """
    requested = list(dict.fromkeys(w for w in msg.worker_identities if w.strip()))
    if not requested:
        result = _base(msg, OUTCOME_NOTHING_REQUESTED)
        result["reasons"] = ["no worker identities were given; nothing to retire"]
        return ApplyOutcome(result=result)
    try:
        async with store.write() as tx:
            env = _Env(clock=clock, probes=probes, settings=settings)
            result = await _decide_and_write(msg, requested, tx, env)
            await tx.append_audit(msg.audit(result))
        return ApplyOutcome(result=result, audited=True)
    except Exception as exc:  # rolled back by store.write(); report, never half-claim
        failed = _base(msg, OUTCOME_TRANSACTION_FAILED)
        failed["success"] = False
        failed["reasons"] = [
            f"retirement transaction rolled back, nothing retired: {type(exc).__name__}: {exc}"
        ]
        failed["preserved"] = [
            {
                "worker_identity": w,
                "reason_code": OUTCOME_TRANSACTION_FAILED,
                "detail": "rolled back",
            }
            for w in requested
        ]
        failed["preserved_count"] = len(requested)
        return ApplyOutcome(result=failed)


async def _decide_and_write(
    msg: ApplyRetirement,
    requested: list[str],
    tx: WriteTx,
    env: _Env,
) -> dict[str, Any]:
    probes, settings = env.probes, env.settings
    # The lease fence is captured before the authoritative read so that any
    # lease movement after this point is seen by the per-target re-check.
    fence = lease_fingerprint(await tx.leases(status="active"))
    reread = await reread_for_apply(tx, requested)
    rows = reread.rows
    leases = await tx.leases(status="active")
    fencing = FencingContext(host_id=probes.host_id(), boot_id=probes.boot_id())
    now = env.clock.now()
    evidence = _evidence_map(probes, rows)
    with gc_paused():
        fresh = plan_retirement(
            [row for row in rows if not is_history(row)] if reread.history else rows,
            now=now,
            evidence=evidence,
            fencing=fencing,
            canonical_repository=msg.canonical_repository,
            protected=protected_from_leases(leases),
            history=reread.history,
        )
    unlisted = (
        {
            str(e.worker_identity): e
            for e in terminal_entries(
                reread.requested_history,
                now=now,
                evidence=evidence,
                fencing=fencing,
                canonical_repository=msg.canonical_repository,
            )
        }
        if reread.history
        else None
    )
    pre = precheck_apply(
        rows,
        mode=msg.mode,
        expected_token=msg.expected_token,
        expected_candidate_fingerprint=msg.expected_candidate_fingerprint,
        requested=requested,
        fresh_plan=fresh,
        history=reread.history,
        unlisted_entries=unlisted,
    )
    result = _base(msg, pre.outcome or OUTCOME_APPLIED)
    result["current_token"] = pre.current_token
    result["current_candidate_fingerprint"] = pre.current_candidate_fingerprint
    result["idempotent"] = pre.outcome == "already_retired"
    if pre.outcome is not None:
        result["reasons"] = [pre.reason]
        if pre.omitted_candidates:
            result["omitted_candidates"] = list(pre.omitted_candidates)
        result["preserved"] = [_verdict_dict(v) for v in pre.preserved]
        result["preserved_count"] = len(pre.preserved)
        return result

    guard = check_mass_guard(
        len(pre.targets),
        rows,
        host_id=fencing.host_id,
        max_share=settings.mass_guard_share,
        floor=settings.mass_guard_floor,
    )
    if guard is not None:
        figures = {
            "would_retire": guard.would_retire,
            "host_active_rows": guard.host_active_rows,
            "max_share": guard.max_share,
            "floor": guard.floor,
            "settings": {
                MASS_GUARD_SHARE_KEY: guard.max_share,
                MASS_GUARD_FLOOR_KEY: guard.floor,
            },
        }
        if not msg.override_mass_guard:
            result["outcome"] = result["code"] = OUTCOME_MASS_GUARD
            result["success"] = False
            result["reasons"] = [guard.reason]
            result["mass_guard"] = figures
            return result
        # The operator's explicit decision for this one apply: the answer and the audit
        # row say the guard would have refused, and by how much.
        result["mass_guard_overridden"] = figures

    denial = msg.recheck_grant()
    if denial is not None:
        result["outcome"] = OUTCOME_REFUSED
        result["code"] = PermissionDenied.code
        result["success"] = False
        result["reasons"] = [denial]
        return result

    stamp = format_stamp(now)
    retired: list[dict[str, Any]] = []
    preserved = [_verdict_dict(v) for v in pre.preserved]
    targets = list(zip(pre.targets, pre.target_entries, strict=True))
    chunk = max(1, settings.write_chunk)
    for start in range(0, len(targets), chunk):
        await _write_chunk(
            targets[start : start + chunk],
            tx=tx,
            probes=probes,
            fence=fence,
            stamp=stamp,
            retired_by=msg.retired_by,
            retired=retired,
            preserved=preserved,
        )
    result["retired"] = retired
    result["retired_count"] = len(retired)
    result["preserved"] = preserved
    result["preserved_count"] = len(preserved)
    result["mutation_performed"] = bool(retired)
    result["retired_at"] = stamp if retired else None
    return result
