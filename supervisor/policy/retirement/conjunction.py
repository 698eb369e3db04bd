"""The retirement conjunction: a row is retired only when every requirement holds, in order.

A row's verdict is the first requirement it fails (its preserve reason), or
``None`` when it meets all of them (``eligible_stale_orphan``). In order:

====  ======================================================  ===============================
 #    requirement                                             preserve reason when it fails
====  ======================================================  ===============================
 1    its worker_identity is on no other row                  conflicting_identity_evidence
 2    status is ``active``                                    already_terminal_registration
 3    every field the conjunction reads is present            incomplete_registry_identity
 4    ``last_heartbeat_at`` parses as a UTC stamp             unparsable_heartbeat
 5    the worker is not live                                  worker_live
 6    the pid probe gave a definite answer                    pid_liveness_unknown
 7    the recorded process is gone (a reused pid is named)    pid_reuse_detected, pid_alive
 8    the heartbeat expired under its TTL                     heartbeat_not_expired
 9    ownership is exactly ``stale``                          ambiguous_ownership_state
10    repository binding present and canonical                repository_binding_ambiguous
11    no identity key shared with a live or unsettled row     conflicting_identity_evidence
12    not an owner of an active work lease                    protected_active_workflow_owner
13    no possibly running row claims its (instance, ns) slot  client_instance_conflict
14    launcher-minted instance, this host, a known boot       untrusted_identity_provenance,
                                                              host_binding_unproven,
                                                              boot_identity_unknown
====  ======================================================  ===============================

Requirements 2-4 and 14 read the row version alone, so ``row_facts`` settles
them once per version (``static_verdict``, ``identity_proof`` below); 1, 11 and
13 read the rest of the fleet (``FleetContext``); 5-9 read this plan's
observations (``moment.observe``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from datetime import datetime
from operator import attrgetter

from supervisor.policy.evidence import PidEvidence
from supervisor.policy.fleet.liveness import STATUS_ACTIVE
from supervisor.policy.fleet.worker_view import OWNERSHIP_STALE, RowColumns
from supervisor.policy.incarnation import same_incarnation

from .facts import RowFacts, Verdict
from .moment import Moment
from .plan import ProtectedOwners
from .reasons import (
    REASON_ALREADY_TERMINAL,
    REASON_AMBIGUOUS_OWNERSHIP,
    REASON_BOOT_UNKNOWN,
    REASON_CONFLICTING_IDENTITY,
    REASON_FOREIGN_REPOSITORY,
    REASON_HEARTBEAT_FRESH,
    REASON_HOST_UNPROVEN,
    REASON_INCOMPLETE_IDENTITY,
    REASON_INSTANCE_CONFLICT,
    REASON_PID_ALIVE,
    REASON_PID_REUSED,
    REASON_PID_UNKNOWN,
    REASON_PROTECTED_OWNER,
    REASON_UNPARSABLE_HEARTBEAT,
    REASON_UNTRUSTED_PROVENANCE,
    REASON_WORKER_LIVE,
)
from .seen import FactsContext

__all__ = [
    "PID_ALIVE_VERDICT",
    "FleetContext",
    "fleet_context",
    "identity_proof",
    "row_verdict",
    "static_verdict",
    "verdict_detail",
]

# Verdicts without a row-specific detail are shared objects: one tuple per live row
# per plan was half a megabyte held at 10,000 rows.
_WORKER_LIVE = (REASON_WORKER_LIVE, "worker is live and must not be retired")
_HEARTBEAT_FRESH = (REASON_HEARTBEAT_FRESH, "heartbeat has not expired under its TTL")
#: The verdict of every row whose pid is running: one object, not a tuple and a
#: string per live row (about 1.3 MB at 10,000); ``verdict_detail`` names the pid
#: when an entry is rendered.
PID_ALIVE_VERDICT: tuple[str, str] = (REASON_PID_ALIVE, "recorded pid is still running")

_IDENTITY = attrgetter("worker_identity")
_SLOT = attrgetter("slot")


def verdict_detail(verdict: tuple[str, str], facts: RowFacts) -> str:
    """The detail an entry shows for ``verdict`` on the row of ``facts``."""
    if verdict is PID_ALIVE_VERDICT:
        return f"recorded pid {facts.pid} is still running"
    return verdict[1]


# --- requirements of the row version alone (settled once per version) ----------------


def static_verdict(status: str, missing: list[str], beat: datetime | None) -> Verdict:
    """Requirements 2-4: active, every required field present, a parsable stamp."""
    if status != STATUS_ACTIVE:
        return (REASON_ALREADY_TERMINAL, f"status is {status!r}; nothing to retire")
    if missing:
        return (
            REASON_INCOMPLETE_IDENTITY,
            f"row lacks field(s) the retirement conjunction reads: {missing}",
        )
    if beat is None:
        return (REASON_UNPARSABLE_HEARTBEAT, "last_heartbeat_at is not a parsable UTC stamp")
    return None


def identity_proof(view: RowColumns, context: FactsContext) -> Verdict:
    """Requirement 14: attribution (launcher-minted instance) plus fencing (same host,
    known boots)."""
    if not view.identity.trusted:
        return (
            REASON_UNTRUSTED_PROVENANCE,
            f"client_instance_id {view.client_instance_id!r} is not launcher-minted "
            f"({view.identity.provenance}); nothing proves which launch this row belongs to",
        )
    if not context.host_id:
        return (
            REASON_HOST_UNPROVEN,
            "the supervisor cannot establish its own host identity, so a local probe "
            "speaks for no machine",
        )
    if view.host_id != context.host_id:
        return (
            REASON_HOST_UNPROVEN,
            f"row is bound to host {view.host_id!r} but this supervisor runs on "
            f"{context.host_id!r}; a local probe says nothing about another machine",
        )
    if not context.boot_id:
        return (
            REASON_BOOT_UNKNOWN,
            "the current boot identity is unknown, so the recorded pid cannot be "
            "compared with a live one",
        )
    # Different boot: every pid of the old boot is gone. Same boot: the probe
    # already said the pid is dead. Either way this incarnation is gone.
    return None


# --- requirements that read the rest of the fleet ----------------------------------------


@dataclass(frozen=True, slots=True)
class FleetContext:
    """What a single row's verdict needs to know about the rest of the fleet.

    The sets are only read (membership and intersection), so an incremental
    planner may hand in the sets it keeps current itself.
    """

    owners: ProtectedOwners
    #: Requirement 1: identities on more than one row.
    duplicate_identities: frozenset[str] | set[str]
    #: Requirement 11: identity keys held by a live or unsettled active row.
    ambiguous_keys: Collection[tuple[str, str]]
    #: Requirement 13: (instance, namespace) slots of several active rows, one maybe running.
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


# --- the conjunction ---------------------------------------------------------------------


# Positional on purpose: the incremental planner maps it over parallel columns.
def row_verdict(  # noqa: PLR0917
    facts: RowFacts,
    probe: PidEvidence,
    live: bool,
    fresh: bool | None,
    ownership: str,
    fleet: FleetContext,
) -> Verdict:
    """The first requirement this row fails, in the order above; ``None`` if eligible."""
    identity = facts.worker_identity
    # 1. the identity is on no other row
    if identity in fleet.duplicate_identities:
        return (
            REASON_CONFLICTING_IDENTITY,
            f"worker identity {identity!r} appears on more than one registry row",
        )
    # 2-4. active, complete, a parsable stamp (``static_verdict``)
    if facts.static_verdict is not None:
        return facts.static_verdict
    # 5. not live
    if live:
        return _WORKER_LIVE
    # 6. the probe answered
    if probe.alive is None:
        return (REASON_PID_UNKNOWN, f"pid {facts.pid} could not be probed; liveness unproven")
    # 7. the process is gone
    if probe.alive:
        # A pid number is only comparable within one host and one boot.
        if (
            facts.same_incarnation_space
            and probe.start_time
            and not same_incarnation(probe.start_time, facts.process_start_time or "")
        ):
            return (
                REASON_PID_REUSED,
                f"pid {facts.pid} is alive but started at {probe.start_time!r}, not the "
                f"registered {facts.process_start_time!r}: the number was reused",
            )
        # Absolute: even across a boot boundary an occupied pid is not argued away.
        return PID_ALIVE_VERDICT
    # 8. the heartbeat expired
    if fresh is not False:
        return _HEARTBEAT_FRESH
    # 9. ownership is exactly stale
    if ownership != OWNERSHIP_STALE:
        return (
            REASON_AMBIGUOUS_OWNERSHIP,
            f"ownership state is {ownership!r}, not 'stale'",
        )
    # 10. bound to the canonical repository
    if facts.repository_unfit:
        return (
            REASON_FOREIGN_REPOSITORY,
            "repository binding is absent or not the canonical repository",
        )
    # 11. no identity evidence shared with a live or unsettled row
    held = fleet.ambiguous_keys
    shared = sorted(
        f"{name}={value}" for name, value in facts.conflict_keys if (name, value) in held
    )
    if shared:
        return (
            REASON_CONFLICTING_IDENTITY,
            f"identity evidence is shared with a live or unprobeable worker: {shared}",
        )
    # 12. owns no active work lease
    hits = _protected_hits(facts, fleet.owners)
    if hits:
        return (
            REASON_PROTECTED_OWNER,
            f"worker still owns active workflow state: {hits}",
        )
    # 13. its (instance, namespace) slot is not contested
    slot = (facts.client_instance_id or "", facts.namespace or "")
    if slot in fleet.contested_slots:
        return (
            REASON_INSTANCE_CONFLICT,
            f"another active row claims instance {facts.client_instance_id!r} in "
            f"namespace {facts.namespace!r} and may be running",
        )
    # 14. trusted instance on this host and a known boot (``identity_proof``)
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
