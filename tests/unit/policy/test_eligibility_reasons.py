"""One minimal fixture per plan reason code, each reaching exactly its branch (DESIGN §6 order)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pytest

from supervisor.policy.evidence import PidEvidence
from supervisor.policy.retirement import reasons as R
from supervisor.policy.retirement.facts import REQUIRED_IDENTITY_FIELDS
from supervisor.policy.retirement.plan import (
    FencingContext,
    ProtectedOwners,
    protected_from_leases,
)

from .rows import (
    BOOT,
    FENCE,
    FRESH_AGE,
    HOST,
    OTHER_BOOT,
    OTHER_HOST,
    REPO,
    ago,
    all_dead,
    live_row,
    make_plan,
    probes,
    reason_of,
    row,
    start_of,
    trusted_instance,
)

#: Every code the planner can put on an entry (apply-only codes excluded).
PLAN_REASON_CODES = frozenset(
    {
        R.REASON_ELIGIBLE,
        R.REASON_CONFLICTING_IDENTITY,
        R.REASON_ALREADY_TERMINAL,
        R.REASON_INCOMPLETE_IDENTITY,
        R.REASON_UNPARSABLE_HEARTBEAT,
        R.REASON_WORKER_LIVE,
        R.REASON_PID_UNKNOWN,
        R.REASON_PID_REUSED,
        R.REASON_PID_ALIVE,
        R.REASON_HEARTBEAT_FRESH,
        R.REASON_AMBIGUOUS_OWNERSHIP,
        R.REASON_FOREIGN_REPOSITORY,
        R.REASON_PROTECTED_OWNER,
        R.REASON_INSTANCE_CONFLICT,
        R.REASON_UNTRUSTED_PROVENANCE,
        R.REASON_HOST_UNPROVEN,
        R.REASON_BOOT_UNKNOWN,
    }
)


@dataclass(frozen=True)
class Case:
    rows: list[dict[str, Any]]
    expected: str
    target: str = "w-1"
    evidence: Mapping[int, PidEvidence] | None = None
    fencing: FencingContext = FENCE
    protected: ProtectedOwners | None = None
    repo: str | None = REPO


def _dead(**overrides: Any) -> dict[str, Any]:
    return row("w-1", pid=101, **overrides)


def _partner_live(**overrides: Any) -> dict[str, Any]:
    return live_row("w-2", pid=202, **overrides)


CASES: dict[str, Case] = {
    "duplicate worker identity": Case(
        rows=[_dead(), row("w-1", pid=102)], expected=R.REASON_CONFLICTING_IDENTITY
    ),
    "duplicate identity beats terminal status": Case(
        rows=[_dead(status="released"), row("w-1", pid=102)],
        expected=R.REASON_CONFLICTING_IDENTITY,
    ),
    "released": Case(rows=[_dead(status="released")], expected=R.REASON_ALREADY_TERMINAL),
    "superseded": Case(rows=[_dead(status="superseded")], expected=R.REASON_ALREADY_TERMINAL),
    "retired": Case(rows=[_dead(status="retired")], expected=R.REASON_ALREADY_TERMINAL),
    "missing status reads as not active": Case(
        rows=[_dead(status=None)], expected=R.REASON_ALREADY_TERMINAL
    ),
    "fencing triple absent (pre-fencing row)": Case(
        rows=[_dead(host_id=None, boot_id=None, process_start_time=None)],
        expected=R.REASON_INCOMPLETE_IDENTITY,
    ),
    "unparsable heartbeat": Case(
        rows=[_dead(last_heartbeat_at="yesterday-ish")], expected=R.REASON_UNPARSABLE_HEARTBEAT
    ),
    "live: fresh heartbeat, pid alive": Case(
        rows=[live_row("w-1", pid=101)],
        evidence=probes(alive=[101]),
        expected=R.REASON_WORKER_LIVE,
    ),
    "live: fresh heartbeat, pid unknown": Case(
        rows=[live_row("w-1", pid=101)], evidence={}, expected=R.REASON_WORKER_LIVE
    ),
    "pid unprobed": Case(rows=[_dead()], evidence={}, expected=R.REASON_PID_UNKNOWN),
    "pid probe cannot tell": Case(
        rows=[_dead()], evidence=probes(unknown=[101]), expected=R.REASON_PID_UNKNOWN
    ),
    "pid reused on same host and boot": Case(
        rows=[_dead()], evidence=probes(reused=[101]), expected=R.REASON_PID_REUSED
    ),
    "pid alive, same incarnation": Case(
        rows=[_dead()], evidence=probes(alive=[101]), expected=R.REASON_PID_ALIVE
    ),
    "pid alive, no start time probed": Case(
        rows=[_dead()], evidence={101: PidEvidence(alive=True)}, expected=R.REASON_PID_ALIVE
    ),
    "pid alive across a boot boundary": Case(
        rows=[_dead(boot_id=OTHER_BOOT)],
        evidence=probes(reused=[101]),
        expected=R.REASON_PID_ALIVE,
    ),
    "pid alive, boot unknown here": Case(
        rows=[_dead()],
        evidence=probes(reused=[101]),
        fencing=FencingContext(host_id=HOST, boot_id=None),
        expected=R.REASON_PID_ALIVE,
    ),
    "fresh heartbeat, dead pid": Case(
        rows=[live_row("w-1", pid=101)], expected=R.REASON_HEARTBEAT_FRESH
    ),
    "invalid ttl, dead pid": Case(
        rows=[_dead(heartbeat_ttl_seconds="soon")], expected=R.REASON_HEARTBEAT_FRESH
    ),
    "started_at unparsable": Case(
        rows=[_dead(started_at="at some point")], expected=R.REASON_AMBIGUOUS_OWNERSHIP
    ),
    "started after its last heartbeat": Case(
        rows=[_dead(started_at=ago(60))], expected=R.REASON_AMBIGUOUS_OWNERSHIP
    ),
    "repository binding absent": Case(
        rows=[_dead(repository_binding=None)], expected=R.REASON_FOREIGN_REPOSITORY
    ),
    "repository binding blank": Case(
        rows=[_dead(repository_binding="  ")], expected=R.REASON_FOREIGN_REPOSITORY
    ),
    "repository binding foreign": Case(
        rows=[_dead(repository_binding="/srv/other-repo")], expected=R.REASON_FOREIGN_REPOSITORY
    ),
    "shares session with live worker": Case(
        rows=[_dead(), _partner_live(session_id="sess-w-1")],
        evidence=probes(dead=[101], alive=[202]),
        expected=R.REASON_CONFLICTING_IDENTITY,
    ),
    "shares generation with live worker": Case(
        rows=[_dead(), _partner_live(generation_id="gen-w-1")],
        evidence=probes(dead=[101], alive=[202]),
        expected=R.REASON_CONFLICTING_IDENTITY,
    ),
    "shares process identity with live worker": Case(
        rows=[_dead(), _partner_live(process_identity="proc-w-1")],
        evidence=probes(dead=[101], alive=[202]),
        expected=R.REASON_CONFLICTING_IDENTITY,
    ),
    "shares pid with live worker on another host": Case(
        rows=[_dead(), live_row("w-2", pid=101, host_id=OTHER_HOST)],
        expected=R.REASON_CONFLICTING_IDENTITY,
    ),
    "shares session with unprobeable worker": Case(
        rows=[_dead(), row("w-2", pid=202, session_id="sess-w-1")],
        evidence=probes(dead=[101]),
        expected=R.REASON_CONFLICTING_IDENTITY,
    ),
    "shares pid with worker of unknown freshness": Case(
        rows=[_dead(), row("w-2", pid=101, heartbeat_ttl_seconds="bogus")],
        expected=R.REASON_CONFLICTING_IDENTITY,
    ),
    "protected by worker identity": Case(
        rows=[_dead()],
        protected=ProtectedOwners(worker_identities=frozenset({"w-1"})),
        expected=R.REASON_PROTECTED_OWNER,
    ),
    "protected by session": Case(
        rows=[_dead()],
        protected=ProtectedOwners(session_ids=frozenset({"sess-w-1"})),
        expected=R.REASON_PROTECTED_OWNER,
    ),
    "protected by pid": Case(
        rows=[_dead()],
        protected=ProtectedOwners(pids=frozenset({101})),
        expected=R.REASON_PROTECTED_OWNER,
    ),
    "protected by an active lease": Case(
        rows=[_dead()],
        protected=protected_from_leases(
            [{"status": "active", "session_id": "sess-w-1", "owner_pid": 999}]
        ),
        expected=R.REASON_PROTECTED_OWNER,
    ),
    "protected by an active lease's pid": Case(
        rows=[_dead()],
        protected=protected_from_leases(
            [{"status": "active", "session_id": "other", "session_pid": 101}]
        ),
        expected=R.REASON_PROTECTED_OWNER,
    ),
    "slot shared with a live worker": Case(
        rows=[_dead(), _partner_live(client_instance_id=trusted_instance("w-1"))],
        evidence=probes(dead=[101], alive=[202]),
        expected=R.REASON_INSTANCE_CONFLICT,
    ),
    "slot shared with an unprobeable worker": Case(
        rows=[_dead(), row("w-2", pid=202, client_instance_id=trusted_instance("w-1"))],
        evidence=probes(dead=[101]),
        expected=R.REASON_INSTANCE_CONFLICT,
    ),
    "legacy-pid instance": Case(
        rows=[_dead(client_instance_id="legacy-pid-27833")],
        expected=R.REASON_UNTRUSTED_PROVENANCE,
    ),
    "pid- instance": Case(
        rows=[_dead(client_instance_id="pid-101")], expected=R.REASON_UNTRUSTED_PROVENANCE
    ),
    "proc- instance": Case(
        rows=[_dead(client_instance_id="proc-4242")], expected=R.REASON_UNTRUSTED_PROVENANCE
    ),
    "malformed instance": Case(
        rows=[_dead(client_instance_id="my-laptop-codex")],
        expected=R.REASON_UNTRUSTED_PROVENANCE,
    ),
    "inst- prefix but malformed": Case(
        rows=[_dead(client_instance_id="inst-codex-whenever-0123456789ab")],
        expected=R.REASON_UNTRUSTED_PROVENANCE,
    ),
    "current host unknown": Case(
        rows=[_dead()],
        fencing=FencingContext(host_id=None, boot_id=BOOT),
        expected=R.REASON_HOST_UNPROVEN,
    ),
    "row bound to another host": Case(
        rows=[_dead(host_id=OTHER_HOST)], expected=R.REASON_HOST_UNPROVEN
    ),
    "current boot unknown": Case(
        rows=[_dead()],
        fencing=FencingContext(host_id=HOST, boot_id=None),
        expected=R.REASON_BOOT_UNKNOWN,
    ),
    "eligible on this boot": Case(rows=[_dead()], expected=R.REASON_ELIGIBLE),
    "eligible from a previous boot": Case(
        rows=[_dead(boot_id=OTHER_BOOT)], expected=R.REASON_ELIGIBLE
    ),
    "eligible with trailing slash on binding": Case(
        rows=[_dead(repository_binding="/srv/fleet/canonical-repo/")], expected=R.REASON_ELIGIBLE
    ),
    "eligible next to an unrelated live worker": Case(
        rows=[_dead(), _partner_live()],
        evidence=probes(dead=[101], alive=[202]),
        expected=R.REASON_ELIGIBLE,
    ),
    "released lease protects nobody": Case(
        rows=[_dead()],
        protected=protected_from_leases(
            [{"status": "released", "session_id": "sess-w-1", "owner_pid": 101}]
        ),
        expected=R.REASON_ELIGIBLE,
    ),
}


@pytest.mark.parametrize("name", list(CASES))
def test_reason_code(name: str) -> None:
    case = CASES[name]
    plan = make_plan(
        case.rows,
        evidence=case.evidence,
        fencing=case.fencing,
        protected=case.protected,
        repo=case.repo,
    )
    entry = plan.reason_for(case.target)
    assert entry is not None
    assert entry.reason_code == case.expected, entry.detail
    assert entry.detail
    in_candidates = case.target in plan.candidate_worker_identities
    assert in_candidates == (case.expected == R.REASON_ELIGIBLE)


def test_every_plan_reason_code_has_a_case() -> None:
    assert {case.expected for case in CASES.values()} == PLAN_REASON_CODES


@pytest.mark.parametrize("missing", [f for f in REQUIRED_IDENTITY_FIELDS if f != "status"])
@pytest.mark.parametrize("blank", [None, "", "   "])
def test_incomplete_identity_for_each_required_field(missing: str, blank: str | None) -> None:
    # Rows written before the fencing triple existed carry NULL there: preserved for good.
    r = row("w-1", pid=101)
    r[missing] = blank
    plan = make_plan([r], evidence=probes(dead=[101]))
    entry = plan.preserved[0]
    assert entry.reason_code == R.REASON_INCOMPLETE_IDENTITY
    assert missing in entry.detail
    assert plan.candidates == ()


def test_status_is_required_but_its_absence_is_reported_as_not_active() -> None:
    assert "status" in REQUIRED_IDENTITY_FIELDS
    plan = make_plan([row("w-1", pid=101, status=None)])
    assert reason_of(plan, "w-1") == R.REASON_ALREADY_TERMINAL


def test_legacy_row_without_fencing_stays_preserved_even_when_everything_else_is_dead() -> None:
    legacy = row(
        "w-1",
        pid=101,
        client_instance_id="legacy-pid-101",
        host_id=None,
        boot_id=None,
        process_start_time=None,
    )
    plan = make_plan([legacy], evidence=all_dead([legacy]))
    assert reason_of(plan, "w-1") == R.REASON_INCOMPLETE_IDENTITY


def test_unknown_own_host_is_reported_as_such_not_as_a_mismatch() -> None:
    plan = make_plan([_dead()], fencing=FencingContext(host_id=None, boot_id=BOOT))
    entry = plan.preserved[0]
    assert entry.reason_code == R.REASON_HOST_UNPROVEN
    assert "cannot establish its own host identity" in entry.detail
    foreign = make_plan([_dead(host_id=OTHER_HOST)]).preserved[0]
    assert OTHER_HOST in foreign.detail
    assert HOST in foreign.detail


def test_untrusted_provenance_is_reached_with_every_other_field_complete() -> None:
    r = row("w-1", pid=101, client_instance_id="legacy-pid-101")
    assert all(str(r[f]).strip() for f in REQUIRED_IDENTITY_FIELDS)
    plan = make_plan([r])
    entry = plan.preserved[0]
    assert entry.reason_code == R.REASON_UNTRUSTED_PROVENANCE
    assert entry.evidence["instance_identity_trusted"] is False
    assert entry.evidence["instance_id_provenance"] == "legacy_incomplete"


def test_live_worker_in_contested_slot_is_itself_reported_live() -> None:
    shared = trusted_instance("w-1")
    rows = [row("w-1", pid=101), live_row("w-2", pid=202, client_instance_id=shared)]
    plan = make_plan(rows, evidence=probes(dead=[101], alive=[202]))
    assert reason_of(plan, "w-2") == R.REASON_WORKER_LIVE
    assert reason_of(plan, "w-1") == R.REASON_INSTANCE_CONFLICT


def test_pid_reuse_needs_a_recorded_start_that_differs() -> None:
    r = row("w-1", pid=101)
    same = make_plan([r], evidence={101: PidEvidence(alive=True, start_time=start_of(101))})
    other = make_plan([r], evidence={101: PidEvidence(alive=True, start_time="ticks-9")})
    foreign = make_plan(
        [row("w-1", pid=101, host_id=OTHER_HOST)],
        evidence={101: PidEvidence(alive=True, start_time="ticks-9")},
    )
    assert reason_of(same, "w-1") == R.REASON_PID_ALIVE
    assert reason_of(other, "w-1") == R.REASON_PID_REUSED
    assert reason_of(foreign, "w-1") == R.REASON_PID_ALIVE


def test_fresh_heartbeat_row_keeps_its_age_in_evidence() -> None:
    plan = make_plan([live_row("w-1", pid=101)])
    entry = plan.preserved[0]
    assert entry.reason_code == R.REASON_HEARTBEAT_FRESH
    assert entry.evidence["heartbeat_fresh"] is True
    assert entry.evidence["heartbeat_age_seconds"] == FRESH_AGE
    assert entry.evidence["pid_alive"] is False
