"""Control-plane policy: refused kinds, references, TTLs, assign decisions and the mutation gate."""

from __future__ import annotations

from typing import Any

import pytest

from supervisor.policy.control.decisions import (
    ASSIGN_GRANT,
    ASSIGN_NO_SAFE_WORK,
    ASSIGN_REFUSED,
    ASSIGN_RESUME,
    ASSIGN_WAIT,
    GATE_ACTION_FORBIDDEN,
    GATE_ACTION_NOT_ALLOWED,
    GATE_HEAD_UNPINNED,
    GATE_LEASE_EXPIRED,
    GATE_LEASE_NOT_ACTIVE,
    GATE_NO_ASSIGNMENT,
    GATE_OK,
    GATE_STALE_HEAD,
    GATE_TERMINAL,
    check_mutation,
    decide_assign,
    split_due,
)
from supervisor.policy.control.plane import (
    ROLE_ACTIONS,
    ControlPlaneRefusal,
    check_actions,
    check_kind,
    check_role,
    check_ttl,
    role_actions,
    work_ref,
)

NOW = "2026-11-30T12:00:00.000000Z"
LATER = "2026-11-30T12:15:00.000000Z"
EARLIER = "2026-11-30T11:00:00.000000Z"
PR = work_ref("prgs", "org", "repo", "pr", 7)
ISSUE = work_ref("prgs", "org", "repo", "issue", 8)


@pytest.mark.parametrize(
    "kind", ["sentry_incident", "glitchtip_incident", "incident", "sentry", "", None, 3]
)
def test_only_issues_and_prs_are_work(kind: object) -> None:
    with pytest.raises(ControlPlaneRefusal) as refused:
        check_kind(kind)
    assert refused.value.code == "invalid_work_kind"
    assert "issue" in refused.value.detail
    assert "pr" in refused.value.detail


def test_kinds_are_normalised() -> None:
    assert check_kind(" PR ") == "pr"
    assert check_kind("Issue") == "issue"


def test_work_ref_checks_the_kind_before_anything_else() -> None:
    with pytest.raises(ControlPlaneRefusal) as refused:
        work_ref("bad/remote", "org", "repo", "sentry_incident", -1)
    assert refused.value.code == "invalid_work_kind"


@pytest.mark.parametrize(
    ("remote", "org", "repo", "number"),
    [
        ("a/b", "org", "repo", 1),
        ("prgs", "o#g", "repo", 1),
        ("prgs", "org", "re:po", 1),
        ("prgs", "org", "", 1),
        ("prgs", "org", "repo", 0),
        ("prgs", "org", "repo", True),
    ],
)
def test_malformed_references_are_refused(remote: str, org: str, repo: str, number: Any) -> None:
    with pytest.raises(ControlPlaneRefusal) as refused:
        work_ref(remote, org, repo, "issue", number)
    assert refused.value.code == "invalid_work_ref"


def test_work_item_keys_are_distinct_per_kind_and_repository() -> None:
    keys = {
        work_ref("prgs", "org", "repo", "pr", 7).key,
        work_ref("prgs", "org", "repo", "issue", 7).key,
        work_ref("prgs", "org", "other", "pr", 7).key,
        work_ref("dade", "org", "repo", "pr", 7).key,
    }
    assert len(keys) == 4
    assert PR.key == "pr:prgs/org/repo#7"


@pytest.mark.parametrize("value", [0, -1, float("nan"), float("inf"), 10**400, "60", True])
def test_bad_ttls_are_refused(value: object) -> None:
    with pytest.raises(ControlPlaneRefusal) as refused:
        check_ttl(value, default=900.0, maximum=3600.0)
    assert refused.value.code == "invalid_ttl"


def test_ttl_default_and_bounds() -> None:
    assert check_ttl(None, default=900.0, maximum=3600.0) == 900.0
    assert check_ttl(3600, default=900.0, maximum=3600.0) == 3600.0
    with pytest.raises(ControlPlaneRefusal):
        check_ttl(3600.5, default=900.0, maximum=3600.0)


def test_roles_and_their_default_actions() -> None:
    assert set(ROLE_ACTIONS) == {"author", "reviewer", "merger", "controller", "reconciler"}
    for role, (allowed, forbidden) in ROLE_ACTIONS.items():
        assert not set(allowed) & set(forbidden), role
    assert "merge" in role_actions("merger")[0]
    assert "merge" in role_actions("author")[1]
    assert check_role(" Reviewer ") == "reviewer"
    with pytest.raises(ControlPlaneRefusal) as refused:
        check_role("janitor")
    assert refused.value.code == "role_ineligible"
    assert check_actions(["merge", "comment", "merge"], "allowed") == ("merge", "comment")
    with pytest.raises(ControlPlaneRefusal):
        check_actions(["Drop Table"], "allowed")


# --- assign decisions ----------------------------------------------------------------------------


def lease(
    session: str, *, expires: str = LATER, role: str = "author", **extra: Any
) -> dict[str, Any]:
    return {
        "lease_id": f"lease-{session}",
        "session_id": session,
        "status": "active",
        "role": role,
        "acquired_at": EARLIER,
        "expires_at": expires,
        **extra,
    }


def decide(
    *,
    ref: Any = ISSUE,
    session: str = "s1",
    role: str = "author",
    head: str | None = None,
    item: dict[str, Any] | None = None,
    leases: list[dict[str, Any]] | None = None,
) -> Any:
    return decide_assign(
        session_id=session,
        role=role,
        ref=ref,
        expected_head_sha=head,
        item=item,
        leases=leases or [],
        now_stamp=NOW,
    )


