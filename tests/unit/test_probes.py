"""Unit tests for supervisor.system.probes: stat parsing, identities, own probes, the fake."""

from __future__ import annotations

import hashlib
import os
import platform
import socket
import sys
from pathlib import Path

import pytest

from supervisor.system import probes
from supervisor.system.peers import peer_credentials
from supervisor.system.pidfd import pidfd_open
from supervisor.system.probes import (
    LocalProbes,
    ProbeBackend,
    ProcessEvidence,
    boot_id,
    host_id,
    parent_pid,
    pid_alive,
    probe_many,
    probe_process,
    process_cwd,
    process_start_time,
)
from tests.fakes import ScriptedProbes

linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux /proc")

# Fields 3..52 of a real stat line; starttime (field 22) is 8675309, ppid (field 4) is 4242.
_TAIL = (
    "S 4242 123 123 0 -1 4194560 1000 0 0 0 5 3 0 0 20 0 1 0 8675309 12345678 900 "
    "18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0 0 0 0 0 0 0 0 0"
)


def _nonexistent_pid() -> int:
    # Well above any default pid_max, searching upward in case something does live there.
    pid = 2**22 - 64
    while pid < 2**31 - 1:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return pid
        except PermissionError:
            pass
        pid += 1
    raise AssertionError("no free pid found")


# --- stat parsing ---


def test_start_ticks_from_plain_stat_line() -> None:
    assert probes._start_ticks_from_stat(f"1234 (python3) {_TAIL}\n") == "ticks-8675309"


@pytest.mark.parametrize(
    "comm",
    ["(a) (b)", "evil) (name", ") (", "with spaces  ", "x) S 1 2 3 (y", "((()))", ""],
)
def test_start_ticks_survive_hostile_comm(comm: str) -> None:
    line = f"77 ({comm}) {_TAIL}\n"
    assert probes._start_ticks_from_stat(line) == "ticks-8675309"
    assert probes._ppid_from_stat(line) == 4242


@pytest.mark.parametrize(
    "line",
    [
        "",
        "garbage without parens",
        "12 (name",
        "12 name) S 1",
        "12 (name) S 1 2 3",
        "12 (name) " + _TAIL.replace("8675309", "-5"),
        "12 (name) " + _TAIL.replace("8675309", "x1"),
    ],
)
def test_start_ticks_malformed_is_none(line: str) -> None:
    assert probes._start_ticks_from_stat(line) is None


def test_ppid_malformed_is_none() -> None:
    assert probes._ppid_from_stat("12 (name)") is None
    assert probes._ppid_from_stat("12 (name) S x") is None


# --- invalid pids ---


@pytest.mark.parametrize("pid", [0, -1, -12345])
def test_invalid_pids_cannot_tell(pid: int) -> None:
    assert pid_alive(pid) is None
    assert process_start_time(pid) is None
    assert probe_process(pid) == ProcessEvidence(pid=pid, alive=None, start_time=None)
    assert parent_pid(pid) is None
    assert process_cwd(pid) is None
    assert pidfd_open(pid) is None


# --- own process ---


def test_own_pid_alive_with_stable_start_time() -> None:
    me = os.getpid()
    assert pid_alive(me) is True
    first = process_start_time(me)
    second = process_start_time(me)
    assert first is not None
    assert first == second
    assert probe_process(me) == ProcessEvidence(pid=me, alive=True, start_time=first)


@linux_only
def test_own_start_time_is_clock_ticks_on_linux() -> None:
    start = process_start_time(os.getpid())
    assert start is not None
    assert start.startswith("ticks-")


def test_own_parent_and_cwd() -> None:
    assert parent_pid(os.getpid()) == os.getppid()
    cwd = process_cwd(os.getpid())
    assert cwd is not None
    assert os.path.realpath(cwd) == os.path.realpath(os.getcwd())


def test_nonexistent_pid_is_dead() -> None:
    pid = _nonexistent_pid()
    assert pid_alive(pid) is False
    assert process_start_time(pid) is None
    assert probe_process(pid) == ProcessEvidence(pid=pid, alive=False, start_time=None)
    assert parent_pid(pid) is None
    assert process_cwd(pid) is None


