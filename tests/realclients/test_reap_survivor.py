"""A server's child that outlived a restart by its live client is reaped; the client, and
the copy it uses now, are not touched.

The MCP SDK's own client stops its server as it does (stdin closed; then the server's
process group signalled), and starts a new copy. The server had started a child in a
session of its own, as Playwright starts its browser: out of the group's reach, it runs
on (the SDK's note: "daemonizers that left the group escape by design"), holding nothing
of the client's stdio. A bare run leaves it; the supervisor plans it as
``survivor_unreachable`` while the client runs and reaps it. The census the reap sees is
cut to this run's marked processes.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.process_trees.marked import marked_supervisor
from tests.process_trees.trees import kids_of, running, until
from tests.realclients.harness import (
    DETACHING,
    leftovers,
    new_marker,
    sdk_argv,
    server_entry,
    temp_home,
)
from tests.realclients.sdk_run import client_line, sdk_client
from tests.realclients.test_leftovers import require

pytestmark = [pytest.mark.integration, pytest.mark.anyio]

#: The stub's script is what makes it a server here (``[discovery] server_words``).
_WORDS = ("stubborn_server",)


async def test_the_child_a_restarted_server_left_is_reaped_while_its_client_runs(
    tmp_path: Path,
) -> None:
    require("sdk", DETACHING)
    marker = new_marker()
    with temp_home() as home:
        entry = server_entry(DETACHING, name="browser", marker=marker, home=home.home)
        with sdk_client(sdk_argv("restart", entry), home, marker) as client:
            assert client.stdin is not None
            assert client.stdout is not None
            old = int(client_line(client.stdout, "ready")[1])
            until(lambda: kids_of(old), "the first copy to start its child")
            (child,) = kids_of(old)
            async with marked_supervisor(
                tmp_path, marker, home.home, server_words=_WORDS
            ) as supervisor:
                first = await supervisor.census()  # the copy, its child and its client
                client.stdin.write(b"restart\n")
                client.stdin.flush()
                new = int(client_line(client.stdout, "restarted")[2])
                until(lambda: not running(old), "the first copy to be stopped")
                until(lambda: kids_of(new), "the new copy to start its child")
                await supervisor.census()
                await supervisor.census()
                bare = {p.pid for p in leftovers(marker)}
                plan = await supervisor.plan()
                applied = await supervisor.apply(plan)
                left = {p.pid for p in leftovers(marker)}
            client_ran = client.poll() is None
    (server,) = [s for s in first.servers if s.process.pid == old]
    assert [m.pid for m in server.usage.children] == [child]
    assert server.owner is not None
    assert server.owner.process.pid == client.pid
    assert child in bare  # a bare run leaves the first copy's child
    assert {t["reason_code"] for t in plan["targets"]} == {"survivor_unreachable"}
    assert {m["pid"] for t in plan["targets"] for m in t["members"]} == {child}
    assert applied["success"] is True, applied
    assert {t["outcome"] for t in applied["targets"]} == {"reaped"}
    assert child not in left
    assert bare - left == {child}  # the new copy and its child are untouched
    assert new in left
    assert client_ran  # the client was never touched
