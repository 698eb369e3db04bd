"""process_tree against real processes: stat facts, tree members, markers, verified signals."""

from __future__ import annotations

import os
import platform
import select
import signal
import stat
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from supervisor.policy.identity.exec_marker import MARKER_ENV, ExecMarker, format_marker
from supervisor.policy.incarnation import inode_of, start_of
from supervisor.system.pidfd import inodes_unique
from supervisor.system.probes import process_start_time
from supervisor.system.proc_reads import StatRead
from supervisor.system.process_tree import (
    Member,
    StatFacts,
    boot_time_epoch,
    client_argv,
    duplicate_fd,
    find_members,
    marker_of,
    scan_markers,
    signal_verified,
    start_epoch,
    stat_facts,
    ticks,
)
from tests.spawned import Spawned, spawning

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc"),
]

#: Waits for a child to set itself up are bounded: this many polls, 10 ms apart.
_POLLS = 1000


def _raw_ticks(pid: int) -> str:
    with open(f"/proc/{pid}/stat", encoding="latin-1") as handle:
        return handle.read().rpartition(")")[2].split()[19]


def _children(pid: int) -> list[int]:
    try:
        with open(f"/proc/{pid}/task/{pid}/children", encoding="ascii") as handle:
            return [int(p) for p in handle.read().split()]
    except OSError:
        return []


def _descendants(pid: int) -> set[int]:
    found: set[int] = set()
    todo = _children(pid)
    while todo:
        child = todo.pop()
        if child not in found:
            found.add(child)
            todo.extend(_children(child))
    return found


def _cmdline(pid: int) -> bytes:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            return handle.read()
    except OSError:
        return b""


