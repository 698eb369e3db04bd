"""Workers whose launching client is gone are reported orphaned in snapshot and plan."""

from __future__ import annotations

from pathlib import Path

import pytest

from supervisor.cli.format import format_plan, format_snapshot
from supervisor.policy.fleet.orphans import REASON_CLIENT_EXITED, REASON_CLIENT_PID_REUSED
from tests.actors.harness import READER
from tests.actors.helpers_app import SettledHarness, harness

pytestmark = pytest.mark.anyio


async def _orphan_of_client(h: SettledHarness) -> tuple[int, str]:
    client = h.spawn(start="ticks-client")
    registration = await h.register(client_pid=client, client_process_start_time="ticks-client")
    return client, str(registration["worker_identity"])


async def test_a_worker_whose_client_exited_is_orphaned_but_not_retired(tmp_path: Path) -> None:
    async with harness(tmp_path) as h:
        client, worker = await _orphan_of_client(h)
        await h.register()  # a worker without a recorded client is never orphaned
        snap = await h.handle.snapshot(READER)
        assert snap["orphaned_workers"] == []
        assert snap["orphaned_worker_count"] == 0

        h.probes.kill(client)
        snap = await h.handle.snapshot(READER)
        plan = await h.handle.plan(READER)
        counts = await h.handle.fleet_counts()
        row = await h.row(worker)
    (finding,) = snap["orphaned_workers"]
    assert finding["worker_identity"] == worker
    assert finding["reason_code"] == REASON_CLIENT_EXITED
    assert finding["client_pid"] == client
    assert finding["pid"] == row["pid"]
    assert plan["orphaned_workers"] == snap["orphaned_workers"]
    # A finding, not a retirement: the worker itself still runs, so it stays preserved.
    assert worker not in plan["candidate_worker_identities"]
    assert counts.orphaned == 1
    assert row["client_pid"] == client
    assert row["client_process_start_time"] == "ticks-client"


async def test_a_reused_client_pid_is_a_gone_client(tmp_path: Path) -> None:
    async with harness(tmp_path) as h:
        client, _ = await _orphan_of_client(h)
        h.probes.revive(client, "ticks-someone-else")
        snap = await h.handle.snapshot(READER)
    (finding,) = snap["orphaned_workers"]
    assert finding["reason_code"] == REASON_CLIENT_PID_REUSED


async def test_an_unprobeable_client_or_a_dead_worker_is_no_orphan(tmp_path: Path) -> None:
    async with harness(tmp_path) as h:
        client, worker = await _orphan_of_client(h)
        h.probes.forget(client)  # cannot tell: not an answer
        assert (await h.handle.snapshot(READER))["orphaned_workers"] == []
        h.probes.kill(client)
        row = await h.row(worker)
        h.probes.kill(int(row["pid"]))  # the worker is gone too: stale, for the plan
        assert (await h.handle.snapshot(READER))["orphaned_workers"] == []


async def test_a_claimed_client_must_be_the_incarnation_that_runs(tmp_path: Path) -> None:
    async with harness(tmp_path) as h:
        client = h.spawn(start="ticks-real")
        refused = await h.handle.register(
            h.spawn(),
            {"namespace": "author", "client_pid": client, "client_process_start_time": "forged"},
        )
        assert not refused.ok
        assert refused.code == "invalid_registration"
        assert "not the claimed 'forged'" in refused.detail
        bad = await h.handle.register(h.spawn(), {"client_pid": True})
        assert bad.code == "invalid_registration"
        assert "client_pid must be a positive integer" in bad.detail


async def test_the_text_snapshot_and_plan_list_orphaned_workers(tmp_path: Path) -> None:
    async with harness(tmp_path) as h:
        client, worker = await _orphan_of_client(h)
        quiet = format_snapshot(await h.handle.snapshot(READER))
        h.probes.kill(client)
        snap = format_snapshot(await h.handle.snapshot(READER))
        plan = format_plan(await h.handle.plan(READER))
    assert "orphaned" not in quiet
    for text in (snap, plan):
        heading = "orphaned workers (their client is gone): 1"
        assert heading in text
        section = text.split(heading, 1)[1]
        (line,) = [line for line in section.splitlines() if line.startswith(worker)]
        assert str(client) in line.split()
        assert REASON_CLIENT_EXITED in line.split()
