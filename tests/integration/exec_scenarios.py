"""Real clients, servers and trees for the exec tests: launch, count leftovers, clean up."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from supervisor.errors import Unavailable
from tests.integration.daemon import Daemon
from tests.realclients import harness

__all__ = [
    "CLIENT",
    "SERVERS",
    "Launch",
    "alive",
    "audit_outcomes",
    "launched",
    "leftovers",
    "ready",
    "rows_of",
    "start_daemon",
    "stop_daemon",
    "stored_row",
    "until",
]

REPO = Path(__file__).resolve().parents[2]
WRAPPER = REPO / "supervisor" / "exec" / "exec_in_place.py"

#: A stand-in MCP client: starts its server with pipes, prints the server's pid, then on
#: each line of its own stdin acts: "close" closes the server's stdin and stays alive,
#: "exit" exits (its end of every pipe closes with it).
CLIENT = """
import subprocess, sys
server = subprocess.Popen(sys.argv[1:], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
print(server.pid, flush=True)
for line in sys.stdin:
    if line.strip() == "close":
        server.stdin.close()
    elif line.strip() == "exit":
        break
"""

#: Servers by behaviour. Each writes its pid to argv[1] when ready.
SERVERS: Mapping[str, str] = {
    # Exits on stdin EOF, as MCP servers do.
    "polite": """
import os, sys
tmp = sys.argv[1] + ".tmp"
open(tmp, "w").write(str(os.getpid())); os.rename(tmp, sys.argv[1])
sys.stdin.buffer.read()
""",
    # Ignores stdin EOF and SIGTERM, and has a child that does the same (a tree).
    "stubborn": """
import os, signal, sys, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
if os.fork() == 0:
    time.sleep(600); os._exit(0)
tmp = sys.argv[1] + ".tmp"
open(tmp, "w").write(str(os.getpid())); os.rename(tmp, sys.argv[1])
time.sleep(600)
""",
    # Like npx: the leader exits on stdin EOF but leaves a child behind that ignores
    # SIGTERM and never reads stdin.
    "leaves_child": """
import os, signal, sys, time
if os.fork() == 0:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    time.sleep(600); os._exit(0)
tmp = sys.argv[1] + ".tmp"
open(tmp, "w").write(str(os.getpid())); os.rename(tmp, sys.argv[1])
sys.stdin.buffer.read()
""",
    # A child that leaves everything a tree is found by: a session of its own (so not the
    # leader's process group) and an empty environment (so no marker). Only a cgroup of
    # the server's own still holds it. Both ignore SIGTERM.
    "escapes": """
import os, signal, sys, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
child = os.fork()
if child == 0:
    os.setsid()
    os.execve(sys.executable, [sys.executable, "-c",
        "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(600)"], {})
tmp = sys.argv[1] + ".tmp"
open(tmp, "w").write(f"{os.getpid()} {child}"); os.rename(tmp, sys.argv[1])
time.sleep(600)
""",
}


def until(predicate: Any, what: str, *, limit: float = 30.0) -> None:
    """Poll real processes; ``limit`` is a hang guard, not a timing claim."""
    deadline = time.monotonic() + limit
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"gave up waiting for {what}")
        time.sleep(0.05)


def ready(daemon: Daemon) -> None:
    """Wait until the daemon answers ``status`` (a hang guard of 30 s)."""

    def answers() -> bool:
        if daemon.process.poll() is not None:
            raise AssertionError(f"daemon exited with {daemon.process.returncode}")
        try:
            with daemon.client() as client:
                return bool(client.status().get("success"))
        except Unavailable:
            return False

    until(answers, "the daemon to answer")


def _state(pid: int) -> str | None:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except (OSError, IndexError):
        return None


def leftovers(marker: str) -> list[int]:
    """Live (non-zombie) processes whose environment carries ``marker``."""
    return [proc.pid for proc in harness.leftovers(marker)]


def kill_all(marker: str) -> None:
    """SIGKILL (through a pidfd, the marker checked again) every process carrying it."""
    harness.kill_all(marker)


def alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie has exited)."""
    return _state(pid) not in (None, "Z", "X")


def rows_of(daemon: Daemon, pid: int) -> list[Mapping[str, Any]]:
    with daemon.client() as client:
        workers = client.snapshot(include_history=True)["workers"]
    return [w for w in workers if w["pid"] == pid]


def stored_row(daemon: Daemon, pid: int) -> dict[str, Any]:
    """The registration row of ``pid`` as stored (every column, not the snapshot's view)."""
    with sqlite3.connect(f"file:{daemon.workdir / 'registry.sqlite3'}?mode=ro", uri=True) as db:
        db.row_factory = sqlite3.Row
        row = db.execute("SELECT * FROM worker_registrations WHERE pid = ?", (pid,)).fetchone()
    assert row is not None, f"no row for pid {pid}"
    return dict(row)


def audit_outcomes(daemon: Daemon, pid: int) -> list[str]:
    """Outcomes of the guard's ``server_exit`` audit events for ``pid``."""
    with sqlite3.connect(f"file:{daemon.workdir / 'registry.sqlite3'}?mode=ro", uri=True) as db:
        events = db.execute(
            "SELECT outcome, detail FROM audit_events WHERE action = 'server_exit'"
        ).fetchall()
    return [outcome for outcome, detail in events if json.loads(detail).get("pid") == pid]


#: What a desktop session gives an orphan: a subreaper (systemd --user, a terminal) that
#: adopts it and reaps it when it exits, but never kills it. This sandbox's pid 1 kills
#: orphans reparented to it within a second, which would clean up every leak for us and
#: hide it; the shim stands between. It prints the client's pid, then reaps until killed.
SUBREAPER = """
import ctypes, os, subprocess, sys, time
ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
client = subprocess.Popen(sys.argv[1:])
print(client.pid, flush=True)
deadline = time.monotonic() + 600
while time.monotonic() < deadline:
    try:
        os.waitpid(-1, os.WNOHANG)
    except ChildProcessError:
        pass
    time.sleep(0.02)
"""


@dataclass
class Launch:
    """One client running one wrapped server; ``marker`` is on every process of both."""

    shim: subprocess.Popen[bytes]
    client_pid: int
    server: int
    marker: str
    pidfile: Path

    def tell(self, command: str) -> None:
        assert self.shim.stdin is not None
        self.shim.stdin.write(f"{command}\n".encode())
        self.shim.stdin.flush()

    def client_running(self) -> bool:
        return alive(self.client_pid)

    def client_exits(self) -> None:
        self.tell("exit")
        until(lambda: not self.client_running(), "the client to exit")

    def kill_client(self) -> None:
        os.kill(self.client_pid, signal.SIGKILL)
        until(lambda: not self.client_running(), "the client to die")

    def tree(self) -> list[int]:
        """The server's processes still running (the client and the shim are not counted)."""
        others = (self.client_pid, self.shim.pid)
        return [pid for pid in leftovers(self.marker) if pid not in others]


def wrapped(daemon: Daemon | None, *command: str, socket: Path | None = None) -> list[str]:
    target = socket or (daemon.socket if daemon else None)
    assert target is not None
    return [sys.executable, "-I", "-S", str(WRAPPER), "--socket", str(target), "--", *command]


@contextmanager
def launched(
    tmp_path: Path,
    kind: str,
    *,
    daemon: Daemon | None = None,
    socket: Path | None = None,
    wrap: bool = True,
    prefix: Sequence[str] = (),
) -> Iterator[Launch]:
    """A client process running a ``kind`` server (wrapped, or bare), under a subreaper
    shim; on the way out every process carrying the launch's marker is killed by pid,
    whatever the test left."""
    marker = uuid.uuid4().hex
    pidfile = tmp_path / f"server-{marker}.pid"
    server: Sequence[str] = (sys.executable, "-c", SERVERS[kind], str(pidfile))
    command = [*prefix, *(wrapped(daemon, *server, socket=socket) if wrap else server)]
    shim = subprocess.Popen(
        [sys.executable, "-c", SUBREAPER, sys.executable, "-c", CLIENT, *command],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "FLEET_TEST_MARKER": marker},
    )
    try:
        assert shim.stdout is not None
        client_pid = int(shim.stdout.readline())
        spawned = int(shim.stdout.readline())
        until(pidfile.exists, "the server to start")
        launch = Launch(
            shim=shim,
            client_pid=client_pid,
            server=int(pidfile.read_text().split()[0]),
            marker=marker,
            pidfile=pidfile,
        )
        # exec in place: the process the client spawned is the server itself.
        assert launch.server == spawned
        yield launch
    finally:
        kill_all(marker)  # the shim carries the marker too
        shim.wait()
        for pipe in (shim.stdin, shim.stdout):
            if pipe is not None:
                pipe.close()


def stop_daemon(daemon: Daemon) -> None:
    """Stop the daemon as an operator would (SIGTERM); its files stay for a restart."""
    daemon.process.send_signal(signal.SIGTERM)
    daemon.process.wait(timeout=30)


def start_daemon(daemon: Daemon) -> None:
    """Start the daemon again on the same config, database and socket."""
    with (daemon.workdir / "daemon.log").open("ab") as log:
        daemon.process = subprocess.Popen(
            [sys.executable, "-m", "supervisor.cli", "--config", str(daemon.config), "run"],
            stdout=subprocess.DEVNULL,
            stderr=log,
        )
    ready(daemon)
