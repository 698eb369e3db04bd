"""ProbeNow with real pidfds and /proc: each shortcut answer equals a stat probe made after it."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, cast

import anyio
import pytest
from anyio.streams.memory import MemoryObjectSendStream

from actors.liveness.actor import LivenessActor, LivenessSettings
from actors.liveness.inbox import LivenessInbox, ProbeNow, Watch
from actors.mailbox import ask
from supervisor.clock import FakeClock, MonotonicWall
from supervisor.policy.evidence import PidEvidence
from supervisor.store.base import Store
from supervisor.system.exit_watch import exit_watch_supported
from supervisor.system.pidfd import pidfd_supported
from supervisor.system.probes import LocalProbes, ProcessEvidence, probe_process
from supervisor.system.proc_listing import listing_is_complete
from tests.actors.harness import START

pytestmark = [
    pytest.mark.integration,
    pytest.mark.anyio,
    pytest.mark.skipif(
        not (pidfd_supported() and exit_watch_supported() and listing_is_complete()),
        reason="needs pidfds, epoll and a /proc without hidepid",
    ),
]

_SLEEPER = [sys.executable, "-c", "import time; time.sleep(60)"]
# The main thread exits while another runs on: the leader shows Z, the process is alive.
_HEADLESS = [
    sys.executable,
    "-c",
    "import ctypes, threading, time\n"
    "threading.Thread(target=time.sleep, args=(60,)).start()\n"
    "print('ready', flush=True)\n"
    "ctypes.CDLL(None).pthread_exit(None)\n",
]


class CountingProbes(LocalProbes):
    """This machine's probes, recording which pids were actually probed."""

    def __init__(self) -> None:
        super().__init__()
        self.probed: list[int] = []

    def probe(self, pid: int) -> ProcessEvidence:
        self.probed.append(pid)
        return super().probe(pid)

    def probe_many(self, pids: Sequence[int]) -> list[ProcessEvidence]:
        self.probed.extend(pids)
        return super().probe_many(pids)


class NoRows:
    async def read_active_processes(self) -> list[tuple[Any, ...]]:
        return []


@dataclass
class Rig:
    probes: CountingProbes
    inbox: MemoryObjectSendStream[LivenessInbox]
    watches: int = 0
    last: dict[int, PidEvidence] = field(default_factory=dict)

    async def watch(self, pid: int) -> None:
        self.watches += 1
        start = probe_process(pid).start_time
        await self.inbox.send(Watch(worker_identity=f"w{self.watches}", pid=pid, start_time=start))

    async def probe_now(self, pids: Sequence[int]) -> dict[int, PidEvidence]:
        self.probes.probed.clear()
        got: Mapping[int, PidEvidence] = await ask(
            self.inbox, lambda reply: ProbeNow(pids=tuple(pids), reply=reply), actor="liveness"
        )
        previous, self.last = self.last, dict(got)
        for pid, evidence in got.items():
            if previous.get(pid) == evidence:
                assert evidence is previous[pid]
        return dict(got)


@asynccontextmanager
async def liveness() -> AsyncIterator[Rig]:
    probes = CountingProbes()
    send, receive = anyio.create_memory_object_stream[LivenessInbox](64)
    # The daemon's own configuration: local probes, real pidfds, shortcuts chosen for them.
    actor = LivenessActor(
        inbox=receive,
        store=cast(Store, NoRows()),
        clock=MonotonicWall(FakeClock(wall=START)),
        probes=probes,
        settings=LivenessSettings(use_pidfd=True),
    )
    with send, receive:
        async with anyio.create_task_group() as tg:
            await tg.start(actor.run)
            yield Rig(probes=probes, inbox=send)
            send.close()


@contextlib.contextmanager
def popen(argv: list[str]) -> Iterator[subprocess.Popen[bytes]]:
    with subprocess.Popen(argv, stdout=subprocess.PIPE) as proc:
        try:
            yield proc
        finally:
            proc.kill()
            proc.wait()


def absent_pids(count: int) -> list[int]:
    with open("/proc/sys/kernel/pid_max", encoding="ascii") as handle:
        pid_max = int(handle.read())
    return list(range(pid_max + 1, pid_max + 1 + count))