def test_a_free_item_is_granted() -> None:
    decision = decide()
    assert (decision.kind, decision.code) == (ASSIGN_GRANT, "assigned")
    assert decision.expire_lease_ids == ()


def test_a_pull_request_needs_a_head_pin() -> None:
    decision = decide(ref=PR)
    assert (decision.kind, decision.code) == (ASSIGN_REFUSED, "head_pin_required")
    assert "expected_head_sha" in decision.reason
    assert decide(ref=PR, head="abc").kind == ASSIGN_GRANT


@pytest.mark.parametrize("state", ["merged", "closed"])
def test_terminal_items_are_no_safe_work(state: str) -> None:
    decision = decide(ref=PR, head="abc", item={"state": state, "current_head_sha": "abc"})
    assert (decision.kind, decision.code) == (ASSIGN_NO_SAFE_WORK, GATE_TERMINAL)
    assert state in decision.reason


def test_a_head_that_moved_is_no_safe_work() -> None:
    decision = decide(ref=PR, head="old", item={"state": "open", "current_head_sha": "new"})
    assert (decision.kind, decision.code) == (ASSIGN_NO_SAFE_WORK, "head_moved")
    same = decide(ref=PR, head="new", item={"state": "open", "current_head_sha": "new"})
    assert same.kind == ASSIGN_GRANT


def test_another_sessions_live_lease_means_wait_naming_the_owner() -> None:
    decision = decide(session="s2", leases=[lease("s1")])
    assert decision.kind == ASSIGN_WAIT
    assert decision.owner_session_id == "s1"
    assert "s1" in decision.reason


def test_the_owner_asking_again_resumes_its_own_lease() -> None:
    decision = decide(session="s1", leases=[lease("s1")])
    assert decision.kind == ASSIGN_RESUME
    assert decision.lease is not None
    assert decision.lease["lease_id"] == "lease-s1"
    assert "owner-resume" in decision.reason


def test_the_owner_asking_under_another_role_is_refused() -> None:
    decision = decide(session="s1", role="reviewer", leases=[lease("s1")])
    assert (decision.kind, decision.code) == (ASSIGN_REFUSED, "role_mismatch")


def test_lapsed_leases_are_expired_and_do_not_block() -> None:
    decision = decide(session="s2", leases=[lease("s1", expires=NOW)])
    assert decision.kind == ASSIGN_GRANT
    assert decision.expire_lease_ids == ("lease-s1",)
    live, due = split_due([lease("a", expires=LATER), lease("b", expires=NOW)], NOW)
    assert [x["session_id"] for x in live] == ["a"]
    assert [x["session_id"] for x in due] == ["b"]


# --- the mutation gate ---------------------------------------------------------------------------


def assignment(**extra: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "assignment_id": "asn-1",
        "lease_id": "lease-s1",
        "session_id": "s1",
        "expected_head_sha": "h1",
        "allowed_actions": ("implement", "comment"),
        "forbidden_actions": ("merge",),
        "status": "active",
    }
    base.update(extra)
    return base


def gate(
    *,
    action: str = "implement",
    session: str = "s1",
    ref: Any = PR,
    item: dict[str, Any] | None = None,
    asn: dict[str, Any] | None = None,
    lease_row: dict[str, Any] | None = None,
    missing_assignment: bool = False,
) -> Any:
    return check_mutation(
        session_id=session,
        action=action,
        ref=ref,
        item=item if item is not None else {"state": "open", "current_head_sha": "h1"},
        assignment=None if missing_assignment else (asn or assignment()),
        lease=lease_row if lease_row is not None else lease("s1"),
        now_stamp=NOW,
    )


def test_the_gate_allows_a_covered_action() -> None:
    verdict = gate()
    assert (verdict.allowed, verdict.code) == (True, GATE_OK)


@pytest.mark.parametrize(
    ("kwargs", "code", "fragment"),
    [
        ({"missing_assignment": True}, GATE_NO_ASSIGNMENT, "no active assignment"),
        ({"lease_row": lease("s1", status="released")}, GATE_LEASE_NOT_ACTIVE, "released"),
        ({"lease_row": lease("s1", status="expired")}, GATE_LEASE_NOT_ACTIVE, "expired"),
        ({"lease_row": lease("s9")}, GATE_LEASE_NOT_ACTIVE, "another session"),
        ({"lease_row": lease("s1", expires=NOW)}, GATE_LEASE_EXPIRED, "expired"),
        ({"item": {"state": "merged", "current_head_sha": "h1"}}, GATE_TERMINAL, "terminal"),
        ({"item": {"state": "closed", "current_head_sha": "h1"}}, GATE_TERMINAL, "terminal"),
        ({"action": "merge"}, GATE_ACTION_FORBIDDEN, "forbidden"),
        ({"action": "approve"}, GATE_ACTION_NOT_ALLOWED, "not allowed"),
        ({"asn": assignment(expected_head_sha=None)}, GATE_HEAD_UNPINNED, "expected_head_sha pin"),
        ({"item": {"state": "open", "current_head_sha": "h2"}}, GATE_STALE_HEAD, "stale head"),
        ({"item": {"state": "open", "current_head_sha": None}}, GATE_STALE_HEAD, "stale head"),
    ],
)
def test_the_gate_fails_closed(kwargs: dict[str, Any], code: str, fragment: str) -> None:
    verdict = gate(**kwargs)
    assert verdict.allowed is False
    assert verdict.code == code
    assert fragment in verdict.reason


def test_an_unpinned_issue_assignment_is_fine() -> None:
    verdict = gate(
        ref=ISSUE,
        asn=assignment(expected_head_sha=None),
        item={"state": "open", "current_head_sha": None},
    )
    assert verdict.allowed
