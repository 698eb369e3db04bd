"""Real clients and servers under ``exec``: no leftovers, rows released when the tree is gone."""

from __future__ import annotations

import array
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from supervisor.policy.identity.instance import assess_instance_identity
from supervisor.system.process_tree import cgroup_of
from tests.integration.daemon import Daemon, running_daemon
from tests.integration.exec_scenarios import (
    alive,
    audit_outcomes,
    launched,
    ready,
    rows_of,
    start_daemon,
    stop_daemon,
    stored_row,
    until,
)

pytestmark = pytest.mark.integration

GRACE = ["[exec]", "reap_grace_seconds = 0.5", "rescan_seconds = 0.5"]


@pytest.fixture
def daemon() -> Iterator[Daemon]:
    with running_daemon(extra_config=GRACE) as running:
        ready(running)
        yield running


@pytest.fixture
def reporting() -> Iterator[Daemon]:
    with running_daemon(extra_config=[*GRACE, "reap_orphans = false"]) as running:
        ready(running)
        yield running


def _status(daemon: Daemon, pid: int) -> str | None:
    rows = rows_of(daemon, pid)
    return str(rows[-1]["status"]) if rows else None


def _released_only_when_gone(daemon: Daemon, tree: list[int], pid: int) -> None:
    """Until the row is released, watch that it never is while a process of the tree runs."""

    def running() -> list[int]:
        return [p for p in tree if alive(p)]

    deadline = time.monotonic() + 30
    while True:
        status = _status(daemon, pid)  # read first: a process seen after it ran then too
        still = running()
        if status == "released":
            assert still == [], f"row released while {still} still run"
            return
        assert time.monotonic() < deadline, f"row still {status}; running: {still}"
        time.sleep(0.05)


def test_the_row_is_registered_with_an_identity_derived_from_the_client(
    daemon: Daemon, tmp_path: Path
) -> None:
    with launched(tmp_path, "polite", daemon=daemon) as launch:
        until(lambda: _status(daemon, launch.server) == "active", "the registration")
        (row,) = rows_of(daemon, launch.server)
        assert assess_instance_identity(row["client_instance_id"]).trusted
        assert str(row["session_id"]).startswith("sess-")
        assert row["ownership_state"] == "live"
        stored = stored_row(daemon, launch.server)
        assert stored["client_pid"] == launch.client_pid
        assert stored["instance_id_provenance"] == "trusted_launcher"


def test_two_launches_of_one_config_get_two_instances_and_one_launch_shares_one(
    daemon: Daemon, tmp_path: Path
) -> None:
    with (
        launched(tmp_path, "polite", daemon=daemon) as first,
        launched(tmp_path, "polite", daemon=daemon) as second,
    ):
        for launch in (first, second):
            until(lambda launch=launch: _status(daemon, launch.server) == "active", "rows")
        one, two = (rows_of(daemon, launch.server)[0] for launch in (first, second))
        assert one["client_instance_id"] != two["client_instance_id"]
        assert one["session_id"] != two["session_id"]
        with daemon.client() as client:
            snapshot = client.snapshot()
        codes = {f.get("code") or f.get("finding") for f in snapshot.get("findings", [])}
        assert "session_identity_collision" not in codes
        assert "duplicate_namespace_worker" not in codes


def test_a_polite_server_whose_client_exits_leaves_nothing(daemon: Daemon, tmp_path: Path) -> None:
    with launched(tmp_path, "polite", daemon=daemon) as launch:
        until(lambda: _status(daemon, launch.server) == "active", "the registration")
        launch.client_exits()
        until(lambda: launch.tree() == [], "the server to be gone")
        until(lambda: _status(daemon, launch.server) == "released", "the release")


@pytest.mark.parametrize("how", ["exit", "kill"])
def test_a_stubborn_tree_whose_client_goes_is_stopped_and_released(
    daemon: Daemon, tmp_path: Path, how: str
) -> None:
    with launched(tmp_path, "stubborn", daemon=daemon) as launch:
        until(lambda: _status(daemon, launch.server) == "active", "the registration")
        tree = launch.tree()
        assert len(tree) == 2  # the server and its child
        if how == "exit":
            launch.client_exits()
        else:
            launch.kill_client()
        _released_only_when_gone(daemon, tree, launch.server)
        assert launch.tree() == []
        assert audit_outcomes(daemon, launch.server) == ["client_exited"]


def test_a_stubborn_server_whose_stdin_is_closed_is_stopped_after_the_grace(
    daemon: Daemon, tmp_path: Path
) -> None:
    with launched(tmp_path, "stubborn", daemon=daemon) as launch:
        until(lambda: _status(daemon, launch.server) == "active", "the registration")
        tree = launch.tree()
        launch.tell("close")
        _released_only_when_gone(daemon, tree, launch.server)
        assert launch.client_running()  # the client lives on; only its server went
        assert audit_outcomes(daemon, launch.server) == ["stdin_closed"]


