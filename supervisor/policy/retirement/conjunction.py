"""One row's retirement verdict: the first requirement it fails, given its observations."""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from operator import attrgetter

from supervisor.policy.evidence import PidEvidence
from supervisor.policy.fleet.worker_view import OWNERSHIP_STALE

from .facts import PID_ALIVE_VERDICT, RowFacts, Verdict
from .moment import Moment
from .plan import ProtectedOwners
from .reasons import (
    REASON_AMBIGUOUS_OWNERSHIP,
    REASON_CONFLICTING_IDENTITY,
    REASON_FOREIGN_REPOSITORY,
    REASON_HEARTBEAT_FRESH,
    REASON_INSTANCE_CONFLICT,
    REASON_PID_REUSED,
    REASON_PID_UNKNOWN,
    REASON_PROTECTED_OWNER,
    REASON_WORKER_LIVE,
)

__all__ = ["FleetContext", "fleet_context", "row_verdict"]

# Verdicts without a row-specific detail are shared objects: one tuple per live row
# per plan was half a megabyte held at 10,000 rows.
_WORKER_LIVE = (REASON_WORKER_LIVE, "worker is live and must not be retired")
_HEARTBEAT_FRESH = (REASON_HEARTBEAT_FRESH, "heartbeat has not expired under its TTL")

_IDENTITY = attrgetter("worker_identity")
_SLOT = attrgetter("slot")


@dataclass(frozen=True, slots=True)
class FleetContext:
    """What a single row's verdict needs to know about the rest of the fleet.

    The sets are only read (membership and intersection), so an incremental
    planner may hand in the sets it keeps current itself.
    """

    owners: ProtectedOwners
    duplicate_identities: frozenset[str] | set[str]
    ambiguous_keys: Collection[tuple[str, str]]
    contested_slots: frozenset[tuple[str, str]] | set[tuple[str, str]]


def fleet_context(
    facts: Sequence[RowFacts],
    moment: Moment,
    ambiguous: frozenset[tuple[str, str]],
    owners: ProtectedOwners,
) -> FleetContext:
    """The fleet-wide sets, from scratch, for one plan's rows and observations."""
    identities = Counter(map(_IDENTITY, facts))
    slot_counts = Counter(map(_SLOT, facts))
    shared = {slot for slot, count in slot_counts.items() if slot is not None and count > 1}
    # Several dead rows on one (instance, namespace) slot are ordinary restart
    # history; the slot is only contested when one of them might be running.
    contested: set[tuple[str, str]] = set()
    if shared:
        for index, f in enumerate(facts):
            if f.slot in shared and (moment.live[index] or moment.probes[index].alive is None):
                contested.add(f.slot)  # type: ignore[arg-type]
    return FleetContext(
        owners=owners,
        duplicate_identities=frozenset(
            identity for identity, count in identities.items() if identity and count > 1
        ),
        ambiguous_keys=ambiguous,
        contested_slots=frozenset(contested),
    )


# Positional on purpose: the incremental planner maps it over parallel columns.
def row_verdict(  # noqa: PLR0917
    facts: RowFacts,
    probe: PidEvidence,
    live: bool,
    fresh: bool | None,
    ownership: str,
    fleet: FleetContext,
) -> Verdict:
    """The first requirement this row fails, in the specified order; ``None`` if eligible."""
    identity = facts.worker_identity
    if identity in fleet.duplicate_identities:
        return (
            REASON_CONFLICTING_IDENTITY,
            f"worker identity {identity!r} appears on more than one registry row",
        )
    if facts.static_verdict is not None:
        return facts.static_verdict
    if live:
        return _WORKER_LIVE
    if probe.alive is None:
        return (REASON_PID_UNKNOWN, f"pid {facts.pid} could not be probed; liveness unproven")
    if probe.alive:
        # A pid number is only comparable within one host and one boot.
        if (
            facts.same_incarnation_space
            and probe.start_time
            and probe.start_time != facts.process_start_time
        ):
            return (
                REASON_PID_REUSED,
                f"pid {facts.pid} is alive but started at {probe.start_time!r}, not the "
                f"registered {facts.process_start_time!r}: the number was reused",
            )
        # Absolute: even across a boot boundary an occupied pid is not argued away.
        return PID_ALIVE_VERDICT
    if fresh is not False:
        return _HEARTBEAT_FRESH
    if ownership != OWNERSHIP_STALE:
        return (
            REASON_AMBIGUOUS_OWNERSHIP,
            f"ownership state is {ownership!r}, not 'stale'",
        )
    if facts.repository_unfit:
        return (
            REASON_FOREIGN_REPOSITORY,
            "repository binding is absent or not the canonical repository",
        )
    held = fleet.ambiguous_keys
    shared = sorted(
        f"{name}={value}" for name, value in facts.conflict_keys if (name, value) in held
    )
    if shared:
        return (
            REASON_CONFLICTING_IDENTITY,
            f"identity evidence is shared with a live or unprobeable worker: {shared}",
        )
    hits = _protected_hits(facts, fleet.owners)
    if hits:
        return (
            REASON_PROTECTED_OWNER,
            f"worker still owns active workflow state: {hits}",
        )
    slot = (facts.client_instance_id or "", facts.namespace or "")
    if slot in fleet.contested_slots:
        return (
            REASON_INSTANCE_CONFLICT,
            f"another active row claims instance {facts.client_instance_id!r} in "
            f"namespace {facts.namespace!r} and may be running",
        )
    return facts.identity_proof


def _protected_hits(facts: RowFacts, owners: ProtectedOwners) -> list[str]:
    hits: list[str] = []
    if facts.worker_identity and facts.worker_identity in owners.worker_identities:
        hits.append(f"worker_identity={facts.worker_identity}")
    if facts.session_id and facts.session_id in owners.session_ids:
        hits.append(f"session_id={facts.session_id}")
    if facts.pid is not None and facts.pid in owners.pids:
        hits.append(f"pid={facts.pid}")
    return hits
