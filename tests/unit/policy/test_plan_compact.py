"""The compact plan (active rows plus the history digest) equals the whole-registry plan."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from supervisor.policy.render import entry_dict, plan_dict, plan_view_dict
from supervisor.policy.retirement.fingerprints import (
    history_summary,
    is_history,
    registry_fingerprint,
)
from supervisor.policy.retirement.history import identity_irregular
from supervisor.policy.retirement.pages import page_of, terminal_entries
from supervisor.policy.retirement.planner import plan_retirement
from supervisor.policy.retirement.reasons import REASON_ALREADY_TERMINAL
from supervisor.policy.retirement.scope import with_history_scope
from supervisor.wire import PlanQuery

from .rows import NOW, REPO
from .test_plan_properties import PROPERTY_SETTINGS, WORLDS, World

_SHARED = ("session_id", "generation_id", "process_identity", "pid", "client_instance_id")
_TERMINAL = st.sampled_from(("released", "superseded", "retired"))


def _registry(world: World, data: st.DataObject) -> list[dict[str, Any]]:
    """The rows a store can hold (worker_identity is its primary key), plus older
    registrations of the same workers: history that shares identity keys with them."""
    seen: set[str] = set()
    rows = []
    for row in world.rows:
        identity = row["worker_identity"]
        if identity not in seen and not identity_irregular(identity):
            seen.add(identity)
            rows.append(row)
    for index, row in enumerate(list(rows)):
        shared = data.draw(st.lists(st.sampled_from(_SHARED), max_size=2, unique=True))
        if not shared:
            continue
        past = {
            **row,
            "worker_identity": f"h-{index}",
            "session_id": f"sess-h-{index}",
            "generation_id": f"gen-h-{index}",
            "process_identity": f"proc-h-{index}",
            "pid": 900 + index,
            "client_instance_id": f"inst-h-{index}",
            "status": data.draw(_TERMINAL),
        }
        for name in shared:
            past[name] = row[name]
        rows.append(past)
    return rows


def _plans(world: World, rows: list[dict[str, Any]]) -> tuple[Any, Any, list[Any]]:
    kwargs: dict[str, Any] = {
        "now": NOW,
        "evidence": world.evidence,
        "fencing": world.fencing,
        "canonical_repository": REPO,
        "protected": world.owners,
    }
    full = plan_retirement(rows, **kwargs)
    active = [r for r in rows if not is_history(r)]
    # In identity order, as the store pages them.
    past = sorted((r for r in rows if is_history(r)), key=lambda r: str(r["worker_identity"]))
    compact = plan_retirement(active, history=history_summary(rows), **kwargs)
    compact = with_history_scope(compact, past)
    terminal = terminal_entries(
        past,
        now=NOW,
        evidence=world.evidence,
        fencing=world.fencing,
        canonical_repository=REPO,
    )
    return full, compact, terminal


@PROPERTY_SETTINGS
@given(world=WORLDS, data=st.data())
def test_compact_plan_has_the_full_plans_candidates_and_tokens(
    world: World, data: st.DataObject
) -> None:
    rows = _registry(world, data)
    full, compact, terminal = _plans(world, rows)

    assert compact.registry_fingerprint == full.registry_fingerprint == registry_fingerprint(rows)
    assert compact.candidate_fingerprint == full.candidate_fingerprint
    assert compact.scope_fingerprint == full.scope_fingerprint
    assert compact.candidates == full.candidates
    assert compact.candidate_rows == full.candidate_rows
    assert compact.preserved_reason_counts == full.preserved_reason_counts
    assert compact.assessed_count == full.assessed_count == len(rows)
    # Every historical row is counted as terminal, and its entry is the full plan's.
    assert compact.unlisted_terminal_count == len(terminal)
    assert all(e.reason_code == REASON_ALREADY_TERMINAL for e in terminal)
    merged = sorted(
        (*compact.preserved, *terminal), key=lambda e: (e.worker_identity or "", e.reason_code)
    )
    assert [entry_dict(e) for e in merged] == [entry_dict(e) for e in full.preserved]


@PROPERTY_SETTINGS
@given(world=WORLDS, limit=st.integers(min_value=1, max_value=3), data=st.data())
def test_paging_a_compact_plan_lists_exactly_the_full_plans_entries(
    world: World, limit: int, data: st.DataObject
) -> None:
    rows = _registry(world, data)
    full, compact, terminal = _plans(world, rows)
    reason = data.draw(st.sampled_from([None, *sorted(full.preserved_reason_counts)]))
    namespace = data.draw(st.sampled_from([None, "author", "reviewer"]))
    pages: list[Any] = []
    cursor: str | None = None
    for _ in range(len(rows) + 1):
        query = PlanQuery(reason=reason, namespace=namespace, limit=limit, cursor=cursor)
        page, cursor = page_of([*compact.preserved, *terminal], query)
        pages.extend(page)
        if cursor is None:
            break
    assert cursor is None
    want = [
        e
        for e in full.preserved
        if (reason is None or e.reason_code == reason)
        and (namespace is None or e.evidence.get("namespace") == namespace)
    ]
    assert [entry_dict(e) for e in pages] == [entry_dict(e) for e in want]


@PROPERTY_SETTINGS
@given(world=WORLDS, data=st.data())
def test_the_rendered_summary_counts_and_tokens_match_the_full_rendering(
    world: World, data: st.DataObject
) -> None:
    rows = _registry(world, data)
    full, compact, terminal = _plans(world, rows)
    wide = plan_dict(full)
    view = plan_view_dict(compact, PlanQuery(), extra_examples=terminal[:3])
    for key in (
        "registry_fingerprint",
        "candidate_fingerprint",
        "scope_fingerprint",
        "candidate_worker_identities",
        "candidates",
        "candidate_count",
        "preserved_count",
        "assessed_count",
        "preserved_reason_counts",
    ):
        assert view[key] == wide[key], key
    assert "preserved" not in view
    summary = {g["reason_code"]: g for g in view["preserved_summary"]}
    assert {code: g["count"] for code, g in summary.items()} == wide["preserved_reason_counts"]
    for code, group in summary.items():
        first = [e["worker_identity"] for e in wide["preserved"] if e["reason_code"] == code]
        assert [e["worker_identity"] for e in group["examples"]] == first[:3]
