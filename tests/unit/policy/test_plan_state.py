"""Incremental plan state: plans that redo only moved rows equal the reference planner."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from supervisor.policy.evidence import PidEvidence
from supervisor.policy.incremental.memo import PlanMemo
from supervisor.policy.incremental.planner import plan_retirement
from supervisor.policy.retirement.derive import row_facts
from supervisor.policy.retirement.freshness import NO_FRESHNESS, epoch_us
from supervisor.policy.retirement.plan import FencingContext, ProtectedOwners, RetirementPlan
from supervisor.policy.retirement.planner import plan_retirement as plain_plan
from supervisor.policy.retirement.seen import FactsContext
from supervisor.policy.stamps import parse_stamp

from .reference_plan import reference_plan
from .rows import FENCE, NOW, REPO, TTL, ago, all_dead, live_row, row
from .test_plan_memo import _LOOKALIKES, _same
from .test_plan_properties import OWNERS, PIDS, evidence_maps, fleet_rows

_FLEET = st.integers(min_value=8, max_value=14).flatmap(
    lambda n: st.tuples(*(fleet_rows(i) for i in range(n)))
)


@st.composite
def _steps(draw: st.DrawFn) -> list[tuple[Any, ...]]:
    """One world change between two plans; mostly a single row or a single pid."""
    out: list[tuple[Any, ...]] = []
    for _ in range(draw(st.integers(min_value=1, max_value=8))):
        kind = draw(
            st.sampled_from(
                ("field", "field", "row", "probe", "probe", "evidence", "time", "owners", "shape")
            )
        )
        if kind == "field":
            name, values = draw(st.sampled_from(_LOOKALIKES))
            out.append(("field", draw(st.integers(0, 63)), name, draw(st.sampled_from(values))))
        elif kind == "row":
            out.append(("row", draw(st.integers(0, 63)), draw(fleet_rows(draw(st.integers(0, 9))))))
        elif kind == "probe":
            alive = draw(st.sampled_from((True, False, None)))
            start = draw(st.sampled_from((None, "ticks-other", "same")))
            out.append(("probe", draw(st.sampled_from(PIDS)), alive, start))
        elif kind == "evidence":
            out.append(("evidence", draw(evidence_maps())))
        elif kind == "time":
            seconds = draw(st.sampled_from((-900.0, -1.0, 0.5, 1.0, 30.0, 899.0, 900.0, 7200.0)))
            out.append(("time", seconds))
        elif kind == "owners":
            out.append(("owners", draw(OWNERS)))
        else:
            out.append(("shape", draw(st.booleans()), draw(fleet_rows(draw(st.integers(0, 9))))))
    return out


def _check(
    memo: PlanMemo,
    fleet: list[dict[str, Any]],
    *,
    now: datetime,
    evidence: dict[int, PidEvidence],
    owners: ProtectedOwners,
    fencing: FencingContext = FENCE,
) -> RetirementPlan:
    kwargs: dict[str, Any] = {
        "now": now,
        "evidence": evidence,
        "fencing": fencing,
        "canonical_repository": REPO,
        "protected": owners,
    }
    incremental = plan_retirement(fleet, memo=memo, **kwargs)
    _same(incremental, reference_plan(fleet, **kwargs))
    # And the plain planner itself, the one the incremental planner wraps.
    _same(incremental, plain_plan(fleet, **kwargs))
    return incremental


@settings(max_examples=200, deadline=None)
@given(base=_FLEET, evidence=evidence_maps(), owners=OWNERS, steps=_steps())
def test_incremental_plans_equal_the_reference_over_change_sequences(
    base: tuple[dict[str, Any], ...],
    evidence: dict[int, PidEvidence],
    owners: ProtectedOwners,
    steps: list[tuple[Any, ...]],
) -> None:
    # As the store hands rows out: a new version is a new dict, never an edit.
    fleet = [dict(r, worker_identity=f"w-{i}") if i % 4 else dict(r) for i, r in enumerate(base)]
    memo = PlanMemo(trust_identity=True)
    now = NOW
    _check(memo, fleet, now=now, evidence=evidence, owners=owners)
    for step in steps:
        match step:
            case ("field", index, name, value):
                at = index % len(fleet)
                fleet[at] = {**fleet[at], name: value}
            case ("row", index, new_row):
                fleet[index % len(fleet)] = new_row
            case ("probe", pid, alive, start):
                evidence = dict(evidence)
                started = None if start is None else (f"ticks-{pid}" if start == "same" else start)
                evidence[pid] = PidEvidence(alive=alive, start_time=started)
            case ("evidence", new_evidence):
                evidence = new_evidence
            case ("time", seconds):
                now = now + timedelta(seconds=seconds)
            case ("owners", new_owners):
                owners = new_owners
            case ("shape", grow, new_row):
                if grow:
                    fleet.insert(len(fleet) // 2, new_row)
                elif len(fleet) > 1:
                    fleet.pop(len(fleet) // 2)
            case _:
                raise AssertionError(step)
        _check(memo, fleet, now=now, evidence=evidence, owners=owners)


def _steady_fleet(n: int) -> tuple[list[dict[str, Any]], dict[int, PidEvidence]]:
    fleet = [
        live_row(f"w-{i}", pid=1000 + i, last_heartbeat_at=ago(1))
        if i % 2
        else row(f"w-{i}", pid=1000 + i)
        for i in range(n)
    ]
    evidence = all_dead(fleet)
    for i in range(1, n, 2):
        evidence[1000 + i] = PidEvidence(alive=True, start_time=f"ticks-{1000 + i}")
    return fleet, evidence


def test_a_plan_after_one_change_redoes_only_that_row() -> None:
    fleet, evidence = _steady_fleet(40)
    memo = PlanMemo(trust_identity=True)
    owners = ProtectedOwners()
    _check(memo, fleet, now=NOW, evidence=evidence, owners=owners)
    passes = memo.state.full_passes
    _check(memo, fleet, now=NOW + timedelta(seconds=1), evidence=evidence, owners=owners)
    assert (memo.state.full_passes, memo.state.redone_rows) == (passes, 0)
    fleet[3] = {**fleet[3], "last_heartbeat_at": ago(0, now=NOW + timedelta(seconds=2))}
    plan = _check(memo, fleet, now=NOW + timedelta(seconds=2), evidence=evidence, owners=owners)
    assert (memo.state.full_passes, memo.state.redone_rows) == (passes, 1)
    assert "w-3" not in plan.candidate_worker_identities


def test_a_dying_live_worker_moves_the_fleet_sets_and_every_verdict_is_redone() -> None:
    fleet, evidence = _steady_fleet(40)
    memo = PlanMemo(trust_identity=True)
    owners = ProtectedOwners()
    _check(memo, fleet, now=NOW, evidence=evidence, owners=owners)
    passes = memo.state.full_passes
    evidence = {**evidence, 1001: PidEvidence(alive=False)}
    _check(memo, fleet, now=NOW, evidence=evidence, owners=owners)
    # Its conflict keys left the ambiguous set: other rows' verdicts may read them.
    assert memo.state.full_passes == passes + 1


def test_freshness_edges_are_exact_at_the_microsecond() -> None:
    context = FactsContext(FENCE.host_id, FENCE.boot_id, REPO)
    for ttl in (TTL, 0.1, 1e-6, 29.999999, 3e-7):
        stamp = ago(0)
        beat = parse_stamp(stamp)
        facts = row_facts(
            row("w-0", pid=101, heartbeat_ttl_seconds=ttl, last_heartbeat_at=stamp), context
        )
        assert beat is not None
        assert facts.beat_us == epoch_us(beat)
        for delta in (facts.fresh_until - 1, facts.fresh_until):
            now = beat + timedelta(microseconds=delta - facts.beat_us)
            assert epoch_us(now) == delta
            age = (now - beat).total_seconds()
            assert age == (delta - facts.beat_us) / 1_000_000
            assert (age < ttl) is (delta < facts.fresh_until)
    no_ttl = row_facts(row("w-1", pid=102, heartbeat_ttl_seconds=None), context)
    assert no_ttl.fresh_until == NO_FRESHNESS


def test_a_plan_cut_short_between_memo_and_state_does_not_hide_a_change() -> None:
    fleet, evidence = _steady_fleet(40)
    memo = PlanMemo(trust_identity=True)
    owners = ProtectedOwners()
    _check(memo, fleet, now=NOW, evidence=evidence, owners=owners)
    # The memo sees row 4 change, but the plan stops before the state does.
    fleet[4] = {**fleet[4], "status": "retired"}
    memo.facts(fleet, FactsContext(FENCE.host_id, FENCE.boot_id, REPO))
    # Relative to the memo's last call nothing moved; relative to the state, row 4 did.
    plan = _check(memo, fleet, now=NOW, evidence=evidence, owners=owners)
    assert "w-4" not in plan.candidate_worker_identities


def test_a_rendered_row_shows_its_new_observations_and_age_every_plan() -> None:
    # Rendered evidence is reused between plans only while the row's facts and
    # observations are the same objects; the age is always this plan's.
    fleet = [row("w-1", pid=101), row("w-2", pid=102)]
    evidence = all_dead(fleet)
    memo = PlanMemo(trust_identity=True)
    owners = ProtectedOwners()
    first = _check(memo, fleet, now=NOW, evidence=evidence, owners=owners)
    again = _check(memo, fleet, now=NOW + timedelta(seconds=5), evidence=evidence, owners=owners)
    ages = [e.evidence["heartbeat_age_seconds"] for e in (first.candidates[0], again.candidates[0])]
    assert ages[1] == ages[0] + 5
    assert first.candidates[0].evidence is not again.candidates[0].evidence
    evidence = {**evidence, 102: PidEvidence(alive=None, start_time=None)}
    moved = _check(memo, fleet, now=NOW + timedelta(seconds=6), evidence=evidence, owners=owners)
    assert [e.worker_identity for e in moved.candidates] == ["w-1"]
    assert moved.preserved[0].evidence["pid_alive"] is None


def test_a_trusting_memo_pairs_new_versions_without_a_content_key_per_row() -> None:
    # No content key is kept per row: a row inserted mid-fleet is the one miss, the
    # rows after it pair with their earlier versions by identity, and a new stamp
    # alone costs a rebeat, not a fresh derivation.
    fleet = [row(f"w-{i}", pid=100 + i) for i in range(6)]
    evidence = all_dead(fleet)
    memo = PlanMemo(trust_identity=True)
    owners = ProtectedOwners()
    _check(memo, fleet, now=NOW, evidence=evidence, owners=owners)
    assert len(memo) == 0
    base_hits, base_misses = memo.hits, memo.misses
    fleet.insert(3, row("w-2b", pid=200))
    fleet[5] = {**fleet[5], "last_heartbeat_at": "2026-07-30T05:59:58.000000Z"}
    evidence = {**evidence, **all_dead([fleet[3]])}
    _check(memo, fleet, now=NOW, evidence=evidence, owners=owners)
    assert (memo.misses - base_misses, memo.rebeats, memo.hits - base_hits) == (1, 1, 5)
