"""Budgets of wrapped servers: which budget a name falls under, the memory hold, the idle
limit, and unknown evidence never making a server due."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from supervisor.policy.servers.budgets import (
    IDLE_BUDGET,
    MEMORY_BUDGET,
    Budget,
    budget_for,
    judge_budgets,
)
from supervisor.policy.servers.census import (
    PROVENANCE_OBSERVED,
    PROVENANCE_WRAPPED,
    ServerRecord,
)
from tests.unit.policy.test_superseded import server

MIB = 1 << 20
CAP = Budget(pattern="mcp-*", memory_bytes=100 * MIB, memory_hold_seconds=60.0)
IDLE = Budget(pattern="time", idle_seconds=600.0)


def wrapped(
    pid: int, name: str | None, *, rss: int | None, idle: float | None = None
) -> ServerRecord:
    record = server(pid, started=1.0, quiet=1.0 if idle is not None else None, idle=idle or 0.0,
                    provenance=PROVENANCE_WRAPPED, label=name)  # fmt: skip
    return replace(record, usage=replace(record.usage, rss_bytes=rss), idle_seconds=idle)


@pytest.mark.parametrize(
    ("name", "budgets", "expected"),
    [
        ("time", [CAP, IDLE], "time"),
        ("mcp-fs", [CAP, IDLE], "mcp-*"),
        ("other", [CAP, IDLE], None),
        (None, [CAP, IDLE], None),
        # An exact name wins over a glob written before it.
        ("mcp-fs", [CAP, replace(IDLE, pattern="mcp-fs")], "mcp-fs"),
    ],
)
def test_a_name_falls_under_its_exact_budget_else_the_first_glob(
    name: str | None, budgets: list[Budget], expected: str | None
) -> None:
    found = budget_for(name, budgets)
    assert (found.pattern if found else None) == expected


def test_memory_over_the_cap_is_due_only_after_the_hold() -> None:
    hog = wrapped(1, "mcp-fs", rss=150 * MIB)
    states, over = judge_budgets([hog], [CAP], {}, now=100.0)
    assert (states[0].due, states[0].over_seconds) == (None, 0.0)
    states, over = judge_budgets([hog], [CAP], over, now=159.0)
    assert states[0].due is None
    states, over = judge_budgets([hog], [CAP], over, now=160.0)
    assert states[0].due == MEMORY_BUDGET
    assert "over the cap" in states[0].detail
    # Back under the cap: the hold starts again from the next time it is over.
    calm = replace(hog, usage=replace(hog.usage, rss_bytes=50 * MIB))
    states, over = judge_budgets([calm], [CAP], over, now=161.0)
    assert (states[0].due, over) == (None, {})
    states, over = judge_budgets([hog], [CAP], over, now=162.0)
    assert states[0].over_seconds == 0.0


def test_idle_past_the_limit_is_due() -> None:
    states, _ = judge_budgets([wrapped(2, "time", rss=MIB, idle=599.9)], [IDLE], {}, 0.0)
    assert states[0].due is None
    states, _ = judge_budgets([wrapped(2, "time", rss=MIB, idle=600.0)], [IDLE], {}, 0.0)
    assert states[0].due == IDLE_BUDGET


def test_unknown_memory_or_idle_time_is_never_due_and_restarts_the_hold() -> None:
    hog = wrapped(1, "mcp-fs", rss=150 * MIB)
    _, over = judge_budgets([hog], [CAP], {}, now=0.0)
    unreadable = replace(hog, usage=replace(hog.usage, rss_bytes=None))
    states, over = judge_budgets([unreadable], [CAP, IDLE], over, now=500.0)
    assert (states[0].due, over) == (None, {})
    states, _ = judge_budgets([wrapped(2, "time", rss=MIB, idle=None)], [IDLE], {}, 1e9)
    assert states[0].due is None


def test_observed_and_unnamed_servers_are_never_judged() -> None:
    observed = replace(wrapped(1, "mcp-fs", rss=500 * MIB), provenance=PROVENANCE_OBSERVED)
    unnamed = wrapped(2, None, rss=500 * MIB)
    assert judge_budgets([observed, unnamed], [CAP], {}, 1e9)[0] == ()


@given(
    rss=st.one_of(st.none(), st.integers(0, 300 * MIB)),
    idle=st.one_of(st.none(), st.floats(0, 2000)),
    held=st.floats(0, 200),
)
def test_a_server_is_due_only_on_evidence_past_its_budget(
    rss: int | None, idle: float | None, held: float
) -> None:
    budget = Budget(pattern="x", memory_bytes=100 * MIB, memory_hold_seconds=60.0,
                    idle_seconds=600.0)  # fmt: skip
    record = wrapped(1, "x", rss=rss, idle=idle)
    states, over = judge_budgets([record], [budget], {}, now=0.0)
    states, _ = judge_budgets([record], [budget], over, now=held)
    (state,) = states
    if state.due == MEMORY_BUDGET:
        assert rss is not None
        assert rss > 100 * MIB
        assert held >= 60.0
    if state.due == IDLE_BUDGET:
        assert idle is not None
        assert idle >= 600.0
