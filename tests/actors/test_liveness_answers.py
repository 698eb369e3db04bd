"""ProbeNow's shortcuts (unfired watches, one /proc listing) give exactly a plain probe's answer."""

from __future__ import annotations

import itertools
import os
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, cast

import anyio
import anyio.lowlevel
import pytest
from anyio.streams.memory import MemoryObjectSendStream
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from actors.liveness.actor import LivenessActor, LivenessSettings
from actors.liveness.answers import ProbeShortcuts
from actors.liveness.inbox import LivenessInbox, ProbeNow, Watch
from actors.mailbox import ask
from supervisor.clock import FakeClock, MonotonicWall
from supervisor.policy.evidence import PidEvidence
from supervisor.store.base import Store
from supervisor.system.exit_watch import exit_watch_supported
from supervisor.system.probes import ProcessEvidence
from tests.actors.harness import START

pytestmark = pytest.mark.skipif(not exit_watch_supported(), reason="epoll is Linux-only")

SLOTS = 5
BASE_PID = 700
ABSENT = (BASE_PID + SLOTS, BASE_PID + SLOTS + 1)
#: Enough unwatched pids to make the actor list /proc rather than probe each.
BULK_ABSENT = tuple(range(9000, 9020))

# Process states, as the kernel's exit path moves through them.
RUNNING = "running"
LEADER_GONE = "leader_gone"  # main thread exited, others run: stat says Z, yet alive
ZOMBIE = "zombie"  # exited, not reaped: stat says Z alone in its group; pidfd readable


@dataclass
class Proc:
    start: str
    state: str = RUNNING
    # Write ends of the pipes standing in for pidfds opened on this incarnation.
    watch_ends: list[int] = field(default_factory=list)


class World:
    """A model kernel: stat reads, one /proc listing, pidfds that fire when a process exits."""

    def __init__(self) -> None:
        self.procs: dict[int, Proc] = {}
        self.listing_fails = False
        self.probed: list[int] = []
        self._starts = itertools.count(1)
        self._ends: list[int] = []

    # --- the model's events ---

    def spawn(self, pid: int) -> None:
        if pid not in self.procs:
            self.procs[pid] = Proc(start=f"ticks-{next(self._starts)}")

    def leader_exits(self, pid: int) -> None:
        proc = self.procs.get(pid)
        if proc is not None and proc.state == RUNNING:
            proc.state = LEADER_GONE

    def exit(self, pid: int) -> None:
        proc = self.procs.get(pid)
        if proc is not None and proc.state != ZOMBIE:
            proc.state = ZOMBIE
            for end in proc.watch_ends:
                os.write(end, b"x")

    def reap(self, pid: int) -> None:
        proc = self.procs.get(pid)
        if proc is not None and proc.state == ZOMBIE:
            del self.procs[pid]

    # --- pidfd_open(pid, expected_start_time) ---

    def open_watch(self, pid: int, start_time: str | None) -> int | None:
        proc = self.procs.get(pid)
        if proc is None or (start_time is not None and start_time != proc.start):
            return None
        read_end, write_end = os.pipe()
        self._ends.append(write_end)
        proc.watch_ends.append(write_end)
        if proc.state == ZOMBIE:
            os.write(write_end, b"x")  # a pidfd on a zombie is readable at once
        return read_end

    def listing(self) -> frozenset[int] | None:
        return None if self.listing_fails else frozenset(self.procs)

    # --- ProbeBackend ---

    def host_id(self) -> str | None:
        return "host-a"

    def boot_id(self) -> str | None:
        return "boot-1"

    def probe(self, pid: int) -> ProcessEvidence:
        self.probed.append(pid)
        proc = self.procs.get(pid)
        if proc is None:
            return ProcessEvidence(pid=pid, alive=False, start_time=None)
        return ProcessEvidence(pid=pid, alive=proc.state != ZOMBIE, start_time=proc.start)

    def identify(self, pid: int) -> ProcessEvidence:
        # The model's starts carry no inode: identifying tells no more than probing.
        return self.probe(pid)

    def probe_many(self, pids: Sequence[int]) -> list[ProcessEvidence]:
        return [self.probe(pid) for pid in pids]

    def parent_pid(self, pid: int) -> int | None:
        return None

    def process_cwd(self, pid: int) -> str | None:
        return None

    def close(self) -> None:
        for end in self._ends:
            os.close(end)


class NoRows:
    async def read_active_processes(self) -> list[tuple[Any, ...]]:
        return []


