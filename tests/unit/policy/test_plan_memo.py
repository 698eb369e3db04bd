"""Incremental planning: a memoized plan equals the pre-memo planner on every input sequence."""

from __future__ import annotations

import dataclasses
import gc
import weakref
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from supervisor.policy.evidence import PidEvidence
from supervisor.policy.incremental.memo import KEY_FIELDS, PlanMemo
from supervisor.policy.incremental.planner import plan_retirement
from supervisor.policy.incremental.rebeat import with_beat
from supervisor.policy.retirement import reasons as R
from supervisor.policy.retirement.derive import row_facts
from supervisor.policy.retirement.plan import (
    FencingContext,
    PlanEntry,
    ProtectedOwners,
    RetirementPlan,
)
from supervisor.policy.retirement.planner import plan_retirement as plain_plan
from supervisor.policy.retirement.seen import FactsContext

from .reference_plan import reference_plan
from .rows import FENCE, NOW, REPO, all_dead, probes, row
from .test_plan_properties import FENCING, OWNERS, evidence_maps, fleet_rows

#: Values that compare equal but must not share memoized facts (type or sign differs).
_LOOKALIKES: tuple[tuple[str, tuple[Any, ...]], ...] = (
    ("fencing_epoch", (1, 1.0, True, 0, 0.0, -0.0, None, "1")),
    ("heartbeat_ttl_seconds", (900, 900.0, True, -0.0, 0.0, "900")),
    ("pid", (101, 101.0, True, 1, None, "101")),
    ("status", ("active", "retired", "released")),
    (
        "last_heartbeat_at",
        (
            None,
            "garbled",
            "",
            "2026-07-30T05:59:59.000000Z",
            " 2026-07-30T05:59:59.000000Z ",
            "2026-07-30T05:59:59.000000",
            datetime(2026, 7, 30, 6, 0, tzinfo=UTC),
        ),
    ),
    ("host_id", ("host-alpha", "host-beta", None, "")),
    ("client_type", (None, "codex", "gemini")),
    ("client_name", (None, "codex", "Claude")),
)


def _same(memoized: RetirementPlan, fresh: RetirementPlan) -> None:
    assert memoized == fresh
    # Equal dicts may still render differently; the evidence order is part of the output.
    for got, want in zip(
        (*memoized.candidates, *memoized.preserved),
        (*fresh.candidates, *fresh.preserved),
        strict=True,
    ):
        # repr tells 1 from 1.0 from True and 0.0 from -0.0, which == does not.
        assert repr(list(got.evidence.items())) == repr(list(want.evidence.items()))
    for got_row, want_row in zip(memoized.candidate_rows, fresh.candidate_rows, strict=True):
        assert repr(list(got_row.items())) == repr(list(want_row.items()))


def _both(
    memo: PlanMemo,
    rows: list[dict[str, Any]],
    *,
    now: datetime,
    evidence: Mapping[int, PidEvidence],
    fencing: FencingContext,
    owners: ProtectedOwners | None,
    repo: str | None = REPO,
) -> RetirementPlan:
    kwargs: dict[str, Any] = {
        "now": now,
        "evidence": evidence,
        "fencing": fencing,
        "canonical_repository": repo,
        "protected": owners,
    }
    memoized = plan_retirement(rows, memo=memo, **kwargs)
    _same(memoized, reference_plan(rows, **kwargs))
    _same(plain_plan(rows, **kwargs), memoized)
    return memoized


_MUTATION = st.sampled_from(_LOOKALIKES)


@st.composite
def steps(draw: st.DrawFn, size: int) -> list[tuple[Any, ...]]:
    """A sequence of world changes between plans."""
    out: list[tuple[Any, ...]] = []
    for _ in range(draw(st.integers(min_value=1, max_value=6))):
        kind = draw(st.sampled_from(("field", "field", "replace", "drop", "evidence", "time")))
        if kind == "field" and size:
            name, values = draw(_MUTATION)
            out.append(
                ("field", draw(st.integers(0, size - 1)), name, draw(st.sampled_from(values)))
            )
        elif kind == "replace":
            out.append(("replace", draw(fleet_rows(draw(st.integers(0, 9))))))
        elif kind == "drop":
            out.append(("drop",))
        elif kind == "evidence":
            out.append(("evidence", draw(evidence_maps()), draw(OWNERS), draw(FENCING)))
        else:
            out.append(("time", draw(st.sampled_from((0.0, 0.5, 30.0, 600.0, 900.0, 7200.0)))))
    return out


