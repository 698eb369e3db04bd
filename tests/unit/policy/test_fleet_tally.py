"""The kept fleet counts equal a full classification after every change, tick and verdict."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

import anyio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    consumes,
    initialize,
    invariant,
    rule,
)

from actors.replies import FleetCounts
from supervisor.clock import FakeClock
from supervisor.policy.evidence import PidEvidence, row_pid
from supervisor.policy.fleet.orphans import find_orphans
from supervisor.policy.incremental.fleet_tally import FleetTally, dead_changes
from supervisor.policy.stamps import format_stamp, parse_stamp
from tests.unit.policy.reference_counts import count_fleet_rows
from tests.unit.policy.rows import HOST, NOW, OTHER_HOST, REPO, row, start_of, trusted_instance

#: Short TTLs, so a few clock steps cross them (and land exactly on their edges).
_TTLS = (1.0, 2.5, 7.0, 0.1, 1e-6)
_PIDS = st.integers(min_value=100, max_value=103)
_CLIENTS = st.one_of(st.none(), st.integers(min_value=200, max_value=201))


def _full(
    rows: Sequence[Mapping[str, Any]], *, now: datetime, evidence: Mapping[int, PidEvidence]
) -> FleetCounts:
    """What a scrape answered before the tally: every row classified from scratch."""
    return count_fleet_rows(
        rows,
        now=now,
        evidence=evidence,
        current_host_id=HOST,
        canonical_repository=REPO,
        historical_count=0,
        orphans=find_orphans(rows, evidence=evidence, current_host_id=HOST),
    )


def _dead(rows: Mapping[str, Mapping[str, Any]], evidence: Mapping[int, PidEvidence]) -> set[str]:
    """The identities the liveness actor would call dead: their pid's evidence says so."""
    return {
        identity
        for identity, r in rows.items()
        if (pid := row_pid(r)) is not None
        and evidence.get(pid, PidEvidence(alive=None)).alive is False
    }


def _kept(tally: FleetTally, now: datetime, evidence: Mapping[int, PidEvidence]) -> FleetCounts:
    clients = sorted(tally.client_rows(), key=lambda r: str(r["worker_identity"]))
    orphans = find_orphans(clients, evidence=evidence, current_host_id=HOST)
    return FleetCounts(workers=tally.counts(now), orphaned=len(orphans))


def _evidence_value(kind: str, pid: int) -> PidEvidence:
    return {
        "alive": PidEvidence(alive=True, start_time=start_of(pid)),
        "dead": PidEvidence(alive=False),
        "unknown": PidEvidence(alive=None),
        "reused": PidEvidence(alive=True, start_time=f"other-{pid}"),
    }[kind]


