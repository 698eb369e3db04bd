"""A copy a live client replaced (Claude Code #79740: a /mcp reconnect leaves the old
server running, its pipes open and unused) is reported, planned only when asked for,
stopped by the reap, and the copy the client uses now is untouched.

The MCP SDK's own client connects to ``mcp-server-time``, then, on the test's word,
connects to a second copy and calls a tool on it while the first connection stays open.
The census the reap sees is cut to this run's marked processes, so nothing else on the
host is ever planned.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import anyio
import pytest

from supervisor.policy.servers.census import ServerRecord
from tests.actors.harness import RETIRER
from tests.process_trees.marked import Marked, marked_supervisor
from tests.process_trees.trees import io_quiet
from tests.realclients.harness import leftovers, new_marker, sdk_argv, server_entry, temp_home
from tests.realclients.sdk_run import client_line, sdk_client
from tests.realclients.test_leftovers import require

pytestmark = [pytest.mark.integration, pytest.mark.anyio]

_LIMIT = 60.0
#: How long (real time) the census must see the old copy's counters unmoved before the
#: reconnect.
_IDLE = 0.2


async def _until_idle(supervisor: Marked, pid: int) -> None:
    """Until fresh censuses ``_IDLE`` apart (real time) show ``pid`` quiet since the same
    read (the harness's clock stands still, so its idle time does not tell); bounded in
    time and count."""
    deadline = anyio.current_time() + _LIMIT
    servers: tuple[ServerRecord, ...] = ()
    quiet: tuple[float | None, float] | None = None
    for _ in range(1000):
        servers = (await supervisor.census()).servers
        now = anyio.current_time()
        for server in servers:
            if server.process.pid != pid or server.quiet_since_boot is None:
                continue
            if quiet is None or quiet[0] != server.quiet_since_boot:
                quiet = (server.quiet_since_boot, now)  # first read, or it moved since
            elif now - quiet[1] >= _IDLE:
                return
        if now > deadline:
            break
        await anyio.sleep(0.05)
    raise AssertionError(f"the census never saw {pid} idle: {_servers(servers, (pid,))}")


def _servers(servers: Iterable[ServerRecord], pids: tuple[int, ...]) -> str:
    """What the census says of ``pids``: when each started, and since when it is quiet."""
    return (
        "; ".join(
            f"{s.process.pid}: started {s.started_since_boot}, quiet since {s.quiet_since_boot}, "
            f"idle {s.idle_seconds}, owner {s.owner}"
            for s in servers
            if s.process.pid in pids
        )
        or f"none of {pids} seen"
    )


async def test_a_replaced_copy_is_reported_planned_on_request_and_reaped(tmp_path: Path) -> None:
    require("sdk", "time")
    marker = new_marker()
    with temp_home() as home:
        entry = server_entry("time", name="time", marker=marker, home=home.home)
        with sdk_client(sdk_argv("reconnect", entry, call=True), home, marker) as client:
            assert client.stdin is not None
            assert client.stdout is not None
            old = int(client_line(client.stdout, "ready")[1])
            io_quiet(old)  # its answer's last log line written: from here it is idle
            async with marked_supervisor(tmp_path, marker, home.home) as supervisor:
                # The census sees the old copy idle: its counters read, then read again
                # unmoved (it looks at a process only once it is older than its settle
                # time, and a loaded machine may still run the copy's last writes).
                await _until_idle(supervisor, old)
                # The kernel stamps a start in 10 ms ticks: a copy started within a tick of
                # that read could have come first, so the rule would (rightly) not tell.
                await anyio.sleep(0.05)
                client.stdin.write(b"reconnect\n")
                client.stdin.flush()
                new = int(client_line(client.stdout, "reconnected")[2])
                report = await supervisor.handle.census_report(fresh=True)
                plain = await supervisor.plan()
                asked = dict(await supervisor.handle.reap_plan(RETIRER, include=["superseded"]))
                applied = await supervisor.apply(asked)
                left = {p.pid for p in leftovers(marker)}
            client_alive = client.poll() is None
    found_ = [s for s in report.superseded if s.server.process.pid in (old, new)]
    assert len(found_) == 1, _servers(report.census.servers, (old, new))
    (found,) = found_
    assert (found.server.process.pid, found.newer.pid) == (old, new)
    assert found.server.owner is not None
    assert found.server.owner.process.pid == client.pid
    # Reported only: the plan of a plain `reap plan` keeps both copies.
    assert plain["targets"] == []
    (target,) = asked["targets"]
    assert (target["pid"], target["reason_code"]) == (old, "superseded_by_newer_instance")
    assert new in {k["pid"] for k in asked["kept"]}
    assert applied["success"] is True, applied
    assert applied["reaped_count"] == 1
    # The old copy is gone; the copy the client uses now, and the client, are untouched.
    assert old not in left
    assert new in left
    assert client_alive
