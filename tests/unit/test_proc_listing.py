"""The /proc listing shortcut is used only when /proc shows every process."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from supervisor.system.probes import probe_many
from supervisor.system.proc_listing import complete_per_mountinfo, listing_is_complete, visible_pids

PROC = "22 27 0:21 / /proc rw,nosuid,nodev,noexec,relatime shared:12 - proc proc {options}\n"
ROOT = "1 0 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw\n"


@pytest.mark.parametrize(
    ("options", "complete"),
    [
        ("rw", True),
        ("rw,hidepid=0", True),
        ("rw,hidepid=off", True),
        ("rw,hidepid=2", False),
        ("rw,hidepid=invisible", False),
        ("rw,hidepid=1,gid=4", False),
    ],
)
def test_hidepid_makes_the_listing_untrustworthy(options: str, complete: bool) -> None:
    assert complete_per_mountinfo(ROOT + PROC.format(options=options)) is complete


def test_no_proc_mount_means_no_listing() -> None:
    assert complete_per_mountinfo(ROOT) is False


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux /proc")
def test_listed_and_unlisted_pids_are_judged_like_single_probes() -> None:
    if not listing_is_complete():
        pytest.skip("this machine mounts /proc with hidepid")
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        listed = visible_pids()
        assert listed is not None
        assert os.getpid() in listed
        assert child.pid in listed
        absent = next(p for p in range(4_000_000, 4_100_000) if p not in listed)
        pids = [os.getpid(), child.pid, absent] + [absent + 1] * 20
        seen = probe_many(pids)
        assert [e.alive for e in seen[:3]] == [True, True, False]
        assert seen[0].start_time is not None
        assert seen[2].start_time is None
    finally:
        child.kill()
        child.wait()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux /proc")
def test_a_proc_of_another_pid_namespace_is_not_a_complete_listing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # /proc/self resolves by the pid this process has in the namespace /proc belongs to.
    listing_is_complete.cache_clear()
    try:
        monkeypatch.setattr(os, "readlink", lambda path: str(os.getpid() + 1))
        assert listing_is_complete() is False
        assert visible_pids() is None
    finally:
        listing_is_complete.cache_clear()
