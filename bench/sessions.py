"""Processes and memory left after whole client sessions: bare servers against wrapped ones."""

# ``python -m bench.sessions [--runs N] [--client C ...] [--scenario S ...]`` (also
# ``python -m bench.leftovers --sessions [--runs N]``) runs each client's headless session
# (tests/sessions: Claude Code, Codex CLI, Gemini CLI, offline in a network namespace of
# their own against a loopback model stand-in) in each scenario, bare and wrapped by
# ``clients wrap``, and prints per client and scenario the processes and MiB left per run
# and the kinds of what was left. Each session's config lists three servers
# (server-everything through npx, mcp-server-time, the stubborn stub). Every process a
# run starts is killed by pid before the next. Needs tests/realclients/install.sh.

from __future__ import annotations

import argparse
import sys
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from tests.realclients.harness import missing
from tests.realclients.scenarios import exec_daemon
from tests.sessions.clients import SESSION_CLIENTS
from tests.sessions.session import SESSION_SCENARIOS, SESSION_SERVERS, run_sessions

__all__ = ["SessionPair", "format_sessions", "main", "measure_sessions"]

_MIB = 1024 * 1024


@dataclass
class SessionPair:
    """One client x scenario: what each run left, bare and wrapped."""

    client: str
    scenario: str
    bare: list[int] = field(default_factory=list)
    wrapped: list[int] = field(default_factory=list)
    bare_rss: list[int] = field(default_factory=list)
    wrapped_rss: list[int] = field(default_factory=list)
    bare_kinds: Counter[str] = field(default_factory=Counter)
    #: Runs in which a session did not reach every server (bare or wrapped).
    incomplete: list[str] = field(default_factory=list)


def measure_sessions(
    *, runs: int, clients: Sequence[str], scenarios: Sequence[str], progress: bool = True
) -> tuple[list[SessionPair], list[str]]:
    pairs: list[SessionPair] = []
    left_out: list[str] = []
    names = {name for _, name in SESSION_SERVERS}
    with exec_daemon() as daemon:
        for client in clients:
            reasons = [r for kind, _ in SESSION_SERVERS if (r := missing(client, kind))]
            if reasons:
                left_out.append(f"{client}: {reasons[0]}")
                continue
            for scenario in scenarios:
                pair = SessionPair(client, scenario)
                for _ in range(runs):
                    for wrapped in (False, True):
                        result = run_sessions(
                            client, scenario, wrapped=wrapped, daemon=daemon if wrapped else None
                        )
                        counts = pair.wrapped if wrapped else pair.bare
                        counts.append(len(result.left))
                        (pair.wrapped_rss if wrapped else pair.bare_rss).append(result.left_rss)
                        if not wrapped:
                            pair.bare_kinds.update(p.kind for p in result.left)
                        reached = all(done == names for done in result.answered)
                        if scenario != "killed-starting" and not reached:
                            pair.incomplete.append("wrapped" if wrapped else "bare")
                        if progress:
                            print(f"[sessions] {result.describe().splitlines()[0]}", flush=True)
                pairs.append(pair)
    return pairs, left_out


def _per_run(values: Sequence[int], scale: float = 1.0) -> str:
    return f"{sum(values) / scale / len(values):.1f}" if values else "-"


def format_sessions(pairs: Sequence[SessionPair]) -> str:
    header = ("client", "scenario", "runs", "bare procs/run", "bare MiB/run",
              "wrapped procs/run", "wrapped MiB/run", "bare left (kinds)")  # fmt: skip
    rows = [header]
    for p in pairs:
        kinds = ", ".join(f"{k} x{n}" for k, n in sorted(p.bare_kinds.items())) or "-"
        if p.incomplete:
            kinds += f" [not every server reached: {', '.join(p.incomplete)}]"
        rows.append((p.client, p.scenario, str(len(p.bare)), _per_run(p.bare),
                     _per_run(p.bare_rss, _MIB), _per_run(p.wrapped),
                     _per_run(p.wrapped_rss, _MIB), kinds))  # fmt: skip
    widths = [max(len(r[i]) for r in rows) for i in range(len(header) - 1)]
    return "\n".join(
        "  ".join(cell.ljust(w) for cell, w in zip(r[:-1], widths, strict=True)) + "  " + r[-1]
        for r in rows
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.sessions", description=__doc__)
    parser.add_argument("--runs", type=int, default=1, help="runs per client, scenario, mode")
    parser.add_argument("--client", action="append", choices=SESSION_CLIENTS)
    parser.add_argument("--scenario", action="append", choices=SESSION_SCENARIOS)
    args = parser.parse_args(argv)
    if not 1 <= args.runs <= 10:
        parser.error("--runs must be within 1..10")
    pairs, left_out = measure_sessions(
        runs=args.runs,
        clients=args.client or SESSION_CLIENTS,
        scenarios=args.scenario or SESSION_SCENARIOS,
    )
    print()
    print(format_sessions(pairs))
    for note in left_out:
        print(f"left out: {note}")
    return 0 if pairs else 1


if __name__ == "__main__":
    sys.exit(main())
