"""The reap on real process trees: every planned orphan is gone after apply, no other process
ever receives a signal (tracers record every one they get), and a reused pid is refused."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from actors.reap import ReapSettings
from supervisor.clock import SystemClock
from supervisor.policy.servers.census import ProcessRef
from tests.integration.reap_host import TRACER, Host, Tracer, host, ref, still_runs
from tests.integration.test_same_tick_reuse import _can_steer_pids, _steer_next_pid
from tests.realclients.harness import missing, server_entry
from tests.reap_rig import running_reap
from tests.unavailable import unavailable

pytestmark = [pytest.mark.integration, pytest.mark.anyio, pytest.mark.offline]

SETTINGS = ReapSettings(grace_seconds=2.0, kill_wait_seconds=10.0, poll_seconds=0.05)
#: Tries at handing a just-freed pid to a tracer; another process may take it first.
_REUSE_TRIES = 200


def _unless(reason: str | None) -> None:
    if reason is not None:
        unavailable(reason)


def _needs_real_servers() -> None:
    for kind in ("everything-npx", "time"):
        _unless(missing("sdk", kind))


def _needs_pid_steering() -> None:
    steerable = _can_steer_pids()
    _unless(None if steerable else "pid reuse needs root and a writable ns_last_pid")


@pytest.fixture
def world(tmp_path: Path) -> Iterator[Host]:
    with host(tmp_path) as planted:
        yield planted


def _orphan(world: Host, kind: str, *, size: int = 1) -> ProcessRef:
    """A real server ``kind`` under a client that is then killed: the server's leader."""
    (world.tmp / kind).mkdir(exist_ok=True)
    entry = server_entry(kind, name=kind, marker="reap-test", home=world.tmp / kind)
    client, server = world.client_with_server(entry.argv, env=entry.env, size=size)
    world.plant(server, client, entry.argv)
    # The client is the test's own child: killed and waited for by its Popen.
    proc = next(p for p in world.spawned.procs if p.pid == client.pid)
    proc.kill()
    proc.wait()
    return server


def _members(plan: dict[str, Any]) -> list[ProcessRef]:
    return [
        ProcessRef(pid=m["pid"], start=m["start"]) for t in plan["targets"] for m in t["members"]
    ]


def _untouched(tracers: list[Tracer]) -> None:
    for tracer in tracers:
        assert still_runs(tracer.process), tracer
        assert tracer.received() == [], tracer


async def test_every_planned_orphan_is_gone_and_nothing_else_is_signalled(world: Host) -> None:
    _needs_real_servers()
    siblings = [world.tracer("sibling-1"), world.tracer("sibling-2")]
    npx = _orphan(world, "everything-npx", size=3)  # npm exec -> sh -> node
    python = _orphan(world, "time")
    stubborn = _orphan(world, "stubborn", size=2)  # ignores SIGTERM, and so does its child
    stopped = _orphan(world, "everything")
    os.kill(stopped.pid, signal.SIGSTOP)  # verified running as planted just above
    # A live client's servers, and a server whose owner cannot be judged: all kept.
    live_client = world.tracer("live-client")
    kept = [world.server_tracer(live_client.process, f"live-server-{i}") for i in (1, 2)]
    unknown = world.server_tracer(live_client.process, "unknown-owner", owner_alive=None)

    async with running_reap(
        world.tmp, take=world.take, clock=SystemClock(), settings=SETTINGS
    ) as rig:
        plan = dict(await rig.plan())
        targets = {t["pid"] for t in plan["targets"]}
        assert targets == {npx.pid, python.pid, stubborn.pid, stopped.pid}
        reasons = {k["pid"]: k["reason_code"] for k in plan["kept"]}
        assert reasons == {
            kept[0].process.pid: "owner_client_live",
            kept[1].process.pid: "owner_client_live",
            unknown.process.pid: "owner_liveness_unknown",
        }
        members = _members(plan)
        assert len(members) == 3 + 1 + 2 + 1
        applied = dict(await rig.apply(plan["plan_token"]))
        audit = await rig.audit()

    assert applied["success"] is True, applied
    outcomes = {t["pid"]: t["outcome"] for t in applied["targets"]}
    assert outcomes == dict.fromkeys(targets, "reaped")
    for member in members:
        assert not still_runs(member), member
    signals = {t["pid"]: t["signals"] for t in applied["targets"]}
    assert signals[stubborn.pid][str(stubborn.pid)] == ["SIGTERM", "SIGKILL"]
    assert signals[stopped.pid][str(stopped.pid)] == ["SIGTERM", "SIGKILL"]
    # Only planned members were ever signalled.
    signalled = {int(pid) for t in applied["targets"] for pid in t["signals"]}
    assert signalled <= {m.pid for m in members}
    _untouched([*siblings, live_client, *kept, unknown])
    events = {e["detail"]["pid"]: e for e in audit if e["action"] == "reap_apply"}
    assert set(events) == targets
    for target in applied["targets"]:
        detail = events[target["pid"]]["detail"]
        assert detail["start"] == target["start"]
        assert detail["command"] == target["command"]
        assert detail["signals"] == target["signals"]
        assert detail["exit_seen"] is True
        assert detail["rss_bytes_freed"] == target["rss_bytes"] > 0


