"""The abandonment verdict: a server is planned only when every stdio end is proven released.

A model host: each server's stdin and stdout pipes, the processes holding either end of
each (with the access they hold it by), and probes that fail. The kernel's count is the
model's: the other end of stdin is released when no process holds it for writing, the
other end of stdout when none holds it for reading. Whatever the holders and failures,
``plan_reap`` targets exactly the servers whose every end is released and was read.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from hypothesis import given, settings
from hypothesis import strategies as st

from supervisor.policy.servers.abandoned import (
    STDIO_ABANDONED,
    STDIO_ABANDONED_PIPE,
    EndState,
    judge_abandoned,
)
from supervisor.policy.servers.reap_plan import KEEP_NO_OWNER, REAP_STDIO_ABANDONED, plan_reap
from tests.unit.policy.test_reap_plan import census, server

ACCESS = ("read", "write", "both")


@dataclass(frozen=True)
class Holder:
    pid: int
    access: str


@dataclass(frozen=True)
class End:
    """One stdio pipe of a server: who holds it besides the server, and whether the probe
    of it fails (the process gone mid-read, not ours to inspect, ...)."""

    holders: tuple[Holder, ...]
    fails: bool


def _state(end: End, index: int) -> EndState:
    link = f"pipe:[{100 + index}]"
    if end.fails:
        return EndState(link=link, released=None, why="cannot be read")
    # stdin: the server reads, the client side writes; stdout the other way round.
    other = "write" if index == 0 else "read"
    held = any(h.access in (other, "both") for h in end.holders)
    return EndState(link=link, released=not held, why="held" if held else "released")


def _proven(end: End, index: int) -> bool:
    other = "write" if index == 0 else "read"
    return not end.fails and not any(h.access in (other, "both") for h in end.holders)


holders = st.lists(
    st.builds(Holder, pid=st.integers(1, 50), access=st.sampled_from(ACCESS)), max_size=4
).map(tuple)
ends = st.builds(End, holders=holders, fails=st.booleans())
servers = st.lists(st.tuples(ends, ends), min_size=1, max_size=6)


@settings(max_examples=300)
@given(servers)
def test_only_servers_whose_every_end_is_proven_released_are_planned(
    model: list[tuple[End, End]],
) -> None:
    records = []
    proven = set()
    for number, (stdin, stdout) in enumerate(model):
        verdict = judge_abandoned([_state(stdin, 0), _state(stdout, 1)])
        pid = 1000 + number
        records.append(
            replace(
                server(pid, owner=None),
                stdio_abandoned=verdict.abandoned,
                stdio_detail=verdict.detail,
            )
        )
        if _proven(stdin, 0) and _proven(stdout, 1):
            proven.add(pid)
    plan = plan_reap(census(*records))
    assert {t.server.process.pid for t in plan.targets} == proven
    assert all(t.reason_code == REAP_STDIO_ABANDONED for t in plan.targets)
    assert all(k.reason_code == KEEP_NO_OWNER for k in plan.kept)


@given(st.lists(st.sampled_from([True, False, None]), max_size=4), st.booleans())
def test_abandoned_only_when_there_are_ends_and_all_are_released(
    released: list[bool | None], pipes: bool
) -> None:
    kind = "pipe" if pipes else "socket"
    states = [EndState(link=f"{kind}:[{i}]", released=r, why="w") for i, r in enumerate(released)]
    verdict = judge_abandoned(states)
    assert verdict.abandoned == (bool(released) and all(r is True for r in released))
    if verdict.abandoned:
        assert verdict.evidence == (STDIO_ABANDONED_PIPE if pipes else STDIO_ABANDONED)
    else:
        assert verdict.evidence is None


def test_the_detail_names_the_end_that_keeps_it() -> None:
    verdict = judge_abandoned(
        [
            EndState(link="pipe:[1]", released=True, why="no write end is open"),
            EndState(link="pipe:[2]", released=False, why="a process still holds its read end"),
        ]
    )
    assert not verdict.abandoned
    assert verdict.detail == "stdout pipe:[2]: a process still holds its read end"
    assert judge_abandoned([]).detail == "its stdio could not be found"