@dataclass
class Rig:
    world: World
    actor: LivenessActor
    inbox: MemoryObjectSendStream[LivenessInbox]
    answers: list[dict[int, PidEvidence]] = field(default_factory=list)

    async def probe_now(self, *pids: int) -> dict[int, PidEvidence]:
        evidence: Mapping[int, PidEvidence] = await ask(
            self.inbox, lambda reply: ProbeNow(pids=pids, reply=reply), actor="liveness"
        )
        self.answers.append(dict(evidence))
        return dict(evidence)


@asynccontextmanager
async def rig(*, shortcuts: ProbeShortcuts | None = None) -> AsyncIterator[Rig]:
    world = World()
    send, receive = anyio.create_memory_object_stream[LivenessInbox](64)
    actor = LivenessActor(
        inbox=receive,
        store=cast(Store, NoRows()),
        # Never advanced: the start-up sweep (of no rows) is the only one.
        clock=MonotonicWall(FakeClock(wall=START)),
        probes=world,
        settings=LivenessSettings(use_pidfd=True),
        pidfd_open=world.open_watch,
        shortcuts=shortcuts or ProbeShortcuts(watches_vouch=True, listing=world.listing),
    )
    try:
        with send, receive:
            async with anyio.create_task_group() as tg:
                await tg.start(actor.run)
                while actor.sweeps_completed < 1:
                    await anyio.lowlevel.checkpoint()
                yield Rig(world=world, actor=actor, inbox=send)
                send.close()
    finally:
        world.close()


def plain(world: World, pids: Sequence[int]) -> dict[int, PidEvidence]:
    """What ProbeNow gave before any shortcut: one probe per distinct pid."""
    return {
        seen.pid: PidEvidence(alive=seen.alive, start_time=seen.start_time)
        for seen in (world.probe(pid) for pid in sorted(set(pids)))
    }


# --- the property -----------------------------------------------------------------------

Op = tuple[str, int, int]

OPS = st.lists(
    st.tuples(
        st.sampled_from(
            [
                *("spawn", "leader_exits", "exit", "reap"),
                *("watch", "watch_stale", "watch_bare"),
                *("probe", "probe", "yield", "listing_fails", "listing_works"),
            ]
        ),
        st.integers(0, SLOTS - 1),
        st.integers(0, 2),
    ),
    max_size=40,
)


async def _step(r: Rig, op: Op, identities: itertools.count[int]) -> None:
    name, slot, arg = op
    pid = BASE_PID + slot
    world = r.world
    if name in ("spawn", "leader_exits", "exit", "reap"):
        getattr(world, name)(pid)
    elif name.startswith("watch"):
        proc = world.procs.get(pid)
        start = None if proc is None else proc.start
        if name == "watch_stale":
            start = "ticks-stale"
        elif name == "watch_bare":
            start = None
        identity = f"wkr-{next(identities)}"
        await r.inbox.send(Watch(worker_identity=identity, pid=pid, start_time=start))
    elif name == "yield":
        # Lets the exit loop take in whatever fired, or not: both orders must agree.
        for _ in range(arg + 1):
            await anyio.lowlevel.checkpoint()
    elif name == "listing_fails":
        world.listing_fails = True
    elif name == "listing_works":
        world.listing_fails = False
    else:
        pids = [BASE_PID + s for s in range(SLOTS) if (s + arg) % 2 or arg == 2]
        pids += [*ABSENT, *(BULK_ABSENT if arg else ())]
        previous = r.answers[-1] if r.answers else {}
        got = await r.probe_now(*pids, *pids[:2])
        # The world only moves between steps, so a probe now sees what the actor saw.
        assert got == plain(world, pids)
        for p, evidence in got.items():
            if previous.get(p) == evidence:
                assert evidence is previous[p], f"pid {p}: equal evidence, new object"


async def _scenario(ops: list[Op]) -> None:
    identities = itertools.count()
    async with rig() as r:
        for op in ops:
            await _step(r, op, identities)
        await _step(r, ("probe", 0, 2), identities)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=OPS)
