"""Real process trees for the reap tests: MCP servers under their clients, signal tracers, a
census of exactly the servers a test planted (read from /proc at every take), pid steering."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path

from actors.reap.trees import current_incarnation
from supervisor.policy.incarnation import same_incarnation
from supervisor.policy.servers.census import (
    PROVENANCE_OBSERVED,
    Census,
    OwnerClient,
    ProcessRef,
    ServerRecord,
    Usage,
)
from supervisor.system.process_tree import stat_facts
from tests.integration.signal_tracer import READY
from tests.spawned import Spawned

__all__ = [
    "Host",
    "Planted",
    "Tracer",
    "host",
    "rss_of",
]

TRACER = Path(__file__).with_name("signal_tracer.py")
#: A client: starts its server (its arguments) on its own stdin and stdout, then waits.
_CLIENT = "import subprocess, sys, time; subprocess.Popen(sys.argv[1:]); time.sleep(600)"
#: Waits for a process to appear or a file to be written: this many polls, 10 ms apart.
_POLLS = 3000
#: Forced owner verdicts (``Planted.owner_alive``); "read" judges the owner from /proc.
_READ = "read"


def _wait(check: Callable[[], bool], what: str) -> None:
    for _ in range(_POLLS):
        if check():
            return
        time.sleep(0.01)
    raise AssertionError(f"{what} did not happen")


def _children() -> dict[int, list[int]]:
    found: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if name.isdigit() and (facts := stat_facts(int(name))) is not None and facts.running:
            found.setdefault(facts.ppid, []).append(facts.pid)
    return found


def descendants(pid: int) -> list[int]:
    """Every running process below ``pid``, parents before children."""
    tree, found, pending = _children(), [], [pid]
    while pending:
        for child in sorted(tree.get(pending.pop(0), [])):
            found.append(child)
            pending.append(child)
    return found


def rss_of(pid: int) -> int | None:
    """A process's resident memory in bytes (VmRSS); None once it cannot be read."""
    try:
        with open(f"/proc/{pid}/status", encoding="ascii", errors="replace") as handle:
            for line in handle:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return 0  # a kernel thread or a process with no memory of its own


def ref(pid: int) -> ProcessRef:
    token = current_incarnation(pid)
    assert token is not None, f"pid {pid} does not run"
    return ProcessRef(pid=pid, start=token)


def still_runs(process: ProcessRef) -> bool:
    now = current_incarnation(process.pid)
    return now is not None and same_incarnation(now, process.start)


@dataclass
class Tracer:
    """A signal tracer's process and the file it writes every signal it gets to."""

    process: ProcessRef
    log: Path

    def received(self) -> list[str]:
        return [line for line in self.log.read_text().splitlines() if line != READY]


@dataclass
class Planted:
    """A server the census lists while its leader runs as started."""

    leader: ProcessRef
    owner: ProcessRef | None
    command: tuple[str, ...]
    #: The census's verdict on the owner: read from /proc, or forced (None: cannot tell).
    owner_alive: bool | str | None = _READ


