"""Whole-fleet planning: per-worker outcomes, counts, determinism and structured evidence."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from supervisor.policy.evidence import PidEvidence
from supervisor.policy.retirement import reasons as R
from supervisor.policy.retirement.plan import ProtectedOwners, protected_from_leases

from .rows import (
    BOOT,
    FENCE,
    HOST,
    NOW,
    OTHER_BOOT,
    REPO,
    STALE_AGE,
    TTL,
    live_row,
    make_plan,
    probes,
    reason_of,
    row,
    start_of,
    trusted_instance,
)


def _mixed_fleet() -> list[dict[str, Any]]:
    return [
        row("w-stale-1", pid=101),
        row("w-stale-2", pid=102),
        live_row("w-live", pid=103),
        row("w-nopid", pid=None),
        row("w-foreign", pid=105, repository_binding="/srv/elsewhere"),
        row("w-terminal", pid=106, status="superseded"),
        row("w-legacy", pid=107, client_instance_id="legacy-pid-107"),
        row("w-leased", pid=108),
    ]


def _mixed_plan() -> Any:
    return make_plan(
        _mixed_fleet(),
        evidence=probes(dead=[101, 102, 105, 106, 107, 108], alive=[103]),
        protected=ProtectedOwners(session_ids=frozenset({"sess-w-leased"})),
    )


def test_mixed_fleet_outcomes_per_worker() -> None:
    plan = _mixed_plan()
    assert plan.candidate_worker_identities == ("w-stale-1", "w-stale-2")
    assert {p.worker_identity: p.reason_code for p in plan.preserved} == {
        "w-live": R.REASON_WORKER_LIVE,
        "w-nopid": R.REASON_INCOMPLETE_IDENTITY,
        "w-foreign": R.REASON_FOREIGN_REPOSITORY,
        "w-terminal": R.REASON_ALREADY_TERMINAL,
        "w-legacy": R.REASON_UNTRUSTED_PROVENANCE,
        "w-leased": R.REASON_PROTECTED_OWNER,
    }


def test_mixed_fleet_counts() -> None:
    plan = _mixed_plan()
    assert plan.assessed_count == 8
    assert len(plan.candidates) == 2
    assert len(plan.preserved) == 6
    assert dict(plan.preserved_reason_counts) == {
        R.REASON_ALREADY_TERMINAL: 1,
        R.REASON_FOREIGN_REPOSITORY: 1,
        R.REASON_INCOMPLETE_IDENTITY: 1,
        R.REASON_PROTECTED_OWNER: 1,
        R.REASON_UNTRUSTED_PROVENANCE: 1,
        R.REASON_WORKER_LIVE: 1,
    }
    assert list(plan.preserved_reason_counts) == sorted(plan.preserved_reason_counts)
    assert [r["worker_identity"] for r in plan.candidate_rows] == ["w-stale-1", "w-stale-2"]
    assert all(c.reason_code == R.REASON_ELIGIBLE for c in plan.candidates)


def test_plan_echoes_its_inputs() -> None:
    owners = ProtectedOwners(session_ids=frozenset({"sess-w-leased"}))
    plan = make_plan(_mixed_fleet(), protected=owners)
    assert plan.protected == owners
    assert plan.fencing == FENCE
    assert plan.canonical_repository == REPO
    assert make_plan([]).protected == ProtectedOwners()


def test_plan_is_deterministic_for_identical_contents() -> None:
    rows = _mixed_fleet()
    evidence = probes(dead=[101, 102, 105, 106, 107, 108], alive=[103])
    first = make_plan(rows, evidence=evidence)
    again = make_plan(rows, evidence=evidence)
    assert first == again
    reordered = make_plan(list(reversed(rows)), evidence=evidence)
    assert reordered.candidates == first.candidates
    assert reordered.preserved == first.preserved
    assert reordered.registry_fingerprint == first.registry_fingerprint
    assert reordered.candidate_fingerprint == first.candidate_fingerprint
    assert reordered.scope_fingerprint == first.scope_fingerprint


def test_plan_does_not_mutate_its_input_rows() -> None:
    rows = _mixed_fleet()
    snapshot = [dict(r) for r in rows]
    make_plan(rows)
    assert rows == snapshot


def test_stale_rows_stay_candidates_later() -> None:
    rows = [row("w-1", pid=101), row("w-2", pid=102)]
    later = make_plan(rows, now=NOW + timedelta(minutes=5))
    assert later.candidate_worker_identities == make_plan(rows).candidate_worker_identities


def test_row_from_previous_boot_with_dead_pid_is_eligible() -> None:
    plan = make_plan([row("w-1", pid=101, boot_id=OTHER_BOOT)], evidence=probes(dead=[101]))
    assert plan.candidate_worker_identities == ("w-1",)


def test_live_pid_blocks_even_across_a_boot_boundary() -> None:
    r = row("w-1", pid=101, boot_id=OTHER_BOOT)
    for evidence in (probes(alive=[101]), probes(reused=[101])):
        assert reason_of(make_plan([r], evidence=evidence), "w-1") == R.REASON_PID_ALIVE


def test_several_dead_rows_on_one_slot_are_all_eligible() -> None:
    # Restarts of one launch's author worker leave history on one (instance, namespace).
    instance = trusted_instance("launch-1")
    rows = [row(f"w-{n}", pid=100 + n, client_instance_id=instance) for n in range(4)]
    plan = make_plan(rows)
    assert plan.candidate_worker_identities == ("w-0", "w-1", "w-2", "w-3")


def test_one_unprobeable_row_contests_its_slot_for_every_dead_sibling() -> None:
    instance = trusted_instance("launch-1")
    rows = [row(f"w-{n}", pid=100 + n, client_instance_id=instance) for n in range(3)]
    plan = make_plan(rows, evidence=probes(dead=[100, 101], unknown=[102]))
    assert reason_of(plan, "w-2") == R.REASON_PID_UNKNOWN
    assert reason_of(plan, "w-0") == R.REASON_INSTANCE_CONFLICT
    assert reason_of(plan, "w-1") == R.REASON_INSTANCE_CONFLICT


def test_terminal_row_on_a_slot_does_not_contest_it() -> None:
    instance = trusted_instance("launch-1")
    rows = [
        row("w-1", pid=101, client_instance_id=instance),
        live_row("w-old", pid=202, client_instance_id=instance, status="released"),
    ]
    plan = make_plan(rows, evidence=probes(dead=[101], alive=[202]))
    assert plan.candidate_worker_identities == ("w-1",)


def test_one_launch_across_namespaces_is_not_a_slot_conflict() -> None:
    instance = trusted_instance("launch-1")
    rows = [
        row("w-dead", pid=101, client_instance_id=instance, namespace="author"),
        live_row("w-live", pid=202, client_instance_id=instance, namespace="reviewer"),
    ]
    plan = make_plan(rows, evidence=probes(dead=[101], alive=[202]))
    assert plan.candidate_worker_identities == ("w-dead",)


def test_dead_rows_sharing_a_generation_do_not_block_each_other() -> None:
    rows = [
        row("w-1", pid=101, generation_id="gen-shared"),
        row("w-2", pid=102, generation_id="gen-shared"),
    ]
    assert make_plan(rows).candidate_worker_identities == ("w-1", "w-2")


def test_evidence_carries_the_structured_fields() -> None:
    plan = make_plan([row("w-1", pid=101, namespace="reviewer")])
    evidence = plan.candidates[0].evidence
    r = row("w-1", pid=101, namespace="reviewer")
    assert evidence == {
        "worker_identity": "w-1",
        "client_type": "codex",
        "client_instance_id": trusted_instance("w-1"),
        "fleet_run_id": "run-1",
        "namespace": "reviewer",
        "profile": "fleet-reviewer",
        "declared_role": "reviewer",
        "session_id": "sess-w-1",
        "generation_id": "gen-w-1",
        "fencing_epoch": 1,
        "process_identity": "proc-w-1",
        "pid": 101,
        "pid_alive": False,
        "probed_start_time": None,
        "host_id": HOST,
        "boot_id": BOOT,
        "process_start_time": start_of(101),
        "repository_binding": REPO,
        "foreign_repository": False,
        "status": "active",
        "started_at": r["started_at"],
        "last_heartbeat_at": r["last_heartbeat_at"],
        "heartbeat_ttl_seconds": float(TTL),
        "heartbeat_age_seconds": STALE_AGE,
        "heartbeat_fresh": False,
        "live": False,
        "ownership_state": "stale",
        "instance_id_provenance": "trusted_launcher",
        "instance_identity_trusted": True,
    }


def test_reused_pid_evidence_names_the_probed_incarnation() -> None:
    plan = make_plan([row("w-1", pid=101)], evidence=probes(reused=[101]))
    entry = plan.preserved[0]
    assert entry.reason_code == R.REASON_PID_REUSED
    assert entry.evidence["pid_alive"] is True
    assert entry.evidence["probed_start_time"] == "other-101"
    assert entry.evidence["process_start_time"] == start_of(101)
    assert "other-101" in entry.detail


@pytest.mark.parametrize(
    ("registered", "probed", "reason"),
    [
        # One start, two inodes: a pid reused within one clock tick is a reuse.
        ("ticks-101@ino-8", "ticks-101@ino-9", R.REASON_PID_REUSED),
        # Told apart by nothing (an inode on one side only): the pid stays occupied.
        ("ticks-101", "ticks-101@ino-9", R.REASON_PID_ALIVE),
        ("ticks-101@ino-8", "ticks-101", R.REASON_PID_ALIVE),
        ("ticks-101@ino-8", "ticks-101@ino-8", R.REASON_PID_ALIVE),
    ],
)
def test_a_pid_reused_within_one_tick_is_told_apart_by_its_inode(
    registered: str, probed: str, reason: str
) -> None:
    plan = make_plan(
        [row("w-1", pid=101, process_start_time=registered)],
        evidence={101: PidEvidence(alive=True, start_time=probed)},
    )
    assert plan.preserved[0].reason_code == reason


def test_reason_for_unknown_identity_is_none() -> None:
    assert make_plan([row("w-1", pid=101)]).reason_for("w-ghost") is None


def test_protected_from_leases_reads_only_active_leases() -> None:
    owners = protected_from_leases(
        [
            {"status": "active", "session_id": " sess-a ", "owner_pid": 10, "session_pid": 11},
            {"status": "active", "session_id": None, "owner_pid": True, "session_pid": "12"},
            {"status": "active", "session_id": "sess-b", "owner_pid": 0, "session_pid": -4},
            {"status": "expired", "session_id": "sess-c", "owner_pid": 13},
            {"status": "released", "session_id": "sess-d", "session_pid": 14},
        ]
    )
    assert owners.session_ids == frozenset({"sess-a", "sess-b"})
    assert owners.pids == frozenset({10, 11})
    assert owners.worker_identities == frozenset()


def test_protection_names_every_hit() -> None:
    owners = ProtectedOwners(
        worker_identities=frozenset({"w-1"}),
        session_ids=frozenset({"sess-w-1"}),
        pids=frozenset({101}),
    )
    entry = make_plan([row("w-1", pid=101)], protected=owners).preserved[0]
    assert entry.reason_code == R.REASON_PROTECTED_OWNER
    for hit in ("worker_identity=w-1", "session_id=sess-w-1", "pid=101"):
        assert hit in entry.detail


def test_conflict_detail_names_the_shared_key() -> None:
    rows = [row("w-1", pid=101), live_row("w-2", pid=202, session_id="sess-w-1")]
    entry = make_plan(rows, evidence=probes(dead=[101], alive=[202])).reason_for("w-1")
    assert entry is not None
    assert entry.reason_code == R.REASON_CONFLICTING_IDENTITY
    assert "session_id=sess-w-1" in entry.detail
