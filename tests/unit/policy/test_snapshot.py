"""Fleet snapshot: every finding class, its blocker status, and the fleet-level verdicts."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pytest

from supervisor.policy.evidence import PidEvidence, row_pid
from supervisor.policy.fleet import findings as S
from supervisor.policy.fleet.snapshot import FleetSnapshot, ManifestEntry, snapshot_fleet
from supervisor.policy.identity.worker_env import NAMESPACES

from .rows import HOST, NOW, OTHER_HOST, REPO, live_row, probes, row, trusted_instance

ALL_CLASSES = frozenset(
    value for name, value in vars(S).items() if name.startswith("CLASS_") and isinstance(value, str)
)


def launch(
    label: str,
    *,
    base_pid: int,
    client: str = "codex",
    namespaces: Sequence[str] = NAMESPACES,
    **overrides: Any,
) -> list[dict[str, Any]]:
    """The live workers of one application launch: one trusted instance, one generation."""
    instance = trusted_instance(label, client)
    return [
        live_row(
            f"{label}-{ns}",
            pid=base_pid + n,
            namespace=ns,
            client_name=client,
            client_instance_id=instance,
            generation_id=f"gen-{label}",
            **overrides,
        )
        for n, ns in enumerate(namespaces)
    ]


def snap(
    rows: Sequence[Mapping[str, Any]],
    *,
    evidence: Mapping[int, PidEvidence] | None = None,
    manifest: Sequence[ManifestEntry] | None = None,
    revision: str | None = None,
) -> FleetSnapshot:
    """Snapshot with every pid alive unless told otherwise."""
    pids = [pid for r in rows if (pid := row_pid(r)) is not None]
    return snapshot_fleet(
        rows,
        now=NOW,
        evidence=probes(alive=pids) if evidence is None else evidence,
        current_host_id=HOST,
        canonical_repository=REPO,
        expected_live_revision=revision,
        expected_manifest=manifest,
    )


def classes(snapshot: FleetSnapshot) -> set[str]:
    return {f.classification for f in snapshot.findings}


@dataclass(frozen=True)
class Case:
    build: Callable[[], FleetSnapshot]
    expected: str


def _with(rows: list[dict[str, Any]], index: int, **changes: Any) -> list[dict[str, Any]]:
    rows[index] = {**rows[index], **changes}
    return rows


A = trusted_instance("A")

CASES: dict[str, Case] = {
    "healthy launch": Case(lambda: snap(launch("A", base_pid=100)), S.CLASS_HEALTHY),
    "expected enrolled": Case(
        lambda: snap(launch("A", base_pid=100), manifest=[ManifestEntry(client_instance_id=A)]),
        S.CLASS_EXPECTED,
    ),
    "missing expected": Case(
        lambda: snap(
            launch("A", base_pid=100),
            manifest=[
                ManifestEntry(client_instance_id=A),
                ManifestEntry(client_instance_id=trusted_instance("gone")),
            ],
        ),
        S.CLASS_MISSING,
    ),
    "unmanifested": Case(
        lambda: snap(
            [*launch("A", base_pid=100), *launch("B", base_pid=200)],
            manifest=[ManifestEntry(client_instance_id=A)],
        ),
        S.CLASS_UNMANIFESTED,
    ),
    "duplicate namespace": Case(
        lambda: snap(
            [*launch("A", base_pid=100), live_row("A-author-2", pid=150, client_instance_id=A)]
        ),
        S.CLASS_DUPLICATE_NAMESPACE,
    ),
    "instance under two client types": Case(
        lambda: snap(_with(launch("A", base_pid=100), 1, client_name="gemini")),
        S.CLASS_INSTANCE_ID_COLLISION,
    ),
    "worker identity claimed twice": Case(
        lambda: snap([live_row("w-1", pid=101), live_row("w-1", pid=102, namespace="merger")]),
        S.CLASS_WORKER_ID_COLLISION,
    ),
    "session reused": Case(
        lambda: snap([live_row("w-1", pid=101), live_row("w-2", pid=102, session_id="sess-w-1")]),
        S.CLASS_SESSION_COLLISION,
    ),
    "generation across instances": Case(
        lambda: snap(
            [
                live_row("w-1", pid=101, generation_id="g"),
                live_row("w-2", pid=102, generation_id="g", fencing_epoch=2),
            ]
        ),
        S.CLASS_GENERATION_COLLISION,
    ),
    "process identity shared": Case(
        lambda: snap(
            [live_row("w-1", pid=101), live_row("w-2", pid=102, process_identity="proc-w-1")]
        ),
        S.CLASS_PROCESS_COLLISION,
    ),
    "pid shared on one host": Case(
        lambda: snap([live_row("w-1", pid=101), live_row("w-2", pid=101)]),
        S.CLASS_PID_COLLISION,
    ),
    "fencing token across instances": Case(
        lambda: snap(
            [
                live_row("w-1", pid=101, generation_id="g"),
                live_row("w-2", pid=102, generation_id="g"),
            ]
        ),
        S.CLASS_OWNERSHIP_COLLISION,
    ),
    "live worker without session": Case(
        lambda: snap(_with(launch("A", base_pid=100), 0, session_id=None)),
        S.CLASS_ORPHANED,
    ),
    "unknown client in an instance": Case(
        lambda: snap([live_row("w-1", pid=101, client_name="mystery-ide")]),
        S.CLASS_UNKNOWN_CLIENT,
    ),
    "unknown client without instance": Case(
        lambda: snap([live_row("w-1", pid=101, client_name=None, client_instance_id=None)]),
        S.CLASS_UNKNOWN_CLIENT,
    ),
    "foreign repository": Case(
        lambda: snap(_with(launch("A", base_pid=100), 2, repository_binding="/srv/other")),
        S.CLASS_FOREIGN_REPOSITORY,
    ),
    "old revision": Case(
        lambda: snap(
            _with(launch("A", base_pid=100), 3, loaded_revision="rev-0"), revision="rev-1"
        ),
        S.CLASS_OLD_REVISION,
    ),
    "stale active row": Case(
        lambda: snap([row("w-1", pid=101)], evidence=probes(dead=[101])),
        S.CLASS_STALE_WORKER,
    ),
    "legacy instance id": Case(
        lambda: snap([live_row("w-1", pid=101, client_instance_id="legacy-pid-101")]),
        S.CLASS_LEGACY_INCOMPLETE,
    ),
    "no instance id": Case(
        lambda: snap([live_row("w-1", pid=101, client_instance_id=None)]),
        S.CLASS_LEGACY_INCOMPLETE,
    ),
    "released row": Case(
        lambda: snap([row("w-1", pid=101, status="released")]), S.CLASS_HISTORICAL
    ),
}


@pytest.mark.parametrize("name", list(CASES))
def test_finding_class(name: str) -> None:
    case = CASES[name]
    snapshot = case.build()
    hits = [f for f in snapshot.findings if f.classification == case.expected]
    assert hits, sorted(classes(snapshot))
    blocker = case.expected in S.ACTIVE_BLOCKER_CLASSES
    assert all(f.active_blocker is blocker for f in hits)
    assert snapshot.live_fleet_safe is not any(f.active_blocker for f in snapshot.findings)
    assert snapshot.active_blockers == tuple(f for f in snapshot.findings if f.active_blocker)


def test_every_finding_class_has_a_case() -> None:
    assert {case.expected for case in CASES.values()} == ALL_CLASSES
    assert len(ALL_CLASSES) == 19


def test_only_expected_historical_and_healthy_are_not_blockers() -> None:
    non_blockers = ALL_CLASSES - S.ACTIVE_BLOCKER_CLASSES
    assert non_blockers == {S.CLASS_EXPECTED, S.CLASS_HISTORICAL, S.CLASS_HEALTHY}


def test_healthy_launch_is_safe_and_has_no_other_findings() -> None:
    snapshot = snap(launch("A", base_pid=100))
    assert classes(snapshot) == {S.CLASS_HEALTHY}
    assert snapshot.live_fleet_safe
    assert snapshot.mutation_safe
    (group,) = snapshot.instances
    assert group.namespaces == tuple(sorted(NAMESPACES))
    assert group.duplicate_namespaces == ()
    assert group.trusted_instance_identity
    assert group.mutation_safe
    assert group.client_types == ("codex",)


def test_one_instance_sharing_a_generation_across_namespaces_is_not_a_collision() -> None:
    snapshot = snap(launch("A", base_pid=100))
    assert S.CLASS_GENERATION_COLLISION not in classes(snapshot)
    assert S.CLASS_OWNERSHIP_COLLISION not in classes(snapshot)


def test_generation_twice_in_one_namespace_of_one_instance_is_a_collision() -> None:
    rows = [
        *launch("A", base_pid=100, namespaces=("author",)),
        live_row("A-author-again", pid=150, client_instance_id=A, generation_id="gen-A"),
    ]
    found = classes(snap(rows))
    assert {S.CLASS_GENERATION_COLLISION, S.CLASS_DUPLICATE_NAMESPACE} <= found


def test_distinct_fencing_epochs_across_instances_are_no_ownership_collision() -> None:
    rows = [
        live_row("w-1", pid=101, generation_id="g"),
        live_row("w-2", pid=102, generation_id="g", fencing_epoch=2),
    ]
    assert S.CLASS_OWNERSHIP_COLLISION not in classes(snap(rows))


def test_one_worker_claimed_twice_is_an_identity_not_a_pid_collision() -> None:
    rows = [live_row("w-1", pid=101), live_row("w-1", pid=101, namespace="merger")]
    found = classes(snap(rows))
    assert S.CLASS_WORKER_ID_COLLISION in found
    assert S.CLASS_PID_COLLISION not in found
    assert S.CLASS_PROCESS_COLLISION not in found


def test_instance_with_any_finding_is_not_also_healthy() -> None:
    # Both client types are known and every worker is mutation-safe on its own.
    snapshot = snap(_with(launch("A", base_pid=100), 1, client_name="gemini"))
    assert S.CLASS_INSTANCE_ID_COLLISION in classes(snapshot)
    assert S.CLASS_HEALTHY not in classes(snapshot)


def test_same_pid_on_two_hosts_is_no_pid_collision() -> None:
    rows = [live_row("w-1", pid=101), live_row("w-2", pid=101, host_id=OTHER_HOST)]
    assert S.CLASS_PID_COLLISION not in classes(snap(rows))


def test_two_instances_of_one_client_type_are_not_a_duplicate() -> None:
    snapshot = snap([*launch("A", base_pid=100), *launch("B", base_pid=200)])
    assert classes(snapshot) == {S.CLASS_HEALTHY}
    assert snapshot.live_fleet_safe
    assert dict(snapshot.multi_instance_same_client_type) == {
        "codex": (trusted_instance("A"), trusted_instance("B"))
    }
    assert len(snapshot.instances) == 2


def test_collisions_only_count_live_workers() -> None:
    rows = [live_row("w-1", pid=101), row("w-2", pid=102, session_id="sess-w-1")]
    snapshot = snap(rows, evidence=probes(alive=[101], dead=[102]))
    assert S.CLASS_SESSION_COLLISION not in classes(snapshot)
    assert S.CLASS_STALE_WORKER in classes(snapshot)


def test_historical_rows_never_block() -> None:
    rows = [
        *launch("A", base_pid=100),
        row("w-old", pid=301, status="released"),
        row("w-gone", pid=302, status="retired"),
        live_row("w-prev", pid=303, status="superseded", session_id="sess-A-author"),
    ]
    snapshot = snap(rows)
    historical = [f for f in snapshot.findings if f.classification == S.CLASS_HISTORICAL]
    assert len(historical) == 3
    assert not any(f.active_blocker for f in historical)
    assert all(f.severity == "info" for f in historical)
    assert snapshot.live_fleet_safe
    assert snapshot.historical_worker_count == 3


def test_counts_and_worker_partitions() -> None:
    rows = [
        *launch("A", base_pid=100, namespaces=("author", "reviewer")),
        row("w-stale", pid=301),
        row("w-done", pid=302, status="retired"),
    ]
    snapshot = snap(rows, evidence=probes(alive=[100, 101], dead=[301, 302]))
    assert (
        snapshot.live_worker_count,
        snapshot.stale_worker_count,
        snapshot.historical_worker_count,
    ) == (2, 1, 1)
    assert [w.worker_identity for w in snapshot.stale_workers] == ["w-stale"]
    assert [w.worker_identity for w in snapshot.historical_workers] == ["w-done"]
    assert len(snapshot.live_workers) == 2
    stale = next(f for f in snapshot.findings if f.classification == S.CLASS_STALE_WORKER)
    assert stale.severity == "warning"
    assert stale.worker_identities == ("w-stale",)


def test_legacy_live_worker_keeps_the_fleet_unsafe_after_retirement() -> None:
    # Post-retirement truth: zero stale rows, yet a live legacy identity remains a blocker.
    rows = [
        row("w-retired", pid=101, status="retired"),
        live_row(
            "w-legacy",
            pid=102,
            client_instance_id="legacy-pid-27833",
            instance_id_provenance="legacy_incomplete",
        ),
    ]
    snapshot = snap(rows, evidence=probes(dead=[101], alive=[102]))
    assert snapshot.stale_worker_count == 0
    assert snapshot.live_worker_count == 1
    assert snapshot.historical_worker_count == 1
    assert not snapshot.live_fleet_safe
    assert not snapshot.mutation_safe
    assert S.CLASS_LEGACY_INCOMPLETE in {f.classification for f in snapshot.active_blockers}


def test_legacy_finding_without_instance_names_no_instance() -> None:
    snapshot = snap([live_row("w-1", pid=101, client_instance_id="  ")])
    (finding,) = [f for f in snapshot.findings if f.classification == S.CLASS_LEGACY_INCOMPLETE]
    assert finding.client_instance_ids == ()
    assert finding.worker_identities == ("w-1",)
    assert snapshot.instances == ()


def test_manifest_lists_missing_and_unmanifested_ids() -> None:
    rows = [*launch("A", base_pid=100), *launch("B", base_pid=200)]
    gone = trusted_instance("gone")
    snapshot = snap(
        rows,
        manifest=[
            ManifestEntry(client_instance_id=A),
            ManifestEntry(client_instance_id=f" {gone} "),
            ManifestEntry(client_instance_id="  "),
        ],
    )
    assert snapshot.missing_expected_instance_ids == (gone,)
    assert snapshot.unmanifested_instance_ids == (trusted_instance("B"),)


def test_no_manifest_means_nothing_is_unmanifested() -> None:
    snapshot = snap([*launch("A", base_pid=100), *launch("B", base_pid=200)])
    assert snapshot.unmanifested_instance_ids == ()
    assert S.CLASS_UNMANIFESTED not in classes(snapshot)


def test_snapshot_is_deterministic_and_order_free() -> None:
    rows = [
        *launch("A", base_pid=100),
        row("w-stale", pid=301),
        live_row("w-1", pid=401, session_id="sess-A-author"),
    ]
    evidence = probes(alive=[*range(100, 105), 401], dead=[301])
    assert snap(rows, evidence=evidence) == snap(list(reversed(rows)), evidence=evidence)


def test_instance_in_a_cross_instance_collision_is_not_healthy() -> None:
    # Each launch is fine on its own; one worker of B reuses a session of A.
    a_rows = launch("A", base_pid=100)
    b_rows = _with(launch("B", base_pid=200), 0, session_id=a_rows[0]["session_id"])
    snapshot = snap([*a_rows, *b_rows])
    assert S.CLASS_SESSION_COLLISION in classes(snapshot)
    healthy = [f for f in snapshot.findings if f.classification == S.CLASS_HEALTHY]
    assert healthy == []


def test_unmanifested_instance_is_not_healthy() -> None:
    a_rows = launch("A", base_pid=100)
    b_rows = launch("B", base_pid=200)
    manifest = [ManifestEntry(client_instance_id=str(a_rows[0]["client_instance_id"]))]
    snapshot = snap([*a_rows, *b_rows], manifest=manifest)
    healthy = {
        f.client_instance_ids for f in snapshot.findings if f.classification == S.CLASS_HEALTHY
    }
    assert healthy == {(str(a_rows[0]["client_instance_id"]),)}
