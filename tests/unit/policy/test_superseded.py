"""Superseded servers: an older copy under a live owner, idle since a newer copy started.
Tables for each condition, and a property over random fleets: only servers matching the
whole rule are ever found."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from supervisor.policy.servers.census import (
    PROVENANCE_OBSERVED,
    PROVENANCE_WRAPPED,
    Census,
    OwnerClient,
    ProcessRef,
    ServerRecord,
    Usage,
)
from supervisor.policy.servers.reap_plan import (
    KEEP_OWNER_LIVE,
    KEEP_PROTECTED,
    REAP_SUPERSEDED,
    plan_reap,
    token_includes_superseded,
)
from supervisor.policy.servers.superseded import superseded

_OWNER = ProcessRef(pid=500, start="ticks-50")


def server(
    pid: int,
    *,
    started: float | None,
    quiet: float | None,
    idle: float | None = 30.0,
    owner: ProcessRef | None = _OWNER,
    alive: bool | None = True,
    command: tuple[str, ...] = ("npx", "mcp-server"),
    provenance: str = PROVENANCE_OBSERVED,
    label: str | None = None,
) -> ServerRecord:
    client = None if owner is None else OwnerClient(process=owner, name="cc", alive=alive)
    usage = Usage(
        rss_bytes=1 << 20, pss_bytes=None, cpu_seconds=None, cpu_percent=None, open_fds=None
    )
    return ServerRecord(
        process=ProcessRef(pid=pid, start=f"ticks-{pid}"),
        provenance=provenance,
        command=command,
        cwd="/work",
        env_keys=("PATH",),
        uid=0,
        owner=client,
        evidence=(),
        first_seen="t",
        age_seconds=None,
        usage=usage,
        idle_seconds=None if quiet is None else idle,
        started_since_boot=started,
        quiet_since_boot=quiet,
        label=label,
    )


def test_an_older_copy_quiet_since_before_the_newer_one_started_is_superseded() -> None:
    old = server(1, started=100.0, quiet=150.0, idle=90.0)
    new = server(2, started=160.0, quiet=200.0, idle=1.0)
    (found,) = superseded([old, new])
    assert found.server is old
    assert found.newer == new.process
    assert (found.newer_started_since_boot, found.quiet_since_boot) == (160.0, 150.0)
    assert (found.idle_seconds, found.memory_bytes) == (90.0, 1 << 20)


@pytest.mark.parametrize(
    ("why", "old", "new"),
    [
        ("it did I/O after the newer one started",
         server(1, started=100.0, quiet=170.0), server(2, started=160.0, quiet=200.0)),
        ("its counters cannot be read",
         server(1, started=100.0, quiet=None), server(2, started=160.0, quiet=200.0)),
        ("its start is unknown",
         server(1, started=None, quiet=150.0), server(2, started=160.0, quiet=200.0)),
        ("the two started in the same tick",
         server(1, started=160.0, quiet=150.0), server(2, started=160.0, quiet=200.0)),
        ("the owner's liveness is unknown",
         server(1, started=100.0, quiet=150.0, alive=None),
         server(2, started=160.0, quiet=200.0, alive=None)),
        ("the owner is gone (the reap's business, not this rule's)",
         server(1, started=100.0, quiet=150.0, alive=False),
         server(2, started=160.0, quiet=200.0, alive=False)),
        ("no owner was recorded",
         server(1, started=100.0, quiet=150.0, owner=None),
         server(2, started=160.0, quiet=200.0, owner=None)),
        ("another owner runs the newer copy (two sessions)",
         server(1, started=100.0, quiet=150.0),
         server(2, started=160.0, quiet=200.0, owner=ProcessRef(pid=501, start="ticks-51"))),
        ("the same pid under another owner incarnation",
         server(1, started=100.0, quiet=150.0),
         server(2, started=160.0, quiet=200.0, owner=ProcessRef(pid=500, start="ticks-99"))),
        ("another command",
         server(1, started=100.0, quiet=150.0),
         server(2, started=160.0, quiet=200.0, command=("npx", "other-server"))),
        ("a wrapped copy's label is not known",
         server(1, started=100.0, quiet=150.0, provenance=PROVENANCE_WRAPPED),
         server(2, started=160.0, quiet=200.0, provenance=PROVENANCE_WRAPPED)),
        ("wrapped copies of different entries",
         server(1, started=100.0, quiet=150.0, provenance=PROVENANCE_WRAPPED, label="a"),
         server(2, started=160.0, quiet=200.0, provenance=PROVENANCE_WRAPPED, label="b")),
    ],
)  # fmt: skip
def test_each_missing_condition_keeps_the_older_copy(
    why: str, old: ServerRecord, new: ServerRecord
) -> None:
    assert superseded([old, new]) == (), why


def test_wrapped_copies_of_one_label_are_one_entry_whatever_their_command() -> None:
    old = server(1, started=100.0, quiet=150.0, provenance=PROVENANCE_WRAPPED, label="time",
                 command=("python", "-m", "time", "--old-flag"))  # fmt: skip
    new = server(2, started=160.0, quiet=200.0, provenance=PROVENANCE_WRAPPED, label="time")
    assert [s.server.process.pid for s in superseded([old, new])] == [1]


def test_only_the_newest_copy_is_never_superseded() -> None:
    copies = [server(pid, started=100.0 * pid, quiet=100.0 * pid + 10) for pid in (1, 2, 3)]
    found = superseded(copies)
    assert [s.server.process.pid for s in found] == [1, 2]
    assert {s.newer.pid for s in found} == {3}


_STARTS = st.one_of(st.none(), st.integers(0, 20).map(float))


@st.composite
def fleets(draw: st.DrawFn) -> list[ServerRecord]:
    owners = [ProcessRef(pid=500 + i, start=f"ticks-{i}") for i in range(2)]
    fleet = []
    for pid in range(1, draw(st.integers(1, 7)) + 1):
        started = draw(_STARTS)
        quiet = draw(st.one_of(st.none(), st.integers(0, 25).map(float)))
        fleet.append(
            server(
                pid,
                started=started,
                quiet=quiet,
                owner=draw(st.sampled_from([*owners, None])),
                alive=draw(st.sampled_from([True, False, None])),
                command=draw(st.sampled_from([("a",), ("b",)])),
            )
        )
    return fleet


def _matches_the_rule(s: ServerRecord, fleet: list[ServerRecord]) -> bool:
    """The rule as the docs state it, written independently of the implementation."""
    if s.owner is None or s.owner.alive is not True:
        return False
    if s.quiet_since_boot is None or s.started_since_boot is None or s.idle_seconds is None:
        return False
    newer = [
        n
        for n in fleet
        if n is not s
        and n.owner is not None
        and n.owner.alive is True
        and n.owner.process == s.owner.process
        and n.command == s.command
        and n.started_since_boot is not None
        and n.started_since_boot > s.started_since_boot
    ]
    return any(s.quiet_since_boot <= n.started_since_boot for n in newer if n.started_since_boot)


@given(fleets())
def test_only_servers_matching_the_whole_rule_are_ever_found(fleet: list[ServerRecord]) -> None:
    found = superseded(fleet)
    for item in found:
        assert _matches_the_rule(item.server, fleet)
        assert item.quiet_since_boot <= item.newer_started_since_boot
    # And every server that matches is found (the rule is the whole story).
    expected = {s.process.pid for s in fleet if _matches_the_rule(s, fleet)}
    assert {s.server.process.pid for s in found} == expected


@given(fleets(), st.integers(0, 6))
def test_unknown_io_never_makes_a_server_superseded(fleet: list[ServerRecord], index: int) -> None:
    target = fleet[index % len(fleet)]
    blinded = [replace(s, quiet_since_boot=None, idle_seconds=None) if s is target else s
               for s in fleet]  # fmt: skip
    assert target.process.pid not in {s.server.process.pid for s in superseded(blinded)}


def test_the_reap_plans_a_superseded_copy_only_when_asked() -> None:
    old = server(1, started=100.0, quiet=150.0, idle=90.0)
    new = server(2, started=160.0, quiet=200.0)
    census = Census(servers=(old, new), taken_at=0.0)
    plain = plan_reap(census)
    asked = plan_reap(census, include_superseded=True)
    assert plain.targets == ()
    assert {e.reason_code for e in plain.kept} == {KEEP_OWNER_LIVE}
    (target,) = asked.targets
    assert (target.server.process.pid, target.reason_code) == (1, REAP_SUPERSEDED)
    assert "pid 2" in target.detail
    assert [e.server.process.pid for e in asked.kept] == [2]
    # The token says the plan included them, so an apply recomputes the same plan.
    assert token_includes_superseded(asked.plan_token)
    assert not token_includes_superseded(plain.plan_token)
    assert plan_reap(census, include_superseded=True).plan_token == asked.plan_token


def test_a_protected_or_orphaned_server_keeps_its_own_verdict() -> None:
    old = server(1, started=100.0, quiet=150.0)
    new = server(2, started=160.0, quiet=200.0)
    census = Census(servers=(old, new), taken_at=0.0)
    protected = plan_reap(census, protected=frozenset({1}), include_superseded=True)
    assert protected.targets == ()
    assert protected.kept[0].reason_code == KEEP_PROTECTED
