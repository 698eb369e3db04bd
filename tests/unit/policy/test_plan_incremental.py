"""The incremental planner equals the plain planner it wraps, over change sequences with history."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from supervisor.policy.evidence import PidEvidence
from supervisor.policy.incremental.memo import PlanMemo
from supervisor.policy.incremental.planner import plan_retirement as incremental_plan
from supervisor.policy.retirement.fingerprints import history_summary, is_history
from supervisor.policy.retirement.plan import ProtectedOwners
from supervisor.policy.retirement.planner import plan_retirement as plain_plan

from .rows import FENCE, NOW, REPO
from .test_plan_memo import _same
from .test_plan_properties import OWNERS, evidence_maps
from .test_plan_state import _FLEET, _steps


def _world_after(
    step: tuple[Any, ...],
    fleet: list[dict[str, Any]],
    world: dict[str, Any],
) -> None:
    """Apply one change (``test_plan_state._steps``) as the store would: new dicts only."""
    kind, *args = step
    if kind == "field":
        index, name, value = args
        fleet[index % len(fleet)] = {**fleet[index % len(fleet)], name: value}
    elif kind == "row":
        fleet[args[0] % len(fleet)] = args[1]
    elif kind == "probe":
        pid, alive, start = args
        started = None if start is None else (f"ticks-{pid}" if start == "same" else start)
        world["evidence"] = {**world["evidence"], pid: PidEvidence(alive=alive, start_time=started)}
    elif kind in ("evidence", "owners"):
        world[kind if kind == "evidence" else "protected"] = args[0]
    elif kind == "time":
        world["now"] += timedelta(seconds=args[0])
    elif args[0]:
        fleet.insert(len(fleet) // 2, args[1])
    elif len(fleet) > 1:
        fleet.pop(len(fleet) // 2)


def _compare(
    memos: tuple[PlanMemo, PlanMemo], fleet: list[dict[str, Any]], world: dict[str, Any]
) -> None:
    # As the retirement actor plans: the active rows and the store's history summary.
    active = [r for r in fleet if not is_history(r)]
    compact = {**world, "history": history_summary(fleet)}
    _same(incremental_plan(active, memo=memos[0], **compact), plain_plan(active, **compact))
    # And over the whole registry (a memo of its own, kept across the steps too).
    _same(incremental_plan(fleet, memo=memos[1], **world), plain_plan(fleet, **world))


_CASES = st.tuples(_FLEET, evidence_maps(), OWNERS, _steps())


@settings(max_examples=150, deadline=None)
@given(case=_CASES)
def test_incremental_plans_equal_the_plain_planner_with_and_without_history(
    case: tuple[tuple[dict[str, Any], ...], dict[int, PidEvidence], ProtectedOwners, list[Any]],
) -> None:
    base, evidence, owners, steps = case
    # Every fourth row keeps a shared identity, so duplicates come and go.
    fleet = [dict(r, worker_identity=f"w-{i}") if i % 4 else dict(r) for i, r in enumerate(base)]
    world: dict[str, Any] = {
        "now": NOW,
        "evidence": evidence,
        "fencing": FENCE,
        "canonical_repository": REPO,
        "protected": owners,
    }
    memos = (PlanMemo(trust_identity=True), PlanMemo(trust_identity=True))
    _compare(memos, fleet, world)
    for step in steps:
        _world_after(step, fleet, world)
        _compare(memos, fleet, world)
