"""The reap plan: targets only on positive evidence, live clients' duplicates reported, the
token a digest of the targets' trees, the guard and the last check before a signal."""

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
    KEEP_NO_OWNER,
    KEEP_OWNER_LIVE,
    KEEP_OWNER_UNKNOWN,
    KEEP_PROTECTED,
    KEEP_WRAPPED,
    REAP_OWNER_GONE,
    REAP_STDIO_ABANDONED,
    REAP_STDIO_CLOSED,
    REAP_UNREACHABLE,
    plan_reap,
)
from supervisor.policy.servers.reap_rules import (
    TARGET_EXITED,
    TARGET_PID_REUSED,
    before_signal,
    check_reap_guard,
    plan_changed_reasons,
)
from supervisor.policy.servers.reap_view import reap_plan_dict

_UNSET = object()


def server(
    pid: int,
    *,
    alive: bool | None = True,
    stdio_open: bool | None = None,
    owner: object = _UNSET,
    provenance: str = PROVENANCE_OBSERVED,
    command: tuple[str, ...] = ("node", "server.js"),
    rss: int | None = 1000,
    children: tuple[ProcessRef, ...] = (),
    start: str | None = None,
) -> ServerRecord:
    client = OwnerClient(
        process=ProcessRef(pid=pid + 10_000, start=f"ticks-{pid}"),
        name="claude_code",
        alive=alive,
        stdio_open=stdio_open,
    )
    return ServerRecord(
        process=ProcessRef(pid=pid, start=start or f"ticks-{pid + 1}"),
        provenance=provenance,
        command=command,
        cwd="/work",
        env_keys=("HOME", "PATH"),
        uid=1000,
        owner=client if owner is _UNSET else owner,  # type: ignore[arg-type]
        evidence=("stdio_pipes_to_parent", "parent_known_client:claude_code"),
        first_seen="2026-12-01T00:00:00Z",
        age_seconds=60.0,
        usage=Usage(
            rss_bytes=rss,
            pss_bytes=None,
            cpu_seconds=1.0,
            cpu_percent=None,
            open_fds=5,
            children=children,
        ),
    )


def census(*servers: ServerRecord) -> Census:
    return Census(servers=servers, taken_at=1.0)


@pytest.mark.parametrize(
    ("record", "code"),
    [
        (server(10, alive=False), REAP_OWNER_GONE),
        (server(10, alive=True, stdio_open=False), REAP_STDIO_CLOSED),
        (server(10, alive=True, stdio_open=True), KEEP_OWNER_LIVE),
        (server(10, alive=True, stdio_open=None), KEEP_OWNER_LIVE),
        (server(10, alive=None), KEEP_OWNER_UNKNOWN),
        # Unknown liveness is never a target, whatever the stdio says.
        (server(10, alive=None, stdio_open=False), KEEP_OWNER_UNKNOWN),
        (server(10, owner=None), KEEP_NO_OWNER),
        # No owner recorded, but the kernel says its stdio's other ends are released.
        (replace(server(10, owner=None), stdio_abandoned=True), REAP_STDIO_ABANDONED),
        (replace(server(10, owner=None), stdio_abandoned=None), KEEP_NO_OWNER),
        (replace(server(10, owner=None), stdio_abandoned=False), KEEP_NO_OWNER),
        # An owner recorded decides, whatever the sockets say.
        (replace(server(10, alive=True, stdio_open=True), stdio_abandoned=True), KEEP_OWNER_LIVE),
        # What survived a server's leader, out of its running owner's reach (the census
        # says so only when the owner holds none of its stdio).
        (replace(server(10, alive=True, stdio_open=None), stdio_abandoned=True), REAP_UNREACHABLE),
        (replace(server(10, alive=True, stdio_open=None), stdio_abandoned=None), KEEP_OWNER_LIVE),
        (
            replace(server(10, alive=None, stdio_open=None), stdio_abandoned=True),
            KEEP_OWNER_UNKNOWN,
        ),
        (
            replace(server(10, alive=False, provenance=PROVENANCE_WRAPPED), stdio_abandoned=True),
            KEEP_WRAPPED,
        ),
        (server(10, alive=False, provenance=PROVENANCE_WRAPPED), KEEP_WRAPPED),
        (server(10, alive=False, provenance="anything else"), KEEP_WRAPPED),
    ],
)
def test_each_server_gets_one_verdict(record: ServerRecord, code: str) -> None:
    plan = plan_reap(census(record))
    [entry] = [*plan.targets, *plan.kept]
    assert entry.reason_code == code
    targets = ("owner_client_gone", "owner_stdio", "stdio_abandoned", "survivor_unreachable")
    assert (entry in plan.targets) == code.startswith(targets)


def test_a_tree_holding_a_protected_pid_is_kept() -> None:
    child = ProcessRef(pid=77, start="ticks-9")
    plan = plan_reap(census(server(10, alive=False, children=(child,))), protected=frozenset({77}))
    assert plan.targets == ()
    assert plan.kept[0].reason_code == KEEP_PROTECTED


