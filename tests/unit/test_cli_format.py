"""The CLI's human renderings of real policy results."""

from __future__ import annotations

from supervisor.cli.format import format_snapshot
from supervisor.policy.fleet.snapshot import snapshot_fleet
from supervisor.policy.render import snapshot_dict
from tests.unit.policy.rows import HOST, NOW, REPO, live_row, probes, row


def test_snapshot_lists_every_worker_and_names_the_stamp_as_no_apply_token() -> None:
    rows = [
        row("w-stale", pid=101),
        live_row("w-live", pid=102),
        row("w-old", pid=103, status="retired"),
    ]
    snapshot = snapshot_fleet(
        rows,
        now=NOW,
        evidence=probes(dead=[101, 103], alive=[102]),
        current_host_id=HOST,
        canonical_repository=REPO,
    )
    result = snapshot_dict(snapshot)

    text = format_snapshot(result)

    for identity in ("w-stale", "w-live", "w-old"):
        assert identity in text
    assert "live 1  stale 1  historical 1" in text
    assert (
        f"observed {result['snapshot_at']}  registry_revision {result['registry_revision']} "
        "(observation stamp; apply takes a plan's tokens)"
    ) in text
