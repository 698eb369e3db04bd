"""What proving pipe leaks costs a census sweep: 1,000 processes on the host, 40 candidates.

The proof asks the kernel, per candidate pipe, whether any process holds its other end
(``system.pipe_ends``: one open of ``/proc/<pid>/fd/<n>``, one ``fstat``, one ``poll``);
no host-wide descriptor scan is made, so the cost follows the candidates, not the host.
Candidates: 20 servers whose client was killed (no process holds their pipes' client
side: listed abandoned, probed every sweep) and 20 whose client side a ``sleep`` still
holds (judged again every sweep). Once the census knows them, sweeps alternate between
the census as it is and the same census with the probe answering at once without asking
the kernel, in one run; the figure is the difference of the medians, in CPU ms per sweep.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any
from unittest.mock import patch

import anyio

from actors.census.actor import CensusActor
from bench.census_rig import StandInClient, sweeps_with_and_without
from bench.fixtures import make_db
from bench.processes import Sleepers, short_tempdir
from bench.report import Figure
from supervisor.system.pipe_ends import PipeEnd

__all__ = ["run"]

CANDIDATES = 20
_LAUNCHER = Path(__file__).resolve().parents[1] / "tests" / "process_trees" / "pipe_launcher.py"


@contextlib.contextmanager
def _orphans(count: int) -> Iterator[list[int]]:
    """``count`` servers over pipes whose client was SIGKILLed; each killed by pid on exit."""
    sleep = shutil.which("sleep")
    assert sleep is not None
    client = StandInClient(count, name="mcp-pipe-orphan", program=[sleep, "900"])
    os.kill(client.proc.pid, signal.SIGKILL)  # our own child, by its Popen's pid
    client.proc.wait(timeout=10)
    try:
        yield client.servers
    finally:
        client.close()


@contextlib.contextmanager
def _held(count: int) -> Iterator[list[int]]:
    """``count`` servers whose launcher exited and whose stdin a ``sleep`` still holds."""
    spec = {
        "server": ["mcp-pipe-held", "-c", "import time; time.sleep(900)"],
        "executable": sys.executable,
        "holders": [{"kind": "sleep", "end": "stdin"}],
    }
    pids: list[int] = []
    try:
        for _ in range(count):
            # stderr is not captured: the server and its holder inherit it and keep it open.
            out = subprocess.run(
                [sys.executable, str(_LAUNCHER), json.dumps(spec)],
                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, check=True, timeout=60,
            ).stdout  # fmt: skip
            told = json.loads(out)
            pids += [int(told["server"]), *(int(p) for p in told["holders"])]
        yield pids
    finally:
        for pid in pids:  # started just above, not waited for by anyone else
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def _not_asked(pid: int, fd: int, link: str) -> PipeEnd:
    return PipeEnd(link=link, access=None, released=None, why="not asked")


def _without_probe() -> contextlib.AbstractContextManager[Any]:
    """The probe answering at once, without asking the kernel."""
    return patch("actors.census.sighting.probe_pipe", _not_asked)


def _look(census: CensusActor) -> dict[str, Any]:
    view = census.view().census.servers
    return {
        "abandoned": sum(1 for s in view if s.stdio_abandoned is True),
        "unowned_judged_again": len(census.tracker.unowned),
    }


def run(quick: bool) -> list[Figure]:
    count = 200 if quick else 1_000
    rounds = 5 if quick else 15
    with (
        short_tempdir("fsb-pipes-") as work,
        Sleepers(count),
        _orphans(CANDIDATES) as orphans,
        _held(CANDIDATES),
    ):
        anyio.run(make_db, work / "registry.sqlite3", [])
        measure = partial(sweeps_with_and_without, warm_sweeps=2, look=_look)
        got = anyio.run(measure, work / "registry.sqlite3", work, rounds, _without_probe)
    with_ms = statistics.median(got["with"]) * 1000
    without_ms = statistics.median(got["without"]) * 1000
    added = with_ms - without_ms
    probes = got["abandoned"] * 2 + got["unowned_judged_again"] * 2
    detail = {
        "processes_started": count,
        "orphans_started": len(orphans),
        "abandoned_found": got["abandoned"],
        "unowned_judged_again": got["unowned_judged_again"],
        "rounds": rounds,
        "with_ms": [x * 1000 for x in got["with"]],
        "without_ms": [x * 1000 for x in got["without"]],
        "pipe_probes_per_sweep": probes,
    }
    return [
        Figure(
            name="pipes.proof_added_ms",
            label=f"CPU the pipe proof adds to a sweep, {count:,} processes, 40 candidates",
            value=added,
            unit="ms",
            judged=not quick,
            detail=detail,
        ),
        Figure(
            name="pipes.sweep_ms",
            label=f"census sweep CPU with the proof, {count:,} processes (median)",
            value=with_ms,
            unit="ms",
            judged=not quick,
        ),
        Figure(
            name="pipes.sweep_without_ms",
            label="the same sweep with the probe not asking the kernel (median)",
            value=without_ms,
            unit="ms",
            judged=not quick,
        ),
    ]


if __name__ == "__main__":
    for figure in run(quick="--quick" in sys.argv[1:]):
        print(f"{figure.label}: {figure.value:.3f} {figure.unit}")
        if figure.detail:
            print(f"  {dict(figure.detail)}")
