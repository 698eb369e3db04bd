"""The permission rules operations declare: which grant and which roles each task needs."""

from __future__ import annotations

from supervisor.policy.control.permissions import OP_LEASE, OP_READ, OP_RETIRE, TaskRule
from supervisor.policy.identity.worker_env import NAMESPACES

__all__ = [
    "ANY_LEASE",
    "ANY_READ",
    "OPERATOR_LEASE",
    "OPERATOR_READ",
    "OPERATOR_RETIRE",
    "REVIEW_LEASE",
]

_OPERATOR_ROLES = frozenset({"controller", "reconciler"})
_ALL_ROLES = frozenset(NAMESPACES)

# Looking needs gitea.read like any read; taking or changing a lease needs the lease
# operation. Retiring is a mutation and needs its own operation: a profile that can
# look must not thereby be able to destroy (no shipped profile holds it).
OPERATOR_READ = TaskRule(operation=OP_READ, roles=_OPERATOR_ROLES)
OPERATOR_RETIRE = TaskRule(operation=OP_RETIRE, roles=_OPERATOR_ROLES)
OPERATOR_LEASE = TaskRule(operation=OP_LEASE, roles=_OPERATOR_ROLES)
ANY_READ = TaskRule(operation=OP_READ, roles=_ALL_ROLES)
ANY_LEASE = TaskRule(operation=OP_LEASE, roles=_ALL_ROLES)
#: The terminal-review lock is set by whoever reviews: the operator roles and reviewers.
REVIEW_LEASE = TaskRule(operation=OP_LEASE, roles=frozenset({*_OPERATOR_ROLES, "reviewer"}))