def _comm(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/comm", encoding="utf-8", errors="replace") as handle:
            return handle.read().rstrip("\n")
    except OSError:
        return ""


def _state(pid: int) -> str:
    facts = stat_facts(pid)
    return facts.state if facts is not None else ""


def _wait_for(what: str, predicate: Callable[[], bool]) -> None:
    """Wait (bounded) for a child process to reach a state; never a protocol deadline."""
    for _ in range(_POLLS):
        if predicate():
            return
        time.sleep(0.01)
    raise AssertionError(f"{what} did not happen")


@pytest.fixture
def spawned() -> Iterator[Spawned]:
    with spawning() as tracker:
        yield tracker


def _group(spawned: Spawned) -> tuple[subprocess.Popen[bytes], set[int]]:
    """``sh -c 'sleep 60 & sleep 60'`` in a session of its own, once both sleeps run."""
    proc = spawned.popen_exec(["sh", "-c", "sleep 60 & sleep 60"], start_new_session=True)

    def both_sleeping() -> bool:
        found = _descendants(proc.pid)
        for pid in found:
            spawned.track(pid)
        return sum(_comm(pid) == "sleep" for pid in found) == 2

    _wait_for("two sleeps", both_sleeping)
    return proc, {proc.pid} | _descendants(proc.pid)


# --- stat facts ---------------------------------------------------------------------------------


def test_stat_facts_of_this_process() -> None:
    facts = stat_facts(os.getpid())
    assert facts is not None
    assert facts.pid == os.getpid()
    assert facts.ppid == os.getppid()
    assert facts.pgid == os.getpgid(0)
    assert facts.state == "R"  # it is reading its own stat right now
    assert facts.start == process_start_time(os.getpid())
    assert facts.start == ticks(_raw_ticks(os.getpid()))


@pytest.mark.parametrize(
    ("state", "running"),
    [("R", True), ("S", True), ("D", True), ("T", True), ("Z", False), ("X", False), ("x", False)],
)
def test_a_process_in_an_exited_state_never_runs_again(state: str, running: bool) -> None:
    # 'x' is how kernels before 3.14 spelled dead; the census and the stat parser agree.
    facts = StatFacts(pid=7, state=state, ppid=1, pgid=7, start="ticks-1")
    census = StatRead(state=state, ppid=1, start="ticks-1", cpu_ticks=0, rss_pages=0, comm="x")
    assert facts.running is census.running is running


def test_stat_facts_of_an_impossible_pid_is_none() -> None:
    with open("/proc/sys/kernel/pid_max", encoding="ascii") as handle:
        pid_max = int(handle.read())
    assert stat_facts(pid_max + 1) is None
    assert stat_facts(0) is None


def test_stat_facts_survive_a_command_name_with_parentheses_and_spaces(spawned: Spawned) -> None:
    code = (
        "import ctypes, sys\n"
        "ctypes.CDLL(None).prctl(15, b') x) (y 1 2 3', 0, 0, 0)\n"  # PR_SET_NAME
        "print('named', flush=True)\n"
        "sys.stdin.read()\n"
    )
    proc = spawned.popen_exec(
        [sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE
    )
    assert proc.stdout is not None
    assert proc.stdout.readline() == b"named\n"
    assert _comm(proc.pid) == ") x) (y 1 2 3"[:15]
    facts = stat_facts(proc.pid)
    assert facts is not None
    assert (facts.ppid, facts.pgid) == (os.getpid(), os.getpgid(0))
    assert facts.start == process_start_time(proc.pid)


def test_start_epoch_lies_between_boot_and_now() -> None:
    with open("/proc/sys/kernel/random/boot_id", encoding="ascii") as handle:
        boot = handle.read().strip()
    booted = boot_time_epoch(boot)
    started = start_epoch(ticks(_raw_ticks(os.getpid())), boot)
    assert booted is not None
    assert started is not None
    assert booted <= started <= time.time() + 1
    assert boot_time_epoch(boot) == booted  # read once per boot id


def test_client_argv_reads_a_command_line(spawned: Spawned) -> None:
    argv = ["sleep", "60"]
    proc = spawned.popen_exec(argv)
    assert client_argv(proc.pid) == argv
    assert client_argv(2**40) == []


# --- tree members -------------------------------------------------------------------------------


def test_find_members_lists_exactly_a_process_group(spawned: Spawned) -> None:
    leader, expected = _group(spawned)
    assert len(expected) == 3  # sh and both sleeps
    start = process_start_time(leader.pid)
    assert start is not None
    members = find_members(leader.pid, start)
    assert {m.pid for m in members} == expected
    assert os.getpid() not in {m.pid for m in members}
    for member in members:
        # The start, and the pidfd inode that names exactly that process where the kernel
        # gives each process its own.
        assert start_of(member.start) == process_start_time(member.pid)
        assert (inode_of(member.start) is not None) is inodes_unique()
    # The scan's markers may be handed in; the answer is the same.
    again = find_members(leader.pid, start, markers=scan_markers())
    assert {m.pid for m in again} == expected


def test_find_members_leaves_out_zombies(spawned: Spawned) -> None:
    # The leader forks a child that exits at once and is never reaped.
    code = (
        "import os, sys\n"
        "pid = os.fork()\n"
        "if pid == 0:\n"
        "    os._exit(0)\n"
        "print(pid, flush=True)\n"
        "sys.stdin.read()\n"
    )
    leader = spawned.popen_exec(
        [sys.executable, "-c", code],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        start_new_session=True,
    )
    assert leader.stdout is not None
    zombie = int(leader.stdout.readline())
    _wait_for("a zombie", lambda: _state(zombie) == "Z")
    start = process_start_time(leader.pid)
    assert start is not None
    assert {m.pid for m in find_members(leader.pid, start)} == {leader.pid}


def test_find_members_follows_the_marker_out_of_the_group(spawned: Spawned) -> None:
    leader, expected = _group(spawned)
    start = process_start_time(leader.pid)
    assert start is not None

    def marked(leader_start: str) -> subprocess.Popen[bytes]:
        marker = ExecMarker(
            leader_pid=leader.pid,
            leader_start=leader_start,
            client_pid=os.getpid(),
            client_start=_raw_ticks(os.getpid()),
            boot_id="boot",
            client="",
            name="moved",
            namespace="",
            daemon="",
        )
        env = {**os.environ, MARKER_ENV: format_marker(marker)}
        return spawned.popen_exec(["sleep", "60"], env=env, start_new_session=True)

    moved = marked(_raw_ticks(leader.pid))
    other_incarnation = marked(str(int(_raw_ticks(leader.pid)) + 1))
    unmarked = spawned.popen_exec(["sleep", "60"], start_new_session=True)
    pids = {m.pid for m in find_members(leader.pid, start)}
    assert pids == expected | {moved.pid}
    assert other_incarnation.pid not in pids
    assert unmarked.pid not in pids
    assert {m.pid for m in find_members(leader.pid, start, markers=scan_markers())} == pids


def test_a_leader_start_from_the_future_lists_nothing(spawned: Spawned) -> None:
    leader, _ = _group(spawned)
    later = ticks(str(int(_raw_ticks(leader.pid)) + 10**9))
    assert find_members(leader.pid, later) == []


# --- markers -----------------------------------------------------------------------------------


def test_marker_of_reads_a_child_environment(spawned: Spawned) -> None:
    marker = ExecMarker(
        leader_pid=12345,
        leader_start="678",
        client_pid=os.getpid(),
        client_start=_raw_ticks(os.getpid()),
        boot_id="boot-1",
        client="codex",
        name="gitea",
        namespace="author",
        daemon="",
    )
    padding = {f"PAD_{i}": "x" * 200 for i in range(50)}
    marked = spawned.popen_exec(
        ["sleep", "60"], env={**padding, MARKER_ENV: format_marker(marker), "AFTER": "1"}
    )
    plain = spawned.popen_exec(["sleep", "60"], env={"ONLY": "1"})
    broken = spawned.popen_exec(["sleep", "60"], env={MARKER_ENV: "v1;leader=oops"})
    prefixed = spawned.popen_exec(["sleep", "60"], env={"X" + MARKER_ENV: format_marker(marker)})
    assert marker_of(marked.pid) == marker
    assert marker_of(plain.pid) is None
    assert marker_of(broken.pid) is None
    assert marker_of(prefixed.pid) is None
    assert marker_of(2**40) is None
    found = scan_markers()
    assert found.get(marked.pid) == marker
    assert not {plain.pid, broken.pid, prefixed.pid} & set(found)


# --- verified signals --------------------------------------------------------------------------

_PONG = (
    "import signal, sys\n"
    "def term(signum, frame):\n"
    "    print('term', flush=True)\n"
    "    sys.exit(0)\n"
    "signal.signal(signal.SIGTERM, term)\n"
    "print('ready', flush=True)\n"
    "for line in sys.stdin:\n"
    "    print('pong', flush=True)\n"
)


def test_a_signal_to_the_wrong_incarnation_is_refused_and_nothing_is_sent(
    spawned: Spawned,
) -> None:
    proc = spawned.popen_exec(
        [sys.executable, "-c", _PONG], stdin=subprocess.PIPE, stdout=subprocess.PIPE
    )
    assert proc.stdin is not None
    assert proc.stdout is not None
    assert proc.stdout.readline() == b"ready\n"
    start = process_start_time(proc.pid)
    assert start is not None
    wrong = Member(pid=proc.pid, start=ticks(str(int(_raw_ticks(proc.pid)) - 1)))
    assert not signal_verified(wrong, signal.SIGTERM)
    assert not signal_verified(Member(pid=proc.pid, start="ticks-0"), signal.SIGKILL)
    # A SIGTERM sent before this line would have run the handler before the read returns.
    proc.stdin.write(b"ping\n")
    proc.stdin.flush()
    assert proc.stdout.readline() == b"pong\n"
    assert proc.poll() is None
    assert signal_verified(Member(pid=proc.pid, start=start), signal.SIGTERM)
    assert proc.stdout.readline() == b"term\n"
    assert proc.wait(timeout=30) == 0


def test_a_verified_sigkill_kills(spawned: Spawned) -> None:
    proc = spawned.popen_exec(["sleep", "60"])
    start = process_start_time(proc.pid)
    assert start is not None
    assert signal_verified(Member(pid=proc.pid, start=start), signal.SIGKILL)
    assert proc.wait(timeout=30) == -signal.SIGKILL
    # Gone (reaped): nothing to signal any more.
    assert not signal_verified(Member(pid=proc.pid, start=start), signal.SIGKILL)


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGHUP, signal.SIGSTOP, 0])
def test_only_sigterm_and_sigkill_may_be_sent(spawned: Spawned, signum: int) -> None:
    proc = spawned.popen_exec(["sleep", "60"])
    start = process_start_time(proc.pid)
    assert start is not None
    with pytest.raises(ValueError, match="refusing"):
        signal_verified(Member(pid=proc.pid, start=start), signum)
    assert _state(proc.pid) in ("S", "R")


