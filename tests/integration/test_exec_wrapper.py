"""The exec wrapper as a real process: it becomes the server (same pid), in a group of its own,
with the marker, a parent-death signal and default SIGPIPE; exit codes; broken stderr; and
registration with a real daemon."""

from __future__ import annotations

import json
import os
import pty
import signal
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from supervisor.exec import exec_in_place
from supervisor.policy.identity.exec_marker import MARKER_ENV, parse_marker
from supervisor.policy.identity.instance import assess_instance_identity
from tests.integration.daemon import Daemon, running_daemon, wait_ready
from tests.spawned import Spawned

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux process facts"),
]

WRAPPER = str(Path(exec_in_place.__file__).resolve())
#: Where ``clients wrap`` put the wrapper before its package was renamed: a shim runs it.
OLD_WRAPPER = str(Path(WRAPPER).parents[1] / "sidecar" / "exec_in_place.py")
CONSOLE = str(Path(sys.executable).parent / "fleet-supervisor")
_ROOT = Path(__file__).resolve().parents[2]
#: Bounded waits for a child to get somewhere: this many polls, 10 ms apart.
_POLLS = 3000

#: What the server reports about itself, as one JSON line on stdout.
REPORT = """\
import ctypes, json, os
value = ctypes.c_int(-1)
ctypes.CDLL(None).prctl(2, ctypes.byref(value), 0, 0, 0)  # PR_GET_PDEATHSIG
print(json.dumps({
    "pid": os.getpid(),
    "ppid": os.getppid(),
    "pgid": os.getpgid(0),
    "marker": os.environ.get("FLEET_SUPERVISOR_EXEC"),
    "pdeathsig": value.value,
}), flush=True)
"""


def _ticks(pid: int) -> str:
    with open(f"/proc/{pid}/stat", encoding="latin-1") as handle:
        return handle.read().rpartition(")")[2].split()[19]


def _boot_id() -> str:
    with open("/proc/sys/kernel/random/boot_id", encoding="ascii") as handle:
        return handle.read().strip()


def _wait_for_file(path: Path) -> str:
    """The file's text once a child has written it (atomically); a bounded wait."""
    for _ in range(_POLLS):
        if path.exists():
            return path.read_text(encoding="utf-8")
        time.sleep(0.01)
    raise AssertionError(f"{path} was never written")


@pytest.fixture
def started() -> Iterator[Spawned]:
    tracker = Spawned()
    try:
        yield tracker
    finally:
        tracker.close()


@pytest.fixture
def no_daemon(tmp_path: Path) -> str:
    """A socket path nobody listens on (never the default, which a real daemon may hold)."""
    return str(tmp_path / "nobody.sock")


def _forms(socket_path: str) -> dict[str, list[str]]:
    """The ways to run the wrapper, each up to (not including) its own flags."""
    return {
        "script": [sys.executable, "-I", "-S", WRAPPER, "--socket", socket_path],
        "old_script": [sys.executable, "-I", "-S", OLD_WRAPPER, "--socket", socket_path],
        "console": [CONSOLE, "--socket", socket_path, "exec"],
        "cli": [sys.executable, "-m", "supervisor.cli", "--socket", socket_path, "exec"],
    }


# --- becoming the server -------------------------------------------------------------------------


