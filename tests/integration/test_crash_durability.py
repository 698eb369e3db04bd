"""An acknowledged registration survives an OS crash: the daemon's database lives on a
loop-mounted ext4 filesystem, and the power cut is a copy of the device as it stands."""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.integration.daemon import running_daemon, wait_ready
from tests.integration.socket_helpers import claims

pytestmark = [pytest.mark.integration, pytest.mark.anyio]

REGISTRATIONS = 25
#: Plain SQLite commits with ``synchronous = NORMAL`` made just before the cut: the
#: control that shows the cut loses what was never flushed.
CONTROL_COMMITS = 25


def _cannot_loop_mount() -> str | None:
    if os.geteuid() != 0:
        return "needs root to attach a loop device and mount it"
    for tool in ("losetup", "mkfs.ext4", "mount", "umount"):
        if shutil.which(tool) is None:
            return f"needs {tool}"
    if not Path("/dev/loop-control").exists():
        return "needs /dev/loop-control"
    return None


@pytest.fixture
def can_loop_mount() -> None:
    reason = _cannot_loop_mount()
    if reason is not None:
        if os.environ.get("CI"):
            pytest.fail(f"the crash test must run in CI: it {reason}")
        pytest.skip(reason)


def _run(*argv: str) -> str:
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, f"{argv}: {done.stderr}"
    return done.stdout.strip()


@contextmanager
def ext4(image: Path, mountpoint: Path, *options: str) -> Iterator[Path]:
    """``image`` attached to a loop device and mounted at ``mountpoint``."""
    device = _run("losetup", "--find", "--show", str(image))
    try:
        mountpoint.mkdir(exist_ok=True)
        _run(
            "mount",
            "-t",
            "ext4",
            *(("-o", ",".join(options)) if options else ()),
            device,
            str(mountpoint),
        )
        try:
            yield mountpoint
        finally:
            _run("umount", str(mountpoint))
    finally:
        _run("losetup", "--detach", device)


def _control_writes(path: Path) -> int:
    """Commits ``CONTROL_COMMITS`` rows as the store did before (WAL, synchronous =
    NORMAL), each acknowledged on stdout, then waits to be killed; returns the count."""
    code = f"""
import sqlite3, sys, time
db = sqlite3.connect({str(path)!r}, isolation_level=None)
db.execute("PRAGMA journal_mode = WAL")
db.execute("PRAGMA synchronous = NORMAL")
db.execute("CREATE TABLE acked (n INTEGER)")
for n in range({CONTROL_COMMITS}):
    db.execute("BEGIN IMMEDIATE")
    db.execute("INSERT INTO acked VALUES (?)", (n,))
    db.execute("COMMIT")
    print(n, flush=True)
time.sleep(120)
"""
    child = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None
        acked = sum(1 for _ in range(CONTROL_COMMITS) if child.stdout.readline())
    finally:
        child.kill()
        child.wait()
        if child.stdout is not None:
            child.stdout.close()
    return acked


def _survivors(database: Path, statement: str) -> set[object]:
    if not database.exists():
        return set()
    db = sqlite3.connect(database)
    try:
        return {row[0] for row in db.execute(statement)}
    except sqlite3.DatabaseError:
        return set()  # the table itself (or the whole file) was lost
    finally:
        db.close()


async def test_acknowledged_registrations_survive_a_power_cut(can_loop_mount: None) -> None:
    with tempfile.TemporaryDirectory(dir="/tmp", prefix="fsv-crash-") as tmp:
        scratch = Path(tmp)
        image, cut = scratch / "disk.img", scratch / "after-the-cut.img"
        with image.open("wb") as blank:
            blank.truncate(64 * 1024 * 1024)
        _run("mkfs.ext4", "-q", "-F", str(image))
        acknowledged: list[str] = []
        # commit=60: the filesystem's own periodic journal commit stays out of the window,
        # so only what the daemon flushed itself is on the device at the cut.
        with (
            ext4(image, scratch / "disk", "commit=60") as disk,
            running_daemon(database_path=disk / "registry.sqlite3") as daemon,
        ):
            await wait_ready(daemon)
            with daemon.client() as client:
                for n in range(REGISTRATIONS):
                    answer = client.register(
                        claims(client_instance_id=f"inst-codex-20261202T120000Z-{n:04x}"),
                        pid=os.getpid(),
                    )
                    assert answer["ok"] is True, answer
                    acknowledged.append(answer["registration"]["worker_identity"])
            daemon.process.kill()  # the daemon dies with the machine
            daemon.process.wait()
            control_acked = _control_writes(disk / "control.sqlite3")
            # The power cut: the device as it stands, without what sits in page cache.
            shutil.copyfile(image, cut)
        with ext4(cut, scratch / "after") as after:
            kept = _survivors(
                after / "registry.sqlite3", "SELECT worker_identity FROM worker_registrations"
            )
            control_kept = _survivors(after / "control.sqlite3", "SELECT n FROM acked")
    assert control_acked == CONTROL_COMMITS
    assert len(control_kept) < control_acked, "the cut lost nothing unflushed: it proves nothing"
    lost = [identity for identity in acknowledged if identity not in kept]
    assert not lost, f"{len(lost)} of {len(acknowledged)} acknowledged registrations lost"
