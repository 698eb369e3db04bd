"""The reap actor on virtual time with scripted processes: the compare-and-swap, the guard, the
grant, the grace, the per-target outcomes and the audit trail."""

from __future__ import annotations

import signal
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, TypeVar

import anyio
import anyio.lowlevel
import pytest

from actors.reap import ReapSettings
from supervisor.clock import FakeClock, MonotonicWall
from supervisor.policy.servers.census import Census, ProcessRef, ServerRecord
from supervisor.system.process_tree import Member
from tests.actors.harness import AUTHOR, RETIRER, START
from tests.reap_rig import ReapRig, running_reap
from tests.unit.policy.test_reap_plan import census, server

pytestmark = pytest.mark.anyio

T = TypeVar("T")
GRACE = 5.0
SETTINGS = ReapSettings(grace_seconds=GRACE, kill_wait_seconds=2.0, poll_seconds=0.25)


@dataclass
class Proc:
    start: str
    running: bool = True
    ignores_term: bool = False
    killable: bool = True


@dataclass
class Scripted:
    """``ProcessOps`` over scripted processes; every delivered signal is logged with its time."""

    clock: FakeClock
    procs: dict[int, Proc] = field(default_factory=dict)
    sent: list[tuple[float, int, str]] = field(default_factory=list)

    def add(self, record: ServerRecord, **behaviour: Any) -> ServerRecord:
        for ref in (record.process, *record.usage.children):
            self.procs[ref.pid] = Proc(start=ref.start, **behaviour)
        return record

    def incarnation(self, pid: int) -> str | None:
        proc = self.procs.get(pid)
        return proc.start if proc is not None and proc.running else None

    def signal(self, member: Member, signum: int) -> bool:
        proc = self.procs.get(member.pid)
        if proc is None or not proc.running or proc.start != member.start:
            return False  # what a pidfd opened against the planned start refuses
        self.sent.append((self.clock.monotonic(), member.pid, signal.Signals(signum).name))
        if (signum == signal.SIGTERM and not proc.ignores_term) or (
            signum == signal.SIGKILL and proc.killable
        ):
            proc.running = False
        return True

    def signalled(self) -> set[int]:
        return {pid for _, pid, _ in self.sent}


@dataclass
class World:
    """The reap actor, its virtual clock, the scripted processes and the census's servers."""

    rig: ReapRig
    clock: FakeClock
    procs: Scripted
    records: list[ServerRecord]

    def add(self, record: ServerRecord, **behaviour: Any) -> ServerRecord:
        self.records.append(self.procs.add(record, **behaviour))
        return record

    async def apply(self, token: str, **options: Any) -> Mapping[str, Any]:
        return await on_virtual_time(self.clock, self.rig.apply(token, **options))


@asynccontextmanager
async def reaping(
    tmp_path: Path,
    *,
    settings: ReapSettings = SETTINGS,
    take: Callable[[], Census] | None = None,
    census_runs: bool = True,
) -> AsyncIterator[World]:
    """By default the census lists every added server whose leader still runs, as discovery
    would; ``take`` answers instead, and without ``census_runs`` no census runs."""
    fake = FakeClock(wall=START)
    procs = Scripted(clock=fake)
    records: list[ServerRecord] = []
    source = take or (lambda: live_census(procs, records))
    async with running_reap(
        tmp_path,
        take=source if census_runs else None,
        clock=MonotonicWall(fake),
        processes=procs,
        settings=settings,
    ) as rig:
        yield World(rig=rig, clock=fake, procs=procs, records=records)


async def on_virtual_time(fake: FakeClock, work: Awaitable[T]) -> T:
    """``work``'s result, advancing virtual time while it waits (for the grace)."""
    box: list[T] = []

    async def run() -> None:
        box.append(await work)

    async with anyio.create_task_group() as tg:
        tg.start_soon(run)
        with anyio.fail_after(60):  # a hang guard: the writer's commits take real time
            while not box:
                await fake.advance(0.25)
                await anyio.lowlevel.checkpoint()
    return box[0]


