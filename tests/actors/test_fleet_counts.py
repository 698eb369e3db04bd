"""Fleet counts from the rows one worker view at a time equal the snapshot's counts."""

from __future__ import annotations

from typing import Any

from supervisor.policy.fleet.snapshot import snapshot_fleet
from tests.unit.policy.reference_counts import count_fleet, count_fleet_rows
from tests.unit.policy.rows import HOST, NOW, OTHER_HOST, REPO, live_row, probes, row


def _fleet() -> tuple[list[dict[str, Any]], dict[int, Any]]:
    rows = [
        live_row("w-live-1", pid=101),
        live_row("w-live-2", pid=102, namespace="reviewer"),
        live_row("w-unknown", pid=103),
        live_row("w-reused", pid=104),
        row("w-stale", pid=105),
        row("w-legacy", pid=106, client_instance_id=None, instance_id_provenance=None),
        row("w-elsewhere", pid=107, host_id=OTHER_HOST),
        row("w-no-pid", pid=None, namespace=None),
        row("w-released", pid=108, status="released"),
        row("w-retired", pid=109, status="retired", namespace="reviewer"),
    ]
    evidence = probes(alive=[101, 102], unknown=[103], reused=[104], dead=[105, 106, 108, 109])
    return rows, evidence


def test_counts_from_rows_equal_the_snapshot_counts() -> None:
    rows, evidence = _fleet()
    for historical_count in (0, 5):
        snap = snapshot_fleet(
            rows,
            now=NOW,
            evidence=evidence,
            current_host_id=HOST,
            canonical_repository=REPO,
            historical_count=historical_count,
        )
        expected = count_fleet(snap, ())
        counted = count_fleet_rows(
            iter(rows),
            now=NOW,
            evidence=evidence,
            current_host_id=HOST,
            canonical_repository=REPO,
            historical_count=historical_count,
            orphans=(),
        )
        assert counted == expected
        # Read historical rows and counted-only history land in one bucket.
        assert counted.workers[("historical", "historical", "")] == 2 + historical_count
        assert len({key[1] for key in counted.workers}) > 2


def test_an_empty_registry_counts_nothing() -> None:
    counted = count_fleet_rows(
        [],
        now=NOW,
        evidence={},
        current_host_id=HOST,
        canonical_repository=None,
        historical_count=0,
        orphans=(),
    )
    assert counted.workers == {}
    assert counted.orphaned == 0