class TallyMachine(RuleBasedStateMachine):
    """Registrations, heartbeats, releases, retirements, re-reads, clock advances and
    probe changes in any order; after each, the tally equals the full recount."""

    identities = Bundle("identities")

    def __init__(self) -> None:
        super().__init__()
        self.clock = FakeClock(wall=NOW)
        self.rows: dict[str, dict[str, Any]] = {}
        self.evidence: dict[int, PidEvidence] = {}
        self.tally = FleetTally(HOST)
        # What the tally was last handed: the rows (by identity) and the dead set.
        self.given: Mapping[str, Mapping[str, Any]] = {}
        self.given_dead: set[str] = set()
        self.reset_next = False
        self.verdicts_first = False
        self.serial = 0
        # False: terminal rows are left out of the rows read and counted instead, as
        # the store's active view hands them out.
        self.with_history = True

    def _stamp(self) -> str:
        return format_stamp(self.clock.now())

    def _replace(self, identity: str, **changes: Any) -> None:
        # A new mapping per version, as the store hands them out (never edited in place).
        self.rows[identity] = {**self.rows[identity], **changes}

    @initialize()
    def start(self) -> None:
        self.check()

    @rule(
        target=identities,
        pid=_PIDS,
        client=_CLIENTS,
        namespace=st.sampled_from(["author", "reviewer", None]),
        ttl=st.sampled_from(_TTLS),
        shape=st.sampled_from(["trusted", "untrusted", "no_session", "backdated", "foreign"]),
    )
    def register(
        self, pid: int, client: int | None, namespace: str | None, ttl: float, shape: str
    ) -> str:
        self.serial += 1
        identity = f"w-{self.serial:03d}"
        stamp = self._stamp()
        extra: dict[str, Any] = {
            "client_instance_id": trusted_instance(identity),
            "started_at": format_stamp(NOW),
        }
        if shape == "untrusted":
            extra["client_instance_id"] = f"pid-{pid}"
        elif shape == "no_session":
            extra["session_id"] = None
        elif shape == "backdated":
            extra["started_at"] = format_stamp(NOW.replace(year=2030))  # after its beats
        elif shape == "foreign":
            extra["host_id"] = OTHER_HOST
        if client is not None:
            extra["client_pid"] = client
            extra["client_process_start_time"] = start_of(client)
        self.rows[identity] = row(
            identity,
            pid=pid,
            namespace=namespace,
            heartbeat_ttl_seconds=ttl,
            last_heartbeat_at=stamp,
            **extra,
        )
        return identity

    @rule(identity=identities)
    def heartbeat(self, identity: str) -> None:
        if self.rows[identity]["status"] == "active":
            self._replace(identity, last_heartbeat_at=self._stamp())

    @rule(
        identity=identities,
        stamp=st.sampled_from(
            ["garbage", "", None, "2026-07-30T06:59:59Z", "2031-01-01T00:00:00Z"]
        ),
    )
    def odd_stamp(self, identity: str, stamp: str | None) -> None:
        # Only the stamp changes, as with a beat, but to an old, future or unreadable one.
        self._replace(identity, last_heartbeat_at=stamp)

    @rule(identity=identities, status=st.sampled_from(["released", "retired", "superseded"]))
    def end(self, identity: str, status: str) -> None:
        if self.rows[identity]["status"] == "active":
            self._replace(identity, status=status)

    @rule(identity=consumes(identities))
    def forget(self, identity: str) -> None:
        # Gone from the rows read altogether (a history compaction, a hand-run delete).
        del self.rows[identity]

    @rule(identity=identities)
    def reread(self, identity: str) -> None:
        # The same contents as a new object: a re-read must not change any count.
        self._replace(identity)

    @rule(seconds=st.one_of(st.sampled_from([0.0, 1e-6, 1.0, 2.5, 7.0]), st.floats(0, 20)))
    def advance(self, seconds: float) -> None:
        anyio.run(self.clock.advance, seconds)

    @rule(identity=identities)
    def advance_to_expiry(self, identity: str) -> None:
        # Exactly onto the instant the row's heartbeat stops being fresh, and no further.
        current = self.rows[identity]
        beat = parse_stamp(current["last_heartbeat_at"])
        if beat is None:
            return
        left = (beat - self.clock.now()).total_seconds() + float(current["heartbeat_ttl_seconds"])
        if left > 0:
            anyio.run(self.clock.advance, left)

    @rule(
        pid=st.one_of(_PIDS, _CLIENTS.filter(lambda p: p is not None)),
        kind=st.sampled_from(["alive", "dead", "unknown", "reused", "forgotten", "same"]),
    )
    def probe(self, pid: int, kind: str) -> None:
        evidence = dict(self.evidence)
        if kind == "forgotten":
            evidence.pop(pid, None)
        elif kind == "same":
            # An equal value as a new object: the tally may re-judge, never miscount.
            if pid in evidence:
                held = evidence[pid]
                evidence[pid] = PidEvidence(alive=held.alive, start_time=held.start_time)
        else:
            evidence[pid] = _evidence_value(kind, pid)
        self.evidence = evidence

    @rule(flag=st.booleans())
    def history_in_view(self, flag: bool) -> None:
        self.with_history = flag

    @rule(flag=st.booleans())
    def verdicts_before_rows(self, flag: bool) -> None:
        self.verdicts_first = flag

    @rule()
    def start_over(self) -> None:
        # The store or the liveness actor lost its record of changes: everything again.
        self.reset_next = True

    @invariant()
    def check(self) -> None:
        handed = {
            identity: r
            for identity, r in self.rows.items()
            if self.with_history or r["status"] == "active"
        }
        dead = _dead(handed, self.evidence)
        if self.reset_next:
            self.tally.apply_rows(dict(handed), reset=True)
            self.tally.apply_dead(dict.fromkeys(dead, True), reset=True)
            self.reset_next = False
        else:
            changes = {
                identity: handed.get(identity)
                for identity in self.given.keys() | handed.keys()
                if handed.get(identity) is not self.given.get(identity)
            }
            if self.verdicts_first:
                # The liveness actor saw rows (or their going) before the tally did.
                self.tally.apply_dead(dead_changes(self.given_dead, dead), reset=False)
                self.tally.apply_rows(changes, reset=False)
            else:
                self.tally.apply_rows(changes, reset=False)
                self.tally.apply_dead(dead_changes(self.given_dead, dead), reset=False)
        self.given, self.given_dead = handed, dead
        now = self.clock.now()
        ordered = [handed[key] for key in sorted(handed)]
        assert len(self.tally) == len(ordered)
        # Verdicts for rows not handed over are held only while the two takes disagree.
        assert not self.tally._dead_unseen
        assert _kept(self.tally, now, self.evidence) == _full(
            ordered, now=now, evidence=self.evidence
        )


