"""Which profile may run which task: operation grants (forbidden wins) and role kinds."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "OP_LEASE",
    "OP_READ",
    "OP_RETIRE",
    "Decision",
    "Profile",
    "TaskRule",
    "decide_rule",
]

OP_READ = "gitea.read"
OP_RETIRE = "gitea.worker_registry.retire"
OP_LEASE = "gitea.workflow.lease"


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


def _operation_granted(profile: Profile, operation: str) -> bool:
    if operation in profile.forbidden_operations:
        return False
    return operation in profile.allowed_operations


def decide_rule(profile: Profile | None, task: str, rule: TaskRule | None) -> Decision:
    """Allowed only for a known task (``rule``), a granted (not forbidden) operation and a
    fitting role. The table of rules is the operations' (``supervisor.operations``)."""
    # One verdict, whatever refuses: an unknown task, no profile, or what the profile lacks.
    operation = rule.operation if rule else None
    roles = tuple(sorted(rule.roles)) if rule else ()
    missing: str | None = None
    role_denied = False
    reasons: list[str] = []
    if rule is None:
        reasons.append(f"unknown task {task!r}")
    elif profile is None:
        missing, role_denied = rule.operation, True
        reasons.append("no authenticated profile")
    else:
        if not _operation_granted(profile, rule.operation):
            missing = rule.operation
            state = "forbidden" if missing in profile.forbidden_operations else "not granted"
            reasons.append(f"operation {missing!r} is {state} for profile {profile.name!r}")
        if profile.role_kind not in rule.roles:
            role_denied = True
            reasons.append(f"role kind {profile.role_kind!r} is not one of {list(roles)}")
    return Decision(
        allowed=not reasons,
        task=task,
        profile=profile.name if profile else None,
        role_kind=profile.role_kind if profile else None,
        required_operation=operation,
        required_roles=roles,
        missing_operation=missing,
        role_denied=role_denied,
        reason="; ".join(reasons) or "allowed",
    )
