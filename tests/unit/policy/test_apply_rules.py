"""Pure apply steps: token prechecks (strict and scoped), the mass guard and the re-probe."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pytest

from supervisor.policy.evidence import PidEvidence
from supervisor.policy.retirement import reasons as R
from supervisor.policy.retirement.apply_rules import (
    TokenMode,
    check_mass_guard,
    precheck_apply,
    reprobe_verdict,
)
from supervisor.policy.retirement.fingerprints import candidate_fingerprint, scope_fingerprint
from supervisor.policy.retirement.plan import ProtectedOwners, RetirementPlan

from .rows import HOST, OTHER_HOST, ago, live_row, make_plan, probes, row, start_of

MODES: tuple[TokenMode, ...] = ("strict", "scoped")


def _fleet() -> list[dict[str, Any]]:
    return [row("w-1", pid=101), row("w-2", pid=102), live_row("w-live", pid=103)]


EVIDENCE = probes(dead=[101, 102, 201], alive=[103])


def _token(plan: RetirementPlan, mode: TokenMode) -> str:
    return plan.registry_fingerprint if mode == "strict" else plan.scope_fingerprint


def _precheck(
    plan: RetirementPlan,
    rows: Sequence[Mapping[str, Any]],
    mode: TokenMode,
    *,
    requested: Sequence[str] | None = None,
    evidence: Mapping[int, PidEvidence] = EVIDENCE,
    protected: ProtectedOwners | None = None,
) -> Any:
    return precheck_apply(
        rows,
        mode=mode,
        expected_token=_token(plan, mode),
        expected_candidate_fingerprint=plan.candidate_fingerprint,
        requested=plan.candidate_worker_identities if requested is None else requested,
        fresh_plan=make_plan(rows, evidence=evidence, protected=protected),
    )


@pytest.mark.parametrize("mode", MODES)
def test_unchanged_world_passes_with_every_candidate_as_target(mode: TokenMode) -> None:
    rows = _fleet()
    plan = make_plan(rows, evidence=EVIDENCE)
    result = _precheck(plan, rows, mode)
    assert result.outcome is None
    assert [t["worker_identity"] for t in result.targets] == ["w-1", "w-2"]
    assert [e.reason_code for e in result.target_entries] == [R.REASON_ELIGIBLE] * 2
    assert result.preserved == ()
    assert result.compared_token == (
        "registry_fingerprint" if mode == "strict" else "scope_fingerprint"
    )
    assert result.current_token == _token(plan, mode)
    assert result.current_candidate_fingerprint == plan.candidate_fingerprint


def test_strict_token_moves_on_any_registry_change() -> None:
    rows = _fleet()
    plan = make_plan(rows, evidence=EVIDENCE)
    moved = [*rows, row("w-new", pid=201)]
    result = _precheck(plan, moved, "strict")
    assert result.outcome == R.OUTCOME_REGISTRY_MOVED
    assert result.targets == ()
    assert {p.reason_code for p in result.preserved} == {R.OUTCOME_REGISTRY_MOVED}
    assert result.current_token != plan.registry_fingerprint


def test_scoped_token_moves_when_a_candidate_row_changes() -> None:
    rows = _fleet()
    plan = make_plan(rows, evidence=EVIDENCE)
    moved = [dict(r) for r in rows]
    moved[0]["last_heartbeat_at"] = ago(5000)
    result = _precheck(plan, moved, "scoped")
    assert result.outcome == R.OUTCOME_SCOPE_MOVED
    assert result.targets == ()


def test_scoped_token_moves_when_a_row_joins_the_scope() -> None:
    rows = _fleet()
    plan = make_plan(rows, evidence=EVIDENCE)
    joined = [*rows, row("w-new", pid=201, generation_id="gen-w-1")]
    assert _precheck(plan, joined, "scoped").outcome == R.OUTCOME_SCOPE_MOVED


def test_scoped_ignores_an_unrelated_heartbeat_that_strict_reports() -> None:
    rows = _fleet()
    plan = make_plan(rows, evidence=EVIDENCE)
    beat = [dict(r) for r in rows]
    beat[2]["last_heartbeat_at"] = ago(1)
    assert _precheck(plan, beat, "strict").outcome == R.OUTCOME_REGISTRY_MOVED
    scoped = _precheck(plan, beat, "scoped")
    assert scoped.outcome is None
    assert [t["worker_identity"] for t in scoped.targets] == ["w-1", "w-2"]


def test_scoped_ignores_an_unrelated_new_candidate_that_strict_reports() -> None:
    rows = _fleet()
    plan = make_plan(rows, evidence=EVIDENCE)
    grown = [*rows, row("w-new", pid=201)]
    # The newcomer is itself eligible, but outside the requested scope.
    assert "w-new" in make_plan(grown, evidence=EVIDENCE).candidate_worker_identities
    assert _precheck(plan, grown, "strict").outcome == R.OUTCOME_REGISTRY_MOVED
    scoped = _precheck(plan, grown, "scoped")
    assert scoped.outcome is None
    assert [t["worker_identity"] for t in scoped.targets] == ["w-1", "w-2"]


@pytest.mark.parametrize("mode", MODES)
def test_already_retired_when_every_requested_row_is_retired(mode: TokenMode) -> None:
    rows = _fleet()
    plan = make_plan(rows, evidence=EVIDENCE)
    done = [
        {**r, "status": "retired"} if r["worker_identity"] in {"w-1", "w-2"} else r for r in rows
    ]
    result = _precheck(plan, done, mode)
    assert result.outcome == R.OUTCOME_ALREADY_RETIRED
    assert result.targets == ()


@pytest.mark.parametrize("mode", MODES)
def test_partly_retired_request_is_a_moved_token_not_a_replay(mode: TokenMode) -> None:
    rows = _fleet()
    plan = make_plan(rows, evidence=EVIDENCE)
    half = [{**r, "status": "retired"} if r["worker_identity"] == "w-1" else r for r in rows]
    expected = R.OUTCOME_REGISTRY_MOVED if mode == "strict" else R.OUTCOME_SCOPE_MOVED
    assert _precheck(plan, half, mode).outcome == expected


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(
    "change",
    [
        {"evidence": probes(dead=[102], alive=[101, 103])},
        {"evidence": probes(dead=[102], unknown=[101], alive=[103])},
        {"protected": ProtectedOwners(session_ids=frozenset({"sess-w-1"}))},
    ],
    ids=["pid revived", "pid unprobeable", "lease acquired"],
)
def test_candidate_set_moved_when_the_fresh_verdict_differs(
    mode: TokenMode, change: dict[str, Any]
) -> None:
    rows = _fleet()
    plan = make_plan(rows, evidence=EVIDENCE)
    result = _precheck(plan, rows, mode, **change)
    assert result.outcome == R.OUTCOME_CANDIDATES_MOVED
    assert result.targets == ()
    assert result.current_candidate_fingerprint != plan.candidate_fingerprint
    assert {p.worker_identity for p in result.preserved} == {"w-1", "w-2"}


def test_scoped_candidate_check_ignores_verdicts_outside_the_scope() -> None:
    rows = [*_fleet(), row("w-far", pid=201)]
    plan = make_plan(rows, evidence=EVIDENCE)
    assert plan.candidate_worker_identities == ("w-1", "w-2", "w-far")
    # w-far's process came back: the fleet's candidate set changed, w-1/w-2's scope did not.
    revived = probes(dead=[101, 102], alive=[103, 201])
    strict = _precheck(plan, rows, "strict", evidence=revived)
    assert strict.outcome == R.OUTCOME_CANDIDATES_MOVED
    requested = ("w-1", "w-2")
    result = precheck_apply(
        rows,
        mode="scoped",
        expected_token=scope_fingerprint(rows, requested),
        expected_candidate_fingerprint=candidate_fingerprint(rows[:2]),
        requested=requested,
        fresh_plan=make_plan(rows, evidence=revived),
    )
    assert result.outcome is None
    assert [t["worker_identity"] for t in result.targets] == ["w-1", "w-2"]


def test_missing_registration_and_fresh_reason_for_a_target_outside_the_plan() -> None:
    rows = _fleet()
    plan = make_plan(rows, evidence=EVIDENCE)
    result = _precheck(plan, rows, "strict", requested=["w-1", "w-2", "w-live", "w-ghost"])
    assert result.outcome is None
    assert [t["worker_identity"] for t in result.targets] == ["w-1", "w-2"]
    preserved = {p.worker_identity: p for p in result.preserved}
    assert preserved["w-live"].reason_code == R.REASON_WORKER_LIVE
    assert preserved["w-live"].evidence is not None
    assert preserved["w-ghost"].reason_code == R.REASON_ROW_MISSING
    assert preserved["w-ghost"].evidence is None


def test_target_absent_from_the_fresh_plan_is_not_in_current_plan() -> None:
    # Contract breach guard: the fresh plan must cover the re-read rows; if it does not,
    # an existing row it never judged is refused rather than trusted.
    rows = _fleet()
    plan = make_plan(rows, evidence=EVIDENCE)
    result = precheck_apply(
        rows,
        mode="strict",
        expected_token=plan.registry_fingerprint,
        expected_candidate_fingerprint=plan.candidate_fingerprint,
        requested=["w-1", "w-2", "w-live"],
        fresh_plan=make_plan(rows[:2], evidence=EVIDENCE),
    )
    assert result.outcome is None
    (refused,) = result.preserved
    assert refused.worker_identity == "w-live"
    assert refused.reason_code == R.REASON_NOT_IN_PLAN


def test_scoped_request_wider_than_the_plan_moves_the_scope() -> None:
    # The anchor set is part of the scoped token: an apply must name the plan's exact set.
    rows = _fleet()
    plan = make_plan(rows, evidence=EVIDENCE)
    result = _precheck(plan, rows, "scoped", requested=["w-1", "w-2", "w-live"])
    assert result.outcome == R.OUTCOME_SCOPE_MOVED


# --- the whole candidate set or nothing ------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(
    "requested",
    [["w-1"], ["w-2"], ["w-1", "w-live"], ["w-2", "w-ghost"]],
    ids=["first", "second", "with a live row", "with a missing row"],
)
def test_a_subset_of_the_plans_candidates_is_refused_as_such(
    mode: TokenMode, requested: list[str]
) -> None:
    rows = _fleet()
    plan = make_plan(rows, evidence=EVIDENCE)
    result = _precheck(plan, rows, mode, requested=requested)
    assert result.outcome == R.OUTCOME_CANDIDATE_SUBSET
    assert result.targets == ()
    omitted = tuple(c for c in ("w-1", "w-2") if c not in requested)
    assert result.omitted_candidates == omitted
    assert f"leaves out 1 of the plan's 2 candidates ({omitted[0]})" in result.reason
    assert "whole candidate set" in result.reason
    assert [(p.worker_identity, p.reason_code) for p in result.preserved] == [
        (w, R.OUTCOME_CANDIDATE_SUBSET) for w in requested
    ]


def test_a_scoped_subset_after_the_scope_really_moved_is_scope_moved() -> None:
    # When the plan's candidates no longer match, the subset cannot be proven and the
    # moved scope is what is reported.
    rows = _fleet()
    plan = make_plan(rows, evidence=EVIDENCE)
    moved = [dict(r) for r in rows]
    moved[1]["last_heartbeat_at"] = ago(1)
    result = _precheck(plan, moved, "scoped", requested=["w-1"])
    assert result.outcome == R.OUTCOME_SCOPE_MOVED


# --- mass guard ----------------------------------------------------------------------------


def _host_rows(active: int, *, host: str = HOST, status: str = "active") -> list[dict[str, Any]]:
    return [
        row(f"{host}-{status}-{n}", pid=1000 + n, status=status, host_id=host)
        for n in range(active)
    ]


@pytest.mark.parametrize(
    ("would_retire", "host_active", "floor", "refused"),
    [
        (6, 10, 2, True),  # above share and above floor
        (5, 10, 2, False),  # exactly the share
        (2, 2, 2, False),  # at the floor, even though it is 100%
        (1, 2, 2, False),  # below the floor
        (3, 4, 2, True),
        (3, 0, 2, True),  # nothing active here yet three to retire: the observer is suspect
    ],
)
def test_mass_guard(would_retire: int, host_active: int, floor: int, refused: bool) -> None:
    guard = check_mass_guard(
        would_retire, _host_rows(host_active), host_id=HOST, max_share=0.5, floor=floor
    )
    assert (guard is not None) is refused
    if guard is not None:
        assert guard.would_retire == would_retire
        assert guard.host_active_rows == host_active
        assert guard.max_share == 0.5
        assert guard.floor == floor
        assert f"retire {would_retire} of the {host_active} active rows" in guard.reason
        assert "retirement.mass_guard_share = 0.5 (50%)" in guard.reason
        assert f"retirement.mass_guard_floor = {floor} rows" in guard.reason


def test_mass_guard_counts_only_this_hosts_active_rows() -> None:
    rows = [
        *_host_rows(4),
        *_host_rows(10, host=OTHER_HOST),
        *_host_rows(5, status="released"),
        *_host_rows(3, status="retired"),
    ]
    guard = check_mass_guard(3, rows, host_id=HOST, max_share=0.5, floor=2)
    assert guard is not None
    assert guard.host_active_rows == 4
    assert check_mass_guard(2, rows, host_id=HOST, max_share=0.5, floor=1) is None


# --- re-probe ------------------------------------------------------------------------------


def test_reprobe_dead_is_ok() -> None:
    assert reprobe_verdict(row("w-1", pid=101), PidEvidence(alive=False)) is None


def test_reprobe_names_a_same_tick_reuse_by_its_inode() -> None:
    registered = row("w-1", pid=101, process_start_time=f"{start_of(101)}@ino-8")
    verdict = reprobe_verdict(
        registered, PidEvidence(alive=True, start_time=f"{start_of(101)}@ino-9")
    )
    assert verdict is not None
    assert verdict.reason_code == R.REASON_LIVENESS_REPROBE
    assert "reused" in verdict.detail


@pytest.mark.parametrize(
    ("probe", "fragment"),
    [
        (PidEvidence(alive=True, start_time=start_of(101)), "running again"),
        (PidEvidence(alive=True, start_time=None), "running again"),
        (PidEvidence(alive=True, start_time="ticks-999"), "reused"),
        (PidEvidence(alive=None), "could not be re-probed"),
        # Identified with an inode: still the registered start, so (as far as an
        # inode-less row can tell) the same process running.
        (PidEvidence(alive=True, start_time=f"{start_of(101)}@ino-9"), "running again"),
    ],
    ids=["revived", "alive no start", "reused", "unknown", "revived with inode"],
)
def test_reprobe_refuses_anything_but_dead(probe: PidEvidence, fragment: str) -> None:
    verdict = reprobe_verdict(row("w-1", pid=101), probe)
    assert verdict is not None
    assert verdict.reason_code == R.REASON_LIVENESS_REPROBE
    assert verdict.worker_identity == "w-1"
    assert fragment in verdict.detail
