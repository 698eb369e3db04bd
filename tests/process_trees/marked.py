"""A whole supervisor whose reap sees only the processes carrying one test's marker.

Real trees on a shared host: the census sweeps the host, but what the reap plans (and so
may signal) is cut to the processes whose environment carries ``marker``, so nothing
else on the machine is ever planned. The reap's grace runs on the virtual clock.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from contextlib import AbstractContextManager, asynccontextmanager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from tempfile import TemporaryDirectory
from typing import Any

import anyio
from anyio.from_thread import start_blocking_portal

from actors.census.actor import CensusSettings
from actors.census.sighting import stdio_abandoned
from actors.reap import ReapSettings
from supervisor.handle import SupervisorHandle
from supervisor.policy.servers.census import Census
from supervisor.policy.servers.rules import mcp_word, with_extras
from supervisor.system.proc_events import ProcEvents
from supervisor.system.unix_diag import UnixPeers
from tests.actors.harness import RETIRER, default_settings
from tests.actors.helpers_app import SettledHarness, harness
from tests.integration.reap_host import rss_of
from tests.integration.test_fleet_page_reap import clock_running
from tests.realclients.harness import Proc, leftovers, leftovers_of

__all__ = [
    "Left",
    "Marked",
    "Reaper",
    "marked_supervisor",
    "reap_afterwards",
    "reap_throughout",
]

_Answer = Mapping[str, Any]


@dataclass
class Marked:
    h: SettledHarness
    marker: str

    @property
    def handle(self) -> SupervisorHandle:
        return self.h.handle

    async def census(self) -> Census:
        """A fresh census, cut to this test's marked processes."""
        census = await self.handle.census(fresh=True)
        mine = tuple(s for s in census.servers if leftovers_of([s.process.pid], self.marker))
        return dataclasses.replace(census, servers=mine)

    async def plan(self) -> dict[str, Any]:
        return dict(await self.handle.reap_plan(RETIRER))

    async def apply(self, plan: _Answer) -> dict[str, Any]:
        async with clock_running(self.h):
            return dict(await self.handle.reap_apply(RETIRER, plan_token=plan["plan_token"]))


@asynccontextmanager
async def marked_supervisor(
    tmp_path: Path, marker: str, home: Path, *, server_words: tuple[str, ...] = ()
) -> AsyncIterator[Marked]:
    """``home``: whose client config files the census reads (the client's own);
    ``server_words``: ``[discovery] server_words``, names the census takes for servers."""
    settings = dataclasses.replace(
        default_settings(),
        census=CensusSettings(home=home, rules=with_extras((), server_words)),
        reap=ReapSettings(grace_seconds=1.0, kill_wait_seconds=5.0, poll_seconds=0.05),
    )
    marked: list[Marked] = []

    async def census() -> Census:
        return await marked[0].census()

    async with harness(tmp_path, settings=settings, census=census) as h:
        marked.append(Marked(h=h, marker=marker))
        yield marked[0]


@dataclass(frozen=True)
class Left:
    """A marked process still running after a reap, and why it was not reaped."""

    proc: Proc
    reason: str
    #: Its resident memory when the reap was done (None: unreadable).
    rss_bytes: int | None = None


#: Makes a reap for one run: entered before the client starts (``marker`` and the client's
#: ``home`` known), it gives what reaps the run's leftovers and returns what is left.
Reaper = Callable[[str, Path], AbstractContextManager[Callable[[], list[Left]]]]

#: The daemon's timers, on real time, for a supervisor that runs beside the client.
FIRST_SIGHT_SECONDS = 0.5
SWEEP_SECONDS = 10.0
EVENT_BATCH_SECONDS = 0.1


def _stdio(pid: int) -> str:
    """Where fd 0 and fd 1 go, and, for pipes and sockets, the kernel's word on their
    other ends (as the census asks it)."""
    links: list[str | None] = []
    for fd in (0, 1):
        try:
            links.append(os.readlink(f"/proc/{pid}/fd/{fd}"))
        except OSError:
            links.append(None)
    words = ", ".join(f"fd {fd} {link or 'unreadable'}" for fd, link in enumerate(links))
    if all(link is not None and link.startswith(("pipe:", "socket:")) for link in links):
        peers = UnixPeers()
        try:
            words += f" ({stdio_abandoned(pid, tuple(links), peers).detail})"
        finally:
            peers.close()
    return words


def _why(proc: Proc, plan: _Answer, words: tuple[str, ...]) -> str:
    for entry in plan["kept"]:
        if proc.pid in {m["pid"] for m in entry["members"]}:
            return f"kept {entry['reason_code']}: {entry['detail']}"
    if proc.pid in {m["pid"] for t in plan["targets"] for m in t["members"]}:
        return "planned, but still runs after the apply"
    facts = [f"parent {proc.ppid}", _stdio(proc.pid)]
    if mcp_word(proc.cmdline, with_extras((), words)) is None:
        facts.append("its command names no MCP server and no client config file lists it")
    return f"not taken for an MCP server ({'; '.join(facts)})"


async def _reap(supervisor: Marked, words: tuple[str, ...] = ()) -> list[Left]:
    plan = await supervisor.plan()
    if plan["targets"]:
        await supervisor.apply(plan)
    return [Left(p, _why(p, plan, words), rss_of(p.pid)) for p in leftovers(supervisor.marker)]


@contextmanager
def reap_afterwards(
    marker: str, home: Path, *, server_words: tuple[str, ...] = ()
) -> Iterator[Callable[[], list[Left]]]:
    """A supervisor started only once the run is over (it never saw the client)."""

    async def once() -> list[Left]:
        with TemporaryDirectory(dir="/tmp", prefix="fsv-reap-") as tmp:
            marked = marked_supervisor(Path(tmp), marker, home, server_words=server_words)
            async with marked as supervisor:
                return await _reap(supervisor, server_words)

    yield lambda: anyio.run(once)


async def _pace(supervisor: Marked) -> None:
    """The daemon's sweep and its look at new processes, on real time: each exec the
    kernel reports (root), else a listing of /proc every half second."""
    census = supervisor.h.supervisor.census
    assert census is not None
    events = ProcEvents.open()
    next_sweep = 0.0
    try:
        while True:
            if anyio.current_time() >= next_sweep:
                await census.sweep()
                next_sweep = anyio.current_time() + SWEEP_SECONDS
            if events is None:
                await anyio.sleep(FIRST_SIGHT_SECONDS)
                await census.first_sights()
                continue
            with anyio.move_on_after(FIRST_SIGHT_SECONDS):
                await anyio.wait_readable(events)
                await anyio.sleep(EVENT_BATCH_SECONDS)
            await census.take_events(events)
    finally:
        if events is not None:
            events.close()


@contextmanager
def reap_throughout(
    marker: str, home: Path, *, server_words: tuple[str, ...] = ()
) -> Iterator[Callable[[], list[Left]]]:
    """A supervisor that runs from before the client starts, sweeping and looking at new
    processes on the daemon's timers, and reaps once the run is over."""
    with (
        TemporaryDirectory(dir="/tmp", prefix="fsv-reap-") as tmp,
        start_blocking_portal() as portal,
    ):
        marked = marked_supervisor(Path(tmp), marker, home, server_words=server_words)
        running = portal.wrap_async_context_manager(marked)
        with running as supervisor:
            pacing = portal.start_task_soon(_pace, supervisor)
            try:
                portal.call(supervisor.h.supervisor.census.sweep)  # type: ignore[union-attr]

                def reap() -> list[Left]:
                    pacing.cancel()
                    return portal.call(_reap, supervisor, server_words)

                yield reap
            finally:
                pacing.cancel()
