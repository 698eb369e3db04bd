"""A copy a live client replaced (Claude Code #79740: a /mcp reconnect leaves the old
server running, its pipes open and unused) is reported, planned only when asked for,
stopped by the reap, and the copy the client uses now is untouched.

The MCP SDK's own client connects to ``mcp-server-time``, then, on the test's word,
connects to a second copy and calls a tool on it while the first connection stays open.
The census the reap sees is cut to this run's marked processes, so nothing else on the
host is ever planned.
"""

from __future__ import annotations

import json
import selectors
import subprocess
import sys
from pathlib import Path
from typing import IO

import anyio
import pytest

from tests.actors.harness import RETIRER
from tests.process_trees.marked import marked_supervisor
from tests.process_trees.trees import io_quiet
from tests.realclients.harness import (
    SDK_CLIENT,
    client_env,
    kill_all,
    kill_pid,
    leftovers,
    new_marker,
    server_entry,
    temp_home,
)
from tests.realclients.test_leftovers import require

pytestmark = [pytest.mark.integration, pytest.mark.anyio]

_LIMIT = 60.0


def _line(stream: IO[bytes], prefix: str) -> list[str]:
    """The words of the client's next line starting with ``prefix`` (bounded)."""
    with selectors.DefaultSelector() as selector:
        selector.register(stream, selectors.EVENT_READ)
        while selector.select(timeout=_LIMIT):
            line = stream.readline().decode()
            if not line:
                break
            if line.startswith(prefix):
                return line.split()
    raise AssertionError(f"the SDK client never printed {prefix!r}")


async def test_a_replaced_copy_is_reported_planned_on_request_and_reaped(tmp_path: Path) -> None:
    require("sdk", "time")
    marker = new_marker()
    with temp_home() as home:
        entry = server_entry("time", name="time", marker=marker, home=home.home)
        pairs = [arg for k, v in entry.env.items() for arg in ("--env", f"{k}={v}")]
        call = f"{entry.tool}={json.dumps(dict(entry.tool_args))}"
        client = subprocess.Popen(
            [sys.executable, str(SDK_CLIENT), *pairs, "--call", call, "reconnect", "--",
             *entry.argv],
            cwd=home.project,
            env=client_env(home.home),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            process_group=0,
        )  # fmt: skip
        assert client.stdin is not None
        assert client.stdout is not None
        try:
            old = int(_line(client.stdout, "ready")[1])
            io_quiet(old)  # its answer's last log line written: from here it is idle
            async with marked_supervisor(tmp_path, marker, home.home) as supervisor:
                # The old copy's I/O counters, first read (the census looks at a process
                # only once it is older than its settle time: real process age, bounded).
                for _ in range(100):
                    seen = await supervisor.census()
                    if old in {s.process.pid for s in seen.servers}:
                        break
                    await anyio.sleep(0.05)
                # The kernel stamps a start in 10 ms ticks: a copy started within a tick of
                # that read could have come first, so the rule would (rightly) not tell.
                await anyio.sleep(0.05)
                client.stdin.write(b"reconnect\n")
                client.stdin.flush()
                new = int(_line(client.stdout, "reconnected")[2])
                report = await supervisor.handle.census_report(fresh=True)
                plain = await supervisor.plan()
                asked = dict(await supervisor.handle.reap_plan(RETIRER, include=["superseded"]))
                applied = await supervisor.apply(asked)
                left = {p.pid for p in leftovers(marker)}
            client_alive = client.poll() is None
        finally:
            kill_pid(client.pid)
            client.wait(timeout=30)
            client.stdin.close()
            client.stdout.close()
            kill_all(marker)
    (found,) = [s for s in report.superseded if s.server.process.pid in (old, new)]
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
