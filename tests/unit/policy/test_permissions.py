"""Who may snapshot, plan and apply: operation grants (forbidden wins) and role kinds."""

from __future__ import annotations

import itertools

import pytest

from supervisor.operations.registry import TASKS, decide
from supervisor.policy.control.permissions import OP_READ, OP_RETIRE, Profile
from supervisor.policy.identity.worker_env import NAMESPACES

OPERATOR_ROLES = {"controller", "reconciler"}


def _profile(role: str, *, retire: bool) -> Profile:
    allowed = {OP_READ, OP_RETIRE} if retire else {OP_READ}
    return Profile(name=f"fleet-{role}", role_kind=role, allowed_operations=frozenset(allowed))


MATRIX = list(itertools.product(NAMESPACES, (False, True), ("snapshot", "plan", "apply")))


@pytest.mark.parametrize(("role", "retire", "task"), MATRIX)
def test_permission_matrix(role: str, retire: bool, task: str) -> None:
    decision = decide(_profile(role, retire=retire), task)
    role_ok = role in OPERATOR_ROLES
    operation_ok = task != "apply" or retire
    assert decision.allowed is (role_ok and operation_ok)
    assert decision.role_denied is (not role_ok)
    expected_operation = OP_RETIRE if task == "apply" else OP_READ
    assert decision.required_operation == expected_operation
    assert decision.missing_operation == (None if operation_ok else OP_RETIRE)
    assert decision.required_roles == ("controller", "reconciler")
    assert decision.profile == f"fleet-{role}"
    assert decision.role_kind == role
    if decision.allowed:
        assert decision.reason == "allowed"
    else:
        assert decision.reason != "allowed"


def test_reader_cannot_apply_on_the_permission_itself() -> None:
    # A controller that can look cannot thereby destroy.
    decision = decide(_profile("controller", retire=False), "apply")
    assert not decision.allowed
    assert not decision.role_denied
    assert decision.missing_operation == OP_RETIRE
    assert "not granted" in decision.reason


def test_author_granted_retire_is_still_refused_by_role() -> None:
    decision = decide(_profile("author", retire=True), "apply")
    assert not decision.allowed
    assert decision.role_denied
    assert decision.missing_operation is None
    assert "role kind 'author'" in decision.reason


def test_author_without_grant_names_both_failures() -> None:
    decision = decide(_profile("author", retire=False), "apply")
    assert decision.missing_operation == OP_RETIRE
    assert decision.role_denied
    assert "not granted" in decision.reason
    assert "role kind" in decision.reason


@pytest.mark.parametrize("operation", [OP_READ, OP_RETIRE])
def test_forbidden_wins_over_allowed(operation: str) -> None:
    profile = Profile(
        name="fleet-reconciler",
        role_kind="reconciler",
        allowed_operations=frozenset({OP_READ, OP_RETIRE}),
        forbidden_operations=frozenset({operation}),
    )
    task = "apply" if operation == OP_RETIRE else "plan"
    decision = decide(profile, task)
    assert not decision.allowed
    assert decision.missing_operation == operation
    assert "forbidden" in decision.reason
    # Forbidding one operation leaves the other intact.
    other = "plan" if task == "apply" else "apply"
    assert decide(profile, other).allowed


def test_unknown_task_is_refused() -> None:
    decision = decide(_profile("controller", retire=True), "delete_everything")
    assert not decision.allowed
    assert decision.required_operation is None
    assert decision.required_roles == ()
    assert "unknown task" in decision.reason
    assert decision.profile == "fleet-controller"


def test_no_profile_is_refused() -> None:
    decision = decide(None, "plan")
    assert not decision.allowed
    assert decision.profile is None
    assert decision.role_kind is None
    assert decision.missing_operation == OP_READ
    assert decision.reason == "no authenticated profile"


def test_unknown_task_without_profile() -> None:
    decision = decide(None, "nope")
    assert not decision.allowed
    assert decision.profile is None


def test_empty_profile_holds_nothing() -> None:
    decision = decide(Profile(name="bare", role_kind="controller"), "snapshot")
    assert not decision.allowed
    assert decision.missing_operation == OP_READ


@pytest.mark.parametrize("role", sorted({*NAMESPACES}))
def test_status_is_open_to_every_namespace_role(role: str) -> None:
    assert decide(_profile(role, retire=False), "status").allowed


def test_apply_needs_its_own_operation() -> None:
    assert TASKS["apply"].operation == OP_RETIRE != TASKS["plan"].operation
    assert TASKS["snapshot"].operation == OP_READ
