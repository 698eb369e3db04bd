"""JSON-ready views of policy results for the surfaces (plain dicts, lists, str, numbers, bools)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .control.permissions import Decision
from .flat import flat, flat_dict
from .fleet.findings import Finding, InstanceGroup
from .fleet.liveness import Liveness
from .fleet.snapshot import FleetSnapshot
from .fleet.worker_view import WorkerView
from .identity.instance import InstanceIdentity
from .retirement.pages import PageQuery
from .retirement.plan import Entries, PlanEntry, ProtectedOwners, RetirementPlan
from .retirement.reasons import OUTCOME_PLANNED

__all__ = [
    "decision_dict",
    "entry_dict",
    "finding_dict",
    "owners_dict",
    "plan_dict",
    "plan_view_dict",
    "snapshot_dict",
    "worker_dict",
]


def entry_dict(entry: PlanEntry) -> dict[str, Any]:
    evidence = entry.evidence
    return {
        "worker_identity": entry.worker_identity,
        "reason_code": entry.reason_code,
        "detail": entry.detail,
        # The planner builds a fresh dict per entry per plan and nothing writes to
        # it afterwards, so the view shares it: a copy per row was a tenth of a
        # 10k-row plan's memory peak.
        "evidence": evidence if type(evidence) is dict else dict(evidence),
    }


def owners_dict(owners: ProtectedOwners) -> dict[str, Any]:
    return {
        "worker_identities": sorted(owners.worker_identities),
        "session_ids": sorted(owners.session_ids),
        "pids": sorted(owners.pids),
    }


def plan_dict(plan: RetirementPlan, *, with_preserved: bool = True) -> dict[str, Any]:
    """The plan in the customer's field names, plus the scoped token."""
    data = {
        "success": True,
        "read_only": True,
        "mutation_performed": False,
        "outcome": OUTCOME_PLANNED,
        "registry_fingerprint": plan.registry_fingerprint,
        "candidate_fingerprint": plan.candidate_fingerprint,
        "scope_fingerprint": plan.scope_fingerprint,
        "assessed_count": plan.assessed_count,
        "candidate_count": len(plan.candidates),
        "preserved_count": plan.preserved_count,
        "candidate_worker_identities": list(plan.candidate_worker_identities),
        "candidates": [entry_dict(e) for e in plan.candidates],
        "preserved": [entry_dict(e) for e in plan.preserved] if with_preserved else [],
        "preserved_reason_counts": dict(plan.preserved_reason_counts),
        "protected_inputs": owners_dict(plan.protected),
        "canonical_repository": plan.canonical_repository,
        "fencing_context": {
            "current_host_id": plan.fencing.host_id,
            "current_boot_id": plan.fencing.boot_id,
        },
    }
    if not with_preserved:
        del data["preserved"]
    return data


def _example(entry: PlanEntry) -> dict[str, Any]:
    return {"worker_identity": entry.worker_identity, "detail": entry.detail}


def plan_view_dict(
    plan: RetirementPlan,
    query: PageQuery,
    *,
    listed: Sequence[PlanEntry] | None = None,
    next_cursor: str | None = None,
    extra_examples: Sequence[PlanEntry] = (),
) -> dict[str, Any]:
    """The plan as a caller reads it: tokens, counts and candidates in full; preserved
    rows as counts per reason code with the first ``query.examples`` of each, plus
    the ``listed`` page of full entries when the query asked for one.

    ``extra_examples`` are entries of rows the plan counted without listing
    (historical rows), in identity order.
    """
    data = plan_dict(plan, with_preserved=False)
    wanted = max(0, query.examples)
    preserved = plan.preserved
    examples: dict[str, list[PlanEntry]] = (
        preserved.first_by_reason(wanted)
        if isinstance(preserved, Entries)
        else Entries.of(preserved).first_by_reason(wanted)
    )
    for entry in extra_examples:
        held = examples.setdefault(entry.reason_code, [])
        held.append(entry)
    data["preserved_summary"] = [
        {
            "reason_code": code,
            "count": count,
            "examples": [
                _example(e)
                for e in sorted(examples.get(code, ()), key=lambda e: e.worker_identity or "")[
                    :wanted
                ]
            ],
        }
        for code, count in plan.preserved_reason_counts.items()
    ]
    if listed is not None:
        data["preserved"] = [entry_dict(e) for e in listed]
        data["next_cursor"] = next_cursor
    data["listing"] = {
        "mode": "full" if query.full else ("page" if listed is not None else "summary"),
        "reason": query.reason,
        "namespace": query.namespace,
        "instance": query.instance,
        "limit": None if query.full else query.limit,
        "cursor": query.cursor,
        "examples_per_reason": query.examples,
    }
    return data