def test_probe_many_live_and_dead() -> None:
    me, dead = os.getpid(), _nonexistent_pid()
    result = probe_many([me, dead])
    assert [(e.pid, e.alive) for e in result] == [(me, True), (dead, False)]
    assert result[0].start_time == process_start_time(me)
    assert result[1].start_time is None
    assert probe_many([]) == []


@linux_only
def test_missing_stat_file_is_confirmed_with_kill(monkeypatch: pytest.MonkeyPatch) -> None:
    # As under hidepid=2: /proc hides a process that exists; that must not read as dead.
    def hidden(pid: int) -> str:
        raise FileNotFoundError(pid)

    monkeypatch.setattr(probes, "_read_stat", hidden)
    me = os.getpid()
    assert probe_many([me]) == [ProcessEvidence(pid=me, alive=True, start_time=None)]


@linux_only
def test_unreadable_stat_and_kill_denied_is_unknown(monkeypatch: pytest.MonkeyPatch) -> None:
    def denied_read(pid: int) -> str:
        raise PermissionError(pid)

    def denied_kill(pid: int, sig: int) -> None:
        raise PermissionError(pid)

    monkeypatch.setattr(probes, "_read_stat", denied_read)
    monkeypatch.setattr(os, "kill", denied_kill)
    me = os.getpid()
    assert probe_process(me) == ProcessEvidence(pid=me, alive=None, start_time=None)
    assert pid_alive(me) is None


def _stat_line(state: str, threads: str) -> str:
    fields = _TAIL.split()
    fields[0], fields[17] = state, threads  # fields 3 (state) and 20 (num_threads)
    return f"77 (worker) {' '.join(fields)}\n"


@linux_only
@pytest.mark.parametrize(
    ("state", "threads", "alive"),
    [
        ("S", "1", True),
        ("R", "4", True),
        ("D", "1", True),
        ("T", "1", True),
        ("Z", "1", False),  # exited, waiting to be reaped
        ("X", "1", False),
        ("x", "1", False),
        ("Z", "2", True),  # only the leader thread exited; the process runs on
        ("Z", "?", True),  # cannot prove the process exited
    ],
)
def test_probe_reads_the_state_field(
    monkeypatch: pytest.MonkeyPatch, state: str, threads: str, alive: bool
) -> None:
    monkeypatch.setattr(probes, "_read_stat", lambda pid: _stat_line(state, threads))
    assert probe_process(77) == ProcessEvidence(pid=77, alive=alive, start_time="ticks-8675309")


