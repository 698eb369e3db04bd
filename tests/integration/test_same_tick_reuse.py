"""A pid reused within one clock tick: the first's exit or signal never lands on the second."""

# The kernel is made to hand a just-reaped pid out again (``ns_last_pid``, root only), and
# the pair is retried until both processes also share their start tick, so that start
# times alone could not tell them apart.

from __future__ import annotations

import os
import shutil
import signal
import time
from collections.abc import Iterator, Mapping
from contextlib import AbstractAsyncContextManager, contextmanager, suppress
from dataclasses import dataclass
from typing import cast

import pytest

from actors.liveness.actor import LivenessSettings, judge
from actors.liveness.inbox import ProbeNow, Watch
from actors.mailbox import ask
from supervisor.clock import FakeClock, MonotonicWall
from supervisor.policy.evidence import PidEvidence
from supervisor.policy.incarnation import inode_of, same_incarnation, start_of
from supervisor.store.base import Store
from supervisor.system.exit_watch import exit_watch_supported
from supervisor.system.pidfd import inodes_unique, pidfd_open
from supervisor.system.probes import LocalProbes, identify_process, process_start_time
from supervisor.system.process_tree import Member, signal_verified
from tests.actors.harness import START
from tests.actors.helpers_actors import LivenessRig, running_liveness, until
from tests.actors.test_liveness_answers import NoRows
from tests.unavailable import unavailable

pytestmark = [pytest.mark.integration, pytest.mark.anyio]

_NS_LAST_PID = "/proc/sys/kernel/ns_last_pid"
#: Reads its stdin to the end and exits: a child whose exit the test decides.
_CAT = shutil.which("cat") or "/bin/cat"
#: Each try costs two spawns; a try fails when the tick turns between them or another
#: process takes the pid first. Bounded in count and in time.
_TRIES = 400
_TRY_SECONDS = 60.0


def _can_steer_pids() -> bool:
    return os.geteuid() == 0 and os.access(_NS_LAST_PID, os.W_OK)


def _needs_same_tick_reuse() -> None:
    """Skip where the kernel cannot be made to reuse a pid, or has no per-process inodes;
    under CI (which runs as root on such a kernel) these must run, so fail instead."""
    missing = []
    if not _can_steer_pids():
        missing.append(f"root and a writable {_NS_LAST_PID}")
    if not (inodes_unique() and exit_watch_supported()):
        missing.append("pidfds with per-process inodes (pidfs, Linux >= 6.9) and epoll")
    if not missing:
        return
    unavailable("same-tick pid reuse needs " + " and ".join(missing))


@dataclass
class Child:
    """A child blocked on a pipe; closing ``release`` lets it exit."""

    pid: int
    release: int
    reaped: bool = False

    def let_exit(self) -> None:
        os.close(self.release)
        self.release = -1

    def reap(self) -> int:
        _, status = os.waitpid(self.pid, 0)
        self.reaped = True
        return status

    def running(self) -> bool:
        done, _ = os.waitpid(self.pid, os.WNOHANG)
        if done:
            self.reaped = True
        return not done

    def stop(self) -> None:
        if self.release >= 0:
            os.close(self.release)
            self.release = -1
        if not self.reaped:
            with suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGKILL)
            with suppress(ChildProcessError):
                os.waitpid(self.pid, 0)
            self.reaped = True


def _spawn_waiting() -> Child:
    """A child that waits for EOF on its stdin. posix_spawn clones with the parent's memory
    shared (vfork), so it costs the same in a large test process as in a small one: two
    forks of a big pytest process no longer fit within one clock tick."""
    read_end, write_end = os.pipe()
    try:
        pid = os.posix_spawn(
            _CAT, [_CAT], dict(os.environ), file_actions=[(os.POSIX_SPAWN_DUP2, read_end, 0)]
        )
    finally:
        os.close(read_end)
    return Child(pid=pid, release=write_end)


def _steer_next_pid(pid: int) -> None:
    with open(_NS_LAST_PID, "w", encoding="ascii") as handle:
        handle.write(str(pid - 1))


@dataclass
class Pair:
    first: Child
    first_token: str
    #: The worker identity the first was watched under.
    identity: str
    second: Child
    tries: int


@contextmanager
def _children() -> Iterator[list[Child]]:
    made: list[Child] = []
    try:
        yield made
    finally:
        for child in made:
            child.stop()


async def _probe_now(rig: LivenessRig, pid: int) -> PidEvidence:
    evidence: Mapping[int, PidEvidence] = await ask(
        rig.inbox, lambda reply: ProbeNow(pids=(pid,), reply=reply), actor="liveness"
    )
    return evidence[pid]