_WORKER = flat(WorkerView)
_IDENTITY = flat(InstanceIdentity)
_LIVENESS = flat(Liveness)


def worker_dict(view: WorkerView) -> dict[str, Any]:
    # The fields are scalars and two flat dataclasses: the same dict ``asdict``
    # builds, without its recursive deep copy (most of a 10k-row snapshot's time).
    data = dict(zip(_WORKER[0], _WORKER[1](view), strict=True))
    data["identity"] = dict(zip(_IDENTITY[0], _IDENTITY[1](view.identity), strict=True))
    data["liveness"] = dict(zip(_LIVENESS[0], _LIVENESS[1](view.liveness), strict=True))
    data["instance_id_provenance"] = view.identity.provenance
    data["instance_identity_trusted"] = view.identity.trusted
    return data


def finding_dict(finding: Finding) -> dict[str, Any]:
    return flat_dict(_FINDING, finding)


_FINDING = flat(Finding)
_GROUP = flat(InstanceGroup)
_DECISION = flat(Decision)


def _instance_dict(group: InstanceGroup) -> dict[str, Any]:
    # Flat fields (texts, flags, tuples of texts) but for one mapping, copied as it is.
    data = flat_dict(_GROUP, group)
    data["namespace_counts"] = dict(group.namespace_counts)
    return data


def snapshot_dict(snapshot: FleetSnapshot) -> dict[str, Any]:
    workers = [worker_dict(w) for w in snapshot.workers]
    # The partitions share the dicts of ``workers``: one view per row, listed again.
    live = [d for w, d in zip(snapshot.workers, workers, strict=True) if w.live]
    stale = [d for w, d in zip(snapshot.workers, workers, strict=True) if w.stale]
    historical = [d for w, d in zip(snapshot.workers, workers, strict=True) if w.historical]
    return {
        "success": True,
        "read_only": True,
        "mutation_performed": False,
        "snapshot_at": snapshot.snapshot_at,
        # Observation stamps (the customer's names for one value): they move on every
        # snapshot and are never accepted by apply as compare-and-swap tokens.
        "consistency_token": snapshot.consistency_token,
        "registry_revision": snapshot.consistency_token,
        "live_worker_count": snapshot.live_worker_count,
        "stale_worker_count": snapshot.stale_worker_count,
        "historical_worker_count": snapshot.historical_worker_count,
        "instance_count": len(snapshot.instances),
        "live_fleet_safe": snapshot.live_fleet_safe,
        "mutation_safe": snapshot.mutation_safe,
        "workers": workers,
        "live_workers": live,
        "stale_workers": stale,
        "historical_workers": historical,
        "instances": [_instance_dict(g) for g in snapshot.instances],
        "findings": [finding_dict(f) for f in snapshot.findings],
        "active_blockers": [finding_dict(f) for f in snapshot.active_blockers],
        "missing_expected_instance_ids": list(snapshot.missing_expected_instance_ids),
        "unmanifested_instance_ids": list(snapshot.unmanifested_instance_ids),
        "multi_instance_same_client_type": {
            k: list(v) for k, v in snapshot.multi_instance_same_client_type.items()
        },
        "same_client_type_not_duplicate": True,
        "reasons": [f.detail for f in snapshot.active_blockers],
    }


def decision_dict(decision: Decision) -> dict[str, Any]:
    return flat_dict(_DECISION, decision)
