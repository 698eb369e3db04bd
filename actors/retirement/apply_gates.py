"""Apply's refusals before any transaction: the token choice, the fencing and the cohort."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from actors.replies import LeaseOwners
from actors.retirement.records import Refused, refusal
from supervisor.policy.evidence import PidEvidence
from supervisor.policy.render import owners_dict
from supervisor.policy.retirement.apply_rules import TokenMode
from supervisor.policy.retirement.cohort import classify_cohort
from supervisor.policy.retirement.plan import FencingContext, RetirementPlan

__all__ = ["check_cohort", "check_fencing", "plan_actions", "token_of"]


def token_of(request: Any) -> tuple[TokenMode, str]:
    """The compare-and-swap mode and token: exactly one of the two must be given."""
    strict, scoped = request.registry_fingerprint, request.scope_fingerprint
    if bool(strict) == bool(scoped):
        raise Refused(
            refusal(
                "invalid_argument",
                "give exactly one of registry_fingerprint (strict) or scope_fingerprint",
            )
        )
    if strict:
        return "strict", strict
    assert scoped is not None
    return "scoped", scoped


def check_fencing(fencing: FencingContext) -> None:
    """Refuse when the supervisor's own host or boot cannot be established."""
    if not fencing.host_id or not fencing.boot_id:
        raise Refused(
            refusal(
                "identity_unknown",
                "the supervisor's own host or boot identity is unknown (fail closed)",
                fencing_context={"host_id": fencing.host_id, "boot_id": fencing.boot_id},
            )
        )


def check_cohort(
    active: Sequence[Mapping[str, Any]],
    evidence: Mapping[int, PidEvidence],
    host_id: str | None,
) -> None:
    """Refuse when daemon-cohort uniqueness fails: worker ownership is contested."""
    cohort = classify_cohort(active, evidence=evidence, current_host_id=host_id)
    if cohort.blocked:
        raise Refused(
            refusal(
                "cohort_contested",
                "daemon-cohort uniqueness failed; worker ownership is contested",
                blocker_kind=cohort.blocker_kind,
                cohort={
                    "reasons": list(cohort.reasons),
                    "duplicate_identities": list(cohort.duplicate_identities),
                    "contested_generations": list(cohort.contested_generations),
                    "blocked_worker_identities": list(cohort.blocked_worker_identities),
                },
            )
        )


def plan_actions(plan: RetirementPlan, owners: LeaseOwners) -> dict[str, Any]:
    """What a plan's answer says about the leases it protected and what to do next."""
    return {
        "protected_active_workflow_owners": {
            **owners_dict(owners.owners),
            "active_lease_count": owners.active_lease_count,
            "lease_fingerprint": owners.fingerprint,
        },
        "apply_tool": "gitea_apply_stale_worker_retirement",
        "exact_next_action": (
            "pass registry_fingerprint (or scope_fingerprint), candidate_fingerprint and "
            "candidate_worker_identities to apply"
            if plan.candidates
            else "no registration is conclusively stale; nothing to apply"
        ),
    }