@pytest.mark.parametrize("form", ["script", "old_script", "console", "cli"])
def test_the_server_is_the_wrapper_process(started: Spawned, no_daemon: str, form: str) -> None:
    assert os.access(CONSOLE, os.X_OK), f"{CONSOLE}: install the project (pip install -e .)"
    argv = [
        *_forms(no_daemon)[form],
        "--name",
        "report",
        "--namespace",
        "author",
        "--client",
        "codex",
        "--",
        sys.executable,
        "-c",
        REPORT,
    ]
    proc = started.popen(argv, cwd=_ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None
    report = json.loads(proc.stdout.readline())
    marker = parse_marker(report["marker"])
    assert proc.wait(timeout=60) == 0
    assert report["pid"] == proc.pid
    assert report["ppid"] == os.getpid()
    assert report["pgid"] == proc.pid  # stdin is not a terminal: a group of its own
    assert report["pdeathsig"] == signal.SIGTERM
    assert marker is not None, report["marker"]
    assert (marker.leader_pid, marker.client_pid) == (proc.pid, os.getpid())
    assert marker.client_start == _ticks(os.getpid())
    assert marker.leader_start.isdigit()
    assert marker.boot_id == _boot_id()
    assert (marker.client, marker.name, marker.namespace) == ("codex", "report", "author")


def test_the_leader_start_in_the_marker_is_the_server_own(started: Spawned, no_daemon: str) -> None:
    code = (
        "import os, sys; print(os.environ['FLEET_SUPERVISOR_EXEC'], flush=True); sys.stdin.read()"
    )
    proc = started.popen(
        [*_forms(no_daemon)["script"], "--", sys.executable, "-c", code],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    assert proc.stdin is not None
    assert proc.stdout is not None
    marker = parse_marker(proc.stdout.readline().decode().strip())
    assert marker is not None
    # Still running: the incarnation the marker names is this very process.
    assert marker.leader_start == _ticks(proc.pid)
    proc.stdin.close()
    assert proc.wait(timeout=60) == 0


def test_an_old_marker_in_the_environment_is_replaced(started: Spawned, no_daemon: str) -> None:
    stale = "v1;leader=1:1;client=1:1;boot=other;client_name=;name=;namespace="
    code = "import os; print(os.environ.get('FLEET_SUPERVISOR_EXEC'))"
    status, out, _ = started.run(
        [*_forms(no_daemon)["script"], "--", sys.executable, "-c", code],
        env={**os.environ, MARKER_ENV: stale},
    )
    assert status == 0
    marker = parse_marker(out.decode().strip())
    assert marker is not None
    assert marker.client_pid == os.getpid()
    assert marker.boot_id == _boot_id()


def test_the_parent_death_signal_can_be_left_off(started: Spawned, no_daemon: str) -> None:
    status, out, _ = started.run(
        [
            *_forms(no_daemon)["script"],
            "--no-parent-death-signal",
            "--",
            sys.executable,
            "-c",
            REPORT,
        ]
    )
    assert status == 0
    assert json.loads(out)["pdeathsig"] == 0


def test_a_terminal_stdin_keeps_the_caller_group(started: Spawned, no_daemon: str) -> None:
    leader, follower = pty.openpty()
    try:
        status, out, _ = started.run(
            [*_forms(no_daemon)["script"], "--", sys.executable, "-c", REPORT], stdin=follower
        )
    finally:
        os.close(follower)
        os.close(leader)
    assert status == 0
    report = json.loads(out)
    assert report["pgid"] == os.getpgid(0)
    assert report["pgid"] != report["pid"]


@pytest.mark.parametrize("restore_signals", [True, False])
def test_sigpipe_and_sigxfsz_are_not_ignored_in_the_server(
    started: Spawned, no_daemon: str, restore_signals: bool
) -> None:
    # cat changes no signal disposition: what it shows is what the wrapper left it.
    status, out, _ = started.run(
        [*_forms(no_daemon)["script"], "--", "cat", "/proc/self/status"],
        restore_signals=restore_signals,
    )
    assert status == 0
    fields = dict(line.split(":\t", 1) for line in out.decode().splitlines() if ":\t" in line)
    ignored = int(fields["SigIgn"].strip(), 16)
    assert not ignored & (1 << (signal.SIGPIPE - 1))
    assert not ignored & (1 << (signal.SIGXFSZ - 1))


def test_the_server_exit_status_is_the_process_status(started: Spawned, no_daemon: str) -> None:
    status, _, _ = started.run(
        [*_forms(no_daemon)["script"], "--", sys.executable, "-c", "raise SystemExit(7)"]
    )
    assert status == 7


def test_the_client_death_sends_sigterm_to_the_server(
    started: Spawned, no_daemon: str, tmp_path: Path
) -> None:
    pid_file, sender_file = tmp_path / "server.pid", tmp_path / "sender"
    server = (
        "import os, signal, sys\n"
        "signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})\n"
        "open(sys.argv[1] + '.tmp', 'w').write(str(os.getpid()))\n"
        "os.rename(sys.argv[1] + '.tmp', sys.argv[1])\n"
        "info = signal.sigtimedwait({signal.SIGTERM}, 120)\n"
        "text = str(info.si_pid) if info else 'none'\n"
        "open(sys.argv[2] + '.tmp', 'w').write(text)\n"
        "os.rename(sys.argv[2] + '.tmp', sys.argv[2])\n"
    )
    wrapped = [
        *_forms(no_daemon)["script"],
        "--",
        sys.executable,
        "-c",
        server,
        str(pid_file),
        str(sender_file),
    ]
    # The client starts the wrapped server, then exits when told to, without waiting for it.
    client_code = (
        "import subprocess, sys\n"
        f"subprocess.Popen({wrapped!r}, stdin=subprocess.DEVNULL, stderr=subprocess.DEVNULL)\n"
        "sys.stdin.readline()\n"
    )
    client = started.popen([sys.executable, "-c", client_code], stdin=subprocess.PIPE)
    server_pid = int(_wait_for_file(pid_file))
    started.track(server_pid)
    assert client.stdin is not None
    client.stdin.close()
    assert client.wait(timeout=60) == 0
    # The kernel sent it as the client died: the sender is the client itself.
    assert _wait_for_file(sender_file) == str(client.pid)


# --- failures -------------------------------------------------------------------------------------


def test_a_missing_command_exits_127(started: Spawned, no_daemon: str, tmp_path: Path) -> None:
    status, _, err = started.run([*_forms(no_daemon)["script"], "--", str(tmp_path / "absent")])
    assert status == 127
    assert b"exec_failed" in err
    status, _, _ = started.run(
        [*_forms(no_daemon)["script"], "--", "no-such-command-anywhere"],
        env={**os.environ, "PATH": str(tmp_path)},
    )
    assert status == 127


def test_a_command_that_cannot_be_executed_exits_126(
    started: Spawned, no_daemon: str, tmp_path: Path
) -> None:
    plain = tmp_path / "plain.sh"
    plain.write_text("#!/bin/sh\necho hi\n", encoding="utf-8")
    plain.chmod(stat.S_IRUSR | stat.S_IWUSR)
    for target in (plain, tmp_path):
        status, out, err = started.run([*_forms(no_daemon)["script"], "--", str(target)])
        assert status == 126, err
        assert out == b""


@pytest.mark.parametrize("form", ["script", "console"])
@pytest.mark.parametrize(
    "flags", [["--bogus"], ["--ttl", "soon"], ["--namespace", "admin"], ["--name"]]
)
def test_a_usage_error_exits_2_and_runs_nothing(
    started: Spawned, no_daemon: str, tmp_path: Path, form: str, flags: list[str]
) -> None:
    touched = tmp_path / "ran"
    argv = [*_forms(no_daemon)[form], *flags, "--", "touch", str(touched)]
    if flags == ["--name"]:
        argv = [*_forms(no_daemon)[form], "--name"]
    status, out, err = started.run(argv)
    assert status == 2
    assert b"usage: fleet-supervisor" in err
    assert out == b""
    assert not touched.exists()


def test_a_stderr_whose_reader_is_gone_does_not_stop_the_server(
    started: Spawned, no_daemon: str, tmp_path: Path
) -> None:
    marker_file = tmp_path / "server-ran"
    reader, writer = os.pipe()
    os.close(reader)  # the client already closed its end
    try:
        # No daemon: the wrapper's warning goes to the broken pipe first.
        proc = started.popen(
            [
                *_forms(no_daemon)["script"],
                "--",
                sys.executable,
                "-c",
                "import sys; open(sys.argv[1], 'w').write('ran')",
                str(marker_file),
            ],
            stdout=subprocess.DEVNULL,
            stderr=writer,
        )
    finally:
        os.close(writer)
    assert proc.wait(timeout=60) == 0
    assert marker_file.read_text(encoding="utf-8") == "ran"


def test_a_closed_stderr_does_not_stop_the_server(
    started: Spawned, no_daemon: str, tmp_path: Path
) -> None:
    marker_file = tmp_path / "server-ran"
    wrapped = [
        *_forms(no_daemon)["script"],
        "--",
        sys.executable,
        "-c",
        "import sys; open(sys.argv[1], 'w').write('ran')",
        str(marker_file),
    ]
    status, _, _ = started.run(["sh", "-c", 'exec 2>&- "$@"', "sh", *wrapped], stderr=None)
    assert status == 0
    assert marker_file.read_text(encoding="utf-8") == "ran"


# --- with a daemon --------------------------------------------------------------------------------

#: Reaping off and rescans rare: a test daemon must never signal processes it did not start
#: (every daemon on a host adopts every marked server it can read).
_QUIET = ["[exec]", "reap_orphans = false", "rescan_seconds = 3600"]


@pytest.fixture(scope="module")
def daemon() -> Iterator[Daemon]:
    with running_daemon(extra_config=_QUIET, ttl=30.0) as running:
        anyio.run(wait_ready, running)
        yield running


def _daemon_log(daemon: Daemon) -> list[dict[str, Any]]:
    lines = (daemon.workdir / "daemon.log").read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines if line.startswith("{")]


def _watched(daemon: Daemon, pid: int) -> dict[str, Any]:
    (event,) = [
        e for e in _daemon_log(daemon) if e.get("event") == "server_watched" and e["pid"] == pid
    ]
    return event


def _worker(daemon: Daemon, pid: int) -> dict[str, Any]:
    with daemon.client() as client:
        workers = client.snapshot()["workers"]
    (worker,) = [w for w in workers if w["pid"] == pid and w["status"] == "active"]
    return dict(worker)


@pytest.mark.parametrize("form", ["script", "console"])
def test_a_registered_server_is_watched_by_its_own_pid(
    started: Spawned, daemon: Daemon, form: str
) -> None:
    code = "import os, sys; print(os.getpid(), flush=True); sys.stdin.read()"
    proc = started.popen(
        [
            *_forms(str(daemon.socket))[form],
            "--name",
            "gitea",
            "--namespace",
            "reviewer",
            "--client",
            "codex",
            "--",
            sys.executable,
            "-c",
            code,
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdin is not None
    assert proc.stdout is not None
    assert int(proc.stdout.readline()) == proc.pid
    worker = _worker(daemon, proc.pid)
    assert worker["namespace"] == "reviewer"
    assert worker["client_type"] == "codex"
    assert assess_instance_identity(worker["client_instance_id"]).trusted
    assert worker["client_instance_id"].startswith("inst-codex-")
    assert worker["session_id"].startswith("sess-gitea-")
    watched = _watched(daemon, proc.pid)
    assert watched["client_pid"] == os.getpid()
    assert watched["stdin_watched"] is True
    proc.stdin.close()
    assert proc.wait(timeout=60) == 0
    assert proc.stderr is not None
    assert proc.stderr.read() == b""  # registered: the wrapper had nothing to warn about


def test_a_server_without_stdin_is_watched_without_one(started: Spawned, daemon: Daemon) -> None:
    code = "import os; print(os.getpid(), flush=True)"
    wrapped = [*_forms(str(daemon.socket))["script"], "--", sys.executable, "-c", code]
    status, out, err = started.run(["sh", "-c", 'exec 0<&- "$@"', "sh", *wrapped])
    assert status == 0, err
    pid = int(out)
    # Not the exec socket mistaken for stdin (it would hang up as soon as it closed).
    assert _watched(daemon, pid)["stdin_watched"] is False