@settings(max_examples=150, deadline=None)
@given(
    rows=st.lists(fleet_rows(0), min_size=0, max_size=6).flatmap(
        lambda base: st.tuples(st.just(base), steps(len(base)))
    ),
    evidence=evidence_maps(),
    owners=OWNERS,
    fencing=FENCING,
    repo=st.sampled_from((REPO, None, "/srv/other")),
)
def test_memoized_plans_equal_fresh_plans_over_mutation_sequences(
    rows: tuple[list[dict[str, Any]], list[tuple[Any, ...]]],
    evidence: dict[int, PidEvidence],
    owners: ProtectedOwners,
    fencing: FencingContext,
    repo: str | None,
) -> None:
    fleet, changes = rows
    fleet = [dict(r, worker_identity=f"w-{i}") if i % 3 else dict(r) for i, r in enumerate(fleet)]
    memo = PlanMemo()
    now = NOW
    _both(memo, fleet, now=now, evidence=evidence, fencing=fencing, owners=owners, repo=repo)
    for change in changes:
        match change:
            case ("field", index, name, value) if index < len(fleet):
                # Mutated in place: a memo keyed by object identity would miss this.
                fleet[index][name] = value
            case ("replace", new_row):
                fleet.append(new_row)
            case ("drop",) if fleet:
                fleet.pop(0)
            case ("evidence", new_evidence, new_owners, new_fencing):
                evidence, owners, fencing = new_evidence, new_owners, new_fencing
            case ("time", seconds):
                now = now + timedelta(seconds=seconds)
            case _:
                pass
        _both(memo, fleet, now=now, evidence=evidence, fencing=fencing, owners=owners, repo=repo)


def _lookalike_rows() -> Iterator[tuple[str, Any, Any]]:
    for name, values in _LOOKALIKES:
        for first in values:
            for second in values:
                if first is not second and first == second:
                    yield name, first, second


@pytest.mark.parametrize(("name", "first", "second"), list(_lookalike_rows()))
def test_equal_values_of_another_type_or_sign_do_not_share_facts(
    name: str, first: Any, second: Any
) -> None:
    memo = PlanMemo()
    base = row("w-1", pid=101)
    evidence = all_dead([base]) | probes(dead=[1])
    for value in (first, second, first):
        changed = dict(base, **{name: value})
        _both(memo, [changed], now=NOW, evidence=evidence, fencing=FENCE, owners=None)