@linux_only
def test_truncated_stat_line_is_not_proof_of_exit(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(probes, "_read_stat", lambda pid: "77 (worker) Z 1 77")
    assert probe_process(77) == ProcessEvidence(pid=77, alive=True, start_time=None)


# --- portable (psutil) path, exercised on this platform ---


def test_portable_path_uses_psutil(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(probes, "_LINUX", False)
    me = os.getpid()
    start = process_start_time(me)
    assert start is not None
    assert start.startswith("ctime-")
    assert probe_process(me) == ProcessEvidence(pid=me, alive=True, start_time=start)
    assert parent_pid(me) == os.getppid()
    dead = _nonexistent_pid()
    assert probe_many([dead]) == [ProcessEvidence(pid=dead, alive=False, start_time=None)]
    token = boot_id()
    assert token is not None
    assert token.startswith("boot-")


def test_portable_probe_drops_start_when_process_dies_mid_probe(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(probes, "_LINUX", False)
    monkeypatch.setattr(probes, "pid_alive", lambda pid: False)
    assert probe_process(os.getpid()).start_time is None


def test_portable_probe_drops_start_when_pid_reused_mid_probe(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(probes, "_LINUX", False)
    tokens = iter(["ctime-1.0", "ctime-2.0"])
    monkeypatch.setattr(probes, "process_start_time", lambda pid: next(tokens))
    evidence = probe_process(os.getpid())
    assert evidence.alive is True
    assert evidence.start_time is None


# --- host and boot identity ---


def test_host_id_override_wins() -> None:
    assert host_id("fleet-host-7") == "fleet-host-7"
    assert LocalProbes(host_override="fleet-host-7").host_id() == "fleet-host-7"


def test_host_id_from_machine_id(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    missing, present = tmp_path / "missing", tmp_path / "machine-id"
    present.write_text("0123456789abcdef0123456789abcdef\n", encoding="ascii")
    monkeypatch.setattr(probes, "_MACHINE_ID_PATHS", (str(missing), str(present)))
    digest = hashlib.sha256(b"0123456789abcdef0123456789abcdef").hexdigest()
    assert host_id() == f"machine-{digest[:16]}"
    assert host_id("") == f"machine-{digest[:16]}"
    assert host_id("   ") == f"machine-{digest[:16]}"


def test_host_id_falls_back_to_node(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    empty = tmp_path / "machine-id"
    empty.write_text("uninitialized\n", encoding="ascii")
    monkeypatch.setattr(probes, "_MACHINE_ID_PATHS", (str(empty), str(tmp_path / "nope")))
    monkeypatch.setattr(platform, "node", lambda: "box-1")
    assert host_id() == "node-box-1"
    monkeypatch.setattr(platform, "node", lambda: "")
    assert host_id() is None


def test_host_id_default_is_stable() -> None:
    first = host_id()
    assert first is not None
    assert host_id() == first


@linux_only
def test_boot_id_stable_and_non_empty() -> None:
    first = boot_id()
    assert first
    assert boot_id() == first
    assert LocalProbes().boot_id() == first


@linux_only
def test_boot_id_unreadable_is_none_on_linux(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(probes, "_BOOT_ID_PATH", str(tmp_path / "absent"))
    assert boot_id() is None


# --- peer credentials ---


@linux_only
def test_peer_credentials_over_socketpair() -> None:
    left, right = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    with left, right:
        assert peer_credentials(left) == (os.getpid(), os.getuid(), os.getgid())


def test_peer_credentials_non_unix_or_closed_is_none() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as inet:
        assert peer_credentials(inet) is None
    left, right = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    left.close()
    right.close()
    assert peer_credentials(left) is None


# --- LocalProbes and the scripted double ---


def test_local_probes_delegate() -> None:
    backend: ProbeBackend = LocalProbes()
    me = os.getpid()
    assert backend.probe(me).alive is True
    assert [e.pid for e in backend.probe_many([me, me])] == [me, me]
    assert backend.parent_pid(me) == os.getppid()
    assert backend.process_cwd(me) is not None
    assert backend.host_id() == host_id()


def test_scripted_probes_pid_reuse() -> None:
    fake = ScriptedProbes()
    backend: ProbeBackend = fake
    fake.set(100, alive=True, start_time="ticks-1", parent=1, cwd="/repo")
    assert backend.probe(100) == ProcessEvidence(pid=100, alive=True, start_time="ticks-1")
    assert backend.parent_pid(100) == 1
    assert backend.process_cwd(100) == "/repo"

    fake.kill(100)
    assert backend.probe(100) == ProcessEvidence(pid=100, alive=False, start_time=None)
    assert backend.process_cwd(100) is None

    fake.revive(100, "ticks-2")
    assert backend.probe(100) == ProcessEvidence(pid=100, alive=True, start_time="ticks-2")
    assert fake.probed == [100, 100, 100]


def test_scripted_probes_defaults_and_identity() -> None:
    fake = ScriptedProbes()
    assert fake.probe(5) == ProcessEvidence(pid=5, alive=None, start_time=None)
    fake.set(6, alive=False, start_time="ticks-9")
    assert fake.probe_many([6]) == [ProcessEvidence(pid=6, alive=False, start_time=None)]
    fake.forget(6)
    assert fake.probe(6).alive is None
    assert (fake.host_id(), fake.boot_id()) == ("host-test", "boot-test")
    fake.set_host_id(None)
    fake.set_boot_id("boot-2")
    assert (fake.host_id(), fake.boot_id()) == (None, "boot-2")
    assert ScriptedProbes(unknown_alive=False).probe(7).alive is False
