"""Whole headless sessions of real clients, offline, bare or wrapped, and what they leave.

``run_sessions(client, scenario, wrapped=..., daemon=...)`` writes the client's own config
with three servers (server-everything through ``npx``, ``mcp-server-time`` and the
stubborn stub), wraps them with ``clients wrap`` when asked, and runs the session (two at
once for ``two-sessions``) inside a network namespace of its own with the model stand-in
on loopback. The stand-in calls one tool of every server, then ends the turn. How the
session ends is the scenario's:

- ``ends``: the client answers and exits;
- ``killed-mid-turn``: the stand-in holds its last answer; the client's own processes
  are SIGKILLed once every tool call came back;
- ``killed-starting``: the stub holds its answer to ``initialize``; the client's own
  processes are SIGKILLed while it waits (Claude Code #93087);
- ``two-sessions``: two sessions of one client from one config hold their last answer
  at once; each must keep all its servers while it lives; then both end.

Every marked process is watched from the start (rows too, with a daemon); after the end
the leftovers are counted once nothing is left or the settle time passed, then every
process the run started is SIGKILLed by pid.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager, suppress
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from tests.integration.daemon import Daemon
from tests.integration.reap_host import rss_of
from tests.realclients.harness import (
    CLIENTS_DIR,
    REPO,
    ClientHome,
    Proc,
    ServerEntry,
    kill_all,
    leftovers,
    new_marker,
    server_entry,
    temp_home,
)
from tests.realclients.scenarios import REAP_GRACE_SECONDS, Watch, rows_of, settle
from tests.sessions.clients import FAMILY, STANDIN_PORT, session_argv, session_env, write_config
from tests.unavailable import unavailable

__all__ = [
    "SESSION_SCENARIOS",
    "SESSION_SERVERS",
    "Session",
    "SessionResult",
    "clients_command",
    "held",
    "kill_client_tree",
    "netns_command",
    "run_sessions",
    "session_entries",
    "start_session",
]

SESSION_SCENARIOS = ("ends", "killed-mid-turn", "killed-starting", "two-sessions")
#: (server kind, entry name) of the three servers every session config lists.
SESSION_SERVERS = (("everything-npx", "everything"), ("time", "time"), ("stubborn", "stub"))
_CLIENT_LIMIT = 120.0
_POLL = 0.05


@dataclass
class SessionResult:
    client: str
    scenario: str
    wrapped: bool
    #: Each session's exit status and output.
    returncodes: list[int | None]
    outputs: list[str]
    #: Servers whose tool call came back to the model, per session.
    answered: list[set[str]]
    left: list[Proc]
    seen: list[Proc]
    rows: list[dict[str, Any]] = field(default_factory=list)
    row_violations: list[str] = field(default_factory=list)
    #: Marked processes stopped while their session still lived (two-sessions).
    stopped_while_live: list[str] = field(default_factory=list)
    stub_log: list[str] = field(default_factory=list)
    #: Resident memory of ``left`` when counted, in bytes.
    left_rss: int = 0
    #: With ``unwrap``: whether ``clients unwrap`` gave the config file its bytes back.
    restored: bool | None = None

    def describe(self) -> str:
        how = "wrapped" if self.wrapped else "bare"
        lines = [
            f"{self.client} {self.scenario} ({how}): {len(self.left)} left, "
            f"rc={self.returncodes}, answered={self.answered}"
        ]
        lines += [f"  left: {p.describe()}" for p in self.left]
        lines += [f"  seen: [{p.kind}] {p.describe()}" for p in self.seen]
        lines += [f"  row: {r.get('pid')} {r.get('status')}" for r in self.rows]
        lines += [f"  violation: {v}" for v in self.row_violations + self.stopped_while_live]
        lines += [f"  stub: {line}" for line in self.stub_log]
        for output in self.outputs:
            lines += [f"    | {line}" for line in output.splitlines()[-30:]]
        return "\n".join(lines)


def netns_command() -> list[str]:
    """``unshare -n`` (``-rn`` when not root), or why a namespace cannot be made here."""
    unshare = shutil.which("unshare")
    if unshare is None:
        unavailable("unshare is missing (Debian: util-linux)")
    command = [unshare, "-n"] if os.geteuid() == 0 else [unshare, "-rn"]
    probe = subprocess.run(
        [*command, "true"], capture_output=True, text=True, timeout=30, check=False
    )
    if probe.returncode != 0:
        unavailable(f"cannot create a network namespace: {probe.stderr.strip()}")
    return command


def session_entries(marker: str, home: ClientHome, hold: Path | None) -> list[ServerEntry]:
    entries = []
    for kind, name in SESSION_SERVERS:
        entry = server_entry(kind, name=name, marker=marker, home=home.home,
                             log=home.home / "stub.log")  # fmt: skip
        if kind == "stubborn" and hold is not None:
            entry = replace(entry, args=(*entry.args, "--hold-until", str(hold)))
        entries.append(entry)
    return entries


def clients_command(verb: str, client: str, home: ClientHome, daemon: Daemon) -> None:
    """``fleet-supervisor clients wrap|unwrap`` of this client's files in ``home``."""
    done = subprocess.run(
        [sys.executable, "-m", "supervisor.cli", "--config", str(daemon.config), "clients",
         verb, "--home", str(home.home), "--project", str(home.project), "--client",
         FAMILY[client]],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 0, f"clients {verb}: {done.stdout}{done.stderr}"


@dataclass
class Session:
    runner: subprocess.Popen[bytes]
    directory: Path

    @property
    def log(self) -> list[dict[str, Any]]:
        try:
            text = (self.directory / "requests.log").read_text()
        except OSError:
            return []
        return [json.loads(line) for line in text.splitlines() if line.strip()]

    def client_pid(self) -> int | None:
        try:
            return int((self.directory / "client.pid").read_text())
        except (OSError, ValueError):
            return None

    def type(self, keys: str) -> None:
        """Type ``keys`` into an interactive session's terminal."""
        with (self.directory / "typed").open("ab") as typed:
            typed.write(keys.encode())

    def output(self) -> str:
        try:
            return (self.directory / "output").read_text(errors="replace")
        except OSError:
            return ""


def start_session(client: str, home: ClientHome, index: int, entries: list[ServerEntry], *,
                  hold_final: Path | None, netns: list[str],
                  interactive: bool = False) -> Session:  # fmt: skip
    """One session in its own namespace; ``interactive``: the client on a pseudo-terminal,
    with no prompt, typing what ``Session.type`` is given (its screen is the output)."""
    directory = home.home / f"session-{index}"
    directory.mkdir()
    calls = [f"{e.name}={e.tool}:{json.dumps(dict(e.tool_args))}" for e in entries]
    binary = CLIENTS_DIR / "node_modules" / ".bin" / client
    argv = [
        *netns, sys.executable, "-m", "tests.sessions.netns",
        "--port", str(STANDIN_PORT), "--log", str(directory / "requests.log"),
        *(f"--call={c}" for c in calls),
        *(["--hold-final", str(hold_final)] if hold_final is not None else []),
        "--pidfile", str(directory / "client.pid"), "--output", str(directory / "output"),
        "--timeout", str(_CLIENT_LIMIT),
        *(["--pty-input", str(directory / "typed")] if interactive else []),
        "--", *session_argv(client, binary, entries, interactive=interactive),
    ]  # fmt: skip
    env = {**session_env(client, home), "PYTHONPATH": str(REPO)}
    # A process group of its own, as a terminal's job control would give it.
    runner = subprocess.Popen(argv, cwd=home.project, env=env, stdin=subprocess.DEVNULL,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                              process_group=0)  # fmt: skip
    return Session(runner, directory)


def _children() -> dict[int, list[int]]:
    tree: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            stat = Path(f"/proc/{name}/stat").read_bytes()
        except OSError:
            continue
        ppid = int(stat[stat.rindex(b")") + 2 :].split()[1])
        tree.setdefault(ppid, []).append(int(name))
    return tree


def _marked(pid: int, marker: str) -> bool:
    try:
        return marker.encode() in Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return False


def kill_client_tree(root: int, marker: str) -> list[int]:
    """SIGKILL the client's own processes: ``root`` and its descendants, but never an MCP
    server (a marked process) or what a server started."""
    killed: list[int] = []
    for _ in range(3):  # what forked between the walk and the kill is caught next round
        tree, todo, found = _children(), [root], []
        while todo:
            pid = todo.pop()
            if _marked(pid, marker):
                continue
            found.append(pid)
            todo += tree.get(pid, [])
        for pid in found:
            with suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        killed += found
        time.sleep(_POLL)
    return sorted(set(killed))


def _wait(what: str, ready: Any, limit: float = _CLIENT_LIMIT) -> bool:
    deadline = time.monotonic() + limit
    while not ready():
        if time.monotonic() > deadline:
            return False
        time.sleep(_POLL)
    return True


def _answered(session: Session, entries: list[ServerEntry]) -> set[str]:
    """Servers whose call the stand-in saw come back: it asks for the next call (or ends
    the turn) only once the previous one's result is in the conversation."""
    steps = [r.get("step") for r in session.log if "step" in r]
    names = [e.name for e in entries]
    asked = [next((n for n in names if s and n in s[1]), None) for s in steps]
    done = set()
    for position, name in enumerate(asked):
        if name is not None and position + 1 < len(steps):
            done.add(name)
    return done


def held(session: Session) -> bool:
    return any(r.get("api") == "held" for r in session.log)


def _stub_started(home: ClientHome, sessions: int) -> bool:
    try:
        lines = (home.home / "stub.log").read_text().splitlines()
    except OSError:
        return False
    return sum(line.endswith("server start") for line in lines) >= sessions


@contextmanager
def _stopped(sessions: list[Session]) -> Iterator[None]:
    try:
        yield
    finally:
        for session in sessions:
            if session.runner.poll() is None:
                with suppress(ProcessLookupError):
                    os.killpg(session.runner.pid, signal.SIGKILL)
            session.runner.wait(timeout=30)


def run_sessions(client: str, scenario: str, *, wrapped: bool, daemon: Daemon | None,
                 settle_seconds: float = REAP_GRACE_SECONDS + 8.0,
                 unwrap: bool = False) -> SessionResult:  # fmt: skip
    """One scenario (see the module's note); with ``unwrap``, ``clients unwrap`` runs once
    the count is done, and the result says whether the file has its original servers."""
    if wrapped and daemon is None:
        raise ValueError("a wrapped session needs the daemon its wrappers register with")
    netns = netns_command()
    marker = new_marker()
    count = 2 if scenario == "two-sessions" else 1
    with temp_home() as home, ExitStack() as stack:
        never = home.home / "never"  # a file nobody makes: the hold lasts until the kill
        release = home.home / "release"
        hold_start = never if scenario == "killed-starting" else None
        entries = session_entries(marker, home, hold_start)
        config = write_config(client, home, entries)
        original = config.read_bytes()
        if wrapped:
            assert daemon is not None
            clients_command("wrap", client, home, daemon)
        known = frozenset(r["worker_identity"] for r in (rows_of(daemon) if daemon else []))
        watch = Watch(marker, daemon, known, limit=_CLIENT_LIMIT * 2 + settle_seconds)
        watch.start()
        stack.callback(kill_all, marker)
        stack.callback(watch.stop.set)
        hold_final = {"killed-mid-turn": never, "two-sessions": release}.get(scenario)
        sessions = [start_session(client, home, i, entries, hold_final=hold_final, netns=netns)
                for i in range(count)]  # fmt: skip
        stack.enter_context(_stopped(sessions))
        stopped_while_live: list[str] = []
        if scenario in ("killed-mid-turn", "two-sessions"):
            _wait("every session to hold its last answer", lambda: all(map(held, sessions)))
        if scenario == "killed-starting":
            _wait("the stub to start", lambda: _stub_started(home, count))
        if scenario == "two-sessions":
            # Both sessions live: every server of each must still run.
            alive = leftovers(marker)
            expected = {p.pid for p in watch.seen.values() if p.kind != "fleet-supervisor exec"}
            gone = expected - {p.pid for p in alive}
            stopped_while_live = [f"pid {pid} stopped while its session lived" for pid in gone]
            release.touch()
        if scenario.startswith("killed"):
            for session in sessions:
                pid = session.client_pid()
                if pid is not None:
                    kill_client_tree(pid, marker)
        for session in sessions:
            with suppress(subprocess.TimeoutExpired):
                session.runner.wait(timeout=_CLIENT_LIMIT)
        settle(watch, marker, daemon, settle_seconds, rows_expected=wrapped)
        left = leftovers(marker)
        left_rss = sum(rss_of(p.pid) or 0 for p in left)
        watch.stop.set()
        watch.join(timeout=30)
        watch.sample()
        rows = watch.new_rows()
        restored = None
        if unwrap:
            assert daemon is not None
            clients_command("unwrap", client, home, daemon)
            restored = config.read_bytes() == original
        try:
            stub_log = (home.home / "stub.log").read_text().splitlines()
        except OSError:
            stub_log = []
        return SessionResult(
            client=client,
            scenario=scenario,
            wrapped=wrapped,
            returncodes=[s.runner.returncode for s in sessions],
            outputs=[s.output() for s in sessions],
            answered=[_answered(s, entries) for s in sessions],
            left=left,
            seen=sorted(watch.seen.values(), key=lambda p: p.pid),
            rows=rows,
            row_violations=list(watch.violations.values()) + [f"watch: {e}" for e in watch.errors],
            stopped_while_live=stopped_while_live,
            stub_log=stub_log,
            restored=restored,
            left_rss=left_rss,
        )