TallyMachine.TestCase.settings = settings(
    max_examples=150,
    stateful_step_count=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
test_tally_equals_a_full_recount = TallyMachine.TestCase


def _one(
    version: Mapping[str, Any], evidence: Mapping[int, PidEvidence], now: datetime = NOW
) -> None:
    tally = FleetTally(HOST)
    tally.apply_rows({version["worker_identity"]: version}, reset=False)
    tally.apply_dead(
        dict.fromkeys(_dead({str(version["worker_identity"]): version}, evidence), True),
        reset=False,
    )
    assert _kept(tally, now, evidence) == _full([version], now=now, evidence=evidence)


def test_a_row_moves_to_stale_when_its_ttl_passes_without_a_write() -> None:
    clock = FakeClock(wall=NOW)
    fresh = row("w-1", pid=101, last_heartbeat_at=format_stamp(NOW), heartbeat_ttl_seconds=10)
    tally = FleetTally(HOST)
    tally.apply_rows({"w-1": fresh}, reset=False)
    assert tally.counts(clock.now()) == {("active", "live", "author"): 1}
    anyio.run(clock.advance, 9.999999)
    assert tally.counts(clock.now()) == {("active", "live", "author"): 1}
    anyio.run(clock.advance, 0.000001)
    assert tally.counts(clock.now()) == {("active", "stale", "author"): 1}


def test_a_dead_verdict_moves_a_fresh_row_and_back() -> None:
    fresh = row("w-1", pid=101, last_heartbeat_at=format_stamp(NOW), heartbeat_ttl_seconds=10)
    tally = FleetTally(HOST)
    tally.apply_rows({"w-1": fresh}, reset=False)
    tally.apply_dead({"w-1": True}, reset=False)
    assert tally.counts(NOW) == {("active", "stale", "author"): 1}
    tally.apply_dead({}, reset=True)
    assert tally.counts(NOW) == {("active", "live", "author"): 1}


def test_a_new_stamp_alone_is_judged_like_a_whole_row() -> None:
    # A row whose start is after its beat contradicts itself until a later beat comes;
    # with its pid dead it is not live, so that decides inconsistent against stale.
    started = format_stamp(NOW.replace(hour=8))
    first = row("w-1", pid=101, started_at=started, last_heartbeat_at=format_stamp(NOW))
    for version in (
        first,
        {**first, "last_heartbeat_at": format_stamp(NOW.replace(hour=9))},
        {**first, "last_heartbeat_at": "unreadable"},
        {**first, "last_heartbeat_at": format_stamp(NOW.replace(hour=7, minute=30))},
    ):
        _one(version, {101: PidEvidence(alive=False)})


@given(
    ttl=st.one_of(
        st.floats(min_value=1e-9, max_value=1e13, allow_nan=False),
        st.sampled_from([0.1, 0.3, 1e-6, 2.5e-7, 86400.0, 1e12, 1e11]),
    ),
    age_us=st.integers(min_value=-(10**7), max_value=10**13),
)
def test_freshness_edges_match_the_liveness_rule_to_the_microsecond(
    ttl: float, age_us: int
) -> None:
    from datetime import timedelta

    beat = NOW
    now = NOW + timedelta(microseconds=age_us)
    _one(
        row("w-1", pid=101, last_heartbeat_at=format_stamp(beat), heartbeat_ttl_seconds=ttl),
        {},
        now,
    )
