"""Every retirement reason code and outcome, named once."""

from __future__ import annotations

__all__ = [
    "OUTCOMES",
    "OUTCOME_ALREADY_RETIRED",
    "OUTCOME_APPLIED",
    "OUTCOME_CANDIDATES_MOVED",
    "OUTCOME_CANDIDATE_SUBSET",
    "OUTCOME_MASS_GUARD",
    "OUTCOME_NOTHING_REQUESTED",
    "OUTCOME_PLANNED",
    "OUTCOME_REFUSED",
    "OUTCOME_REGISTRY_MOVED",
    "OUTCOME_SCOPE_MOVED",
    "OUTCOME_TRANSACTION_FAILED",
    "PLAN_REASON_CODES",
    "REASON_ALREADY_TERMINAL",
    "REASON_AMBIGUOUS_OWNERSHIP",
    "REASON_BOOT_UNKNOWN",
    "REASON_CONFLICTING_IDENTITY",
    "REASON_ELIGIBLE",
    "REASON_FOREIGN_REPOSITORY",
    "REASON_HEARTBEAT_FRESH",
    "REASON_HOST_UNPROVEN",
    "REASON_INCOMPLETE_IDENTITY",
    "REASON_INSTANCE_CONFLICT",
    "REASON_LIVENESS_REPROBE",
    "REASON_NOT_IN_PLAN",
    "REASON_PID_ALIVE",
    "REASON_PID_REUSED",
    "REASON_PID_UNKNOWN",
    "REASON_PROTECTED_OWNER",
    "REASON_ROW_CHANGED",
    "REASON_ROW_MISSING",
    "REASON_UNPARSABLE_HEARTBEAT",
    "REASON_UNTRUSTED_PROVENANCE",
    "REASON_WORKER_LIVE",
]

REASON_ELIGIBLE = "eligible_stale_orphan"
REASON_CONFLICTING_IDENTITY = "conflicting_identity_evidence"
REASON_ALREADY_TERMINAL = "already_terminal_registration"
REASON_INCOMPLETE_IDENTITY = "incomplete_registry_identity"
REASON_UNPARSABLE_HEARTBEAT = "unparsable_heartbeat"
REASON_WORKER_LIVE = "worker_live"
REASON_PID_UNKNOWN = "pid_liveness_unknown"
REASON_PID_REUSED = "pid_reuse_detected"
REASON_PID_ALIVE = "pid_alive"
REASON_HEARTBEAT_FRESH = "heartbeat_not_expired"
REASON_AMBIGUOUS_OWNERSHIP = "ambiguous_ownership_state"
REASON_FOREIGN_REPOSITORY = "repository_binding_ambiguous"
REASON_PROTECTED_OWNER = "protected_active_workflow_owner"
REASON_INSTANCE_CONFLICT = "client_instance_conflict"
REASON_UNTRUSTED_PROVENANCE = "untrusted_identity_provenance"
REASON_HOST_UNPROVEN = "host_binding_unproven"
REASON_BOOT_UNKNOWN = "boot_identity_unknown"

#: Every code a plan entry can carry (a plan listing can be filtered by one).
PLAN_REASON_CODES = frozenset(
    {
        REASON_ELIGIBLE,
        REASON_CONFLICTING_IDENTITY,
        REASON_ALREADY_TERMINAL,
        REASON_INCOMPLETE_IDENTITY,
        REASON_UNPARSABLE_HEARTBEAT,
        REASON_WORKER_LIVE,
        REASON_PID_UNKNOWN,
        REASON_PID_REUSED,
        REASON_PID_ALIVE,
        REASON_HEARTBEAT_FRESH,
        REASON_AMBIGUOUS_OWNERSHIP,
        REASON_FOREIGN_REPOSITORY,
        REASON_PROTECTED_OWNER,
        REASON_INSTANCE_CONFLICT,
        REASON_UNTRUSTED_PROVENANCE,
        REASON_HOST_UNPROVEN,
        REASON_BOOT_UNKNOWN,
    }
)

# Per-target reasons that only apply can produce.
REASON_ROW_MISSING = "registration_missing"
REASON_NOT_IN_PLAN = "not_in_current_plan"
REASON_ROW_CHANGED = "row_changed_since_plan"
REASON_LIVENESS_REPROBE = "liveness_reprobe_refused"

OUTCOME_PLANNED = "planned"
OUTCOME_APPLIED = "applied"
OUTCOME_REGISTRY_MOVED = "registry_revision_moved"
OUTCOME_SCOPE_MOVED = "scope_moved"
OUTCOME_CANDIDATES_MOVED = "candidate_set_moved"
#: The request left out candidates of the plan its tokens came from.
OUTCOME_CANDIDATE_SUBSET = "candidate_subset_requested"
OUTCOME_ALREADY_RETIRED = "already_retired"
OUTCOME_NOTHING_REQUESTED = "nothing_requested"
OUTCOME_TRANSACTION_FAILED = "transaction_failed"
OUTCOME_MASS_GUARD = "mass_retirement_guard"
#: A gate before the transaction refused (permission, evidence, cohort).
OUTCOME_REFUSED = "refused"

OUTCOMES = frozenset(
    {
        OUTCOME_PLANNED,
        OUTCOME_APPLIED,
        OUTCOME_REGISTRY_MOVED,
        OUTCOME_SCOPE_MOVED,
        OUTCOME_CANDIDATES_MOVED,
        OUTCOME_CANDIDATE_SUBSET,
        OUTCOME_ALREADY_RETIRED,
        OUTCOME_NOTHING_REQUESTED,
        OUTCOME_TRANSACTION_FAILED,
        OUTCOME_MASS_GUARD,
        OUTCOME_REFUSED,
    }
)
