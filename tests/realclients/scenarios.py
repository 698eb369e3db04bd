"""Leftover scenarios: a real client runs a server, ends somehow, and what is left is counted."""

# ``run_scenario(scenario, server, wrapped=...)`` gives one ``ScenarioResult``. The server
# entry carries a fresh marker; a watch thread scans for marked processes every 50 ms
# from the start (``seen``: the server's whole tree) and, with a daemon, reads the rows
# registered since the start before each scan, so a row seen not ``active`` while a
# server process still ran is recorded in ``row_violations`` (the row is read first: a
# process found in the scan after it was alive when the row was read). After the client
# ends (or, for ``sdk-close-stdin``, closes the server's stdin) the scenario waits until
# no marked process is left (and, with a daemon, every new row has left ``active``), or
# ``settle_seconds`` pass: then it counts. Whatever is left is SIGKILLed by pid at the end.

from __future__ import annotations

import queue
import re
import subprocess
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio

from tests.integration.daemon import Daemon, running_daemon, wait_ready

if TYPE_CHECKING:
    from tests.process_trees.marked import Left, Reaper
from tests.realclients.harness import (
    ClientHome,
    Proc,
    ServerEntry,
    client_argv,
    client_env,
    kill_all,
    kill_pid,
    leftovers,
    new_marker,
    run_client,
    sdk_argv,
    server_entry,
    temp_home,
    wrap_command,
)

__all__ = [
    "DAEMON_EXEC_CONFIG",
    "REAP_GRACE_SECONDS",
    "SCENARIOS",
    "ScenarioResult",
    "Watch",
    "exec_daemon",
    "rows_of",
    "run_scenario",
    "settle",
]

#: scenario -> (client, how it ends). ``exits``: the client exits by itself after
#: listing (or calling) the tools; ``sigkill``: it is SIGKILLed while its server runs;
#: ``close-stdin``: it closes the server's stdin and stays alive.
SCENARIOS: dict[str, tuple[str, str]] = {
    "claude-list": ("claude", "exits"),
    "gemini-list": ("gemini", "exits"),
    "inspector-list": ("inspector", "exits"),
    "inspector-call": ("inspector", "exits"),
    "sdk-sigkill": ("sdk", "sigkill"),
    "sdk-close-stdin": ("sdk", "close-stdin"),
}

#: The daemon's grace between SIGTERM and SIGKILL of a server tree, in these runs.
REAP_GRACE_SECONDS = 1.0
#: ``running_daemon(extra_config=...)`` for wrapped runs.
DAEMON_EXEC_CONFIG = (
    "[exec]",
    "reap_orphans = true",
    f"reap_grace_seconds = {REAP_GRACE_SECONDS}",
)


@contextmanager
def exec_daemon() -> Iterator[Daemon]:
    """A daemon reaping orphaned wrapped servers with a short grace, ready for requests."""
    with running_daemon(extra_config=DAEMON_EXEC_CONFIG) as daemon:
        anyio.run(wait_ready, daemon)
        yield daemon


SERVER_NAME = "fleet-test"
_POLL = 0.05
#: A client (or its handshake) that takes longer is killed and the run reported.
_CLIENT_TIMEOUT = 90.0


@dataclass
class ScenarioResult:
    scenario: str
    client: str
    server: str
    wrapped: bool
    connected: bool
    client_returncode: int | None
    client_output: str
    client_seconds: float
    leftover_count: int
    leftovers: list[Proc]
    #: Every marked process seen from the start (pid order), as last seen.
    seen: list[Proc]
    #: Seconds from the client's end (or stdin close) until no marked process ran.
    gone_after: float | None
    #: Rows registered during the run, as the daemon shows them at the end.
    rows: list[dict[str, Any]] = field(default_factory=list)
    row_violations: list[str] = field(default_factory=list)
    #: The stubborn server's log: start, EOF and each signal it got, with times.
    server_log: list[str] = field(default_factory=list)
    client_timed_out: bool = False
    #: What ``reaper``'s reap left of the bare leftovers, each with why (None: not asked).
    after: list[Left] | None = None

    def leftover_kinds(self) -> list[str]:
        return sorted(p.kind for p in self.leftovers)

    def summary(self) -> str:
        kinds = ", ".join(self.leftover_kinds()) or "-"
        return (
            f"{self.scenario} x {self.server} ({'wrapped' if self.wrapped else 'bare'}): "
            f"{self.leftover_count} left ({kinds}); connected={self.connected}; "
            f"client rc={self.client_returncode} in {self.client_seconds:.1f}s"
        )


