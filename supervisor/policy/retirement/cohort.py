"""Daemon-cohort uniqueness: is worker ownership contested anywhere in the active fleet?"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from supervisor.policy.canonical import canon
from supervisor.policy.evidence import EvidenceMap, evidence_for
from supervisor.policy.fleet.liveness import STATUS_ACTIVE, pid_evidence_applies

__all__ = [
    "BLOCKER_CONTESTED_GENERATION",
    "BLOCKER_REUSED_IDENTITY",
    "CohortVerdict",
    "classify_cohort",
]

BLOCKER_REUSED_IDENTITY = "worker_identity_reused"
BLOCKER_CONTESTED_GENERATION = "generation_contested"


@dataclass(frozen=True, slots=True, kw_only=True)
class CohortVerdict:
    """``blocked`` means ownership is contested fleet-wide, so no row may be retired."""

    blocked: bool
    blocker_kind: str | None
    reasons: tuple[str, ...]
    duplicate_identities: tuple[str, ...]
    contested_generations: tuple[str, ...]
    blocked_worker_identities: tuple[str, ...]


def classify_cohort(
    rows: Iterable[Mapping[str, Any]],
    *,
    evidence: EvidenceMap,
    current_host_id: str | None = None,
) -> CohortVerdict:
    """Active rows only: a reused worker identity, or one generation claimed by possibly
    running workers across namespaces or instances, contests ownership."""
    active = [row for row in rows if str(row.get("status") or "") == STATUS_ACTIVE]
    identities = Counter(canon(row.get("worker_identity")) for row in active)
    duplicates = sorted(i for i, n in identities.items() if i and n > 1)

    by_generation: dict[str, list[Mapping[str, Any]]] = defaultdict(list)
    for row in active:
        generation = canon(row.get("generation_id"))
        # A row whose pid is known dead cannot contest anything any more; a
        # local probe says nothing about another host's pid, so those rows
        # count as possibly running.
        local = pid_evidence_applies(row, current_host_id)
        if generation and (not local or evidence_for(row, evidence).alive is not False):
            by_generation[generation].append(row)
    contested: list[str] = []
    for generation, members in sorted(by_generation.items()):
        if len(members) < 2:
            continue
        namespaces = Counter(canon(m.get("namespace")) for m in members)
        instances = {canon(m.get("client_instance_id")) for m in members}
        if any(n > 1 for n in namespaces.values()) or len(instances) > 1:
            contested.append(generation)

    blocked_ids = sorted(
        {
            canon(row.get("worker_identity"))
            for row in active
            if canon(row.get("worker_identity")) in duplicates
            or canon(row.get("generation_id")) in contested
        }
    )
    reasons: list[str] = []
    if duplicates:
        reasons.append(f"worker identities reused across active rows: {duplicates}")
    if contested:
        reasons.append(f"generations claimed by more than one possibly running worker: {contested}")
    kind = None
    if duplicates:
        kind = BLOCKER_REUSED_IDENTITY
    elif contested:
        kind = BLOCKER_CONTESTED_GENERATION
    return CohortVerdict(
        blocked=bool(reasons),
        blocker_kind=kind,
        reasons=tuple(reasons),
        duplicate_identities=tuple(duplicates),
        contested_generations=tuple(contested),
        blocked_worker_identities=tuple(blocked_ids),
    )
