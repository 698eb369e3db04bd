"""Shared benchmark set-up: registry rows, databases, free pids, child processes, the daemon."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import TracebackType
from typing import Any, Literal, Self

import anyio

from supervisor.policy.evidence import PidEvidence
from supervisor.policy.identity import mint_instance_id
from supervisor.policy.permissions import OP_READ, OP_RETIRE, Profile
from supervisor.policy.stamps import format_stamp
from supervisor.probes import process_start_time
from supervisor.store.schema import REGISTRATION_COLUMNS
from supervisor.store.sqlite import migrate

__all__ = [
    "READER",
    "REPO",
    "RETIRER",
    "Daemon",
    "EchoServer",
    "RowKind",
    "Sleepers",
    "StallMeter",
    "StaticProfiles",
    "cpu_seconds",
    "free_pids",
    "insert_rows",
    "live_rows",
    "make_db",
    "mixed_fleet",
    "mixed_kind",
    "registration_row",
    "short_tempdir",
    "sleeper_argv",
    "sqlite_connect",
    "wait_until",
]

REPO = "/srv/repos/bench-fleet"
_MINT_AT = datetime(2026, 1, 1, tzinfo=UTC)
_REPO_ROOT = Path(__file__).resolve().parent.parent

RowKind = Literal["live", "stale", "legacy"]

READER = Profile(
    name="bench-reader", role_kind="controller", allowed_operations=frozenset({OP_READ})
)
RETIRER = Profile(
    name="bench-retirer",
    role_kind="reconciler",
    allowed_operations=frozenset({OP_READ, OP_RETIRE}),
)


class StaticProfiles:
    """A ProfileLookup over the two bench profiles."""

    def get(self, name: str) -> Profile | None:
        return {p.name: p for p in (READER, RETIRER)}.get(name)


# --- rows -------------------------------------------------------------------------------


def mixed_kind(index: int) -> RowKind:
    """Half live, 35% stale (retirement candidates), 15% legacy rows without fencing data."""
    slot = index % 20
    if slot < 10:
        return "live"
    if slot < 17:
        return "stale"
    return "legacy"


def registration_row(
    index: int,
    *,
    kind: RowKind,
    now: datetime,
    host_id: str | None,
    boot_id: str | None,
    pid: int,
    start_time: str | None,
    ttl: float = 30.0,
) -> dict[str, Any]:
    """One ``worker_registrations`` row; its own trusted instance id so no slot is shared."""
    legacy = kind == "legacy"
    last = now - (timedelta(seconds=1) if kind == "live" else timedelta(hours=1))
    instance = f"pid-{pid}" if legacy else mint_instance_id("codex", now=_MINT_AT, nonce=str(index))
    return {
        "worker_identity": f"wkr-bench-{index:08d}",
        "client_name": "codex",
        "client_instance_id": instance,
        "session_id": f"sess-bench-{index}",
        "generation_id": f"gen-bench-{index}",
        "role": "author",
        "profile": "prgs-author",
        "namespace": "author",
        "repository_binding": REPO,
        "pid": pid,
        "process_identity": f"{host_id}:{pid}:{start_time}",
        "transport": "stdio",
        "started_at": format_stamp(now - timedelta(hours=2)),
        "last_heartbeat_at": format_stamp(last),
        "heartbeat_ttl_seconds": ttl,
        "fencing_epoch": 1,
        "status": "active",
        "instance_id_provenance": "legacy_incomplete" if legacy else "trusted_launcher",
        "host_id": None if legacy else host_id,
        "boot_id": None if legacy else boot_id,
        "process_start_time": None if legacy else start_time,
    }


def live_rows(count: int, *, first_pid: int) -> list[dict[str, Any]]:
    """``count`` live rows on the bench's synthetic host, pids from ``first_pid`` (never
    probed: for benchmarks that only write)."""
    now = datetime.now(UTC)
    return [
        registration_row(
            i,
            kind="live",
            now=now,
            host_id="host-bench",
            boot_id="boot-bench",
            pid=first_pid + i,
            start_time=f"ticks-{i}",
        )
        for i in range(count)
    ]


def mixed_fleet(
    count: int,
    *,
    now: datetime,
    host_id: str | None,
    boot_id: str | None,
    first_pid: int = 100_000,
) -> tuple[list[dict[str, Any]], dict[int, PidEvidence]]:
    """``count`` rows of :func:`mixed_kind` and evidence to match (live alive, others dead)."""
    rows: list[dict[str, Any]] = []
    evidence: dict[int, PidEvidence] = {}
    for index in range(count):
        kind = mixed_kind(index)
        pid = first_pid + index
        start = f"ticks-{pid}"
        row = registration_row(
            index,
            kind=kind,
            now=now,
            host_id=host_id,
            boot_id=boot_id,
            pid=pid,
            start_time=start,
        )
        # Shaped as the store returns rows: every column, NULL ones as None.
        rows.append({column: row.get(column) for column in REGISTRATION_COLUMNS})
        alive = kind == "live"
        evidence[pid] = PidEvidence(alive=alive, start_time=start if alive else None)
    return rows, evidence


# --- databases --------------------------------------------------------------------------


def sqlite_connect(path: Path) -> sqlite3.Connection:
    """A plain sqlite3 connection with the store's pragmas (WAL, synchronous=NORMAL)."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA busy_timeout = 5000")
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = NORMAL")
    conn.execute("PRAGMA foreign_keys = ON")
    return conn


