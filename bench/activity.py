"""What reading each server tree's I/O counters costs a census sweep: 200 tracked servers.

A stand-in client (named ``claude``) starts 200 servers over pipes (``sleep`` under an MCP
name, so they cost the host little). Once the census knows them, sweeps alternate between
the daemon as it is and the same daemon with the activity read taken out (every read of
the counters answers None, as for an unreadable process), in one run; the figure is the
difference of the medians, in CPU milliseconds per sweep.
"""

from __future__ import annotations

import contextlib
import shutil
import statistics
from collections.abc import Iterator
from functools import partial
from typing import Any

import anyio

from actors.census.actor import CensusActor
from bench.census_rig import StandInClient, sweeps_with_and_without
from bench.fixtures import make_db
from bench.processes import short_tempdir
from bench.report import Figure
from supervisor.system.io_counters import IoCounters

__all__ = ["run"]

SERVERS = 200


@contextlib.contextmanager
def _client(servers: int) -> Iterator[list[int]]:
    """The stand-in client with ``servers`` ``sleep`` servers, each killed by pid on exit."""
    sleep = shutil.which("sleep")
    assert sleep is not None
    client = StandInClient(servers, name="mcp-activity-server", program=[sleep, "900"])
    try:
        yield client.servers
    finally:
        client.close()


@contextlib.contextmanager
def _without_activity() -> Iterator[None]:
    """The census as it was before it read I/O counters: every read answers None."""
    read = IoCounters.read
    IoCounters.read = lambda self, pid, start: None  # type: ignore[method-assign]
    try:
        yield
    finally:
        IoCounters.read = read  # type: ignore[method-assign]


def _look(census: CensusActor) -> dict[str, Any]:
    view = census.view().census.servers
    return {"servers": len(view), "idle_known": sum(s.idle_seconds is not None for s in view)}


def run(quick: bool) -> list[Figure]:
    rounds = 6 if quick else 20
    with short_tempdir("fsb-ac-") as work, _client(SERVERS) as pids:
        anyio.run(make_db, work / "registry.sqlite3", [])
        measure = partial(sweeps_with_and_without, look=_look)
        got = anyio.run(measure, work / "registry.sqlite3", work, rounds, _without_activity)
    with_ms = statistics.median(got["with"]) * 1000
    without_ms = statistics.median(got["without"]) * 1000
    detail = {
        "servers_started": len(pids),
        "servers_found": got["servers"],
        "idle_known": got["idle_known"],
        "rounds": rounds,
        "with_ms_per_sweep": [x * 1000 for x in got["with"]],
        "without_ms_per_sweep": [x * 1000 for x in got["without"]],
    }
    return [
        Figure(
            name="activity.added_ms",
            label=f"census sweep CPU added by reading I/O counters, {SERVERS} servers (median)",
            value=with_ms - without_ms,
            unit="ms",
            goal=2.0,
            op="<=",
            judged=not quick,
            detail=detail,
        ),
        Figure(
            name="activity.sweep_ms",
            label=f"census sweep CPU with activity, {SERVERS} servers (median)",
            value=with_ms,
            unit="ms",
            judged=not quick,
        ),
        Figure(
            name="activity.sweep_without_ms",
            label=f"census sweep CPU without activity, {SERVERS} servers (median)",
            value=without_ms,
            unit="ms",
            judged=not quick,
        ),
    ]
