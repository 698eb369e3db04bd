"""The opt-in stop of superseded copies (``[servers] stop_superseded_after_seconds``) on
virtual time with scripted processes: only copies idle past the configured time since
their newer copy started are stopped, under the supervisor's own grant, audited."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from actors.reap import ReapSettings
from supervisor.policy.servers.census import ServerRecord
from tests.actors.harness import RETIRER
from tests.actors.test_reap import SETTINGS, on_virtual_time, reaping
from tests.unit.policy.test_reap_plan import server

pytestmark = pytest.mark.anyio

AFTER = 600.0
ON = replace(SETTINGS, stop_superseded_after_seconds=AFTER, superseded_check_seconds=30.0)


def copy(pid: int, *, started: float, quiet: float, idle: float) -> ServerRecord:
    """One copy of one entry under one live owner (``server``'s owner depends on the pid,
    so the owner is set to the same client for every copy)."""
    base = server(100, command=("npx", "mcp-server-x"))
    return replace(
        server(pid, command=("npx", "mcp-server-x")),
        owner=base.owner,
        started_since_boot=started,
        quiet_since_boot=quiet,
        idle_seconds=idle,
    )


async def test_a_copy_idle_past_the_time_since_its_newer_copy_started_is_stopped(
    tmp_path: Path,
) -> None:
    async with reaping(tmp_path, settings=ON) as w:
        w.rig.profiles.by_name["supervisor"] = replace(RETIRER, name="supervisor")
        # Newer copy started at 1000 s; now is 1000 + 900 s for the old one (quiet since 900).
        w.add(copy(10, started=100.0, quiet=900.0, idle=1000.0))
        # Idle only 300 s since the newer copy started: kept.
        w.add(copy(11, started=200.0, quiet=950.0, idle=350.0))
        w.add(copy(12, started=1000.0, quiet=1890.0, idle=10.0))  # the newest: in use
        w.add(server(20, alive=False))  # an orphan: the reap's business, not this round's
        answer = await on_virtual_time(w.clock, w.rig.superseded_tick())
        audit = await w.rig.audit()
    assert [t["pid"] for t in answer["targets"]] == [10]
    assert w.procs.signalled() == {10}
    (event,) = [e for e in audit if e.get("action") == "reap_apply" and e.get("outcome")]
    assert "superseded_by_newer_instance" in str(event)


async def test_the_round_runs_on_its_own_timer_and_is_off_by_default(tmp_path: Path) -> None:
    async with reaping(tmp_path, settings=ON) as w:
        w.rig.profiles.by_name["supervisor"] = replace(RETIRER, name="supervisor")
        w.add(copy(10, started=100.0, quiet=900.0, idle=1000.0))
        w.add(copy(12, started=1000.0, quiet=1890.0, idle=10.0))
        for _ in range(400):  # bounded: the timer's 30 s, then the grace, on virtual time
            if w.procs.signalled():
                break
            await w.clock.advance(0.5)
    assert w.procs.signalled() == {10}
    (tmp_path / "off").mkdir()
    async with reaping(tmp_path / "off", settings=SETTINGS) as w:
        w.rig.profiles.by_name["supervisor"] = replace(RETIRER, name="supervisor")
        w.add(copy(10, started=100.0, quiet=900.0, idle=1000.0))
        w.add(copy(12, started=1000.0, quiet=1890.0, idle=10.0))
        await w.clock.advance(3600)
        off = await w.rig.superseded_tick()
    assert w.procs.signalled() == set()
    assert off["outcome"] == "nothing_to_reap"


async def test_without_the_grant_the_round_stops_nothing_and_says_why(tmp_path: Path) -> None:
    async with reaping(tmp_path, settings=ON) as w:
        w.add(copy(10, started=100.0, quiet=900.0, idle=1000.0))
        w.add(copy(12, started=1000.0, quiet=1890.0, idle=10.0))
        denied = await w.rig.superseded_tick()
    assert denied["code"] == "permission_denied"
    assert w.procs.sent == []


def test_the_settings_default_is_off() -> None:
    assert ReapSettings().stop_superseded_after_seconds == 0.0
