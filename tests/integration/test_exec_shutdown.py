"""A client stopping an ``exec``-wrapped server with SIGTERM/SIGINT releases its row."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator

import psutil
import pytest

from tests.integration.daemon import Daemon, running_daemon, wait_ready
from tests.integration.test_end_to_end import launch_env, snapshot, wait_for

pytestmark = [pytest.mark.anyio, pytest.mark.integration]

# A server that says when it is ready; with HANDLER it exits 128+N on SIGTERM
# the way many servers do, without it SIGTERM kills it (-15) and SIGINT ends
# it through KeyboardInterrupt.
CHILD = """
import signal, sys, time
if sys.argv[1] == "handler":
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
print("ready", flush=True)
time.sleep(600)
"""


@pytest.fixture(scope="module")
def daemon() -> Iterator[Daemon]:
    with running_daemon(ttl=30.0) as running:
        yield running
    assert running.process.returncode == 0, (running.workdir / "daemon.log").read_text()[-2000:]


@pytest.mark.parametrize(
    ("signum", "mode", "status"),
    [
        (signal.SIGTERM, "handler", 143),
        (signal.SIGTERM, "default", 128 + signal.SIGTERM),
        (signal.SIGINT, "default", 128 + signal.SIGINT),
    ],
)
async def test_a_forwarded_stop_signal_releases_the_row(
    daemon: Daemon, signum: signal.Signals, mode: str, status: int
) -> None:
    await wait_ready(daemon)  # a no-op once the module's daemon is up
    with subprocess.Popen(
        daemon.worker_command(sys.executable, "-c", CHILD, mode),
        env={**os.environ, **launch_env(daemon)["author"]},
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    ) as sidecar:
        try:
            assert sidecar.stdout is not None
            assert sidecar.stdout.readline() == b"ready\n"

            def rows() -> dict[str, str]:
                # A released row is history: listed only when history is asked for.
                workers = snapshot(daemon, include_history=True)["workers"]
                return {w["worker_identity"]: w["status"] for w in workers if w["pid"] == child}

            child = _only_child(sidecar.pid)
            await wait_for(lambda: list(rows().values()) == ["active"], what="the registration")
            sidecar.send_signal(signum)
            assert sidecar.wait(timeout=30) == status
            assert list(rows().values()) == ["released"]
        finally:
            if sidecar.poll() is None:
                sidecar.kill()


def _only_child(pid: int) -> int:
    (child,) = psutil.Process(pid).children()
    return int(child.pid)
