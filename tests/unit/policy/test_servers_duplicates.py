"""Duplicate servers and the census's sums: table cases and properties."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from supervisor.policy.servers.census import (
    Census,
    OwnerClient,
    ProcessRef,
    ServerRecord,
    Usage,
)
from supervisor.policy.servers.duplicates import duplicate_groups, memory_of
from supervisor.policy.servers.summary import (
    by_client_launch,
    by_command,
    cpu_percent,
    is_orphaned,
    summarize,
)


def server(
    pid: int,
    command: tuple[str, ...] = ("mcp-server-time",),
    *,
    cwd: str | None = "/p",
    env: tuple[str, ...] = ("HOME", "PATH"),
    rss: int | None = 100,
    pss: int | None = None,
    owner: str | None = "claude_code",
    alive: bool | None = True,
    provenance: str = "observed",
) -> ServerRecord:
    return ServerRecord(
        process=ProcessRef(pid=pid, start=f"ticks-{pid}"),
        provenance=provenance,
        command=command,
        cwd=cwd,
        env_keys=env,
        uid=1000,
        owner=None
        if owner is None
        else OwnerClient(process=ProcessRef(pid=1, start="ticks-1"), name=owner, alive=alive),
        evidence=("stdio_pipes_to_parent",),
        first_seen="2026-01-01T00:00:00.000000Z",
        age_seconds=1.0,
        usage=Usage(rss_bytes=rss, pss_bytes=pss, cpu_seconds=1.0, cpu_percent=2.0, open_fds=4),
    )


def test_servers_running_one_thing_are_grouped_with_the_memory_they_repeat() -> None:
    servers = [
        server(10, rss=300),
        server(11, rss=100, owner="gemini"),
        server(12, rss=200, pss=150, owner=None),
        server(13, cwd="/other"),  # another directory: another thing
        server(14, env=("HOME",)),  # other environment names
        server(15, ("mcp-server-fetch",)),
    ]
    (group,) = duplicate_groups(servers)
    assert [s.pid for s in group.servers] == [10, 11, 12]
    assert group.clients == ("claude_code", "gemini", None)
    assert (group.memory_bytes, group.repeated_bytes) == (550, 250)


def test_memory_is_pss_where_the_kernel_gave_it() -> None:
    assert memory_of(server(1, rss=300, pss=120)) == 120
    assert memory_of(server(1, rss=300)) == 300
    assert memory_of(server(1, rss=None)) == 0


def test_the_summary_counts_provenance_orphans_duplicates_and_memory_by_client() -> None:
    servers = (
        server(1, rss=10),
        server(2, rss=20, alive=False),
        server(3, ("x-mcp",), rss=5, owner=None),
        server(4, ("w",), rss=7, provenance="wrapped", alive=None),
    )
    summary = summarize(Census(servers=servers, taken_at=0.0))
    assert summary.by_provenance == {"wrapped": 1, "observed": 3}
    assert summary.orphaned == 1
    assert (summary.duplicate_groups, summary.repeated_bytes) == (1, 10)
    assert summary.memory_bytes == 42
    assert summary.memory_by_client == {"claude_code": 37, "none": 5}
    assert [is_orphaned(s) for s in servers] == [False, True, False, False]
    assert [r.key for r in by_command(servers)] == ["mcp-server-time", "w", "x-mcp"]
    launches = by_client_launch(servers)
    assert [(r.key, r.servers, r.memory_bytes) for r in launches] == [
        ("claude_code pid 1 (ticks-1)", 3, 37),
        ("none", 1, 5),
    ]


@pytest.mark.parametrize(
    ("before", "after", "elapsed", "expected"),
    [
        (1.0, 1.5, 1.0, 50.0),
        (1.0, 3.0, 1.0, 200.0),
        (None, 1.0, 1.0, None),
        (2.0, 1.0, 1.0, None),
        (1.0, 2.0, 0.0, None),
    ],
)
def test_cpu_percent_is_between_two_reads_of_one_incarnation(
    before: float | None, after: float | None, elapsed: float, expected: float | None
) -> None:
    assert cpu_percent(before, after, elapsed) == expected


_servers = st.lists(
    st.builds(
        server,
        st.integers(min_value=2, max_value=10_000),
        st.sampled_from([("a",), ("b", "-x"), ("c-mcp",)]),
        cwd=st.sampled_from(["/p", "/q", None]),
        env=st.sampled_from([("HOME",), ("HOME", "PATH")]),
        rss=st.one_of(st.none(), st.integers(min_value=0, max_value=1 << 30)),
        pss=st.one_of(st.none(), st.integers(min_value=0, max_value=1 << 30)),
        owner=st.sampled_from(["claude_code", "gemini", None]),
    ),
    max_size=30,
    unique_by=lambda s: s.process.pid,
)


@given(servers=_servers, data=st.data())
def test_grouping_is_a_partition_of_the_shared_keys_in_any_order(
    servers: list[ServerRecord], data: st.DataObject
) -> None:
    groups = duplicate_groups(servers)
    shuffled = data.draw(st.permutations(servers))
    assert duplicate_groups(shuffled) == groups
    by_pid = {s.process.pid: s for s in servers}
    grouped = [ref.pid for g in groups for ref in g.servers]
    assert len(grouped) == len(set(grouped))
    for group in groups:
        members = [by_pid[ref.pid] for ref in group.servers]
        assert len(members) >= 2
        assert {m.duplicate_key for m in members} == {(group.command, group.cwd, group.env_keys)}
        sizes = [memory_of(m) for m in members]
        assert group.memory_bytes == sum(sizes)
        assert group.repeated_bytes == sum(sizes) - max(sizes) >= 0
    keys = [s.duplicate_key for s in servers]
    assert set(grouped) == {s.process.pid for s in servers if keys.count(s.duplicate_key) > 1}


@given(servers=_servers)
def test_the_summary_adds_up_whatever_the_servers(servers: list[ServerRecord]) -> None:
    summary = summarize(Census(servers=tuple(servers), taken_at=0.0))
    assert summary.servers == len(servers) == sum(summary.by_provenance.values())
    assert sum(summary.memory_by_client.values()) == summary.memory_bytes
    assert summary.memory_bytes == sum(r.memory_bytes for r in by_command(servers))
    assert summary.memory_bytes == sum(r.memory_bytes for r in by_client_launch(servers))


def test_a_server_left_on_released_socket_pairs_counts_as_an_orphan() -> None:
    ownerless = server(3, ("x-mcp",), owner=None)
    abandoned = replace(ownerless, stdio_abandoned=True)
    assert [is_orphaned(s) for s in (ownerless, abandoned)] == [False, True]
    summary = summarize(Census(servers=(ownerless, abandoned), taken_at=0.0))
    assert summary.orphaned == 1


def test_what_survived_out_of_its_running_owners_reach_counts_as_an_orphan() -> None:
    live = server(3, ("chromium",))  # the owner runs; its stdio not judged (None)
    unreachable = replace(live, stdio_abandoned=True)
    assert live.owner is not None
    held = replace(unreachable, owner=replace(live.owner, stdio_open=True))
    unknown = replace(unreachable, owner=replace(live.owner, alive=None))
    assert [is_orphaned(s) for s in (live, unreachable, held, unknown)] == [
        False, True, False, False,
    ]  # fmt: skip
    summary = summarize(Census(servers=(live, unreachable), taken_at=0.0))
    assert summary.orphaned == 1