class _Recording(dict[str, Any]):
    """A row that records which columns were read."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.read: set[str] = set()

    def get(self, key: str, default: Any = None) -> Any:
        self.read.add(key)
        return super().get(key, default)

    def __getitem__(self, key: str) -> Any:
        self.read.add(key)
        return super().__getitem__(key)


def test_facts_read_only_the_columns_the_memo_key_holds() -> None:
    # A column read by the facts but absent from the key would let a changed
    # row reuse stale facts.
    recorded = _Recording(row("w-1", pid=101, client_name=None, client_type="codex"))
    row_facts(recorded, FactsContext(host_id="h", boot_id="b", canonical_repository=REPO))
    assert recorded.read <= set(KEY_FIELDS)


def test_unchanged_rows_hit_and_changed_rows_miss() -> None:
    memo = PlanMemo()
    fleet = [row(f"w-{i}", pid=100 + i) for i in range(5)]
    kwargs: dict[str, Any] = {"now": NOW, "evidence": all_dead(fleet), "fencing": FENCE}
    plan_retirement(fleet, memo=memo, **kwargs)
    assert (memo.hits, memo.misses) == (0, 5)
    fleet[2] = dict(fleet[2], last_heartbeat_at="garbled")
    plan = plan_retirement(fleet, memo=memo, **kwargs)
    # A new stamp alone re-derives only what depends on it.
    assert (memo.hits, memo.misses, memo.rebeats) == (4, 5, 1)
    assert plan.reason_for("w-2") is not None
    assert plan.reason_for("w-2").reason_code == R.REASON_UNPARSABLE_HEARTBEAT  # type: ignore[union-attr]
    fleet[3] = dict(fleet[3], generation_id="gen-moved")
    plan_retirement(fleet, memo=memo, **kwargs)
    assert (memo.hits, memo.misses, memo.rebeats) == (8, 6, 1)


def test_superseded_row_versions_are_dropped() -> None:
    memo = PlanMemo()
    fleet = [row(f"w-{i}", pid=100 + i) for i in range(5)]
    kwargs: dict[str, Any] = {"now": NOW, "evidence": all_dead(fleet), "fencing": FENCE}
    for version in range(1500):
        fleet[0] = dict(fleet[0], generation_id=f"gen-{version}")
        plan_retirement(fleet, memo=memo, **kwargs)
        # Memory follows the registry's size, not the number of versions seen.
        assert len(memo) <= 2 * len(fleet) + 1024 + 1
    plan_retirement(fleet, memo=memo, **kwargs)
    assert memo.hits >= 4 * 1500


def test_a_new_fencing_context_discards_the_memo() -> None:
    memo = PlanMemo()
    fleet = [row("w-1", pid=101)]
    plan_retirement(fleet, memo=memo, now=NOW, evidence=all_dead(fleet), fencing=FENCE)
    other = FencingContext(host_id="host-other", boot_id=FENCE.boot_id)
    plan = plan_retirement(fleet, memo=memo, now=NOW, evidence=all_dead(fleet), fencing=other)
    assert memo.misses == 2
    assert plan.candidates == ()


def test_live_pid_and_lease_owner_stay_preserved_with_a_warm_memo() -> None:
    # The memo holds row facts only; a probe or a lease arriving later still wins.
    memo = PlanMemo()
    fleet = [row("w-1", pid=101), row("w-2", pid=102, session_id="sess-held")]
    kwargs: dict[str, Any] = {"now": NOW, "fencing": FENCE, "canonical_repository": REPO}
    warm = plan_retirement(fleet, memo=memo, evidence=all_dead(fleet), **kwargs)
    assert warm.candidate_worker_identities == ("w-1", "w-2")
    later = plan_retirement(
        fleet,
        memo=memo,
        evidence=probes(alive=[101], dead=[102]),
        protected=ProtectedOwners(session_ids=frozenset({"sess-held"})),
        **kwargs,
    )
    assert later.candidates == ()
    assert later.reason_for("w-1").reason_code == R.REASON_PID_ALIVE  # type: ignore[union-attr]
    assert later.reason_for("w-2").reason_code == R.REASON_PROTECTED_OWNER  # type: ignore[union-attr]
    unknown = plan_retirement(fleet, memo=memo, evidence={}, **kwargs)
    assert unknown.candidates == ()


def test_unhashable_and_exotic_values_are_planned_without_the_memo() -> None:
    memo = PlanMemo()
    fleet = [
        row("w-1", pid=101, remote=["not", "hashable"]),
        row("w-2", pid=102, fencing_epoch={"odd": 1}),
        row("w-3", pid=103, last_heartbeat_at=datetime(2026, 7, 30, 5, 0, tzinfo=UTC)),
        row("w-4", pid=104),
    ]
    for _ in range(2):
        _both(memo, fleet, now=NOW, evidence=all_dead(fleet), fencing=FENCE, owners=None)
    # Rows with exotic key columns are judged afresh every time; a datetime stamp
    # (which compares equal across zones yet prints differently) keeps its
    # row's static facts but is re-derived on every plan.
    assert len(memo) == 2
    assert memo.rebeats == 1
    for beat in range(1100):
        fleet[3] = dict(
            fleet[3], last_heartbeat_at=f"2026-07-30T05:{beat // 60 % 60:02d}:{beat % 60:02d}Z"
        )
        plan_retirement(fleet, memo=memo, now=NOW, evidence=all_dead(fleet), fencing=FENCE)
    assert len(memo) <= 2 * len(fleet) + 1024


def test_tokens_are_reused_only_while_their_inputs_are_equal() -> None:
    memo = PlanMemo()
    calls: list[str] = []

    def compute(name: str) -> str:
        calls.append(name)
        return f"token-{len(calls)}"

    units = ["a", "b"]
    assert memo.reuse("registry", units, lambda: compute("registry")) == "token-1"
    # An equal list (not the same object) still reuses: the texts are the inputs.
    assert memo.reuse("registry", ["a", "b"], lambda: compute("registry")) == "token-1"
    # Slots are independent: the same inputs under another slot are computed afresh.
    assert memo.reuse("candidate", units, lambda: compute("candidate")) == "token-2"
    assert memo.reuse("registry", ["a", "c"], lambda: compute("registry")) == "token-3"
    assert calls == ["registry", "candidate", "registry"]


def test_a_warm_memo_moves_every_token_when_a_candidate_row_changes() -> None:
    memo = PlanMemo()
    fleet = [row(f"w-{i}", pid=100 + i) for i in range(4)]
    kwargs: dict[str, Any] = {"now": NOW, "evidence": all_dead(fleet), "fencing": FENCE}
    first = plan_retirement(fleet, memo=memo, **kwargs)
    again = plan_retirement(fleet, memo=memo, **kwargs)
    assert (again.registry_fingerprint, again.candidate_fingerprint, again.scope_fingerprint) == (
        first.registry_fingerprint,
        first.candidate_fingerprint,
        first.scope_fingerprint,
    )
    fleet[1] = dict(fleet[1], generation_id="gen-moved")
    moved = plan_retirement(fleet, memo=memo, **kwargs)
    assert moved.candidate_worker_identities == first.candidate_worker_identities
    assert moved.registry_fingerprint != first.registry_fingerprint
    assert moved.candidate_fingerprint != first.candidate_fingerprint
    assert moved.scope_fingerprint != first.scope_fingerprint
    _same(moved, plan_retirement(fleet, **kwargs))


def test_plan_entries_are_frozen_and_equal_to_constructed_ones() -> None:
    fleet = [row("w-1", pid=101)]
    plan = plan_retirement(fleet, now=NOW, evidence=all_dead(fleet), fencing=FENCE)
    (entry,) = plan.candidates
    built = PlanEntry(
        worker_identity=entry.worker_identity,
        reason_code=entry.reason_code,
        detail=entry.detail,
        evidence=dict(entry.evidence),
    )
    assert entry == built
    assert repr(entry) == repr(built)
    with pytest.raises(dataclasses.FrozenInstanceError):
        entry.reason_code = "changed"  # type: ignore[misc]


_STAMPS = st.one_of(
    st.sampled_from(
        (
            None,
            "",
            "   ",
            "garbled",
            "2026-07-30",
            "2026-07-30T05:59:59Z",
            "2026-07-30T05:59:59.000001Z",
            "2026-07-30T07:59:59+02:00",
            "2026-07-30T05:59:59",
            1.0,
            0,
            datetime(2026, 7, 30, 5, 0, tzinfo=UTC),
            datetime(2026, 7, 30, 5, 0),
        )
    ),
    st.text(max_size=30),
)


@settings(max_examples=300, deadline=None)
@given(
    base=fleet_rows(0),
    beats=st.lists(_STAMPS, min_size=1, max_size=4),
    fencing=FENCING,
    repo=st.sampled_from((REPO, None)),
)
def test_a_new_stamp_re_derives_exactly_the_facts_of_the_new_row(
    base: dict[str, Any], beats: list[Any], fencing: FencingContext, repo: str | None
) -> None:
    context = FactsContext(fencing.host_id, fencing.boot_id, repo)
    facts = row_facts(base, context)
    for beat in beats:
        facts = with_beat(facts, beat)
        want = row_facts({**base, "last_heartbeat_at": beat}, context)
        assert facts == want
        # == cannot tell 1 from 1.0 or a datetime from its text; repr can.
        assert repr(list(facts.evidence_template.get().items())) == repr(
            list(want.evidence_template.get().items())
        )
        assert repr(facts.beat_raw) == repr(want.beat_raw)


def test_a_trusting_memo_builds_templates_only_for_rendered_rows() -> None:
    # Most rows of a plan are never rendered; their facts must not carry ~800 bytes
    # of evidence each (the daemon's memory goal), yet a rendered entry is unchanged.
    fleet = [row(f"w-{i}", pid=100 + i) for i in range(6)]
    fleet[0] = {**fleet[0], "status": "retired"}
    evidence = all_dead(fleet)
    memo = PlanMemo(trust_identity=True)
    plan = plan_retirement(
        fleet, now=NOW, evidence=evidence, fencing=FENCE, canonical_repository=REPO, memo=memo
    )
    context = FactsContext(FENCE.host_id, FENCE.boot_id, REPO)
    held = memo.facts(fleet, context)
    assert not any(f.evidence_template.built for f in held)
    fresh = plan_retirement(
        fleet, now=NOW, evidence=evidence, fencing=FENCE, canonical_repository=REPO
    )
    assert [e.evidence for e in plan.candidates] == [e.evidence for e in fresh.candidates]
    built = [f.evidence_template.built for f in held]
    assert built == [False, True, True, True, True, True]
    assert plan.preserved[0].evidence == fresh.preserved[0].evidence
    assert all(f.evidence_template.built for f in held)


class _Version(dict[str, Any]):
    """A row that a weak reference can watch (plain dicts cannot be weakly referenced)."""


def test_a_new_stamp_lets_the_old_row_version_go() -> None:
    context = FactsContext(FENCE.host_id, FENCE.boot_id, REPO)
    old = _Version(row("w-1", pid=101))
    facts = row_facts(old, context, lazy=True)
    new = _Version({**old, "last_heartbeat_at": "2026-07-30T06:00:00.000000Z"})
    rebeat = with_beat(facts, new["last_heartbeat_at"], new)
    watch = weakref.ref(old)
    del old, facts
    gc.collect()
    assert watch() is None
    want = row_facts(dict(new), context)
    assert rebeat == want
    assert list(rebeat.evidence_template.get().items()) == list(
        want.evidence_template.get().items()
    )