def test_a_polite_server_whose_stdin_is_closed_exits_by_itself(
    daemon: Daemon, tmp_path: Path
) -> None:
    with launched(tmp_path, "polite", daemon=daemon) as launch:
        until(lambda: _status(daemon, launch.server) == "active", "the registration")
        launch.tell("close")
        until(lambda: launch.tree() == [], "the server to exit on EOF")
        until(lambda: _status(daemon, launch.server) == "released", "the release")
        assert audit_outcomes(daemon, launch.server) == ["server_exited"]


def test_children_left_by_an_exited_leader_are_stopped_before_the_release(
    daemon: Daemon, tmp_path: Path
) -> None:
    with launched(tmp_path, "leaves_child", daemon=daemon) as launch:
        until(lambda: _status(daemon, launch.server) == "active", "the registration")
        tree = launch.tree()
        assert len(tree) == 2
        launch.tell("close")  # the leader exits on EOF; its child ignores SIGTERM
        _released_only_when_gone(daemon, tree, launch.server)
        assert launch.client_running()


def test_a_signal_from_the_client_reaches_the_server_itself(daemon: Daemon, tmp_path: Path) -> None:
    with launched(tmp_path, "polite", daemon=daemon) as launch:
        until(lambda: _status(daemon, launch.server) == "active", "the registration")
        os.kill(launch.server, signal.SIGTERM)  # what a client's stop escalation sends
        until(lambda: launch.tree() == [], "the server to stop")
        until(lambda: _status(daemon, launch.server) == "released", "the release")


def test_without_reaping_an_orphan_is_reported_and_left_running(
    reporting: Daemon, tmp_path: Path
) -> None:
    with launched(tmp_path, "stubborn", daemon=reporting) as launch:
        until(lambda: _status(reporting, launch.server) == "active", "the registration")
        launch.kill_client()

        def finding() -> list[dict[str, object]]:
            with reporting.client() as client:
                return list(client.snapshot()["orphaned_workers"])

        until(lambda: bool(finding()), "the orphan finding")
        (found,) = finding()
        assert found["pid"] == launch.server
        assert found["reason_code"] == "launching_client_exited"
        assert len(launch.tree()) == 2
        assert _status(reporting, launch.server) == "active"


def test_servers_started_while_the_daemon_is_down_are_adopted_then_reaped(
    daemon: Daemon, tmp_path: Path
) -> None:
    stop_daemon(daemon)
    with launched(tmp_path, "stubborn", daemon=daemon) as launch:
        tree = launch.tree()
        assert len(tree) == 2  # the wrapper started the server without a daemon
        start_daemon(daemon)
        until(lambda: _status(daemon, launch.server) == "active", "the adoption")
        launch.kill_client()
        _released_only_when_gone(daemon, tree, launch.server)


def test_a_client_that_dies_while_the_daemon_is_down_is_cleaned_up_at_restart(
    daemon: Daemon, tmp_path: Path
) -> None:
    with launched(tmp_path, "stubborn", daemon=daemon) as launch:
        until(lambda: _status(daemon, launch.server) == "active", "the registration")
        tree = launch.tree()
        stop_daemon(daemon)
        launch.kill_client()
        # The stubborn tree ignores the parent-death SIGTERM: nothing stops it yet.
        assert launch.tree() == tree
        start_daemon(daemon)
        _released_only_when_gone(daemon, tree, launch.server)


def test_a_server_that_dies_unwatched_is_retirable_through_plan_and_apply(
    daemon: Daemon, tmp_path: Path
) -> None:
    with launched(tmp_path, "polite", daemon=daemon) as launch:
        until(lambda: _status(daemon, launch.server) == "active", "the registration")
        stop_daemon(daemon)
        launch.client_exits()  # the server exits on EOF; nobody watches it go
        until(lambda: launch.tree() == [], "the server to exit")
        start_daemon(daemon)
        (row,) = rows_of(daemon, launch.server)
        assert row["status"] == "active"  # its exit was not seen: no shortcut

        def candidates() -> list[str]:
            plan = json.loads(daemon.cli("plan", "--json").stdout)
            return [c["worker_identity"] for c in plan.get("candidates", [])]

        until(lambda: row["worker_identity"] in candidates(), "the plan to offer the row")


def test_the_wrapper_with_no_daemon_still_starts_the_server(tmp_path: Path) -> None:
    with launched(tmp_path, "polite", socket=tmp_path / "nobody.sock") as launch:
        assert launch.tree() == [launch.server]
        launch.client_exits()
        until(lambda: launch.tree() == [], "the server to exit on EOF")