def child(pid: int) -> ProcessRef:
    return ProcessRef(pid=pid, start=f"ticks-{pid + 1}")


def live_census(procs: Scripted, records: list[ServerRecord]) -> Census:
    """The census as discovery would take it now: servers whose leader still runs."""
    return census(*(r for r in records if procs.incarnation(r.process.pid) is not None))


async def test_apply_reaps_the_planned_trees_and_audits_each(tmp_path: Path) -> None:
    async with reaping(tmp_path) as w:
        w.add(server(100, alive=False, children=(child(101),), rss=4096))
        w.add(server(200, alive=True, stdio_open=False, rss=1024))
        w.add(server(300))
        w.add(server(400, alive=None))
        plan = await w.rig.plan()
        assert [t["pid"] for t in plan["targets"]] == [100, 200]
        assert {k["pid"]: k["reason_code"] for k in plan["kept"]} == {
            300: "owner_client_live",
            400: "owner_liveness_unknown",
        }
        assert plan["target_rss_bytes"] == 5120
        applied = await w.apply(plan["plan_token"])
        audit = await w.rig.audit()
    assert applied["success"] is True
    assert applied["outcome"] == "applied"
    assert {t["pid"]: t["outcome"] for t in applied["targets"]} == {100: "reaped", 200: "reaped"}
    assert applied["targets"][0]["signals"] == {"100": ["SIGTERM"], "101": ["SIGTERM"]}
    assert applied["rss_bytes_freed"] == 5120
    assert w.procs.signalled() == {100, 101, 200}
    assert w.procs.procs[300].running
    assert w.procs.procs[400].running
    events = [e for e in audit if e["action"] == "reap_apply"]
    assert sorted(e["detail"]["pid"] for e in events) == [100, 200]
    first = next(e for e in events if e["detail"]["pid"] == 100)
    assert first["outcome"] == "reaped"
    assert first["actor"] == RETIRER.name
    assert first["detail"]["start"] == "ticks-101"
    assert first["detail"]["command"] == ["node", "server.js"]
    assert first["detail"]["signals"] == {"100": ["SIGTERM"], "101": ["SIGTERM"]}
    assert first["detail"]["exit_seen"] is True
    assert first["detail"]["rss_bytes_freed"] == 4096
    assert first["detail"]["reason_code"] == "owner_client_gone"


async def test_sigkill_goes_only_after_the_grace_and_only_to_what_remains(
    tmp_path: Path,
) -> None:
    async with reaping(tmp_path) as w:
        w.add(server(100, alive=False), ignores_term=True)
        w.add(server(200, alive=False))
        plan = await w.rig.plan()
        applied = await w.apply(plan["plan_token"])
    assert applied["success"] is True
    by_pid = {t["pid"]: t["signals"] for t in applied["targets"]}
    assert by_pid == {100: {"100": ["SIGTERM", "SIGKILL"]}, 200: {"200": ["SIGTERM"]}}
    term, kill = (t for t, pid, _ in w.procs.sent if pid == 100)
    assert kill - term >= GRACE


async def test_a_moved_plan_reaps_nothing(tmp_path: Path) -> None:
    async with reaping(tmp_path) as w:
        w.add(server(100, alive=False))
        plan = await w.rig.plan()
        # Another server is orphaned between plan and apply: the token moves.
        w.add(server(200, alive=False))
        refused = await w.rig.apply(plan["plan_token"])
        audit = await w.rig.audit()
    assert refused["success"] is False
    assert refused["code"] == "plan_changed"
    assert refused["current_target_count"] == 2
    assert refused["current_plan_token"] != plan["plan_token"]
    assert w.procs.sent == []
    assert [(e["outcome"], e["detail"]["code"]) for e in audit] == [("refused", "plan_changed")]