def insert_rows(path: Path, rows: Sequence[Mapping[str, Any]]) -> None:
    """Bulk-insert registrations in one transaction (the database must be migrated)."""
    columns = ", ".join(REGISTRATION_COLUMNS)
    marks = ", ".join("?" for _ in REGISTRATION_COLUMNS)
    conn = sqlite_connect(path)
    try:
        conn.execute("BEGIN IMMEDIATE")
        conn.executemany(
            f"INSERT INTO worker_registrations ({columns}) VALUES ({marks})",
            [tuple(row.get(c) for c in REGISTRATION_COLUMNS) for row in rows],
        )
        conn.execute("COMMIT")
        # Leave a self-contained file behind (no WAL to carry along when it is copied).
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        conn.close()


async def make_db(path: Path, rows: Sequence[Mapping[str, Any]]) -> None:
    """A migrated registry database at ``path`` holding ``rows``."""
    await migrate(path)
    await anyio.to_thread.run_sync(insert_rows, path, rows)


# --- pids and processes -------------------------------------------------------------------


def _read_int(path: str, default: int) -> int:
    try:
        with open(path, encoding="ascii") as handle:
            return int(handle.read().strip())
    except (OSError, ValueError):
        return default


def free_pids(count: int) -> list[int]:
    """Pid numbers above the kernel's pid_max: no process can hold them, now or later.

    They probe exactly like any absent pid (``/proc/<pid>/stat`` ENOENT, then ``kill(pid, 0)``
    ESRCH) but, unlike numbers below pid_max, can never be handed to a process the suite
    (or anything else on the machine) starts meanwhile, so "dead" stays dead for the run.
    """
    pid_max = _read_int("/proc/sys/kernel/pid_max", 4_194_304)
    return list(range(pid_max + 1, pid_max + 1 + max(0, count)))


def sleeper_argv() -> list[str]:
    """A command that idles for 15 minutes (the benchmarks kill it long before)."""
    sleep = shutil.which("sleep")
    return [sleep, "900"] if sleep else [sys.executable, "-c", "import time; time.sleep(900)"]


def cpu_seconds(pid: int) -> float:
    """User + system CPU a process (all its threads) has used so far."""
    with open(f"/proc/{pid}/stat", encoding="latin-1") as handle:
        fields = handle.read().rpartition(")")[2].split()
    ticks = int(fields[11]) + int(fields[12])  # utime, stime (fields 14 and 15)
    return ticks / os.sysconf("SC_CLK_TCK")


class EchoServer:
    """``python -m bench.echo_server`` on a socket in ``workdir``, killed by pid on exit."""

    def __init__(self, workdir: Path) -> None:
        self.socket_path = workdir / "echo.sock"
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "bench.echo_server", str(self.socket_path)],
            cwd=_REPO_ROOT,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        deadline = time.monotonic() + 30.0
        while not self.socket_path.exists():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.close()
                raise RuntimeError("the echo server did not start")
            time.sleep(0.02)

    def cpu_seconds(self) -> float:
        return cpu_seconds(self.proc.pid)

    def log_tail(self) -> str:
        return ""

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        if self.proc.stderr is not None:
            self.proc.stderr.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Sleepers:
    """``count`` idle child processes of this process, killed by pid on exit."""

    def __init__(self, count: int) -> None:
        argv = sleeper_argv()
        self.procs: list[subprocess.Popen[bytes]] = []
        try:
            for _ in range(count):
                self.procs.append(
                    subprocess.Popen(
                        argv,
                        stdin=subprocess.DEVNULL,
                        stdout=subprocess.DEVNULL,
                        stderr=subprocess.DEVNULL,
                    )
                )
            self.pids = [p.pid for p in self.procs]
            starts = [process_start_time(pid) for pid in self.pids]
            if any(s is None for s in starts):
                raise RuntimeError("a freshly spawned sleeper cannot be probed")
            self.start_times = [str(s) for s in starts]
        except BaseException:
            self.close()
            raise

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(proc.pid, signal.SIGKILL)
        for proc in self.procs:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=5)
        self.procs = []


