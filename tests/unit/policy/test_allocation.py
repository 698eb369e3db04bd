"""Allocator routing: roles per signal, skip reasons, terminal path first, ordering, leases."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from supervisor.policy.control.allocation import (
    CANDIDATE_FIELDS,
    OUTCOME_ASSIGNED,
    OUTCOME_BLOCKED_TERMINAL,
    OUTCOME_NO_SAFE,
    OUTCOME_WAIT,
    SKIP_BLOCKED,
    SKIP_CLAIMED,
    SKIP_DEPENDENCY,
    SKIP_LEASED,
    SKIP_NO_HEAD,
    SKIP_NOT_READY,
    SKIP_ROLE,
    SKIP_TERMINAL_PATH,
    SKIP_TERMINAL_STATE,
    Candidate,
    candidate_from_mapping,
    candidates_from_mappings,
    expected_role,
    next_command,
    order_candidates,
    route,
    skip_reason,
)
from supervisor.policy.control.plane import ControlPlaneRefusal

SHA = "a" * 40


def pr(number: int, **signals: Any) -> Candidate:
    signals.setdefault("head_sha", SHA)
    return Candidate(kind="pr", number=number, **signals)


def issue(number: int, **signals: Any) -> Candidate:
    return Candidate(kind="issue", number=number, **signals)


# --- which role ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("candidate", "role"),
    [
        (issue(1), "author"),
        (pr(2, request_changes_current_head=True), "author"),
        (pr(3, approval_stale=True), "reviewer"),
        (pr(4, approval_on_current_head=True, mergeable=True), "merger"),
        (pr(5, approval_on_current_head=True, mergeable=False), "author"),
        (pr(6, approval_contaminated=True, approval_on_current_head=True), "reconciler"),
        (pr(7), "reviewer"),
        # Contamination outranks everything: a clean-looking approval is not trusted.
        (pr(8, approval_contaminated=True, request_changes_current_head=True), "reconciler"),
    ],
)
def test_expected_role_per_signal(candidate: Candidate, role: str) -> None:
    assert expected_role(candidate) == role


@pytest.mark.parametrize(
    ("candidate", "role"),
    [
        (pr(2, request_changes_current_head=True), "author"),
        (pr(3, approval_stale=True), "reviewer"),
        (pr(4, approval_on_current_head=True, mergeable=True), "merger"),
        (pr(6, approval_contaminated=True), "reconciler"),
        (pr(6, approval_contaminated=True), "controller"),
    ],
)
def test_each_role_receives_its_own_work(candidate: Candidate, role: str) -> None:
    routing = route([candidate], role=role, session_id="s", terminal_pr=None, holders={})
    assert routing.outcome == OUTCOME_ASSIGNED
    assert routing.selected == candidate
    others = {"author", "reviewer", "merger", "reconciler"} - {role}
    if role == "controller":
        others -= {"reconciler"}
    for other in others:
        refused = route([candidate], role=other, session_id="s", terminal_pr=None, holders={})
        assert refused.outcome == OUTCOME_NO_SAFE, other
        assert refused.skipped[0].code == SKIP_ROLE


def test_a_request_changes_pr_is_not_for_the_reviewer() -> None:
    routing = route(
        [pr(9, request_changes_current_head=True)],
        role="reviewer",
        session_id="s",
        terminal_pr=None,
        holders={},
    )
    assert routing.outcome == OUTCOME_NO_SAFE
    assert "expects role 'author'" in routing.skipped[0].reason


# --- skip reasons --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("candidate", "code", "fragment"),
    [
        (issue(1, state="closed"), SKIP_TERMINAL_STATE, "closed"),
        (pr(2, state="merged"), SKIP_TERMINAL_STATE, "merged"),
        (issue(3, blocked=True), SKIP_BLOCKED, "blocked"),
        (issue(4, labels=("status:blocked",)), SKIP_BLOCKED, "blocked"),
        (
            issue(5, dependency_unmet=True, dependency_reason="waits on #600"),
            SKIP_DEPENDENCY,
            "600",
        ),
        (issue(6, dependency_unmet=True), SKIP_DEPENDENCY, "unmet dependencies"),
        (pr(7, head_sha=None), SKIP_NO_HEAD, "head sha"),
        (issue(8, labels=("status:needs-triage",)), SKIP_NOT_READY, "status:ready"),
        (issue(9, already_claimed_elsewhere=True), SKIP_CLAIMED, "claimed"),
    ],
)
def test_skip_reasons(candidate: Candidate, code: str, fragment: str) -> None:
    verdict = skip_reason(candidate, role=expected_role(candidate), terminal_pr=None)
    assert verdict is not None
    assert verdict[0] == code
    assert fragment in verdict[1]


def test_ready_and_unlabelled_issues_are_selectable() -> None:
    for candidate in (issue(1), issue(2, labels=("status:ready",)), issue(3, labels=("bug",))):
        assert skip_reason(candidate, role="author", terminal_pr=None) is None


def test_blocked_and_dependent_items_are_skipped_with_reasons_and_the_next_is_chosen() -> None:
    candidates = [
        issue(612, priority=99, dependency_unmet=True, dependency_reason="downstream of #600"),
        issue(601, priority=98, blocked=True),
        issue(600, priority=1, labels=("status:ready",)),
    ]
    routing = route(candidates, role="author", session_id="s", terminal_pr=None, holders={})
    assert routing.selected is not None
    assert routing.selected.number == 600
    assert {s.number: s.code for s in routing.skipped} == {
        612: SKIP_DEPENDENCY,
        601: SKIP_BLOCKED,
    }
    assert "600" in next(s.reason for s in routing.skipped if s.number == 612)


def test_nothing_safe_is_no_safe_work_with_every_skip_listed() -> None:
    routing = route(
        [issue(1, blocked=True), issue(2, state="closed")],
        role="author",
        session_id="s",
        terminal_pr=None,
        holders={},
    )
    assert routing.outcome == OUTCOME_NO_SAFE
    assert routing.selected is None
    assert len(routing.skipped) == 2
    assert routing.reasons
    empty = route([], role="author", session_id="s", terminal_pr=None, holders={})
    assert (empty.outcome, empty.skipped) == (OUTCOME_NO_SAFE, ())


# --- terminal path first -------------------------------------------------------------------------


@pytest.mark.parametrize("role", ["reviewer", "merger"])
def test_terminal_pr_goes_first_and_downstream_prs_wait(role: str) -> None:
    signals: dict[str, Any] = (
        {"approval_on_current_head": True, "mergeable": True} if role == "merger" else {}
    )
    candidates = [pr(11, priority=5, **signals), pr(10, priority=1, **signals)]
    routing = route(candidates, role=role, session_id="s", terminal_pr=10, holders={})
    assert routing.selected is not None
    assert routing.selected.number == 10
    assert [(s.number, s.code) for s in routing.skipped] == [(11, SKIP_TERMINAL_PATH)]
    assert "terminal-review lock" in routing.skipped[0].reason


def test_only_downstream_work_is_blocked_by_the_terminal_path() -> None:
    routing = route([pr(99)], role="reviewer", session_id="s", terminal_pr=10, holders={})
    assert routing.outcome == OUTCOME_BLOCKED_TERMINAL
    assert "#10" in routing.reasons[0]


def test_the_terminal_lock_does_not_hold_back_authors() -> None:
    routing = route(
        [pr(11, request_changes_current_head=True)],
        role="author",
        session_id="s",
        terminal_pr=10,
        holders={},
    )
    assert routing.outcome == OUTCOME_ASSIGNED


# --- ordering ------------------------------------------------------------------------------------


def test_priority_then_age_ordering() -> None:
    old = datetime(2026, 1, 1, tzinfo=UTC)
    new = datetime(2026, 6, 1, tzinfo=UTC)
    candidates = [
        issue(5, priority=1),
        issue(4, priority=1, created_at=new),
        issue(3, priority=1, created_at=old),
        issue(9, priority=7),
        issue(2, priority=1),
    ]
    ordered = order_candidates(candidates, role="author", terminal_pr=None)
    assert [c.number for c in ordered] == [9, 3, 4, 2, 5]


# --- leases --------------------------------------------------------------------------------------


def test_leased_items_are_passed_over_for_a_free_one() -> None:
    holders = {("issue", 1): "other"}
    routing = route(
        [issue(1, priority=9), issue(2)],
        role="author",
        session_id="me",
        terminal_pr=None,
        holders=holders,
    )
    assert routing.kind == "assign"
    assert routing.selected is not None
    assert routing.selected.number == 2
    assert [(s.number, s.code) for s in routing.skipped] == [(1, SKIP_LEASED)]


def test_only_leased_items_left_means_wait_naming_the_owner() -> None:
    routing = route(
        [issue(1)], role="author", session_id="me", terminal_pr=None, holders={("issue", 1): "s1"}
    )
    assert (routing.kind, routing.outcome, routing.owner_session_id) == ("wait", OUTCOME_WAIT, "s1")


def test_the_callers_own_lease_is_resumed_first() -> None:
    routing = route(
        [issue(1, priority=9), issue(2)],
        role="author",
        session_id="me",
        terminal_pr=None,
        holders={("issue", 2): "me"},
    )
    assert routing.kind == "resume"
    assert routing.selected is not None
    assert routing.selected.number == 2


# --- parsing -------------------------------------------------------------------------------------


def test_candidates_parse_from_json_values() -> None:
    parsed = candidate_from_mapping(
        {
            "kind": "PR",
            "number": 7,
            "head_sha": SHA,
            "approval_on_current_head": True,
            "mergeable": True,
            "labels": ["Status:Ready", " "],
            "created_at": "2026-01-01T00:00:00Z",
        }
    )
    assert expected_role(parsed) == "merger"
    assert parsed.labels == ("status:ready",)
    assert parsed.created_at == datetime(2026, 1, 1, tzinfo=UTC)


def test_null_fields_take_their_documented_defaults() -> None:
    # What a tracker export writes for fields it has no value for.
    nulls = dict.fromkeys(CANDIDATE_FIELDS - {"kind", "number"})
    parsed = candidate_from_mapping({"kind": "issue", "number": 4, **nulls})
    assert parsed == Candidate(kind="issue", number=4)
    assert (parsed.state, parsed.priority, parsed.blocked) == ("open", 0, False)
    assert parsed.labels == ()


def test_null_signals_route_like_absent_ones() -> None:
    with_nulls = candidates_from_mappings(
        [
            {"kind": "issue", "number": 1, "priority": None, "state": None, "blocked": None},
            {"kind": "issue", "number": 2, "priority": 5},
        ]
    )
    routing = route(with_nulls, role="author", session_id="s-1", terminal_pr=None, holders={})
    assert routing.selected is not None
    assert routing.selected.number == 2
    assert routing.skipped == ()


@pytest.mark.parametrize("field", ["kind", "number"])
def test_null_kind_or_number_is_still_refused(field: str) -> None:
    with pytest.raises(ControlPlaneRefusal):
        candidate_from_mapping({"kind": "issue", "number": 1, field: None})


@pytest.mark.parametrize(
    "raw",
    [
        {"kind": "sentry_incident", "number": 1},
        {"kind": "issue", "number": 0},
        {"kind": "issue", "number": "1"},
        {"kind": "issue", "number": 1, "blokced": True},
        {"kind": "issue", "number": 1, "blocked": "yes"},
        {"kind": "issue", "number": 1, "labels": "status:ready"},
        {"kind": "issue", "number": 1, "state": "reopened"},
        {"kind": "issue", "number": 1, "created_at": "yesterday"},
    ],
)
def test_bad_candidates_are_refused(raw: dict[str, Any]) -> None:
    with pytest.raises(ControlPlaneRefusal):
        candidate_from_mapping(raw)


def test_incidents_cannot_be_candidates_even_when_built_directly() -> None:
    with pytest.raises(ControlPlaneRefusal) as refused:
        Candidate(kind="sentry_incident", number=1)
    assert refused.value.code == "invalid_work_kind"


def test_duplicate_candidates_are_refused() -> None:
    with pytest.raises(ControlPlaneRefusal, match="twice"):
        candidates_from_mappings([{"kind": "issue", "number": 1}, {"kind": "issue", "number": 1}])


def test_next_command_names_the_item() -> None:
    assert "#3" in next_command("merger", pr(3))
    assert "issue #4" in next_command("author", issue(4))


# --- invariants -----------------------------------------------------------------------------

_ROLES = ("author", "reviewer", "merger", "controller", "reconciler")
_candidate = st.builds(
    Candidate,
    kind=st.sampled_from(("issue", "pr")),
    number=st.integers(min_value=1, max_value=12),
    state=st.sampled_from(("open", "open", "closed", "merged")),
    priority=st.integers(min_value=0, max_value=3),
    head_sha=st.sampled_from((SHA, None)),
    request_changes_current_head=st.booleans(),
    approval_on_current_head=st.booleans(),
    approval_stale=st.booleans(),
    approval_contaminated=st.booleans(),
    mergeable=st.booleans(),
    blocked=st.booleans(),
    dependency_unmet=st.booleans(),
)


@given(
    candidates=st.lists(_candidate, max_size=8, unique_by=lambda c: c.key),
    role=st.sampled_from(_ROLES),
    terminal_pr=st.sampled_from((None, 1, 2)),
    held=st.dictionaries(
        st.tuples(st.sampled_from(("issue", "pr")), st.integers(1, 12)),
        st.sampled_from(("me", "other")),
        max_size=6,
    ),
)
def test_routing_invariants(
    candidates: list[Candidate],
    role: str,
    terminal_pr: int | None,
    held: dict[tuple[str, int], str],
) -> None:
    routing = route(candidates, role=role, session_id="me", terminal_pr=terminal_pr, holders=held)
    skipped = {(s.kind, s.number) for s in routing.skipped}
    assert len(skipped) == len(routing.skipped)  # nobody is skipped twice
    assert skipped <= {c.key for c in candidates}
    chosen = routing.selected
    if routing.kind == "none":
        assert chosen is None
        assert skipped == {c.key for c in candidates}
        return
    assert chosen is not None
    assert chosen.key not in skipped
    # Whatever is chosen is safe for this role: never terminal, blocked or mis-routed.
    assert skip_reason(chosen, role=role, terminal_pr=terminal_pr) is None
    if routing.kind == "assign":
        assert chosen.key not in held
    elif routing.kind == "resume":
        assert held[chosen.key] == "me"
    else:
        assert held[chosen.key] == "other"
        assert routing.owner_session_id == "other"
