"""What the retirement actor answers besides plans: refusals, orphan fields and the
post-apply fleet view."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from supervisor.policy.fleet.orphans import OrphanFinding, orphan_dict
from supervisor.policy.fleet.snapshot import FleetSnapshot
from supervisor.policy.refusal import refused
from supervisor.policy.render import finding_dict

__all__ = [
    "Refused",
    "orphan_fields",
    "post_apply_view",
    "refusal",
]


def post_apply_view(
    registry_fingerprint: str, snap: FleetSnapshot, result: Mapping[str, Any]
) -> dict[str, Any]:
    """The fleet after an apply, reporting what still blocks instead of claiming safety."""
    retired = {str(r.get("worker_identity")) for r in result.get("retired") or []}
    return {
        "available": True,
        "registry_fingerprint": registry_fingerprint,
        "live_worker_count": snap.live_worker_count,
        "stale_worker_count": snap.stale_worker_count,
        "historical_worker_count": snap.historical_worker_count,
        "retired_still_counted_live": sorted(
            str(w.worker_identity) for w in snap.live_workers if w.worker_identity in retired
        ),
        "retired_still_counted_stale": sorted(
            str(w.worker_identity) for w in snap.stale_workers if w.worker_identity in retired
        ),
        "live_fleet_safe": snap.live_fleet_safe,
        "remaining_blockers": [finding_dict(f) for f in snap.active_blockers],
        "note": "retiring stale rows does not repair untrusted live identity; "
        "remaining blockers are reported as they are",
    }


class Refused(Exception):
    """A gate before the transaction said no; carries the structured refusal."""

    def __init__(self, result: dict[str, Any]) -> None:
        super().__init__(result.get("reasons"))
        self.result = result


def refusal(code: str, reason: str, **extra: Any) -> dict[str, Any]:
    """A structured refusal: nothing was changed, why, and its stable ``code``."""
    return refused(code, reason, retired_count=0, **extra)


def orphan_fields(orphans: Sequence[OrphanFinding]) -> dict[str, Any]:
    """The orphaned-worker finding as the keys a snapshot or plan answer carries."""
    return {
        "orphaned_workers": [orphan_dict(o) for o in orphans],
        "orphaned_worker_count": len(orphans),
    }