def test_targets_carry_their_tree_and_memory() -> None:
    child = ProcessRef(pid=11, start="ticks-12")
    plan = plan_reap(census(server(10, alive=False, children=(child,), rss=5000), server(20)))
    [target] = plan.targets
    assert target.members == (ProcessRef(pid=10, start="ticks-11"), child)
    assert plan.target_rss_bytes == 5000
    view = reap_plan_dict(plan)
    assert view["target_count"] == 1
    assert view["kept_count"] == 1
    assert view["targets"][0]["members"] == [
        {"pid": 10, "start": "ticks-11"},
        {"pid": 11, "start": "ticks-12"},
    ]
    assert view["targets"][0]["owner"]["alive"] is False


def test_unknown_memory_makes_the_total_unknown() -> None:
    plan = plan_reap(census(server(10, alive=False), server(20, alive=False, rss=None)))
    assert plan.target_rss_bytes is None


def test_duplicates_of_live_clients_are_reported_never_targeted() -> None:
    same = ("npx", "-y", "@modelcontextprotocol/server-everything")
    plan = plan_reap(
        census(
            server(10, command=same, rss=100),
            server(20, command=same, rss=300),
            server(30, command=same, rss=200, provenance=PROVENANCE_WRAPPED),
            server(40, command=same, alive=False),  # orphaned: a target, not a duplicate
            server(50, command=("uvx", "mcp-server-time")),
        )
    )
    assert [t.server.process.pid for t in plan.targets] == [40]
    [group] = plan.duplicates
    assert [p.pid for p in group.servers] == [10, 20, 30]
    assert group.repeated_bytes == 300  # every copy but the largest
    assert group.clients == ("claude_code",) * 3


def test_the_token_names_the_targets_trees() -> None:
    base = census(server(10, alive=False), server(20, alive=False), server(30))
    token = plan_reap(base).plan_token
    # Order and kept servers never matter.
    reordered = census(server(30, rss=1), server(20, alive=False), server(10, alive=False))
    assert plan_reap(reordered).plan_token == token
    # A target more or less, another incarnation, another member: the token moves.
    assert plan_reap(census(server(10, alive=False))).plan_token != token
    reused = census(server(10, alive=False, start="ticks-999"), server(20, alive=False))
    assert plan_reap(reused).plan_token != token
    grown = census(
        server(10, alive=False, children=(ProcessRef(pid=11, start="ticks-12"),)),
        server(20, alive=False),
    )
    assert plan_reap(grown).plan_token != token
    assert plan_reap(census()).plan_token == plan_reap(census(server(30))).plan_token


@given(
    st.lists(
        st.tuples(st.integers(2, 500), st.sampled_from([True, False, None])),
        unique_by=lambda t: t[0],
        max_size=12,
    ),
    st.randoms(use_true_random=False),
)
def test_the_plan_is_deterministic_and_total(
    specs: list[tuple[int, bool | None]], rng: object
) -> None:
    records = [server(pid, alive=alive) for pid, alive in specs]
    shuffled = list(records)
    rng.shuffle(shuffled)  # type: ignore[attr-defined]
    plan, again = plan_reap(census(*records)), plan_reap(census(*shuffled))
    assert plan == again
    # Every server lands in exactly one list; only a recorded-dead owner makes a target.
    assert len(plan.targets) + len(plan.kept) == len(records)
    assert {t.server.process.pid for t in plan.targets} == {p for p, a in specs if a is False}


def test_a_moved_token_says_what_the_plan_is_now() -> None:
    plan = plan_reap(census(server(10, alive=False)))
    assert plan_changed_reasons(plan.plan_token, plan) is None
    reasons = plan_changed_reasons("reap-v1-old", plan)
    assert reasons is not None
    assert "pid 10" in reasons[1]
    assert plan.plan_token in reasons[1]


def test_the_mass_guard() -> None:
    records = [server(pid, alive=pid > 3) for pid in range(1, 11)]  # 3 orphans of 10
    plan = plan_reap(census(*records))
    assert len(plan.targets) == 3
    assert check_reap_guard(plan, max_share=0.5, floor=0) is None
    assert check_reap_guard(plan, max_share=0.2, floor=3) is None  # within the floor
    refused = check_reap_guard(plan, max_share=0.2, floor=2)
    assert refused is not None
    assert (refused.would_reap, refused.servers) == (3, 10)
    assert "reap.mass_guard_share" in refused.reason


def test_the_last_check_before_a_signal() -> None:
    planned = ProcessRef(pid=10, start="ticks-5@ino-7")
    assert before_signal(planned, None) == TARGET_EXITED
    assert before_signal(planned, "ticks-6") == TARGET_PID_REUSED
    assert before_signal(planned, "ticks-5@ino-8") == TARGET_PID_REUSED
    assert before_signal(planned, "ticks-5@ino-7") is None
    assert before_signal(replace(planned, start="ticks-5"), "ticks-5@ino-8") is None
