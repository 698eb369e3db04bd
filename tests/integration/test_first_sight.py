"""A client that lives one second: the daemon records it as its server's owner, and plans the reap.

The census sweeps every 10 s; between sweeps it looks at each process that exec'd, as the
kernel's process events report it (root), or by listing /proc every 0.5 s (elsewhere). A
fake client starts a server over socket pairs, lives one second and is SIGKILLed: the
server's owner (the client's pid and start) was recorded while it ran, so the plan names
it gone. With neither, the same run leaves no owner recorded. The plan is only read:
nothing on the shared host is reaped.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import anyio
import pytest

from supervisor.system.proc_events import ProcEvents
from tests.integration.daemon import Daemon, running_daemon, wait_ready
from tests.process_trees.trees import child, processes, start_tree
from tests.spawned import Spawned
from tests.unavailable import unavailable

pytestmark = [pytest.mark.integration, pytest.mark.anyio]

#: How long the client lives once its server runs (the issue's promise: a second).
CLIENT_LIFETIME = 1.0


async def _swept(daemon: Daemon) -> None:
    """Until the daemon's first census sweep is done (the pass starts after it)."""
    with anyio.fail_after(60):  # a hang guard
        while True:
            with daemon.client() as client:
                status = client.status()
            if status["servers"]["sweeps"] >= 1:
                return
            await anyio.sleep(0.1)


def _entry(daemon: Daemon, pid: int) -> dict[str, Any]:
    done = daemon.cli("reap", "plan", "--json")
    assert done.returncode == 0, done.stderr
    plan = json.loads(done.stdout)
    found = [e for e in (*plan["targets"], *plan["kept"]) if e["pid"] == pid]
    assert len(found) == 1, plan
    return dict(found[0])


def _short_lived_client(spawned: Spawned) -> tuple[int, int]:
    """(client pid, server pid) once the client, having lived a second, is killed."""
    tree = start_tree(spawned, "claude", [child("mcp-fake-server", stdio="socket")])
    time.sleep(CLIENT_LIFETIME)  # the scenario: how long the client runs (no assertion on time)
    proc = next(p for p in spawned.procs if p.pid == tree.client)
    proc.kill()
    proc.wait()
    (server,) = tree.children
    return tree.client, server


@pytest.fixture(params=["process_events", "proc_listing"])
def daemon(request: pytest.FixtureRequest) -> Iterator[Daemon]:
    """The daemon as shipped (the kernel's exec events where root) and with the listing
    of /proc every 0.5 s that a daemon which is not root uses."""
    if request.param == "process_events":
        events = ProcEvents.open()
        if events is None:
            unavailable("the kernel's process events need root (CAP_NET_ADMIN)")
        events.close()
    choice = "true" if request.param == "process_events" else "false"
    # A sweep a minute apart: none falls inside the client's second, so only the look
    # at new processes can record the owner.
    config = ["[discovery]", f"process_events = {choice}", "sweep_interval_seconds = 60"]
    with running_daemon(extra_config=config) as running:
        yield running


async def test_a_client_that_lives_a_second_is_recorded_as_its_servers_owner(
    daemon: Daemon,
) -> None:
    await wait_ready(daemon)
    await _swept(daemon)
    with processes() as spawned:
        client, server = _short_lived_client(spawned)
        entry = _entry(daemon, server)
    assert entry["reason_code"] == "owner_client_gone", entry
    assert entry["owner"]["pid"] == client
    assert entry["owner"]["name"] == "claude_code"


async def test_without_the_pass_the_same_client_is_not_recorded() -> None:
    # A sweep a minute apart: none falls inside the client's second.
    config = ["[discovery]", "first_sight_interval_seconds = 0", "sweep_interval_seconds = 60"]
    with running_daemon(extra_config=config) as off:
        await wait_ready(off)
        await _swept(off)
        with processes() as spawned:
            _, server = _short_lived_client(spawned)
            entry = _entry(off, server)
    # Socket pairs: the kernel still proves it abandoned, but no owner was recorded.
    assert entry["owner"] is None
    assert entry["reason_code"] == "stdio_abandoned"
