"""Property tests: fingerprint and plan invariants over small random fleets."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from supervisor.policy.evidence import PidEvidence, evidence_for
from supervisor.policy.retirement import reasons as R
from supervisor.policy.retirement.fingerprints import registry_fingerprint, scope_fingerprint
from supervisor.policy.retirement.plan import FencingContext, ProtectedOwners, RetirementPlan

from .rows import (
    BOOT,
    FENCE,
    HOST,
    OTHER_BOOT,
    OTHER_HOST,
    STALE_AGE,
    TTL,
    ago,
    live_row,
    make_plan,
    row,
    start_of,
    trusted_instance,
)

PIDS = tuple(range(101, 109))
SESSIONS = ("s-0", "s-1", "s-2", "s-3")
GOOD_REPO = "/srv/fleet/canonical-repo"

PROPERTY_SETTINGS = settings(max_examples=200, deadline=None)


def _mostly(good: object, *bad: object) -> st.SearchStrategy[Any]:
    """``good`` about four times in five, else one of ``bad``: random fleets stay mostly
    retirable, so the candidate-side properties are not vacuous."""
    return st.one_of(
        st.just(good), st.just(good), st.just(good), st.just(good), st.sampled_from(bad)
    )


@st.composite
def fleet_rows(draw: st.DrawFn, index: int) -> dict[str, Any]:
    identity = draw(_mostly(f"w-{index}", "w-0", "w-1"))
    pid = draw(_mostly(PIDS[index % len(PIDS)], PIDS[0], PIDS[1], None))
    return row(
        identity,
        pid=pid,
        status=draw(_mostly("active", "released", "superseded", "retired")),
        namespace=draw(st.sampled_from(("author", "reviewer"))),
        session_id=draw(_mostly(f"sess-{identity}", *SESSIONS, None)),
        generation_id=draw(_mostly(f"gen-{identity}", "g-0", "g-1", None)),
        client_instance_id=draw(
            _mostly(
                trusted_instance(identity), trusted_instance("A"), "legacy-pid-7", "pid-8", None
            )
        ),
        process_identity=draw(_mostly(f"proc-{identity}", "proc-shared", None)),
        last_heartbeat_at=draw(
            _mostly(
                ago(STALE_AGE),
                ago(0),
                ago(30),
                ago(TTL - 1),
                ago(TTL),
                ago(TTL + 1),
                "garbled",
                None,
            )
        ),
        heartbeat_ttl_seconds=draw(_mostly(TTL, float(TTL), 60, None, "bad")),
        started_at=draw(_mostly(ago(STALE_AGE + 3600), ago(10), "garbled")),
        host_id=draw(_mostly(HOST, OTHER_HOST, None)),
        boot_id=draw(_mostly(BOOT, OTHER_BOOT, None)),
        process_start_time=draw(_mostly(start_of(pid) if pid else None, "ticks-other", None)),
        repository_binding=draw(_mostly(GOOD_REPO, "/srv/other", None)),
    )


@st.composite
def fleets(draw: st.DrawFn) -> list[dict[str, Any]]:
    size = draw(st.integers(min_value=0, max_value=7))
    return [draw(fleet_rows(index)) for index in range(size)]


PID_EVIDENCE = _mostly("dead", "alive", "reused", "unknown", "absent")


@st.composite
def evidence_maps(draw: st.DrawFn) -> dict[int, PidEvidence]:
    out: dict[int, PidEvidence] = {}
    for pid in PIDS:
        kind = draw(PID_EVIDENCE)
        if kind == "dead":
            out[pid] = PidEvidence(alive=False)
        elif kind == "alive":
            out[pid] = PidEvidence(alive=True, start_time=start_of(pid))
        elif kind == "reused":
            out[pid] = PidEvidence(alive=True, start_time="ticks-other")
        elif kind == "unknown":
            out[pid] = PidEvidence(alive=None)
    return out


OWNERS = st.builds(
    ProtectedOwners,
    worker_identities=st.frozensets(st.sampled_from(("w-0", "w-3", "w-9")), max_size=2),
    session_ids=st.frozensets(st.sampled_from(("sess-w-1", *SESSIONS)), max_size=2),
    pids=st.frozensets(st.sampled_from(PIDS), max_size=2),
)
FENCING = st.sampled_from(
    (
        FENCE,
        FENCE,
        FencingContext(host_id=None, boot_id=BOOT),
        FencingContext(host_id=HOST, boot_id=None),
    )
)


@dataclass(frozen=True)
class World:
    rows: list[dict[str, Any]]
    evidence: dict[int, PidEvidence]
    owners: ProtectedOwners
    fencing: FencingContext

    def plan(self, rows: list[dict[str, Any]] | None = None) -> RetirementPlan:
        return make_plan(
            self.rows if rows is None else rows,
            evidence=self.evidence,
            fencing=self.fencing,
            protected=self.owners,
        )


WORLDS = st.builds(
    World,
    rows=fleets(),
    evidence=evidence_maps(),
    owners=OWNERS,
    fencing=FENCING,
)


def _verdicts(plan: RetirementPlan) -> Counter[tuple[str | None, str]]:
    return Counter((e.worker_identity, e.reason_code) for e in (*plan.candidates, *plan.preserved))


@PROPERTY_SETTINGS
@given(world=WORLDS, data=st.data())
def test_tokens_and_candidates_are_permutation_invariant(world: World, data: st.DataObject) -> None:
    shuffled = data.draw(st.permutations(world.rows))
    anchors = [r["worker_identity"] for r in world.rows[:2]]
    assert registry_fingerprint(shuffled) == registry_fingerprint(world.rows)
    assert scope_fingerprint(shuffled, anchors) == scope_fingerprint(world.rows, anchors)
    first, second = world.plan(), world.plan(list(shuffled))
    assert first.registry_fingerprint == second.registry_fingerprint
    assert first.candidate_fingerprint == second.candidate_fingerprint
    assert first.scope_fingerprint == second.scope_fingerprint
    assert set(first.candidate_worker_identities) == set(second.candidate_worker_identities)
    assert _verdicts(first) == _verdicts(second)


@PROPERTY_SETTINGS
@given(world=WORLDS)
def test_plan_partitions_the_rows(world: World) -> None:
    plan = world.plan()
    assert plan.assessed_count == len(world.rows)
    entries = Counter(e.worker_identity for e in (*plan.candidates, *plan.preserved))
    assert entries == Counter(r["worker_identity"] for r in world.rows)
    assert not {c.reason_code for c in plan.candidates} - {R.REASON_ELIGIBLE}
    assert R.REASON_ELIGIBLE not in {p.reason_code for p in plan.preserved}
    assert sum(plan.preserved_reason_counts.values()) == len(plan.preserved)
    assert len(plan.candidate_rows) == len(plan.candidates)


@PROPERTY_SETTINGS
@given(world=WORLDS)
def test_no_candidate_is_alive_unknown_fresh_or_leased(world: World) -> None:
    plan = world.plan()
    by_identity = Counter(r["worker_identity"] for r in world.rows)
    for candidate_row in plan.candidate_rows:
        identity = candidate_row["worker_identity"]
        assert by_identity[identity] == 1
        assert candidate_row["status"] == "active"
        assert evidence_for(candidate_row, world.evidence).alive is False
        assert identity not in world.owners.worker_identities
        assert candidate_row["session_id"] not in world.owners.session_ids
        assert candidate_row["pid"] not in world.owners.pids
        assert str(candidate_row["client_instance_id"]).startswith("inst-")
        assert world.fencing.host_id is not None
        assert world.fencing.boot_id is not None
        assert candidate_row["host_id"] == world.fencing.host_id
    for candidate in plan.candidates:
        assert candidate.evidence["heartbeat_fresh"] is False
        assert candidate.evidence["live"] is False
        assert candidate.evidence["ownership_state"] == "stale"


@PROPERTY_SETTINGS
@given(world=WORLDS)
def test_an_unrelated_live_worker_changes_no_verdict(world: World) -> None:
    stranger = live_row(
        "w-stranger",
        pid=999,
        session_id="s-stranger",
        generation_id="g-stranger",
        process_identity="proc-stranger",
        client_instance_id=trusted_instance("stranger"),
    )
    evidence = {**world.evidence, 999: PidEvidence(alive=True, start_time=start_of(999))}
    before = world.plan()
    after = make_plan(
        [*world.rows, stranger], evidence=evidence, fencing=world.fencing, protected=world.owners
    )
    assert after.reason_for("w-stranger") is not None
    assert set(after.candidate_worker_identities) <= set(before.candidate_worker_identities)
    after_verdicts = _verdicts(after)
    after_verdicts.pop(("w-stranger", R.REASON_WORKER_LIVE))
    assert after_verdicts == _verdicts(before)


@PROPERTY_SETTINGS
@given(world=WORLDS)
def test_plan_is_deterministic(world: World) -> None:
    assert world.plan() == world.plan()