@dataclass
class Host:
    spawned: Spawned
    tmp: Path
    planted: list[Planted] = field(default_factory=list)
    #: A census that stops following the host (what discovery read a moment ago).
    frozen: Census | None = None
    _fds: list[int] = field(default_factory=list)

    # --- processes ----------------------------------------------------------------------

    def tracer(
        self, name: str, *, popen: Callable[..., subprocess.Popen[bytes]] | None = None
    ) -> Tracer:
        """A tracer started by the test (a sibling of every tree), ready when returned."""
        log = self.tmp / f"tracer-{name}.log"
        proc = (popen or self.spawned.popen)([sys.executable, str(TRACER), str(log)])
        return self._ready(proc.pid, log)

    def _ready(self, pid: int, log: Path) -> Tracer:
        _wait(lambda: log.exists() and READY in log.read_text(), f"tracer {pid} ready")
        return Tracer(process=ref(pid), log=log)

    def client_with_server(
        self, argv: Sequence[str], *, env: Mapping[str, str] | None = None, size: int = 1
    ) -> tuple[ProcessRef, ProcessRef]:
        """A client that starts ``argv`` as its stdio server; returned once the server's
        tree has ``size`` processes. The server's stdin and stdout are pipes whose other
        ends the test holds, so the server outlives its client as a leaked one does."""
        stdin_r, stdin_w = os.pipe()
        stdout_r, stdout_w = os.pipe()
        self._fds += [stdin_w, stdout_r]
        try:
            client = self.spawned.popen(
                [sys.executable, "-c", _CLIENT, *argv],
                stdin=stdin_r,
                stdout=stdout_w,
                stderr=subprocess.DEVNULL,
                env={**os.environ, **(env or {})},
            )
        finally:
            os.close(stdin_r)
            os.close(stdout_w)
        _wait(lambda: len(descendants(client.pid)) >= size, f"a tree of {size} under {client.pid}")
        tree = descendants(client.pid)
        for pid in tree:
            self.spawned.track(pid)
        return ref(client.pid), ref(tree[0])

    def server_tracer(
        self, client: ProcessRef, name: str, *, owner_alive: bool | str | None = _READ
    ) -> Tracer:
        """A tracer planted as a server of ``client`` (started by the test)."""
        tracer = self.tracer(name)
        self.plant(tracer.process, client, ("signal_tracer", name), owner_alive=owner_alive)
        return tracer

    def plant(
        self,
        leader: ProcessRef,
        owner: ProcessRef | None,
        command: Sequence[str],
        *,
        owner_alive: bool | str | None = _READ,
    ) -> Planted:
        planted = Planted(
            leader=leader, owner=owner, command=tuple(command), owner_alive=owner_alive
        )
        self.planted.append(planted)
        return planted

    def close(self) -> None:
        for fd in self._fds:
            with suppress(OSError):
                os.close(fd)
        self._fds.clear()

    # --- the census ---------------------------------------------------------------------

    def take(self) -> Census:
        """Every planted server whose leader still runs as started, with its tree now."""
        if self.frozen is not None:
            return self.frozen
        return Census(
            servers=tuple(self._record(p) for p in self.planted if still_runs(p.leader)),
            taken_at=time.monotonic(),
        )

    def freeze(self) -> None:
        self.frozen = None
        self.frozen = self.take()

    def _record(self, planted: Planted) -> ServerRecord:
        owner = None
        if planted.owner is not None:
            alive = planted.owner_alive
            owner = OwnerClient(
                process=planted.owner,
                name="test_client",
                alive=still_runs(planted.owner) if alive == _READ else alive,  # type: ignore[arg-type]
            )
        members = [planted.leader.pid, *descendants(planted.leader.pid)]
        tokens = {pid: current_incarnation(pid) for pid in members[1:]}
        children = tuple(ProcessRef(pid=p, start=t) for p, t in tokens.items() if t is not None)
        sizes = [rss_of(pid) for pid in members]
        return ServerRecord(
            process=planted.leader,
            provenance=PROVENANCE_OBSERVED,
            command=planted.command,
            cwd=None,
            env_keys=(),
            uid=os.getuid(),
            owner=owner,
            evidence=("planted_by_test",),
            first_seen="2026-12-01T00:00:00Z",
            age_seconds=None,
            usage=Usage(
                rss_bytes=None if None in sizes else sum(s for s in sizes if s is not None),
                pss_bytes=None,
                cpu_seconds=None,
                cpu_percent=None,
                open_fds=None,
                children=children,
            ),
        )


@contextmanager
def host(tmp_path: Path) -> Iterator[Host]:
    """A host of planted servers and tracers; every process started is killed by its pid
    (through a pidfd) at the end, and every pipe end closed."""
    spawned = Spawned()
    planted = Host(spawned=spawned, tmp=tmp_path)
    try:
        yield planted
    finally:
        spawned.close()
        planted.close()
