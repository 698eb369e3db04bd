"""Never a wrong stop: random interleavings of server starts, calls, pauses, sweeps and
exits, judged against what really happened.

A hypothesis state machine keeps a world of clients and server copies with the true time
of every I/O, reads it the way the census does (``Tracked.saw_io`` and ``record`` at each
sweep, starts stamped in 10 ms ticks) and checks, after every sweep, that every copy the
rule finds superseded (and so every copy ``reap plan --include superseded`` plans) truly
has a live owner running a newer copy of its entry and did no I/O since that copy
started, and that the opt-in stop plans a copy only once that has lasted the configured
time. Sub-agent overlaps (a client alternating calls between two copies), periodic work
and copies seen first after their newer copy started are among what it draws.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field, replace

from hypothesis import event, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, precondition, rule

from actors.census.tracked import NO_USAGE, Tracked
from supervisor.policy.servers.census import (
    PROVENANCE_OBSERVED,
    Census,
    OwnerClient,
    ProcessRef,
    ServerRecord,
)
from supervisor.policy.servers.reap_plan import (
    REAP_SUPERSEDED,
    plan_reap,
    plan_superseded_stop,
)
from supervisor.policy.servers.superseded import superseded

#: The opt-in stop's time in these runs (seconds idle since the newer copy started).
STOP_AFTER = 30.0


@dataclass
class Copy:
    pid: int
    owner: int
    entry: str
    started: float
    io: int = 0
    io_times: list[float] = field(default_factory=list)
    tracked: Tracked | None = None


@dataclass
class Client:
    pid: int
    alive: bool = True


def _tick(seconds: float) -> float:
    """A start as /proc stamps it: truncated to a 10 ms clock tick."""
    return math.floor(seconds * 100) / 100


class SupersededWorld(RuleBasedStateMachine):
    @initialize()
    def start(self) -> None:
        self.now = 1000.0
        self.clients = {1: Client(1), 2: Client(2)}
        self.copies: dict[int, Copy] = {}
        self.next_pid = 100
        self.records: tuple[ServerRecord, ...] = ()

    @rule(owner=st.sampled_from([1, 2]), entry=st.sampled_from(["a", "b"]))
    def start_copy(self, owner: int, entry: str) -> None:
        if not self.clients[owner].alive:
            return
        self.next_pid += 1
        self.copies[self.next_pid] = Copy(self.next_pid, owner, entry, self.now)

    @precondition(lambda self: bool(self.copies))
    @rule(index=st.integers(0, 50), size=st.integers(1, 4096))
    def call(self, index: int, size: int) -> None:
        """A tool call (or a copy's own periodic work): its tree moves bytes now."""
        copy = list(self.copies.values())[index % len(self.copies)]
        copy.io += size
        copy.io_times.append(self.now)

    @rule(seconds=st.sampled_from([0.001, 0.004, 0.02, 0.5, 3.0, 11.0, 40.0]))
    def pause(self, seconds: float) -> None:
        self.now += seconds

    @precondition(lambda self: bool(self.copies))
    @rule(index=st.integers(0, 50), gap=st.sampled_from([0.0, 0.004, 0.02, 1.0]))
    def reconnect(self, index: int, gap: float) -> None:
        """A /mcp reconnect: the census has read the copy, then (``gap`` later, maybe
        within the same clock tick) its client starts a new copy of the entry and uses it."""
        old = list(self.copies.values())[index % len(self.copies)]
        self.sweep(unreadable=False)
        self.now += gap
        self.start_copy(old.owner, old.entry)
        if self.next_pid in self.copies:
            self.call(len(self.copies) - 1, 100)

    @rule(seconds=st.sampled_from([5.0, 29.0, 31.0, 90.0]))
    def wait_then_sweep(self, seconds: float) -> None:
        self.now += seconds
        self.sweep(unreadable=False)

    @precondition(lambda self: bool(self.copies))
    @rule(index=st.integers(0, 50))
    def exit_copy(self, index: int) -> None:
        pid = list(self.copies)[index % len(self.copies)]
        del self.copies[pid]

    @rule(owner=st.sampled_from([1, 2]))
    def client_exits(self, owner: int) -> None:
        self.clients[owner].alive = False

    @rule(unreadable=st.booleans())
    def sweep(self, unreadable: bool) -> None:
        """The census reads every copy's counters now (or cannot read one of them)."""
        records = []
        for position, copy in enumerate(self.copies.values()):
            if copy.tracked is None:
                copy.tracked = Tracked(server=self._record(copy), stdio=(None, None),
                                       started_at=_tick(copy.started))  # fmt: skip
            blind = unreadable and position == 0
            copy.tracked.saw_io(None if blind else copy.io, self.now, self.now)
            records.append(copy.tracked.record(self.now, self.now))
        self.records = tuple(records)
        # Judged against the truth at this sweep: what happens after it is the next
        # sweep's to see (an apply takes a census of its own and compares plan tokens).
        self._only_true_cases_are_found_planned_or_stopped()

    def _record(self, copy: Copy) -> ServerRecord:
        client = self.clients[copy.owner]
        owner = OwnerClient(process=ProcessRef(pid=client.pid, start="ticks-1"), name="cc",
                            alive=client.alive)  # fmt: skip
        return ServerRecord(
            process=ProcessRef(pid=copy.pid, start=f"ticks-{copy.pid}"),
            provenance=PROVENANCE_OBSERVED,
            command=("mcp-server", copy.entry),
            cwd="/w",
            env_keys=(),
            uid=os.getuid(),
            owner=owner,
            evidence=(),
            first_seen="t",
            age_seconds=None,
            usage=NO_USAGE,
        )

    def _current(self) -> tuple[ServerRecord, ...]:
        """The latest sweep's records with the owners' liveness as the census would judge
        it now (the owner is read every sweep: a gone client is gone in the record)."""
        out = []
        for record in self.records:
            copy = self.copies.get(record.process.pid)
            if copy is None:
                continue  # exited since: the census would not list it
            assert record.owner is not None
            alive = self.clients[copy.owner].alive
            out.append(replace(record, owner=replace(record.owner, alive=alive)))
        return tuple(out)

    def _truly_superseded(self, pid: int, newer_pid: int) -> float | None:
        """Seconds since the newer copy started, when ``pid`` truly did no I/O since then
        and both copies run one entry for one live owner; None when any of that is false."""
        old, new = self.copies.get(pid), self.copies.get(newer_pid)
        if old is None or new is None or not self.clients[old.owner].alive:
            return None
        if (old.owner, old.entry) != (new.owner, new.entry) or new.started <= old.started:
            return None
        if any(t > new.started for t in old.io_times):
            return None
        return self.now - new.started

    def _only_true_cases_are_found_planned_or_stopped(self) -> None:
        records = self._current()
        census = Census(servers=records, taken_at=self.now)
        found_now = superseded(records)
        event("superseded found" if found_now else "none superseded")
        stopped = plan_superseded_stop(census, after_seconds=STOP_AFTER).targets
        event("opt-in stop due" if stopped else "opt-in stop: none due")
        for found in found_now:
            since = self._truly_superseded(found.server.process.pid, found.newer.pid)
            assert since is not None, (found, self.copies)
            # The rule's own figure never claims more idle time than truly passed.
            assert found.since_newer_seconds <= since
        planned = plan_reap(census, include_superseded=True)
        for target in planned.targets:
            if target.reason_code == REAP_SUPERSEDED:
                pid = target.server.process.pid
                assert any(s.server.process.pid == pid for s in superseded(records))
        # Without the user's word nothing live is ever a target.
        assert all(t.reason_code != REAP_SUPERSEDED for t in plan_reap(census).targets)
        stop = plan_superseded_stop(census, after_seconds=STOP_AFTER)
        for target in stop.targets:
            (found,) = [s for s in superseded(records) if s.server.process == target.server.process]
            since = self._truly_superseded(target.server.process.pid, found.newer.pid)
            assert since is not None
            assert since >= STOP_AFTER


TestSupersededWorld = SupersededWorld.TestCase
TestSupersededWorld.settings = settings(
    max_examples=int(os.environ.get("STATE_MACHINE_EXAMPLES", "100")),
    stateful_step_count=60,
    deadline=None,
)