def state_of(pid: int) -> str:
    with open(f"/proc/{pid}/stat", encoding="latin-1") as handle:
        return handle.read().rpartition(")")[2].split()[0]


def wait_for_state(pid: int, state: str) -> None:
    for _ in range(10_000):  # a hang guard, not a timing
        if state_of(pid) == state:
            return
        time.sleep(0.001)
    raise AssertionError(f"pid {pid} never reached state {state!r}")


def fresh(pids: Sequence[int]) -> dict[int, PidEvidence]:
    return {
        pid: PidEvidence(alive=seen.alive, start_time=seen.start_time)
        for pid, seen in ((pid, probe_process(pid)) for pid in pids)
    }


async def test_watched_live_headless_zombie_reaped_and_absent_pids_match_a_probe() -> None:
    absent = absent_pids(20)  # enough to make the actor list /proc
    with (
        popen(_SLEEPER) as live,
        popen(_HEADLESS) as headless,
        popen(_SLEEPER) as zombie,
        popen(_SLEEPER) as reaped,
    ):
        assert headless.stdout is not None
        assert headless.stdout.readline().strip() == b"ready"
        wait_for_state(headless.pid, "Z")
        async with liveness() as rig:
            for proc in (live, headless, zombie, reaped):
                await rig.watch(proc.pid)
            pids = [live.pid, headless.pid, zombie.pid, reaped.pid, *absent]
            first = await rig.probe_now(pids)
            assert first == fresh(pids)
            # The unfired watches answered; only the absent pids' listing was read.
            assert rig.probes.probed == []
            assert first[headless.pid].alive is True

            zombie.kill()  # never waited for until the end: a zombie from here on
            wait_for_state(zombie.pid, "Z")
            reaped.kill()
            reaped.wait()
            for _ in range(2):  # before the exit loop takes the exits in, and (likely) after
                got = await rig.probe_now(pids)
                assert got == fresh(pids)
                assert got[zombie.pid] == PidEvidence(
                    alive=False, start_time=first[zombie.pid].start_time
                )
                assert got[reaped.pid] == PidEvidence(alive=False, start_time=None)
                assert got[live.pid] is first[live.pid]
                assert live.pid not in rig.probes.probed
                await anyio.sleep(0.05)


async def test_a_reused_pid_is_the_newcomer_whether_or_not_its_own_watch_is_open() -> None:
    async with liveness() as rig:
        with popen(_SLEEPER) as old:
            await rig.watch(old.pid)
            pid = old.pid
            before = await rig.probe_now([pid])
        # Reaped on leaving the block; its watch has fired. Hand the number out again, a
        # clock tick later: within one tick the two incarnations' start times are equal.
        old_start = int(str(before[pid].start_time).removeprefix("ticks-"))
        while _uptime_ticks() <= old_start + 1:
            await anyio.sleep(0.005)
        newcomer = _spawn_at(pid)
        if newcomer is None:
            pytest.skip("cannot steer pid allocation here (ns_last_pid)")
        try:
            assert await rig.probe_now([pid]) == fresh([pid])
            assert rig.probes.probed == [pid]
            got = rig.last[pid]
            assert got.alive is True
            assert got.start_time != before[pid].start_time
            await rig.watch(pid)
            again = await rig.probe_now([pid])
            assert again == fresh([pid])
            assert rig.probes.probed == []  # the newcomer's own watch vouches for it
            assert again[pid] is got
        finally:
            newcomer.kill()
            newcomer.wait()
        assert await rig.probe_now([pid]) == fresh([pid])


def _uptime_ticks() -> int:
    with open("/proc/uptime", encoding="ascii") as handle:
        seconds = float(handle.read().split()[0])
    return int(seconds * os.sysconf("SC_CLK_TCK"))


def _spawn_at(pid: int) -> subprocess.Popen[bytes] | None:
    for _ in range(20):  # another process may take the number first
        try:
            with open("/proc/sys/kernel/ns_last_pid", "w", encoding="ascii") as handle:
                handle.write(str(pid - 1))
        except OSError:
            return None
        proc = subprocess.Popen(_SLEEPER)
        if proc.pid == pid:
            return proc
        proc.kill()
        proc.wait()
    return None
