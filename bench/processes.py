"""Benchmark processes: free pid numbers, idle children, the echo server and the daemon."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from types import TracebackType
from typing import Self

from supervisor.system.probes import process_start_time

__all__ = [
    "Daemon",
    "EchoServer",
    "Sleepers",
    "cpu_seconds",
    "free_pids",
    "short_tempdir",
    "sleeper_argv",
]

_REPO_ROOT = Path(__file__).resolve().parent.parent


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


def _listening(path: Path, proc: subprocess.Popen[bytes], *, timeout: float) -> bool:
    """True once a connect to ``path`` succeeds; False if ``proc`` exits or time runs out."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and proc.poll() is None:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
            try:
                probe.connect(str(path))
            except OSError:
                time.sleep(0.02)
                continue
        return True
    return False


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
        # Wait for a connect to succeed, not for the file: the socket's path exists from
        # bind(), a moment before listen(), and a connect in that moment is refused.
        if not _listening(self.socket_path, self.proc, timeout=30.0):
            self.close()
            raise RuntimeError("the echo server did not start")

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
        if _listening(self.socket_path, self.proc, timeout=timeout):
            return
        if self.proc.poll() is not None:
            code = self.proc.returncode
            raise RuntimeError(f"daemon exited early ({code}): {self.log_tail()}")
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