def test_the_console_script_form_registers_too(daemon: Daemon, tmp_path: Path) -> None:
    script = Path(sys.executable).with_name("fleet-supervisor")
    pidfile = tmp_path / "server.pid"
    code = "import os,sys; open(sys.argv[1],'w').write(str(os.getpid())); sys.stdin.read()"
    wrapper = [str(script), "--config", str(daemon.config), "exec", "--name", "t", "--"]
    with subprocess.Popen(
        [*wrapper, sys.executable, "-c", code, str(pidfile)],
        stdin=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    ) as server:
        try:
            until(lambda: pidfile.exists() and pidfile.read_text() != "", "the server")
            assert int(pidfile.read_text()) == server.pid
            until(lambda: _status(daemon, server.pid) == "active", "the registration")
            assert server.stdin is not None
            server.stdin.close()
            server.wait(timeout=30)
            until(lambda: _status(daemon, server.pid) == "released", "the release")
        finally:
            if server.poll() is None:
                server.kill()


def _exec_request(daemon: Daemon, payload: bytes, fds: list[int]) -> str:
    path = str(daemon.socket) + ".exec"
    with socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET) as sock:
        sock.settimeout(30)
        sock.connect(path)
        ancillary = [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds).tobytes())]
        sock.sendmsg([payload], ancillary if fds else [])
        return sock.recv(4096).decode()


def _held(pid: int, targets: set[str]) -> set[str]:
    """Which of ``targets`` (``pipe:[inode]`` links) the process holds a descriptor on."""
    held: set[str] = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        with contextlib.suppress(FileNotFoundError):
            held.add(os.readlink(f"/proc/{pid}/fd/{fd}"))
    return held & targets


def test_bad_exec_requests_are_refused_and_leak_nothing(daemon: Daemon) -> None:
    pipes = [os.pipe() for _ in range(3)]
    # The daemon's own descriptors come and go (its census, its store), so the pipes
    # handed over are told by their inodes, not by a count.
    handed = {os.readlink(f"/proc/self/fd/{read}") for read, _ in pipes}
    try:
        for payload in (b"", b"\xff\xfe", b"v=2\n", b"v=1\nevil=1\n", b"v=1\nttl=nan\n"):
            fds = [read for read, _ in pipes]
            answer = _exec_request(daemon, payload, fds)
            assert answer.startswith("refused invalid_request"), answer
        ready(daemon)  # still answering
        # Every descriptor handed over with a refused request was closed again.
        until(lambda: not _held(daemon.process.pid, handed), "the daemon to close the fds")
    finally:
        for read, write in pipes:
            os.close(read)
            os.close(write)


def _cgroup2_mount() -> Path | None:
    with open("/proc/self/mountinfo", encoding="utf-8") as handle:
        for line in handle:
            if " - cgroup2 " in line:
                return Path(line.split()[4])
    return None


@pytest.fixture
def own_cgroup() -> Iterator[Path]:
    """A fresh cgroup v2 beside this test's, as ``systemd-run --scope`` would give a server."""
    mount = _cgroup2_mount()
    here = cgroup_of(os.getpid())
    if mount is None or here is None or not os.access(mount / here.lstrip("/"), os.W_OK):
        if os.environ.get("CI"):
            pytest.fail("CI needs a writable cgroup v2 hierarchy for this test")
        pytest.skip("no writable cgroup v2 hierarchy here")
    path = mount / here.lstrip("/") / f"fleet-test-{os.getpid()}-{time.monotonic_ns()}"
    path.mkdir()
    try:
        yield path
    finally:
        for pid in (path / "cgroup.procs").read_text().split():
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(pid), signal.SIGKILL)
        until(lambda: (path / "cgroup.procs").read_text() == "", "the cgroup to empty")
        path.rmdir()


def test_a_server_in_a_cgroup_of_its_own_is_stopped_with_every_process_in_it(
    daemon: Daemon, tmp_path: Path, own_cgroup: Path
) -> None:
    # The command the client runs joins the cgroup and execs the wrapper (same pid): the
    # server is registered from inside it, its client from outside.
    join = ["sh", "-c", f'echo $$ > {own_cgroup}/cgroup.procs && exec "$@"', "sh"]
    with launched(tmp_path, "escapes", daemon=daemon, prefix=join) as launch:
        until(lambda: _status(daemon, launch.server) == "active", "the registration")
        escaped = int(launch.pidfile.read_text().split()[1])
        assert alive(escaped)
        assert escaped not in launch.tree()  # neither in the group nor carrying the marker
        assert str(escaped) in (own_cgroup / "cgroup.procs").read_text().split()
        launch.kill_client()
        _released_only_when_gone(daemon, [launch.server, escaped], launch.server)
        assert not alive(escaped)