def _reuse(world: Host, gone: ProcessRef) -> Tracer | None:
    """A tracer holding ``gone``'s pid (which must be free), or None when other processes
    kept taking it first."""
    for attempt in range(_REUSE_TRIES):
        _steer_next_pid(gone.pid)
        log = world.tmp / f"reused-{attempt}.log"
        proc = world.spawned.popen([sys.executable, str(TRACER), str(log)])
        if proc.pid == gone.pid:
            return world._ready(proc.pid, log)
        proc.kill()  # our own child, by its Popen
        proc.wait()
        world.spawned.forget(proc.pid)
    return None


def _python_orphan(world: Host, name: str) -> ProcessRef:
    """A Python server the test started itself (so the test reaps it when it dies), planted
    with an owner client that has exited."""
    owner = world.spawned.popen([sys.executable, "-c", "pass"])
    owner_ref = ref(owner.pid)
    owner.wait()
    server = world.spawned.popen_exec(
        [sys.executable, "-c", "import time; time.sleep(600)"], stdin=subprocess.PIPE
    )
    leader = ref(server.pid)
    world.plant(leader, owner_ref, ("python", name))
    return leader


def _kill_and_reap(world: Host, leader: ProcessRef) -> None:
    proc = next(p for p in world.spawned.procs if p.pid == leader.pid)
    proc.kill()
    proc.wait()
    world.spawned.forget(leader.pid)


async def test_a_pid_reused_between_plan_and_apply_is_refused(world: Host) -> None:
    _needs_pid_steering()
    sibling = world.tracer("sibling")
    reused = _python_orphan(world, "reused")
    other = _python_orphan(world, "other")
    async with running_reap(
        world.tmp, take=world.take, clock=SystemClock(), settings=SETTINGS
    ) as rig:
        plan = dict(await rig.plan())
        assert {t["pid"] for t in plan["targets"]} == {reused.pid, other.pid}
        _kill_and_reap(world, reused)
        impostor = _reuse(world, reused)
        assert impostor is not None, "no tracer got the freed pid"
        refused = dict(await rig.apply(plan["plan_token"]))
        replanned = dict(await rig.plan())
    assert refused["code"] == "plan_changed"
    assert refused["current_target_count"] == 1
    assert still_runs(other)  # a refused apply signals nothing at all
    assert [t["pid"] for t in replanned["targets"]] == [other.pid]
    _untouched([sibling, impostor])


async def test_a_pid_reused_after_the_census_is_never_signalled(world: Host) -> None:
    _needs_pid_steering()
    reused = _python_orphan(world, "reused")
    other = _python_orphan(world, "other")
    async with running_reap(
        world.tmp, take=world.take, clock=SystemClock(), settings=SETTINGS
    ) as rig:
        world.freeze()  # discovery's last census, read before the pid changed hands
        plan = dict(await rig.plan())
        _kill_and_reap(world, reused)
        impostor = _reuse(world, reused)
        assert impostor is not None, "no tracer got the freed pid"
        applied = dict(await rig.apply(plan["plan_token"]))
        audit = await rig.audit()
    outcomes = {t["pid"]: t["outcome"] for t in applied["targets"]}
    assert outcomes == {reused.pid: "pid_reused", other.pid: "reaped"}
    assert not still_runs(other)
    _untouched([impostor])
    assert {e["detail"]["pid"]: e["outcome"] for e in audit} == outcomes
