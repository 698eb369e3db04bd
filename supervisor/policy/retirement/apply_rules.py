"""Pure steps of a compare-and-swap apply: token checks, target revalidation, guard, re-probe."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from supervisor.policy.canonical import canon
from supervisor.policy.evidence import PidEvidence
from supervisor.policy.fleet.liveness import STATUS_ACTIVE, STATUS_RETIRED
from supervisor.policy.incarnation import same_incarnation

from .fingerprints import (
    candidate_fingerprint,
    registry_fingerprint,
    scope_fingerprint,
    scope_rows,
)
from .history import HistorySummary
from .plan import PlanEntry, RetirementPlan
from .reasons import (
    OUTCOME_ALREADY_RETIRED,
    OUTCOME_CANDIDATE_SUBSET,
    OUTCOME_CANDIDATES_MOVED,
    OUTCOME_MASS_GUARD,
    OUTCOME_REGISTRY_MOVED,
    OUTCOME_SCOPE_MOVED,
    REASON_LIVENESS_REPROBE,
    REASON_NOT_IN_PLAN,
    REASON_ROW_MISSING,
)

__all__ = [
    "DEFAULT_MASS_GUARD_FLOOR",
    "DEFAULT_MASS_GUARD_SHARE",
    "MASS_GUARD_FLOOR_KEY",
    "MASS_GUARD_SHARE_KEY",
    "OUTCOME_MASS_GUARD",
    "ApplyPrecheck",
    "MassGuard",
    "TargetVerdict",
    "TokenMode",
    "check_mass_guard",
    "precheck_apply",
    "reprobe_verdict",
]

TokenMode = Literal["strict", "scoped"]

#: The settings behind the mass guard, named as an operator finds them in supervisor.toml.
MASS_GUARD_SHARE_KEY = "retirement.mass_guard_share"
MASS_GUARD_FLOOR_KEY = "retirement.mass_guard_floor"
#: Half of a host's active rows may go at once ...
DEFAULT_MASS_GUARD_SHARE = 0.5
#: ... and any number up to this many whatever the share: five client launches of five
#: namespace workers each, so one machine whose clients crashed is cleaned up unasked.
DEFAULT_MASS_GUARD_FLOOR = 25


@dataclass(frozen=True, slots=True, kw_only=True)
class TargetVerdict:
    """Why one requested identity was not retired."""

    worker_identity: str
    reason_code: str
    detail: str
    evidence: Mapping[str, Any] | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ApplyPrecheck:
    """Result of the in-transaction checks that run before any write.

    ``outcome`` is set when the whole apply must stop with zero writes;
    otherwise ``targets`` are the rows to retire, in request order.
    """

    outcome: str | None
    compared_token: str
    current_token: str
    current_candidate_fingerprint: str | None
    targets: tuple[Mapping[str, Any], ...]
    target_entries: tuple[PlanEntry, ...]
    preserved: tuple[TargetVerdict, ...]
    reason: str
    #: Candidates of the plan that the request left out (``candidate_subset_requested``).
    omitted_candidates: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class MassGuard:
    """Numbers behind a mass-retirement refusal."""

    would_retire: int
    host_active_rows: int
    max_share: float
    floor: int
    reason: str


def _token(
    mode: TokenMode,
    rows: Sequence[Mapping[str, Any]],
    requested: Sequence[str],
    history: HistorySummary | None,
) -> str:
    if mode == "strict":
        return registry_fingerprint(rows, history)
    return scope_fingerprint(rows, requested)


def precheck_apply(
    rows: Sequence[Mapping[str, Any]],
    *,
    mode: TokenMode,
    expected_token: str,
    expected_candidate_fingerprint: str,
    requested: Sequence[str],
    fresh_plan: RetirementPlan,
    history: HistorySummary | None = None,
    unlisted_entries: Mapping[str, PlanEntry] | None = None,
) -> ApplyPrecheck:
    """Compare tokens against the re-read rows and the recomputed plan; revalidate each target.

    ``fresh_plan`` must have been computed from exactly ``rows`` with freshly
    read lease owners and fresh pid evidence. With ``history`` (the store's
    digest of every historical row), ``rows`` are the active rows plus at least
    every historical row that is requested or shares an identity key with a
    requested row, and ``unlisted_entries`` holds the plan entries of the
    requested historical rows the plan counted without listing.
    """
    token_name = "registry_fingerprint" if mode == "strict" else "scope_fingerprint"
    current = _token(mode, rows, requested, history)
    by_identity = {canon(row.get("worker_identity")): row for row in rows}

    def stop(
        outcome: str,
        reason: str,
        candidate_fp: str | None = None,
        omitted: tuple[str, ...] = (),
    ) -> ApplyPrecheck:
        return ApplyPrecheck(
            outcome=outcome,
            compared_token=token_name,
            current_token=current,
            current_candidate_fingerprint=candidate_fp,
            targets=(),
            target_entries=(),
            preserved=tuple(
                TargetVerdict(worker_identity=w, reason_code=outcome, detail=reason)
                for w in requested
            ),
            reason=reason,
            omitted_candidates=omitted,
        )

    def subset_stop() -> ApplyPrecheck | None:
        # Only the whole candidate set a plan reviewed may be applied: the mass
        # guard judges one request, so slicing a plan into small requests would walk
        # past it, and the tokens vouch for the set, not for any part of it.
        if fresh_plan.candidate_fingerprint != expected_candidate_fingerprint:
            return None
        wanted = set(requested)
        omitted = tuple(c for c in fresh_plan.candidate_worker_identities if c not in wanted)
        if not omitted:
            return None
        total = len(fresh_plan.candidates)
        more = len(omitted) - 10
        shown = ", ".join(omitted[:10]) + (f" and {more} more" if more > 0 else "")
        return stop(
            OUTCOME_CANDIDATE_SUBSET,
            f"the request leaves out {len(omitted)} of the plan's {total} candidates ({shown}); "
            "apply takes a plan's whole candidate set or nothing, so retiring nothing",
            fresh_plan.candidate_fingerprint,
            omitted,
        )

    if current != expected_token:
        if requested and all(
            str((by_identity.get(w) or {}).get("status") or "") == STATUS_RETIRED for w in requested
        ):
            return stop(OUTCOME_ALREADY_RETIRED, "every requested row is already retired")
        # A scope token is computed over the requested identities, so a subset moves it
        # too; say what actually happened rather than blame the registry.
        if mode == "scoped" and (subset := subset_stop()) is not None:
            return subset
        moved = OUTCOME_REGISTRY_MOVED if mode == "strict" else OUTCOME_SCOPE_MOVED
        return stop(moved, f"{token_name} moved between plan and apply; retiring nothing")

    if mode == "strict":
        current_candidates = fresh_plan.candidate_fingerprint
    else:
        # Scoped mode pins only the decision scope: a row dying elsewhere in the
        # fleet must not move the candidate token of an unrelated apply.
        in_scope = {canon(r.get("worker_identity")) for r in scope_rows(rows, requested)}
        current_candidates = candidate_fingerprint(
            r for r in fresh_plan.candidate_rows if canon(r.get("worker_identity")) in in_scope
        )
    if current_candidates != expected_candidate_fingerprint:
        return stop(
            OUTCOME_CANDIDATES_MOVED,
            "the candidate set changed between plan and apply; retiring nothing",
            current_candidates,
        )
    if mode == "strict" and (subset := subset_stop()) is not None:
        return subset

    eligible = {str(c.worker_identity): c for c in fresh_plan.candidates}
    targets: list[Mapping[str, Any]] = []
    entries: list[PlanEntry] = []
    preserved: list[TargetVerdict] = []
    for identity in requested:
        row = by_identity.get(identity)
        if row is None:
            preserved.append(
                TargetVerdict(
                    worker_identity=identity,
                    reason_code=REASON_ROW_MISSING,
                    detail="no registration has this identity",
                )
            )
            continue
        if identity not in eligible:
            entry = fresh_plan.reason_for(identity) or (unlisted_entries or {}).get(identity)
            preserved.append(
                TargetVerdict(
                    worker_identity=identity,
                    reason_code=entry.reason_code if entry else REASON_NOT_IN_PLAN,
                    detail=entry.detail if entry else "not a candidate of the current plan",
                    evidence=entry.evidence if entry else None,
                )
            )
            continue
        targets.append(row)
        entries.append(eligible[identity])
    return ApplyPrecheck(
        outcome=None,
        compared_token=token_name,
        current_token=current,
        current_candidate_fingerprint=current_candidates,
        targets=tuple(targets),
        target_entries=tuple(entries),
        preserved=tuple(preserved),
        reason="",
    )


def check_mass_guard(
    would_retire: int,
    rows: Sequence[Mapping[str, Any]],
    *,
    host_id: str | None,
    max_share: float,
    floor: int,
) -> MassGuard | None:
    """Refuse when too much of this host's active fleet would go at once.

    When most of a fleet looks dead at the same moment the observer is more
    likely broken than the fleet. ``floor`` lets a small fleet (one closed
    application's five workers) still be cleaned up.
    """
    host_active = sum(
        1
        for row in rows
        if str(row.get("status") or "") == STATUS_ACTIVE and canon(row.get("host_id")) == host_id
    )
    if would_retire <= floor or would_retire <= max_share * host_active:
        return None
    return MassGuard(
        would_retire=would_retire,
        host_active_rows=host_active,
        max_share=max_share,
        floor=floor,
        reason=(
            f"apply would retire {would_retire} of the {host_active} active rows on this host: "
            f"more than {MASS_GUARD_SHARE_KEY} = {max_share:g} ({max_share:.0%}) of them and "
            f"more than {MASS_GUARD_FLOOR_KEY} = {floor} rows. When this much of a fleet looks "
            "dead at once the observer is more likely broken than the fleet. If these workers "
            "really are gone, repeat this apply with override_mass_guard (the CLI's "
            "--override-mass-guard; it needs the retire grant and is audited), or raise "
            f"{MASS_GUARD_SHARE_KEY} or {MASS_GUARD_FLOOR_KEY} in supervisor.toml and reload "
            "the supervisor (SIGHUP)"
        ),
    )


def reprobe_verdict(row: Mapping[str, Any], probe: PidEvidence) -> TargetVerdict | None:
    """Immediately before the write, the probe must affirmatively say the pid is gone."""
    if probe.alive is False:
        return None
    identity = canon(row.get("worker_identity"))
    if probe.alive is None:
        detail = f"pid {row.get('pid')} could not be re-probed; death is not re-established"
    elif probe.start_time and not same_incarnation(
        probe.start_time, canon(row.get("process_start_time"))
    ):
        detail = (
            f"pid {row.get('pid')} is occupied again (start {probe.start_time!r}, registered "
            f"{row.get('process_start_time')!r}); refusing on a reused or revived pid"
        )
    else:
        detail = f"pid {row.get('pid')} is running again"
    return TargetVerdict(
        worker_identity=identity, reason_code=REASON_LIVENESS_REPROBE, detail=detail
    )
