"""What ``fleet-supervisor exec`` costs a server: start-up to its first byte, and resident memory.

Start-up: time from spawn to the first byte on the server's stdout, for the bare server
(``echo``), the wrapper run as ``python -I -S exec_in_place.py`` and the console script
``fleet-supervisor exec`` (what launch-config writes), each with the daemon down (no socket)
and up (a real ``fleet-supervisor run`` answering the exec socket). Every variant is run
once per round, the rounds interleaved so drift on the machine touches all alike.

Memory: 20 wrapped long-running servers under a live daemon against 20 bare ones (the sum of
the RSS of every process they have), and the daemon's own RSS before and after it took them on.

The daemons here run with reaping off and rare rescans: every daemon on a host adopts every
marked server it can read, and a benchmark must never signal processes it did not start.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import sqlite3
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import anyio

from bench.fixtures import make_db
from bench.processes import Daemon, short_tempdir, sleeper_argv
from bench.report import Figure, percentile
from supervisor.exec import exec_in_place

__all__ = ["run"]

_WRAPPER = str(Path(exec_in_place.__file__).resolve())
_CONSOLE = str(Path(sys.executable).parent / "fleet-supervisor")
_QUIET = "[exec]\nstop_orphans = false\nrescan_seconds = 3600.0"
_PROFILES = """\
[profiles.bench-ops]
role_kind = "controller"
allowed_operations = ["gitea.read"]
"""
#: The issue's goals: at most 50 ms added to a server's start, at most 1 MB resident each.
_ADDED_GOAL_MS = 50.0
_RESIDENT_GOAL_KB = 1024.0
#: Registrations (and releases) the memory daemon serves before its baseline is read.
_WARM_REGISTRATIONS = 10
#: Bounded waits for spawned processes to reach their server (polls, 5 ms apart).
_POLLS = 6000

Argv = Callable[[str], list[str]]


def _server() -> list[str]:
    """A server that writes one line at once and exits."""
    return [shutil.which("echo") or "/bin/echo", "1"]


def _variants(server: list[str]) -> dict[str, Argv]:
    return {
        "script": lambda sock: [
            sys.executable,
            "-I",
            "-S",
            _WRAPPER,
            "--socket",
            sock,
            "--",
            *server,
        ],
        "console": lambda sock: [_CONSOLE, "--socket", sock, "exec", "--", *server],
    }


def _first_byte(argv: list[str]) -> tuple[float, bytes]:
    """Milliseconds from spawn to the first byte on stdout, and what went to stderr."""
    began = time.perf_counter()
    proc = subprocess.Popen(
        argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    try:
        assert proc.stdout is not None
        first = os.read(proc.stdout.fileno(), 1)
        elapsed = (time.perf_counter() - began) * 1000
        _out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(proc.pid, signal.SIGKILL)
            proc.communicate()
    if first != b"1" or proc.returncode != 0:
        raise RuntimeError(f"{argv[0]} gave {first!r}, status {proc.returncode}: {err[-300:]!r}")
    return elapsed, err


def _spread(samples: Sequence[float]) -> dict[str, Any]:
    return {
        "runs": len(samples),
        "median": statistics.median(samples),
        "p10": percentile(samples, 10),
        "p90": percentile(samples, 90),
        "min": min(samples),
        "max": max(samples),
        "samples_ms": [round(s, 3) for s in samples],
    }


def _daemon(work: Path) -> Daemon:
    """A daemon on a fresh registry in ``work``; started by its ``with`` block."""
    db = work / "registry.sqlite3"
    anyio.run(make_db, db, [])
    profiles = work / "profiles.toml"
    profiles.write_text(_PROFILES, encoding="utf-8")
    return Daemon(work, db=db, profiles=profiles, sections=(_QUIET,))


def _check_stderr(name: str, state: str | None, err: bytes) -> None:
    """Bare and registered runs are silent; a wrapper without a daemon warns, once."""
    silent = state != "down"
    if (silent and err) or (not silent and b"daemon_unreachable" not in err):
        raise RuntimeError(f"{name}: unexpected stderr {err[-300:]!r}")


def _startup(runs: int, warmup: int) -> dict[str, dict[str, Any]]:
    """Per variant (``bare``, ``script_down`` ...): the spread of its start-up samples."""
    server = _server()
    samples: dict[str, list[float]] = {}
    with short_tempdir("fsb-exec-") as work, _daemon(work) as daemon:
        sockets = {"down": str(work / "nobody.sock"), "up": str(daemon.socket_path)}
        plan: list[tuple[str, list[str], str | None]] = [("bare", server, None)]
        for form, command in _variants(server).items():
            for state, sock in sockets.items():
                plan.append((f"{form}_{state}", command(sock), state))
        for round_index in range(warmup + runs):
            # Rotate the order each round: no variant always follows the same one.
            shift = round_index % len(plan)
            for name, argv, kind in plan[shift:] + plan[:shift]:
                elapsed, err = _first_byte(argv)
                _check_stderr(name, kind, err)
                if round_index >= warmup:
                    samples.setdefault(name, []).append(elapsed)
    spreads = {name: _spread(samples[name]) for name, _, _ in plan}
    spreads["bare"]["server"] = server
    return spreads


# --- resident memory ----------------------------------------------------------------------


def _status_kb(pid: int, key: str) -> int:
    with open(f"/proc/{pid}/status", encoding="ascii") as handle:
        for line in handle:
            if line.startswith(f"{key}:"):
                return int(line.split()[1])
    raise KeyError(key)


def _children(pid: int) -> list[int]:
    try:
        with open(f"/proc/{pid}/task/{pid}/children", encoding="ascii") as handle:
            return [int(p) for p in handle.read().split()]
    except OSError:
        return []


def _tree_rss_kb(pids: Sequence[int]) -> tuple[int, int]:
    """(sum of VmRSS, process count) over ``pids`` and all their descendants."""
    total = count = 0
    todo = list(pids)
    while todo:
        pid = todo.pop()
        total += _status_kb(pid, "VmRSS")
        count += 1
        todo.extend(_children(pid))
    return total, count


def _comm(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/comm", encoding="utf-8", errors="replace") as handle:
            return handle.read().strip()
    except OSError:
        return ""


def _state(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/stat", encoding="latin-1") as handle:
            return handle.read().rpartition(")")[2].split()[0]
    except OSError:
        return ""


def _wait_exec(procs: Sequence[subprocess.Popen[bytes]], comm: str) -> None:
    """Until every process runs ``comm`` (a wrapper has registered and become its server) and
    sleeps in it: right after the exec its pages are not all touched yet, and RSS reads low."""
    for _ in range(_POLLS):
        if all(_comm(p.pid) == comm and _state(p.pid) == "S" for p in procs):
            return
        if any(p.poll() is not None for p in procs):
            raise RuntimeError("a server exited before it was measured")
        time.sleep(0.005)
    raise RuntimeError(f"not every process became {comm!r}")


def _kill(procs: Sequence[subprocess.Popen[bytes]]) -> None:
    for proc in procs:
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(proc.pid, signal.SIGKILL)
    for proc in procs:
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=10)
        for stream in (proc.stdin, proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()


def _spawn(argv: list[str], count: int, errors: Path | None) -> list[subprocess.Popen[bytes]]:
    procs: list[subprocess.Popen[bytes]] = []
    try:
        for index in range(count):
            err: Any = subprocess.DEVNULL
            if errors is not None:
                err = (errors / f"{index}.err").open("wb")
            try:
                procs.append(
                    subprocess.Popen(
                        argv, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=err
                    )
                )
            finally:
                if errors is not None:
                    err.close()
    except BaseException:
        _kill(procs)
        raise
    return procs


def _active_rows(db: Path, pids: Sequence[int]) -> int:
    """Active registry rows naming ``pids`` (read-only, beside the running daemon)."""
    marks = ", ".join("?" for _ in pids)
    with contextlib.closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True)) as conn:
        conn.execute("PRAGMA busy_timeout = 5000")
        row = conn.execute(
            "SELECT count(*) FROM worker_registrations"
            f" WHERE status = 'active' AND pid IN ({marks})",
            list(pids),
        ).fetchone()
    return int(row[0])


def _memory(count: int) -> dict[str, Any]:
    sleeper = sleeper_argv()
    comm = os.path.basename(sleeper[0])[:15]
    with short_tempdir("fsb-execm-") as work, _daemon(work) as daemon:
        bare = _spawn(sleeper, count, None)
        try:
            _wait_exec(bare, comm)
            bare_kb, bare_procs = _tree_rss_kb([p.pid for p in bare])
        finally:
            _kill(bare)
        # Warm the registration path (statements, caches, first rows) before the baseline:
        # the figure is what each further server costs, not the daemon's first one.
        warm = [sys.executable, "-I", "-S", _WRAPPER, "--socket", str(daemon.socket_path)]
        for _ in range(_WARM_REGISTRATIONS):
            _check_stderr("warm-up", "up", _first_byte([*warm, "--", *_server()])[1])
        daemon_before = _status_kb(daemon.pid, "VmRSS")
        errors = work / "errors"
        errors.mkdir()
        wrapped = _spawn(
            [_CONSOLE, "--socket", str(daemon.socket_path), "exec", "--", *sleeper], count, errors
        )
        try:
            _wait_exec(wrapped, comm)
            complaints = [f.read_text() for f in sorted(errors.iterdir()) if f.stat().st_size]
            if complaints:
                raise RuntimeError(f"wrapped servers did not register: {complaints[0][-300:]}")
            wrapped_kb, wrapped_procs = _tree_rss_kb([p.pid for p in wrapped])
            daemon_after = _status_kb(daemon.pid, "VmRSS")
            daemon_fds = len(os.listdir(f"/proc/{daemon.pid}/fd"))
            registered = _active_rows(daemon.db, [p.pid for p in wrapped])
            if registered != count:
                raise RuntimeError(f"{registered} of {count} wrapped servers have an active row")
        finally:
            _kill(wrapped)
    return {
        "servers": count,
        "server": sleeper,
        "bare_rss_kb": bare_kb,
        "bare_processes": bare_procs,
        "wrapped_rss_kb": wrapped_kb,
        "wrapped_processes": wrapped_procs,
        "extra_per_server_kb": (wrapped_kb - bare_kb) / count,
        "daemon_before_kb": daemon_before,
        "daemon_after_kb": daemon_after,
        "daemon_per_server_kb": (daemon_after - daemon_before) / count,
        "daemon_open_fds": daemon_fds,
        "registered": registered,
    }


# --- figures ------------------------------------------------------------------------------

_FORMS = {"script": "python -I -S exec_in_place.py", "console": "fleet-supervisor exec"}
_STATES = {"down": "daemon down", "up": "daemon up"}


def _print_spread(spreads: dict[str, dict[str, Any]]) -> None:
    bare = spreads["bare"]["median"]
    print("exec start-up, spawn to first byte (ms):")
    print(
        f"  {'variant':<16}{'runs':>5}{'median':>9}{'p10':>8}{'p90':>8}{'min':>8}{'max':>8}"
        f"{'added':>9}{'ratio':>8}"
    )
    for name, s in spreads.items():
        print(
            f"  {name:<16}{s['runs']:>5}{s['median']:>9.2f}{s['p10']:>8.2f}{s['p90']:>8.2f}"
            f"{s['min']:>8.2f}{s['max']:>8.2f}{s['median'] - bare:>9.2f}{s['median'] / bare:>8.2f}"
        )


def _print_memory(memory: dict[str, Any]) -> None:
    print(
        f"resident memory, {memory['servers']} servers: bare {memory['bare_rss_kb']} KB "
        f"({memory['bare_processes']} processes), wrapped {memory['wrapped_rss_kb']} KB "
        f"({memory['wrapped_processes']} processes); daemon {memory['daemon_before_kb']} KB "
        f"-> {memory['daemon_after_kb']} KB ({memory['daemon_per_server_kb']:.1f} KB per server)",
        flush=True,
    )


def run(quick: bool) -> list[Figure]:
    runs, warmup, servers = (5, 1, 3) if quick else (30, 3, 20)
    judged = not quick
    spreads = _startup(runs, warmup)
    _print_spread(spreads)
    memory = _memory(servers)
    _print_memory(memory)
    bare = spreads["bare"]
    figures = [
        Figure(
            name="exec_start.bare_ms",
            label=f"start to first byte, bare server (median of {runs})",
            value=bare["median"],
            unit="ms",
            judged=judged,
            detail=bare,
        )
    ]
    for form, form_label in _FORMS.items():
        for state, state_label in _STATES.items():
            spread = spreads[f"{form}_{state}"]
            key = f"exec_start.{form}_{state}"
            added = spread["median"] - bare["median"]
            figures += [
                Figure(
                    name=f"{key}_ms",
                    label=f"start to first byte, {form_label}, {state_label} (median of {runs})",
                    value=spread["median"],
                    unit="ms",
                    judged=judged,
                    detail=spread,
                ),
                Figure(
                    name=f"{key}_added_ms",
                    label=f"added to a start by {form_label}, {state_label}",
                    value=added,
                    unit="ms",
                    goal=_ADDED_GOAL_MS,
                    op="<=",
                    judged=judged,
                    detail={
                        "wrapped_median_ms": spread["median"],
                        "bare_median_ms": bare["median"],
                    },
                ),
                Figure(
                    name=f"{key}_ratio",
                    label=f"start-up ratio, {form_label} / bare, {state_label}",
                    value=spread["median"] / bare["median"],
                    unit="x",
                    judged=judged,
                ),
            ]
    count = memory["servers"]
    resident = memory["extra_per_server_kb"] + memory["daemon_per_server_kb"]
    figures += [
        Figure(
            name="exec_start.rss_bare_kb",
            label=f"RSS of {count} bare servers (all their processes)",
            value=memory["bare_rss_kb"],
            unit="KB",
            judged=judged,
            detail=memory,
        ),
        Figure(
            name="exec_start.rss_wrapped_kb",
            label=f"RSS of {count} wrapped servers (all their processes)",
            value=memory["wrapped_rss_kb"],
            unit="KB",
            judged=judged,
        ),
        Figure(
            name="exec_start.rss_extra_per_server_kb",
            label="extra RSS per wrapped server (its own processes)",
            value=memory["extra_per_server_kb"],
            unit="KB",
            judged=judged,
        ),
        Figure(
            name="exec_start.daemon_per_server_kb",
            label=f"daemon RSS per adopted server ({count} adopted)",
            value=memory["daemon_per_server_kb"],
            unit="KB",
            judged=judged,
        ),
        Figure(
            name="exec_start.resident_per_server_kb",
            label="resident cost per wrapped server (own extra + daemon share)",
            value=resident,
            unit="KB",
            goal=_RESIDENT_GOAL_KB,
            op="<=",
            judged=judged,
        ),
    ]
    return figures
