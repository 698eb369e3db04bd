"""Server processes left after real MCP clients end: bare servers against ``exec``-wrapped ones."""

# ``python -m bench.leftovers [--runs N] [--scenario S ...] [--server S ...] [--bare-only]
# [--reap]`` runs every scenario of tests/realclients/scenarios.py against every server,
# bare and wrapped (one daemon with ``[exec] stop_orphans = true``), and prints per
# scenario and server the processes left after each run and what kinds they were (with
# ``--reap``, also what a reap leaves of a bare run's leftovers, processes and MiB, twice:
# by a supervisor that ran throughout the run (on the daemon's sweep and first-sight
# timers) and by one started only afterwards, which never saw the client; every process
# a reap left is listed with why it could not be proven abandoned), then how each
# client tried to stop the stubborn server (its log: EOF and signals, in ms from the
# server's start). ``python -m bench --only leftovers`` runs it once per pair and reports
# the mean per run as figures (wrapped: goal 0). Needs tests/realclients/install.sh;
# pairs whose client or server is missing are left out and named. Every process a run
# starts is killed by pid before the next. The real clients run only offline (tests/offline.py):
# as root, ``unshare --net .venv/bin/python -m tests.offline -- .venv/bin/python -m bench...``.

from __future__ import annotations

import argparse
import sys
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from functools import partial

from bench.report import Figure
from tests.integration.daemon import Daemon
from tests.process_trees.marked import Left, reap_afterwards, reap_throughout
from tests.realclients.harness import OBSERVER, SERVERS, missing
from tests.realclients.scenarios import (
    REAP_GRACE_SECONDS,
    SCENARIOS,
    ScenarioResult,
    exec_daemon,
    run_scenario,
)

__all__ = ["Pair", "main", "measure", "run"]

AFTERWARDS = "started afterwards"
THROUGHOUT = "ran throughout"
REAPERS: dict[str, Callable[..., AbstractContextManager[Callable[[], list[Left]]]]] = {
    AFTERWARDS: reap_afterwards,
    THROUGHOUT: reap_throughout,
}

#: After the client's end: the daemon's grace and then some (a bare server that is still
#: there after this long is counted as left).
SETTLE_SECONDS = REAP_GRACE_SECONDS + 3.0


@dataclass
class Pair:
    """One scenario x server: processes left after each run, bare and wrapped."""

    scenario: str
    server: str
    bare: list[int] = field(default_factory=list)
    wrapped: list[int] = field(default_factory=list)
    #: Seconds from the client's end until nothing of the server ran (None: never).
    bare_gone: list[float | None] = field(default_factory=list)
    wrapped_gone: list[float | None] = field(default_factory=list)
    #: Left of the bare run's leftovers by a reap from a supervisor started afterwards,
    #: and from one that ran throughout the run: processes and MiB per run.
    reaped: list[tuple[int, float]] = field(default_factory=list)
    reaped_throughout: list[tuple[int, float]] = field(default_factory=list)
    #: Why each process a reap left could not be reaped ("afterwards: ..." and so on).
    left_reasons: Counter[str] = field(default_factory=Counter)
    bare_kinds: Counter[str] = field(default_factory=Counter)
    wrapped_kinds: Counter[str] = field(default_factory=Counter)
    #: Runs whose client never showed the server connected (bare, wrapped).
    unconnected: list[str] = field(default_factory=list)
    stop_sequence: list[str] = field(default_factory=list)
    seen_kinds: list[str] = field(default_factory=list)

    def add(self, result: ScenarioResult, reaper: str | None = None) -> None:
        counts, kinds = (
            (self.wrapped, self.wrapped_kinds) if result.wrapped else (self.bare, self.bare_kinds)
        )
        counts.append(result.leftover_count)
        if result.after is not None:
            mib = sum(left.rss_bytes or 0 for left in result.after) / (1 << 20)
            column = self.reaped_throughout if reaper == THROUGHOUT else self.reaped
            column.append((len(result.after), mib))
            self.left_reasons.update(
                f"{reaper}: {left.proc.kind}: {left.reason}" for left in result.after
            )
        (self.wrapped_gone if result.wrapped else self.bare_gone).append(result.gone_after)
        kinds.update(result.leftover_kinds())
        if not result.connected:
            self.unconnected.append("wrapped" if result.wrapped else "bare")
        if not result.wrapped and not self.seen_kinds:
            self.seen_kinds = [p.kind for p in result.seen]
        if not result.wrapped and result.server_log and not self.stop_sequence:
            self.stop_sequence = _relative(result.server_log)


