"""The idle daemon's CPU with 1,000 processes on the host: first-sight pass on, and off.

A real ``fleet-supervisor run`` (SQLite, discovery on its default timers: a sweep every
10 s, the first-sight pass every 0.5 s) beside 1,000 sleeping processes, and the same
daemon with the pass off, one after the other in one run. After a warm-up (the first
sweep reads every process once) the daemon's own CPU time (utime + stime of its
/proc/<pid>/stat) is read over a window; the figure is that time over the window, in
percent of one core. Goal: at most 0.2% with the pass on.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from bench.processes import Sleepers, short_tempdir
from bench.report import Figure
from supervisor.system.proc_census import clock_ticks, read_stat_facts

__all__ = ["run"]

#: Seconds the daemon runs before the window: its first sweeps read every process.
WARMUP_SECONDS = 15.0


def _config(work: Path, first_sight: float) -> Path:
    path = work / f"supervisor-{first_sight}.toml"
    path.write_text(
        "\n".join(
            [
                "[database]",
                f'path = "{work / f"registry-{first_sight}.sqlite3"}"',
                "[socket]",
                f'path = "{work / f"s-{first_sight}.sock"}"',
                "[auth]",
                f'profiles_path = "{work / "profiles.toml"}"',
                "[discovery]",
                f"first_sight_interval_seconds = {first_sight}",
                "",
            ]
        )
    )
    return path


@contextmanager
def _daemon(config: Path) -> Iterator[int]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "supervisor.cli", "--config", str(config), "run"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        yield proc.pid
    finally:
        proc.terminate()  # our own child, by its Popen
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=30)


def _cpu_seconds(pid: int) -> float:
    stat = read_stat_facts(pid)
    if stat is None:
        raise RuntimeError(f"the daemon (pid {pid}) is gone")
    return stat.cpu_ticks / clock_ticks()


def _percent(config: Path, window: float) -> float:
    with _daemon(config) as pid:
        time.sleep(WARMUP_SECONDS)
        began, cpu = time.monotonic(), _cpu_seconds(pid)
        time.sleep(window)
        used = _cpu_seconds(pid) - cpu
        return 100.0 * used / (time.monotonic() - began)


def run(quick: bool) -> list[Figure]:
    count = 200 if quick else 1_000
    window = 20.0 if quick else 60.0
    with short_tempdir("fsb-idle-") as work, Sleepers(count):
        shipped = Path(__file__).resolve().parents[1] / "config" / "profiles.toml"
        profiles = work / "profiles.toml"
        profiles.write_text(shipped.read_text())
        os.chmod(profiles, 0o600)
        on = _percent(_config(work, 0.5), window)
        off = _percent(_config(work, 0.0), window)
    detail = {"processes_started": count, "window_seconds": window, "pass_off_percent": off}
    return [
        Figure(
            name="idle_cpu.daemon_percent",
            label=f"idle daemon CPU, % of one core, {count:,} processes, first-sight pass on",
            value=on,
            unit="%",
            goal=0.2,
            op="<=",
            judged=not quick,
            detail=detail,
        ),
        Figure(
            name="idle_cpu.pass_off_percent",
            label=f"the same daemon with the first-sight pass off, {count:,} processes",
            value=off,
            unit="%",
            judged=not quick,
        ),
    ]


if __name__ == "__main__":
    for figure in run(quick="--quick" in sys.argv[1:]):
        print(f"{figure.label}: {figure.value:.3f} {figure.unit}")
