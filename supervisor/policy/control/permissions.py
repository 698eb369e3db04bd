"""Which profile may run which task: operation grants (forbidden wins) and role kinds."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

__all__ = [
    "OP_LEASE",
    "OP_READ",
    "OP_RETIRE",
    "TASKS",
    "Decision",
    "Profile",
    "TaskRule",
    "decide",
]

OP_READ = "gitea.read"
OP_RETIRE = "gitea.worker_registry.retire"
OP_LEASE = "gitea.workflow.lease"

_OPERATOR_ROLES = frozenset({"controller", "reconciler"})
_ALL_ROLES = frozenset({*_OPERATOR_ROLES, "author", "reviewer", "merger"})


@dataclass(frozen=True, slots=True, kw_only=True)
class Profile:
    """A named set of grants; secrets never live here."""

    name: str
    role_kind: str
    allowed_operations: frozenset[str] = frozenset()
    forbidden_operations: frozenset[str] = frozenset()


@dataclass(frozen=True, slots=True, kw_only=True)
class TaskRule:
    operation: str
    roles: frozenset[str]


@dataclass(frozen=True, slots=True, kw_only=True)
class Decision:
    """``allowed`` plus, when refused, exactly what was missing."""

    allowed: bool
    task: str
    profile: str | None
    role_kind: str | None
    required_operation: str | None
    required_roles: tuple[str, ...]
    missing_operation: str | None
    role_denied: bool
    reason: str


#: Retiring is a mutation and needs its own operation: a profile that can look
#: must not thereby be able to destroy. No shipped profile holds it.
TASKS: Mapping[str, TaskRule] = {
    "snapshot": TaskRule(operation=OP_READ, roles=_OPERATOR_ROLES),
    "plan": TaskRule(operation=OP_READ, roles=_OPERATOR_ROLES),
    "apply": TaskRule(operation=OP_RETIRE, roles=_OPERATOR_ROLES),
    "status": TaskRule(operation=OP_READ, roles=_ALL_ROLES),
    # Control plane. Looking (a dry-run allocation, the mutation gate, the terminal
    # lock) needs gitea.read like any read; taking or changing a lease needs the lease
    # operation. Any role may ask the allocator for its own work; assigning a named
    # item directly bypasses routing, so only the operator roles may.
    "allocate_preview": TaskRule(operation=OP_READ, roles=_ALL_ROLES),
    "allocate_apply": TaskRule(operation=OP_LEASE, roles=_ALL_ROLES),
    "assignment_check": TaskRule(operation=OP_READ, roles=_ALL_ROLES),
    "lease_assign": TaskRule(operation=OP_LEASE, roles=_OPERATOR_ROLES),
    "lease_heartbeat": TaskRule(operation=OP_LEASE, roles=_ALL_ROLES),
    "lease_release": TaskRule(operation=OP_LEASE, roles=_ALL_ROLES),
    "session_upsert": TaskRule(operation=OP_LEASE, roles=_ALL_ROLES),
    "work_item_upsert": TaskRule(operation=OP_LEASE, roles=_ALL_ROLES),
    "terminal_lock_read": TaskRule(operation=OP_READ, roles=_ALL_ROLES),
    "terminal_lock_set": TaskRule(
        operation=OP_LEASE, roles=frozenset({*_OPERATOR_ROLES, "reviewer"})
    ),
    # Any session may report and read its own namespace health. An incident link is
    # written by the monitoring bridge, an operator boundary; anyone may read it.
    "namespace_health_assess": TaskRule(operation=OP_READ, roles=_ALL_ROLES),
    "namespace_health_gate": TaskRule(operation=OP_READ, roles=_ALL_ROLES),
    "incident_link_upsert": TaskRule(operation=OP_LEASE, roles=_OPERATOR_ROLES),
    "incident_link_read": TaskRule(operation=OP_READ, roles=_ALL_ROLES),
}


def _operation_granted(profile: Profile, operation: str) -> bool:
    if operation in profile.forbidden_operations:
        return False
    return operation in profile.allowed_operations


def decide(profile: Profile | None, task: str) -> Decision:
    """Allowed only for a known task, a granted (not forbidden) operation and a fitting role."""
    rule = TASKS.get(task)
    if rule is None:
        return Decision(
            allowed=False,
            task=task,
            profile=profile.name if profile else None,
            role_kind=profile.role_kind if profile else None,
            required_operation=None,
            required_roles=(),
            missing_operation=None,
            role_denied=False,
            reason=f"unknown task {task!r}",
        )
    roles = tuple(sorted(rule.roles))
    if profile is None:
        return Decision(
            allowed=False,
            task=task,
            profile=None,
            role_kind=None,
            required_operation=rule.operation,
            required_roles=roles,
            missing_operation=rule.operation,
            role_denied=True,
            reason="no authenticated profile",
        )
    missing = None if _operation_granted(profile, rule.operation) else rule.operation
    role_denied = profile.role_kind not in rule.roles
    reasons = []
    if missing:
        state = "forbidden" if missing in profile.forbidden_operations else "not granted"
        reasons.append(f"operation {missing!r} is {state} for profile {profile.name!r}")
    if role_denied:
        reasons.append(f"role kind {profile.role_kind!r} is not one of {list(roles)}")
    return Decision(
        allowed=not reasons,
        task=task,
        profile=profile.name,
        role_kind=profile.role_kind,
        required_operation=rule.operation,
        required_roles=roles,
        missing_operation=missing,
        role_denied=role_denied,
        reason="; ".join(reasons) or "allowed",
    )