async def _watch(rig: LivenessRig, identity: str, pid: int, token: str) -> None:
    await rig.inbox.send(Watch(worker_identity=identity, pid=pid, start_time=token))


def _state_of(rig: LivenessRig, identity: str) -> str | None:
    verdict = rig.actor.verdict(identity)
    return None if verdict is None else verdict.state


def _liveness() -> AbstractAsyncContextManager[LivenessRig]:
    """The real actor: this machine's probes, real pidfds, real exit watches."""
    return running_liveness(
        cast(Store, NoRows()),
        clock=MonotonicWall(FakeClock(wall=START)),
        probes=LocalProbes(),
        settings=LivenessSettings(use_pidfd=True),
    )


async def _same_tick_pair(made: list[Child], rig: LivenessRig | None) -> Pair:
    """First process watched (by ``rig``), exited and reaped; a second spawned onto its pid
    within the same start tick. Retried until the kernel gives both."""
    deadline = time.monotonic() + _TRY_SECONDS
    for attempt in range(_TRIES):
        if time.monotonic() > deadline:
            break
        identity = f"first-{attempt}"
        first = _spawn_waiting()
        made.append(first)
        seen = identify_process(first.pid)
        token = seen.start_time
        assert seen.alive
        assert token is not None
        assert inode_of(token) is not None
        if rig is not None:
            await _watch(rig, identity, first.pid, token)
            # Handled in order: once this answers, the watch on the first is open.
            assert (await _probe_now(rig, first.pid)).alive is True
        first.let_exit()
        first.reap()
        _steer_next_pid(first.pid)
        second = _spawn_waiting()
        made.append(second)
        if second.pid == first.pid and process_start_time(second.pid) == start_of(token):
            return Pair(
                first=first, first_token=token, identity=identity, second=second, tries=attempt + 1
            )
        second.stop()
    pytest.fail(f"the kernel gave no same-tick pid reuse in {_TRIES} tries")


async def test_the_exit_of_the_first_never_marks_the_second_dead() -> None:
    _needs_same_tick_reuse()
    with _children() as made:
        async with _liveness() as rig:
            pair = await _same_tick_pair(made, rig)
            pid, first_token = pair.first.pid, pair.first_token

            async def first_exit_seen() -> bool:
                return _state_of(rig, pair.identity) == "dead"

            await until(first_exit_seen)
            second_token = identify_process(pid).start_time
            assert second_token is not None
            # One start, two processes: only the inode tells them apart.
            assert start_of(second_token) == start_of(first_token)
            assert not same_incarnation(second_token, first_token)

            # The probe finds the second process with the start of the one whose exit was
            # seen: it is identified, and it is alive, named by its own token.
            evidence = await _probe_now(rig, pid)
            assert evidence == PidEvidence(alive=True, start_time=second_token)
            # Judged per registration: the first is gone, the second lives.
            assert judge(evidence, first_token) == "dead"
            assert judge(evidence, second_token) == "alive"

            # Registered and watched, the second is vouched for by its own watch.
            await _watch(rig, "second", pid, second_token)
            assert await _probe_now(rig, pid) == PidEvidence(alive=True, start_time=second_token)
            assert _state_of(rig, "second") == "alive"
            assert pair.second.running()


async def test_a_signal_meant_for_the_first_never_reaches_the_second() -> None:
    _needs_same_tick_reuse()
    with _children() as made:
        pair = await _same_tick_pair(made, None)
        pid = pair.first.pid
        # What the guard holds for the first process: its verified token, from before.
        meant = Member(pid=pid, start=pair.first_token)
        assert pidfd_open(pid, expected_start_time=pair.first_token) is None
        assert not signal_verified(meant, signal.SIGTERM)
        assert not signal_verified(meant, signal.SIGKILL)
        assert pair.second.running()
        # Its own token reaches it.
        second_token = identify_process(pid).start_time
        assert second_token is not None
        assert signal_verified(Member(pid=pid, start=second_token), signal.SIGKILL)
        status = pair.second.reap()
        assert os.WIFSIGNALED(status)
        assert os.WTERMSIG(status) == signal.SIGKILL


def test_a_registration_token_names_the_process_exactly_where_the_kernel_can() -> None:
    token = identify_process(os.getpid()).start_time
    assert token is not None
    assert start_of(token) == process_start_time(os.getpid())
    assert (inode_of(token) is not None) is inodes_unique()
