"""``python -m bench``: run every benchmark, print the figures table, write them as JSON."""

from __future__ import annotations

import argparse
import importlib
import signal
import time
import traceback
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from types import FrameType

from bench.report import Figure, format_table, machine_info, to_json, write_json
from supervisor.logs import configure_logging

__all__ = ["BENCHMARKS", "BenchmarkTimeout", "main"]

#: Module of each benchmark, in the order they run; each exposes ``run(quick) -> [Figure]``.
BENCHMARKS: tuple[str, ...] = (
    "heartbeats",
    "writer",
    "plan",
    "sweep",
    "exit_detect",
    "apply",
    "rss",
)

_DEFAULT_OUT = Path(__file__).resolve().parent / "results" / "latest.json"

#: Wall-clock ceiling per benchmark: a hung step fails that benchmark instead of the suite
#: (SIGALRM raises in the main thread; the benchmark's ``finally`` blocks still stop the
#: processes it started).
_LIMIT_SECONDS = {False: 180, True: 60}


class BenchmarkTimeout(Exception):
    """A benchmark ran past its wall-clock ceiling."""


def _on_alarm(signum: int, frame: FrameType | None) -> None:
    raise BenchmarkTimeout("benchmark exceeded its time limit")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument("--out", type=Path, default=_DEFAULT_OUT, help="JSON output path")
    parser.add_argument(
        "--quick", action="store_true", help="small sizes and short windows (smoke mode)"
    )
    parser.add_argument(
        "--only",
        action="append",
        choices=BENCHMARKS,
        help="run only this benchmark (repeatable)",
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    # The in-process supervisors log through structlog; keep their info lines off the table.
    configure_logging("error")
    selected = [name for name in BENCHMARKS if not args.only or name in args.only]
    figures: list[Figure] = []
    errors: dict[str, str] = {}
    timings: dict[str, float] = {}
    started = time.perf_counter()
    for name in selected:
        module = importlib.import_module(f"bench.{name}")
        run: Callable[[bool], list[Figure]] = module.run
        began = time.perf_counter()
        print(f"[bench] {name} ...", flush=True)
        previous = signal.signal(signal.SIGALRM, _on_alarm)
        signal.alarm(_LIMIT_SECONDS[args.quick])
        try:
            figures.extend(run(args.quick))
        except Exception as exc:
            traceback.print_exc()
            errors[name] = f"{type(exc).__name__}: {exc}"
        finally:
            signal.alarm(0)
            signal.signal(signal.SIGALRM, previous)
        timings[name] = time.perf_counter() - began
        print(f"[bench] {name} done in {timings[name]:.1f}s", flush=True)
    meta = {
        "started_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "quick": args.quick,
        "benchmarks": selected,
        "seconds": time.perf_counter() - started,
        "seconds_per_benchmark": timings,
        "machine": machine_info(),
    }
    print()
    print(format_table(figures))
    if args.quick:
        print("(quick mode: small sizes, goals not judged)")
    for name, error in errors.items():
        print(f"FAILED {name}: {error}")
    write_json(args.out, to_json(figures, meta=meta, errors=errors))
    print(f"\nwrote {args.out} ({meta['seconds']:.0f}s)")
    return 1 if errors else 0


if __name__ == "__main__":
    raise SystemExit(main())