# Each path at least once: a watched process that runs, loses its main thread, becomes a
# zombie, is reaped and its pid reused, with the exit taken in or not before the probe.
@example(
    ops=[
        ("spawn", 0, 0),
        ("watch", 0, 0),
        ("probe", 0, 2),
        ("leader_exits", 0, 0),
        ("probe", 0, 2),
        ("exit", 0, 0),
        ("probe", 0, 2),
        ("yield", 0, 2),
        ("probe", 0, 2),
        ("reap", 0, 0),
        ("probe", 0, 2),
        ("spawn", 0, 0),
        ("probe", 0, 1),
        ("watch", 0, 0),
        ("probe", 0, 1),
        ("listing_fails", 0, 0),
        ("probe", 0, 1),
    ]
)
@example(ops=[("spawn", 1, 0), ("watch", 1, 0), ("exit", 1, 0), ("probe", 0, 2)])
def test_shortcut_answers_equal_a_plain_probe_and_reuse_unchanged_objects(
    ops: list[Op],
) -> None:
    anyio.run(_scenario, ops, backend="asyncio")


# --- the shortcuts, one at a time -------------------------------------------------------


@pytest.mark.anyio
async def test_an_unfired_watch_answers_without_a_probe_until_its_process_exits() -> None:
    async with rig() as r:
        pid = BASE_PID
        r.world.spawn(pid)
        start = r.world.procs[pid].start
        await r.inbox.send(Watch(worker_identity="wkr-a", pid=pid, start_time=start))
        first = await r.probe_now(pid)
        assert first == {pid: PidEvidence(alive=True, start_time=start)}
        assert r.world.probed == []
        assert (await r.probe_now(pid))[pid] is first[pid]
        assert r.world.probed == []
        # Fired but not yet taken in by the exit loop: the watch no longer vouches.
        r.world.exit(pid)
        assert await r.probe_now(pid) == {pid: PidEvidence(alive=False, start_time=start)}
        assert r.world.probed == [pid]


@pytest.mark.anyio
async def test_a_watch_opened_without_a_start_time_does_not_vouch() -> None:
    async with rig() as r:
        r.world.spawn(BASE_PID)
        await r.inbox.send(Watch(worker_identity="wkr-a", pid=BASE_PID, start_time=None))
        await r.probe_now(BASE_PID)
        assert r.world.probed == [BASE_PID]


@pytest.mark.anyio
async def test_pids_missing_from_the_listing_are_dead_and_not_probed_one_by_one() -> None:
    async with rig() as r:
        r.world.spawn(BASE_PID)
        got = await r.probe_now(BASE_PID, *BULK_ABSENT)
        assert r.world.probed == [BASE_PID]
        assert got == plain(r.world, [BASE_PID, *BULK_ABSENT])
        assert all(got[p] is got[BULK_ABSENT[0]] for p in BULK_ABSENT)


@pytest.mark.anyio
@pytest.mark.parametrize("why", ["listing_fails", "no_listing"])
async def test_without_a_trustworthy_listing_every_unwatched_pid_is_probed(why: str) -> None:
    shortcuts = None if why == "listing_fails" else ProbeShortcuts(watches_vouch=True)
    async with rig(shortcuts=shortcuts) as r:
        r.world.listing_fails = True
        r.world.spawn(BASE_PID)
        got = await r.probe_now(BASE_PID, *BULK_ABSENT)
        assert sorted(r.world.probed) == [BASE_PID, *BULK_ABSENT]
        assert got == plain(r.world, [BASE_PID, *BULK_ABSENT])


@pytest.mark.anyio
async def test_without_shortcuts_every_pid_is_probed_even_a_watched_one() -> None:
    async with rig(shortcuts=ProbeShortcuts()) as r:
        r.world.spawn(BASE_PID)
        start = r.world.procs[BASE_PID].start
        await r.inbox.send(Watch(worker_identity="wkr-a", pid=BASE_PID, start_time=start))
        pids = (BASE_PID, *BULK_ABSENT)
        got = await r.probe_now(*pids)
        assert sorted(r.world.probed) == sorted(pids)
        assert got == plain(r.world, pids)


@pytest.mark.anyio
async def test_evidence_that_changed_is_a_new_object_and_unchanged_the_same() -> None:
    async with rig() as r:
        for slot in range(3):
            r.world.spawn(BASE_PID + slot)
        pids = (BASE_PID, BASE_PID + 1, BASE_PID + 2, *ABSENT)
        before = await r.probe_now(*pids)
        r.world.exit(BASE_PID + 1)
        after = await r.probe_now(*pids)
        assert after[BASE_PID + 1] == PidEvidence(
            alive=False, start_time=r.world.procs[BASE_PID + 1].start
        )
        assert after[BASE_PID + 1] is not before[BASE_PID + 1]
        assert all(after[p] is before[p] for p in pids if p != BASE_PID + 1)