def rows_of(daemon: Daemon) -> list[dict[str, Any]]:
    with daemon.client() as client:
        return [dict(r) for r in client.snapshot(include_history=True)["workers"]]


class Watch(threading.Thread):
    """Samples marked processes (and new rows) until stopped; bounded by ``limit``."""

    def __init__(
        self, marker: str, daemon: Daemon | None, known: frozenset[str], limit: float
    ) -> None:
        super().__init__(daemon=True, name=f"watch-{marker[:8]}")
        self.marker = marker
        self.daemon_ = daemon
        self.known = known
        self.limit = limit
        self.stop = threading.Event()
        self.seen: dict[int, Proc] = {}
        self.violations: dict[str, str] = {}
        self.errors: list[str] = []

    def new_rows(self) -> list[dict[str, Any]]:
        if self.daemon_ is None:
            return []
        return [r for r in rows_of(self.daemon_) if r["worker_identity"] not in self.known]

    def sample(self) -> None:
        rows = self.new_rows()  # first: see the class note on ordering
        procs = leftovers(self.marker)
        for proc in procs:
            self.seen[proc.pid] = proc  # the latest look: a wrapper has exec'd its server
        # A wrapper process still on its way out is not the server it wrapped.
        server = [p for p in procs if p.kind != "fleet-supervisor exec"]
        for row in rows:
            # A row speaks for its own server's processes (its leader's entry name); a
            # session runs several servers under one marker.
            leader = self.seen.get(row["pid"])
            own = [p for p in server if leader is None or self._of(p, leader)]
            if row["status"] == "active" or not own or row["worker_identity"] in self.violations:
                continue
            self.violations[row["worker_identity"]] = (
                f"row {row['worker_identity']} (pid {row['pid']}) was {row['status']} while "
                + "; ".join(p.describe() for p in own)
                + " still ran"
            )

    def _of(self, proc: Proc, leader: Proc) -> bool:
        """Whether ``proc`` is in ``leader``'s tree: its entry, and its process group (a
        wrapped server leads its own) or its descendant as far as the watch saw."""
        if proc.server != leader.server:
            return False
        if proc.pgid == leader.pid:
            return True
        seen, pid = set(), proc.pid
        while pid in self.seen and pid not in seen:
            if pid == leader.pid:
                return True
            seen.add(pid)
            pid = self.seen[pid].ppid
        return False

    def run(self) -> None:
        deadline = time.monotonic() + self.limit
        while not self.stop.is_set() and time.monotonic() < deadline:
            try:
                self.sample()
            except Exception as exc:  # reported with the result, never lost
                self.errors.append(f"{type(exc).__name__}: {exc}")
                if len(self.errors) > 20:
                    return
            self.stop.wait(_POLL)


def _lines(process: subprocess.Popen[bytes], into: queue.Queue[str | None]) -> None:
    assert process.stdout is not None
    for raw in process.stdout:
        into.put(raw.decode(errors="replace"))
    into.put(None)


def _until_line(lines: queue.Queue[str | None], prefix: str, seen: list[str], limit: float) -> bool:
    """Collect output lines until one starts with ``prefix``; False at EOF or the deadline."""
    deadline = time.monotonic() + limit
    while (left := deadline - time.monotonic()) > 0:
        try:
            line = lines.get(timeout=left)
        except queue.Empty:
            return False
        if line is None:
            return False
        seen.append(line)
        if line.startswith(prefix):
            return True
    return False