# --- pidfd_getfd -------------------------------------------------------------------------------


def _getfd_refusal() -> str | None:
    """Why this host would refuse pidfd_getfd on our own child, or None if nothing would."""
    release = tuple(int(p) for p in platform.release().split(".")[:2] if p.isdigit())
    if release < (5, 6):
        return f"kernel {platform.release()} has no pidfd_getfd"
    try:
        with open("/proc/sys/kernel/yama/ptrace_scope", encoding="ascii") as handle:
            scope = int(handle.read())
    except (OSError, ValueError):
        scope = 0
    if scope >= 3 or (scope == 2 and os.geteuid() != 0):
        return f"yama ptrace_scope {scope}"
    return None


def test_duplicate_fd_gives_a_working_copy_of_a_child_stdin(spawned: Spawned) -> None:
    proc = spawned.popen_exec(
        [sys.executable, "-c", "import sys; print('up', flush=True); sys.stdin.read()"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    )
    assert proc.stdin is not None
    assert proc.stdout is not None
    assert proc.stdout.readline() == b"up\n"
    pidfd = os.pidfd_open(proc.pid)
    try:
        fd = duplicate_fd(pidfd, 0)
        assert duplicate_fd(pidfd, 987) is None  # not open in the child
    finally:
        os.close(pidfd)
    if fd is None:
        reason = _getfd_refusal()
        assert reason is not None, "pidfd_getfd refused with no reason this host can show"
        pytest.skip(reason)
    try:
        ours = os.fstat(proc.stdin.fileno())
        theirs = os.fstat(fd)
        assert stat.S_ISFIFO(theirs.st_mode)
        assert (theirs.st_dev, theirs.st_ino) == (ours.st_dev, ours.st_ino)
        assert not os.get_inheritable(fd)
        watch = select.poll()
        watch.register(fd, select.POLLHUP)
        assert watch.poll(0) == []  # a writer (us) still holds the pipe open
        proc.stdin.close()  # the client hangs up
        assert watch.poll(0) == [(fd, select.POLLHUP)]
        assert proc.wait(timeout=30) == 0
    finally:
        os.close(fd)


def test_duplicate_fd_of_something_that_is_no_pidfd_is_none(tmp_path: Any) -> None:
    with open(tmp_path / "plain", "wb") as handle:
        assert duplicate_fd(handle.fileno(), 0) is None
    assert duplicate_fd(-1, 0) is None


@pytest.mark.parametrize(
    ("server", "client", "dedicated"),
    [
        ("/user.slice/app.scope", "/user.slice/term.scope", "/user.slice/app.scope"),
        ("/a/b", "/a", "/a/b"),  # a child cgroup of the client's own
        ("/a", "/a", None),  # the client's cgroup is shared, never the server's
        ("/a", "/a/b", None),  # the client lives inside it
        ("/", "/x", None),  # the root is everyone's
        (None, "/x", None),
        ("/x", None, None),
    ],
)
def test_a_cgroup_is_the_servers_own_only_when_nothing_else_shares_it(
    monkeypatch: pytest.MonkeyPatch, server: str | None, client: str | None, dedicated: str | None
) -> None:
    from supervisor.system import process_tree

    paths = {1: server, 2: client}
    monkeypatch.setattr(process_tree, "cgroup_of", paths.get)
    assert process_tree.dedicated_cgroup(1, 2) == dedicated