@contextlib.contextmanager
def short_tempdir(prefix: str) -> Iterator[Path]:
    """A temporary directory under /tmp, short enough for AF_UNIX socket paths."""
    path = Path(tempfile.mkdtemp(prefix=prefix, dir="/tmp"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


# --- the daemon as a subprocess -------------------------------------------------------------


def _toml_string(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


class Daemon:
    """``python -m supervisor.cli run`` with a temporary config, stopped by SIGTERM to its pid."""

    def __init__(
        self,
        workdir: Path,
        *,
        db: Path,
        sweep_interval_seconds: float = 5.0,
        log_level: str = "warning",
        profiles: Path | None = None,
        sections: Sequence[str] = (),
    ) -> None:
        """``sections``: extra TOML sections (whole ``[name]`` blocks) for the config."""
        self.workdir = workdir
        self.socket_path = workdir / "s.sock"
        self.db = db
        self.log_path = workdir / "daemon.log"
        profiles_path = profiles or workdir / "profiles.toml"
        config = "\n".join(
            [
                "[database]",
                f"path = {_toml_string(str(db))}",
                "[supervisor]",
                f"log_level = {_toml_string(log_level)}",
                "[liveness]",
                f"sweep_interval_seconds = {sweep_interval_seconds!r}",
                "[socket]",
                f"path = {_toml_string(str(self.socket_path))}",
                "max_connections = 256",
                "[auth]",
                f"profiles_path = {_toml_string(str(profiles_path))}",
                *sections,
                "",
            ]
        )
        self.config_path = workdir / "supervisor.toml"
        self.config_path.write_text(config, encoding="utf-8")
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def start(self, *, timeout: float = 60.0) -> None:
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "supervisor.cli", "--config", str(self.config_path), "run"],
                cwd=_REPO_ROOT,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=log,
            )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                code = self.proc.returncode
                raise RuntimeError(f"daemon exited early ({code}): {self.log_tail()}")
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
                try:
                    probe.connect(str(self.socket_path))
                except OSError:
                    time.sleep(0.05)
                    continue
            return
        self.stop()
        raise RuntimeError(f"daemon did not listen within {timeout}s: {self.log_tail()}")

    def log_tail(self, lines: int = 5) -> str:
        try:
            text = self.log_path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return ""
        return " | ".join(text.strip().splitlines()[-lines:])

    def cpu_seconds(self) -> float:
        """User + system CPU the daemon (all its threads) has used so far."""
        return cpu_seconds(self.pid)

    def status_kb(self, key: str) -> int:
        """A ``kB`` line of /proc/<pid>/status, e.g. VmHWM or VmRSS."""
        with open(f"/proc/{self.pid}/status", encoding="ascii") as handle:
            for line in handle:
                if line.startswith(f"{key}:"):
                    return int(line.split()[1])
        raise KeyError(key)

    def open_fds(self) -> int:
        return len(os.listdir(f"/proc/{self.pid}/fd"))

    def stop(self, *, timeout: float = 20.0) -> int | None:
        proc, self.proc = self.proc, None
        if proc is None:
            return None
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(proc.pid, signal.SIGTERM)
            try:
                return proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(proc.pid, signal.SIGKILL)
                return proc.wait(timeout=5)
        return proc.returncode

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


async def wait_until(predicate: Callable[[], Awaitable[bool]], *, limit: float, what: str) -> None:
    """Poll ``predicate`` every 10 ms until it holds; RuntimeError after ``limit`` seconds."""
    deadline = time.perf_counter() + limit
    while time.perf_counter() < deadline:
        if await predicate():
            return
        await anyio.sleep(0.01)
    if not await predicate():
        raise RuntimeError(f"{what} did not happen within {limit}s")


# --- event-loop stall meter ---------------------------------------------------------------


class StallMeter:
    """A task that sleeps 1 ms at a time and records the longest gap between its wake-ups."""

    def __init__(self, tick: float = 0.001) -> None:
        self.tick = tick
        self.longest = 0.0
        self.gaps = 0
        self._running = True

    def reset(self) -> None:
        self.longest = 0.0
        self.gaps = 0

    def stop(self) -> None:
        self._running = False

    async def run(self) -> None:
        last = time.perf_counter()
        while self._running:
            await anyio.sleep(self.tick)
            now = time.perf_counter()
            self.longest = max(self.longest, now - last)
            self.gaps += 1
            last = now