@dataclass
class _Ended:
    returncode: int | None
    output: str
    seconds: float
    timed_out: bool
    connected: bool
    #: A client left alive on purpose (close-stdin); killed after the count.
    alive: subprocess.Popen[bytes] | None = None
    #: The SDK client and the thread reading its output, closed once its servers are gone.
    process: subprocess.Popen[bytes] | None = None
    reader: threading.Thread | None = None

    def close(self) -> None:
        if self.reader is not None:
            self.reader.join(timeout=30)
        if self.process is not None and self.process.stdout is not None:
            self.process.stdout.close()


def _connected(client: str, output: str, entry: ServerEntry, method: str) -> bool:
    if client in ("claude", "gemini"):
        return re.search(rf"{re.escape(entry.name)}\b.*\bConnected", output) is not None
    if client == "inspector":
        return ('"tools"' if method == "list" else '"content"') in output
    match = re.search(r"^ready (\d+)", output, re.MULTILINE)
    return match is not None and int(match.group(1)) > 0


def _run_exiting(client: str, scenario: str, home: ClientHome, entry: ServerEntry) -> _Ended:
    method = "call" if scenario.endswith("-call") else "list"
    argv = client_argv(client, home, [entry], method)
    run = run_client(argv, env=client_env(home.home), cwd=home.project, timeout=_CLIENT_TIMEOUT)
    connected = _connected(client, run.output, entry, method)
    return _Ended(run.returncode, run.output, run.seconds, run.timed_out, connected)


def _run_sdk(how: str, home: ClientHome, entry: ServerEntry) -> _Ended:
    mode = "hold" if how == "sigkill" else "close-stdin"
    started = time.monotonic()
    process = subprocess.Popen(
        sdk_argv(mode, entry),
        cwd=home.project,
        env=client_env(home.home),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        process_group=0,
    )
    lines: queue.Queue[str | None] = queue.Queue()
    reader = threading.Thread(target=_lines, args=(process, lines), daemon=True)
    reader.start()
    output: list[str] = []
    reached = _until_line(lines, "ready" if how == "sigkill" else "closed", output, _CLIENT_TIMEOUT)
    seconds = time.monotonic() - started
    if how == "sigkill" or not reached:
        kill_pid(process.pid)  # the crash under test (or a client that never got there)
        process.wait(timeout=30)
        # Not joined here: the server inherited the client's stderr (our pipe) and may
        # hold it open for as long as it runs; the reader ends when it is gone.
        while (line := _drain_one(lines)) is not None:
            output.append(line)
        alive = None
    else:
        alive = process
    text = "".join(output)
    return _Ended(
        process.returncode if alive is None else None,
        text,
        seconds,
        not reached,
        _connected("sdk", text, entry, "list") and reached,
        alive=alive,
        process=process,
        reader=reader,
    )


def _drain_one(lines: queue.Queue[str | None]) -> str | None:
    try:
        return lines.get_nowait()
    except queue.Empty:
        return None


def settle(
    watch: Watch,
    marker: str,
    daemon: Daemon | None,
    settle_seconds: float,
    *,
    rows_expected: bool = True,
) -> float | None:
    """Seconds until nothing marked runs (and new rows left ``active``); None if never."""
    began = time.monotonic()
    deadline = began + settle_seconds
    while True:
        procs_gone = not leftovers(marker)
        rows = watch.new_rows() if daemon is not None else []
        rows_done = daemon is None or (
            (bool(rows) or not rows_expected) and all(r["status"] != "active" for r in rows)
        )
        if procs_gone and rows_done:
            return time.monotonic() - began
        if time.monotonic() > deadline:
            return time.monotonic() - began if procs_gone else None
        time.sleep(_POLL)


def _read_log(path: Path) -> list[str]:
    try:
        return path.read_text().splitlines()
    except OSError:
        return []