def _relative(log: Sequence[str]) -> list[str]:
    """Log lines as ``+ms role event`` from the first line's time."""
    parsed = [line.split(" ", 3) for line in log if line.count(" ") >= 3]
    if not parsed:
        return []
    start = float(parsed[0][0])
    return [f"+{(float(t) - start) * 1000:.0f}ms {role} {what}" for t, _, role, what in parsed]


@contextmanager
def _daemon(needed: bool) -> Iterator[Daemon | None]:
    if not needed:
        yield None
        return
    with exec_daemon() as daemon:
        yield daemon


def measure(
    *,
    runs: int,
    scenarios: Sequence[str],
    servers: Sequence[str],
    wrapped: bool = True,
    settle_seconds: float = SETTLE_SECONDS,
    progress: bool = True,
    reap: bool = False,
    server_words: tuple[str, ...] = (),
) -> tuple[list[Pair], list[str]]:
    """Every pair, ``runs`` times bare (and wrapped); the pairs and what was left out."""
    pairs: list[Pair] = []
    left_out: list[str] = []
    with _daemon(wrapped) as daemon:
        for scenario in scenarios:
            client, _ = SCENARIOS[scenario]
            for server in servers:
                reason = missing(client, server)
                if reason is not None:
                    left_out.append(f"{scenario} x {server}: {reason}")
                    continue
                pair = Pair(scenario, server)
                for _ in range(runs):
                    modes: list[tuple[bool, str | None]] = [(False, AFTERWARDS if reap else None)]
                    if reap:
                        modes.append((False, THROUGHOUT))
                    if wrapped:
                        modes.append((True, None))
                    for wrap, reaper in modes:
                        made = None
                        if reaper is not None:
                            made = partial(REAPERS[reaper], server_words=server_words)
                        result = run_scenario(
                            scenario,
                            server,
                            wrapped=wrap,
                            daemon=daemon if wrap else None,
                            settle_seconds=settle_seconds,
                            reaper=made,
                        )
                        pair.add(result, reaper)
                        if progress:
                            print(f"[leftovers] {result.summary()}", flush=True)
                pairs.append(pair)
    return pairs, left_out


def _seconds(values: Sequence[float | None]) -> str:
    return "/".join("-" if v is None else f"{v:.1f}" for v in values)


def _reaped(runs: Sequence[tuple[int, float]]) -> str:
    """Processes (MiB) per run."""
    return "/".join(f"{n} ({mib:.1f})" if n else "0" for n, mib in runs)


def format_left_reasons(pairs: Sequence[Pair]) -> str:
    out = ["", "what each reap left, and why (count over the runs):"]
    for p in pairs:
        for reason, count in sorted(p.left_reasons.items()):
            out.append(f"  {p.scenario} x {p.server}: {count}x {reason}")
    if len(out) == 2:
        out.append("  nothing")
    return "\n".join(out)


def _kinds(kinds: Counter[str]) -> str:
    return ", ".join(f"{n}x {k}" for k, n in sorted(kinds.items())) or "-"


def format_pairs(pairs: Sequence[Pair], *, wrapped: bool, reap: bool = False) -> str:
    header = ["scenario", "server", "runs", "left bare", "gone after s", "kinds bare"]
    if reap:
        header += ["after reap, ran throughout", "after reap, started afterwards"]
    if wrapped:
        header += ["left wrapped", "gone after s", "kinds wrapped"]
    rows = []
    for p in pairs:
        row = [
            p.scenario,
            p.server,
            str(len(p.bare)),
            "/".join(map(str, p.bare)),
            _seconds(p.bare_gone),
            _kinds(p.bare_kinds),
        ]
        if reap:
            row += [_reaped(p.reaped_throughout), _reaped(p.reaped)]
        if wrapped:
            row += [
                "/".join(map(str, p.wrapped)),
                _seconds(p.wrapped_gone),
                _kinds(p.wrapped_kinds),
            ]
        rows.append(row)
    widths = [max(len(r[i]) for r in (header, *rows)) for i in range(len(header))]

    def line(cells: Sequence[str]) -> str:
        return "  ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)).rstrip()

    out = [line(header), "  ".join("-" * w for w in widths), *(line(r) for r in rows)]
    notes = [f"{p.scenario} x {p.server}: not connected in {p.unconnected}" for p in pairs]
    out += [n for n, p in zip(notes, pairs, strict=True) if p.unconnected]
    return "\n".join(out)


