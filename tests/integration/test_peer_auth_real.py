"""Peer authorization against real processes: a child's proof is pinned to its start time."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator

import pytest

from supervisor.errors import PermissionDenied
from supervisor.surfaces.socket.peer_auth import Conversation, authorize_pid
from supervisor.system.probes import LocalProbes

pytestmark = pytest.mark.integration

_SLEEPER = [sys.executable, "-c", "import time; time.sleep(30)"]


@pytest.fixture
def child() -> Iterator[subprocess.Popen[bytes]]:
    with subprocess.Popen(_SLEEPER) as proc:
        try:
            yield proc
        finally:
            proc.kill()


def _me() -> Conversation:
    return Conversation((os.getpid(), os.getuid(), os.getgid()))


def test_a_child_is_vouched_for_with_the_start_time_it_has(
    child: subprocess.Popen[bytes],
) -> None:
    probes, peer = LocalProbes(), _me()
    authorize_pid(probes, child.pid, peer, "register")
    # Its whole token: the start, and its pidfd inode where the kernel gives one.
    start = probes.identify(child.pid).start_time
    assert start
    assert peer.vouched == {child.pid: start}


def test_a_recorded_incarnation_other_than_the_live_one_is_refused(
    child: subprocess.Popen[bytes],
) -> None:
    # What a reused pid looks like to the check: the live process is not the one proved.
    probes, peer = LocalProbes(), _me()
    peer.vouched[child.pid] = "an-earlier-process"
    # Still our child, so it is proved again, for the process that holds the pid now.
    authorize_pid(probes, child.pid, peer, "heartbeat")
    assert peer.vouched[child.pid] == probes.identify(child.pid).start_time
    stranger = Conversation((os.getppid(), os.getuid(), os.getgid()))
    stranger.vouched[child.pid] = "an-earlier-process"
    with pytest.raises(PermissionDenied):
        authorize_pid(probes, child.pid, stranger, "heartbeat")
    assert child.pid not in stranger.vouched


def test_a_child_that_exited_may_still_be_released(child: subprocess.Popen[bytes]) -> None:
    probes, peer = LocalProbes(), _me()
    authorize_pid(probes, child.pid, peer, "register")
    child.kill()
    child.wait()
    authorize_pid(probes, child.pid, peer, "release")
    with pytest.raises(PermissionDenied):
        authorize_pid(probes, child.pid, _me(), "release")
