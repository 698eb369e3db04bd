"""One benchmark in a process of its own: ``python -m bench.child NAME --out FILE [--quick]``.

Why a process per benchmark: each figure should describe its component as the
daemon would run it, not a heap left behind by the benchmarks before it. When
everything shared one process, sweeps measured after the 100,000-row plans took
about 45 ms of CPU instead of 36 and stalled the loop for up to 5.5 ms.
"""

from __future__ import annotations

import argparse
import importlib
import json
import signal
from collections.abc import Callable, Sequence
from pathlib import Path
from types import FrameType

from bench.report import Figure
from supervisor.observe.logs import configure_logging

__all__ = ["LIMIT_SECONDS", "BenchmarkTimeout", "main"]

#: Wall-clock ceiling per benchmark: a hung step fails that benchmark instead of the suite
#: (SIGALRM raises in the main thread; the benchmark's ``finally`` blocks still stop the
#: processes it started).
LIMIT_SECONDS = {False: 180, True: 60}


class BenchmarkTimeout(Exception):
    """A benchmark ran past its wall-clock ceiling."""


def _on_alarm(signum: int, frame: FrameType | None) -> None:
    raise BenchmarkTimeout("benchmark exceeded its time limit")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.child", description=__doc__)
    parser.add_argument("name")
    parser.add_argument("--out", type=Path, required=True, help="where the figures go (JSON)")
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args(argv)
    # The in-process supervisors log through structlog; keep their info lines off the table.
    configure_logging("error")
    module = importlib.import_module(f"bench.{args.name}")
    run: Callable[[bool], list[Figure]] = module.run
    signal.signal(signal.SIGALRM, _on_alarm)
    signal.alarm(LIMIT_SECONDS[args.quick])
    try:
        figures = run(args.quick)
    finally:
        signal.alarm(0)
    args.out.write_text(json.dumps([f.as_dict() for f in figures]), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