def format_trees_and_stops(pairs: Sequence[Pair]) -> str:
    out = ["", "server trees (bare, first run):"]
    for server in dict.fromkeys(p.server for p in pairs):
        first = next(p for p in pairs if p.server == server)
        out.append(f"  {server}: {' -> '.join(first.seen_kinds) or '-'}")
    out.append("")
    out.append("how each client stopped the stub server (bare, first run):")
    for p in pairs:
        if p.server in ("stubborn", OBSERVER):
            out.append(f"  {p.scenario} x {p.server}: {'; '.join(p.stop_sequence) or '-'}")
    return "\n".join(out)


def run(quick: bool) -> list[Figure]:
    """``python -m bench --only leftovers``: one run per pair, bare and wrapped."""
    pairs, left_out = measure(runs=1, scenarios=list(SCENARIOS), servers=SERVERS, progress=False)
    for note in left_out:
        print(f"[leftovers] left out: {note}", flush=True)
    if not pairs:
        raise RuntimeError("no real clients here: run tests/realclients/install.sh")
    figures = []
    for p in pairs:
        for mode, counts, kinds in (
            ("bare", p.bare, p.bare_kinds),
            ("wrapped", p.wrapped, p.wrapped_kinds),
        ):
            figures.append(
                Figure(
                    name=f"leftovers.{p.scenario}.{p.server}.{mode}",
                    label=f"processes left per run, {p.scenario} x {p.server}, {mode}",
                    value=sum(counts) / len(counts),
                    unit="procs",
                    goal=0.0 if mode == "wrapped" else None,
                    op="<=" if mode == "wrapped" else None,
                    judged=not quick,
                    detail={"runs": counts, "kinds": dict(kinds)},
                )
            )
    return figures


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.leftovers", description=__doc__)
    parser.add_argument("--runs", type=int, default=3, help="runs per pair and mode")
    parser.add_argument("--scenario", action="append", choices=list(SCENARIOS))
    parser.add_argument("--server", action="append", choices=(*SERVERS, OBSERVER))
    parser.add_argument("--bare-only", action="store_true", help="no daemon, no wrapper")
    parser.add_argument("--settle", type=float, default=SETTLE_SECONDS, help="seconds")
    parser.add_argument(
        "--reap",
        action="store_true",
        help="reap each bare run's leftovers: by a supervisor that ran throughout the run, "
        "and (in another run) by one started afterwards",
    )
    parser.add_argument(
        "--server-word",
        action="append",
        default=[],
        help="with --reap: a [discovery] server_words entry for the reaping supervisor "
        "(e.g. stubborn_server, so that the stub counts as an MCP server)",
    )
    parser.add_argument(
        "--sessions",
        action="store_true",
        help="whole client sessions instead (bench.sessions: per client and scenario)",
    )
    args = parser.parse_args(argv)
    if not 1 <= args.runs <= 20:
        parser.error("--runs must be within 1..20")
    if args.sessions:
        from bench.sessions import main as sessions_main

        return sessions_main(["--runs", str(min(args.runs, 10))])
    pairs, left_out = measure(
        runs=args.runs,
        scenarios=args.scenario or list(SCENARIOS),
        servers=args.server or SERVERS,
        wrapped=not args.bare_only,
        settle_seconds=args.settle,
        reap=args.reap,
        server_words=tuple(args.server_word),
    )
    print()
    print(format_pairs(pairs, wrapped=not args.bare_only, reap=args.reap))
    if args.reap:
        print(format_left_reasons(pairs))
    print(format_trees_and_stops(pairs))
    for note in left_out:
        print(f"left out: {note}")
    return 0 if pairs else 1


if __name__ == "__main__":
    sys.exit(main())
