"""The control-plane tests' profiles: lease grants per role, and one that may only look."""

from __future__ import annotations

from supervisor.policy.control.permissions import OP_LEASE, OP_READ, Profile

__all__ = [
    "AUTHOR_P",
    "CONTROLLER_P",
    "CONTROL_PROFILES",
    "LOOKER_P",
    "MERGER_P",
    "RECONCILER_P",
    "REVIEWER_P",
]

_LEASE = frozenset({OP_READ, OP_LEASE})
CONTROLLER_P = Profile(name="cp-controller", role_kind="controller", allowed_operations=_LEASE)
RECONCILER_P = Profile(name="cp-reconciler", role_kind="reconciler", allowed_operations=_LEASE)
AUTHOR_P = Profile(name="cp-author", role_kind="author", allowed_operations=_LEASE)
REVIEWER_P = Profile(name="cp-reviewer", role_kind="reviewer", allowed_operations=_LEASE)
MERGER_P = Profile(name="cp-merger", role_kind="merger", allowed_operations=_LEASE)
#: Can look (preview, gate, lock) but not take a lease.
LOOKER_P = Profile(name="cp-looker", role_kind="author", allowed_operations=frozenset({OP_READ}))

#: Every profile above: the harness's profile source knows them, as a daemon's profiles
#: file knows every token's profile, so the writer's re-read of a grant finds them.
CONTROL_PROFILES = (CONTROLLER_P, RECONCILER_P, AUTHOR_P, REVIEWER_P, MERGER_P, LOOKER_P)