def run_scenario(
    scenario: str,
    server: str,
    *,
    wrapped: bool,
    daemon: Daemon | None = None,
    settle_seconds: float = REAP_GRACE_SECONDS + 5.0,
    extra_env: Mapping[str, str] | None = None,
    daemon_starts: Callable[[], None] | None = None,
    reaper: Reaper | None = None,
) -> ScenarioResult:
    """Run ``scenario`` (a key of SCENARIOS) against ``server`` (harness.SERVERS), bare or
    wrapped by ``fleet-supervisor exec`` talking to ``daemon``; every marked process left
    is killed by pid before this returns.

    With ``daemon_starts``, ``daemon`` is down while the client runs: the wrappers start
    their servers unregistered, and ``daemon_starts`` is called once the client has
    ended; the count then waits for the started daemon to finish the cleanup.

    ``reaper(marker, home)`` is entered before the client starts; once what was left is
    counted, what it gives reaps (a supervisor started then, or one that ran alongside
    the client) and says what is left after that, and why.
    """
    client, how = SCENARIOS[scenario]
    if wrapped and daemon is None:
        raise ValueError("a wrapped run needs the daemon its wrapper registers with")
    marker = new_marker()
    with temp_home() as home:
        log = home.home / "server-signals.log"
        entry = server_entry(server, name=SERVER_NAME, marker=marker, home=home.home, log=log)
        if extra_env:
            entry = ServerEntry(
                entry.name,
                entry.kind,
                entry.command,
                entry.args,
                {**entry.env, **extra_env},
                entry.tool,
                entry.tool_args,
            )
        if wrapped:
            assert daemon is not None
            entry = wrap_command(entry, config=daemon.config, client=client)
        up = daemon if daemon_starts is None else None
        known = frozenset(r["worker_identity"] for r in (rows_of(up) if up is not None else []))
        watch = Watch(marker, daemon, known, limit=_CLIENT_TIMEOUT + settle_seconds + 60)
        if daemon_starts is None:
            watch.start()
        ended: _Ended | None = None
        reaping = reaper(marker, home.home) if reaper is not None else nullcontext(None)
        try:
            with reaping as reap:
                if how == "exits":
                    ended = _run_exiting(client, scenario, home, entry)
                else:
                    ended = _run_sdk(how, home, entry)
                if daemon_starts is not None:
                    daemon_starts()
                    watch.start()
                # A daemon that was down may find nothing to register: the client is gone,
                # so what is left is only stopped, and no row needs to leave ``active``.
                gone_after = settle(
                    watch, marker, daemon, settle_seconds, rows_expected=daemon_starts is None
                )
                left = leftovers(marker)
                watch.stop.set()
                watch.join(timeout=30)
                watch.sample()  # one last ordered look, after the count
                rows = watch.new_rows()
                after = reap() if reap is not None else None
        finally:
            watch.stop.set()
            if ended is not None and ended.alive is not None:
                kill_pid(ended.alive.pid)
                ended.alive.wait(timeout=30)
            kill_all(marker)
            if ended is not None:
                ended.close()
        server_log = _read_log(log)
    violations = list(watch.violations.values()) + [f"watch: {e}" for e in watch.errors]
    return ScenarioResult(
        scenario=scenario,
        client=client,
        server=server,
        wrapped=wrapped,
        connected=ended.connected,
        client_returncode=ended.returncode,
        client_output=ended.output,
        client_seconds=ended.seconds,
        leftover_count=len(left),
        leftovers=left,
        seen=sorted(watch.seen.values(), key=lambda p: p.pid),
        gone_after=gone_after,
        rows=rows,
        row_violations=violations,
        server_log=server_log,
        client_timed_out=ended.timed_out,
        after=after,
    )


def describe(result: ScenarioResult) -> str:
    """Everything a failed assertion should show."""
    lines = [result.summary()]
    lines += [f"  left: {p.describe()}" for p in result.leftovers]
    lines += [f"  seen: [{p.kind}] {p.describe()}" for p in result.seen]
    lines += [
        f"  row: {r.get('pid')} {r.get('status')} {r.get('worker_identity')}" for r in result.rows
    ]
    lines += [f"  violation: {v}" for v in result.row_violations]
    lines += [f"  server log: {line}" for line in result.server_log]
    tail = result.client_output.splitlines()[-40:]
    lines += ["  client output:", *(f"    {line}" for line in tail)]
    return "\n".join(lines)
