"""``python -m bench``: run every benchmark, print the figures table, write them as JSON."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

from bench.child import LIMIT_SECONDS
from bench.report import Figure, format_table, machine_info, to_json, write_json

__all__ = ["BENCHMARKS", "FULL_ONLY", "main"]

#: Module of each benchmark, in the order they run; each exposes ``run(quick) -> [Figure]``.
BENCHMARKS: tuple[str, ...] = (
    "heartbeats",
    "writer",
    "durability",
    "plan",
    "gauges",
    "sweep",
    "discovery",
    "activity",
    "pipes",
    "exit_detect",
    "exit_snapshot",
    "apply",
    "rss",
    "exec_start",
)
#: Benchmarks of full runs only (or ``--only``): ``multihost`` starts its own PostgreSQL
#: and three supervisor processes, too much for the quick smoke run's time budget;
#: ``leftovers`` runs the real MCP clients of tests/realclients (install.sh first);
#: ``idle_cpu`` watches two idle daemons for over a minute each.
FULL_ONLY: tuple[str, ...] = ("multihost", "leftovers", "idle_cpu")

_DEFAULT_OUT = Path(__file__).resolve().parent / "results" / "latest.json"
_ROOT = Path(__file__).resolve().parent.parent
#: Past the child's own alarm: only a child that ignores it is killed from here.
_GRACE_SECONDS = 60


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument("--out", type=Path, default=_DEFAULT_OUT, help="JSON output path")
    parser.add_argument(
        "--quick", action="store_true", help="small sizes and short windows (smoke mode)"
    )
    parser.add_argument(
        "--only",
        action="append",
        choices=BENCHMARKS + FULL_ONLY,
        help="run only this benchmark (repeatable)",
    )
    return parser


def _run_child(name: str, *, quick: bool, workdir: Path) -> list[Figure]:
    """``bench.child`` for one benchmark; its figures, or RuntimeError saying why none."""
    out = workdir / f"{name}.json"
    argv = [sys.executable, "-m", "bench.child", name, "--out", str(out)]
    if quick:
        argv.append("--quick")
    try:
        completed = subprocess.run(
            argv, cwd=_ROOT, timeout=LIMIT_SECONDS[quick] + _GRACE_SECONDS, check=False
        )
    except subprocess.TimeoutExpired as exc:
        raise RuntimeError(f"{name} did not finish within {exc.timeout:.0f}s") from None
    if completed.returncode != 0:
        raise RuntimeError(f"{name} exited with status {completed.returncode}")
    return [Figure.from_dict(item) for item in json.loads(out.read_text(encoding="utf-8"))]


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.only:
        selected = [name for name in BENCHMARKS + FULL_ONLY if name in args.only]
    else:
        selected = list(BENCHMARKS if args.quick else BENCHMARKS + FULL_ONLY)
    figures: list[Figure] = []
    errors: dict[str, str] = {}
    timings: dict[str, float] = {}
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="fsb-run-") as scratch:
        for name in selected:
            began = time.perf_counter()
            print(f"[bench] {name} ...", flush=True)
            try:
                figures.extend(_run_child(name, quick=args.quick, workdir=Path(scratch)))
            except (RuntimeError, OSError, ValueError, KeyError) as exc:
                errors[name] = f"{type(exc).__name__}: {exc}"
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
