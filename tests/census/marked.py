"""A whole supervisor whose reap sees only the processes carrying one test's marker.

Real trees on a shared host: the census sweeps the host, but what the reap plans (and so
may signal) is cut to the processes whose environment carries ``marker``, so nothing
else on the machine is ever planned. The reap's grace runs on the virtual clock.
"""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from tempfile import TemporaryDirectory
from typing import Any

import anyio

from actors.census.actor import CensusSettings
from actors.reap import ReapSettings
from supervisor.handle import SupervisorHandle
from supervisor.policy.servers.census import Census
from tests.actors.harness import RETIRER, default_settings
from tests.actors.helpers_app import SettledHarness, harness
from tests.integration.test_fleet_page_reap import clock_running
from tests.realclients.harness import Proc, leftovers, leftovers_of

__all__ = ["Marked", "marked_supervisor", "reap_leftovers"]

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
async def marked_supervisor(tmp_path: Path, marker: str, home: Path) -> AsyncIterator[Marked]:
    """``home``: whose client config files the census reads (the client's own)."""
    settings = dataclasses.replace(
        default_settings(),
        census=CensusSettings(home=home),
        reap=ReapSettings(grace_seconds=1.0, kill_wait_seconds=5.0, poll_seconds=0.05),
    )
    marked: list[Marked] = []

    async def census() -> Census:
        return await marked[0].census()

    async with harness(tmp_path, settings=settings, census=census) as h:
        marked.append(Marked(h=h, marker=marker))
        yield marked[0]


def reap_leftovers(marker: str, home: Path) -> list[Proc]:
    """A supervisor started now (it never saw the clients) plans a reap of this marker's
    processes and applies it; what is left of them afterwards."""

    async def once() -> None:
        with TemporaryDirectory(dir="/tmp", prefix="fsv-reap-") as tmp:
            async with marked_supervisor(Path(tmp), marker, home) as supervisor:
                plan = await supervisor.plan()
                if plan["targets"]:
                    await supervisor.apply(plan)

    anyio.run(once)
    return leftovers(marker)