async def test_a_pid_taken_after_the_census_is_never_signalled(tmp_path: Path) -> None:
    frozen: list[Census] = []
    # The census was read before the pid changed hands: it still names the old process.
    async with reaping(tmp_path, take=lambda: frozen[0]) as w:
        reused = w.add(server(100, alive=False, children=(child(101),)))
        frozen.append(census(reused, w.add(server(200, alive=False))))
        plan = await w.rig.plan()
        w.procs.procs[100] = Proc(start="ticks-999")  # someone else's process now
        applied = await w.apply(plan["plan_token"])
        audit = await w.rig.audit()
    outcomes = {t["pid"]: t["outcome"] for t in applied["targets"]}
    assert outcomes == {100: "pid_reused", 200: "reaped"}
    assert applied["success"] is True
    assert w.procs.signalled() == {200}
    assert w.procs.procs[100].running
    assert w.procs.procs[101].running  # its tree is left whole: nothing of it is signalled
    assert {e["detail"]["pid"]: e["outcome"] for e in audit} == {
        100: "pid_reused",
        200: "reaped",
    }


async def test_a_tree_that_survives_sigkill_is_reported(tmp_path: Path) -> None:
    async with reaping(tmp_path) as w:
        w.add(server(100, alive=False), ignores_term=True, killable=False)
        plan = await w.rig.plan()
        applied = await w.apply(plan["plan_token"])
    assert applied["success"] is False
    assert applied["code"] == "reap_incomplete"
    [target] = applied["targets"]
    assert target["outcome"] == "survived"
    assert target["survivors"] == [100]
    assert target["rss_bytes_freed"] is None


async def test_the_mass_guard_and_its_override(tmp_path: Path) -> None:
    guarded = replace(SETTINGS, mass_guard_share=0.5, mass_guard_floor=1)
    async with reaping(tmp_path, settings=guarded) as w:
        for pid in (10, 20, 30, 40):
            w.add(server(pid, alive=pid > 30))
        plan = await w.rig.plan()
        refused = await w.rig.apply(plan["plan_token"])
        assert w.procs.sent == []
        applied = await w.apply(plan["plan_token"], override=True)
    assert refused["code"] == "mass_reap_guard"
    assert (refused["would_reap"], refused["servers"]) == (3, 4)
    assert applied["success"] is True
    assert applied["mass_guard_overridden"] is True
    assert w.procs.signalled() == {10, 20, 30}


async def test_a_grant_revoked_after_the_plan_stops_the_apply(tmp_path: Path) -> None:
    async with reaping(tmp_path) as w:
        w.add(server(100, alive=False))
        plan = await w.rig.plan()
        w.rig.profiles.revoke(RETIRER.name)
        refused = await w.rig.apply(plan["plan_token"])
        as_author = await w.rig.apply(plan["plan_token"], profile=AUTHOR)
    for answer in (refused, as_author):
        assert answer["code"] == "permission_denied"
        assert answer["denied"] is True
    assert w.procs.sent == []


async def test_without_a_census_nothing_is_planned_or_reaped(tmp_path: Path) -> None:
    async with reaping(tmp_path, census_runs=False) as w:
        w.add(server(100, alive=False))
        plan = await w.rig.plan()
        applied = await w.rig.apply("reap-v1-anything")
        audit = await w.rig.audit()
    assert plan["code"] == "census_unavailable"
    assert applied["code"] == "census_unavailable"
    assert len(audit) == 2
    assert w.procs.sent == []


async def test_the_periodic_round_is_the_same_plan_and_apply(tmp_path: Path) -> None:
    async with reaping(tmp_path) as w:
        w.add(server(100, alive=False))
        w.add(server(200))
        denied = await w.rig.tick()  # no "supervisor" profile: no grant, nothing reaped
        assert w.procs.sent == []
        w.rig.profiles.by_name["supervisor"] = replace(RETIRER, name="supervisor")
        applied = await on_virtual_time(w.clock, w.rig.tick())
        quiet = await w.rig.tick()
    assert denied["code"] == "permission_denied"
    assert [t["pid"] for t in applied["targets"]] == [100]
    assert w.procs.signalled() == {100}
    assert quiet["outcome"] == "nothing_to_reap"
