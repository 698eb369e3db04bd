"""The retirement plan: every row is a candidate or preserved with the first failing reason code."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from operator import attrgetter
from typing import Any

from .evidence import EvidenceMap
from .fingerprints import candidate_token, is_history, registry_token, scope_token
from .history import HistorySummary, fold_history
from .plan_facts import (
    REQUIRED_IDENTITY_FIELDS,
    FactsContext,
    RowFacts,
    Verdict,
    row_facts,
)
from .plan_memo import PlanMemo
from .plan_moment import Moment, entry_evidence, lazy_entries, observe
from .plan_types import (
    FencingContext,
    PlanEntry,
    ProtectedOwners,
    RetirementPlan,
    protected_from_leases,
)
from .reasons import (
    REASON_ALREADY_TERMINAL,
    REASON_AMBIGUOUS_OWNERSHIP,
    REASON_CONFLICTING_IDENTITY,
    REASON_ELIGIBLE,
    REASON_FOREIGN_REPOSITORY,
    REASON_HEARTBEAT_FRESH,
    REASON_INSTANCE_CONFLICT,
    REASON_PID_ALIVE,
    REASON_PID_REUSED,
    REASON_PID_UNKNOWN,
    REASON_PROTECTED_OWNER,
    REASON_WORKER_LIVE,
)
from .worker_view import (
    OWNERSHIP_STALE,
)

__all__ = [
    "REQUIRED_IDENTITY_FIELDS",
    "FencingContext",
    "PlanEntry",
    "PlanMemo",
    "ProtectedOwners",
    "RetirementPlan",
    "plan_retirement",
    "protected_from_leases",
]


_IDENTITY = attrgetter("worker_identity")
_CANON_IDENTITY = attrgetter("canon_identity")
_SCOPE_KEYS = attrgetter("scope_keys")
_SLOT = attrgetter("slot")

_ELIGIBLE_DETAIL = (
    "dead pid, expired heartbeat, stale ownership, trusted and fenced "
    "identity, canonical repository, no active lease"
)


@dataclass(frozen=True, slots=True)
class _FleetContext:
    """What a single row's verdict needs to know about the rest of the fleet."""

    owners: ProtectedOwners
    duplicate_identities: frozenset[str]
    ambiguous_keys: frozenset[tuple[str, str]]
    contested_slots: frozenset[tuple[str, str]]


def _fleet_context(
    facts: Sequence[RowFacts], moment: Moment, owners: ProtectedOwners
) -> _FleetContext:
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
    return _FleetContext(
        owners=owners,
        duplicate_identities=frozenset(
            identity for identity, count in identities.items() if identity and count > 1
        ),
        ambiguous_keys=moment.ambiguous_keys,
        contested_slots=frozenset(contested),
    )


def plan_retirement(
    rows: Iterable[Mapping[str, Any]],
    *,
    now: datetime,
    evidence: EvidenceMap,
    fencing: FencingContext,
    canonical_repository: str | None = None,
    protected: ProtectedOwners | None = None,
    memo: PlanMemo | None = None,
    history: HistorySummary | None = None,
) -> RetirementPlan:
    """Decide, without side effects, which registrations are conclusively stale orphans.

    ``memo`` carries per-row facts from earlier plans; the result is the same
    with or without it, only rows whose content changed cost their full price.

    Without ``history``, ``rows`` is the whole registry. With it, ``rows`` is
    just the active rows and ``history`` the store's summary of the rest: a
    historical row is always ``already_terminal_registration`` unless it shares
    an identity with another row, which only a non-normalized identity can do
    (``history.identity_irregular``), so while ``history.irregular_count`` is 0
    the historical rows are counted, not planned. The scope token then covers
    the active rows only until ``with_history_scope`` adds the historical rows
    that share a key with a candidate.
    """
    all_rows = rows if isinstance(rows, list) else list(rows)
    if history is not None and any(map(is_history, all_rows)):
        raise ValueError("with a history summary, pass only the active rows")
    owners = protected or ProtectedOwners()
    context = FactsContext(fencing.host_id, fencing.boot_id, canonical_repository)
    facts = (
        memo.facts(all_rows, context)
        if memo is not None
        else [row_facts(row, context) for row in all_rows]
    )
    moment = observe(facts, evidence, now)
    fleet = _fleet_context(facts, moment, owners)

    candidates: list[PlanEntry] = []
    candidate_indices: list[int] = []
    # Preserved rows keep only their verdict here; their entries are built when read.
    kept: list[tuple[int, tuple[str, str]]] = []
    for index, f in enumerate(facts):
        verdict = _verdict(f, index, moment, fleet)
        if verdict is None:
            candidates.append(
                PlanEntry(
                    worker_identity=f.worker_identity,
                    reason_code=REASON_ELIGIBLE,
                    detail=_ELIGIBLE_DETAIL,
                    evidence=entry_evidence(f, index, moment),
                )
            )
            candidate_indices.append(index)
        else:
            kept.append((index, verdict))

    candidates.sort(key=lambda e: e.worker_identity or "")
    preserved = lazy_entries(facts, moment, kept)
    anchors = [str(c.worker_identity) for c in candidates]
    units = [f.unit for f in facts]
    candidate_units = [facts[i].unit for i in candidate_indices]
    if history is None:
        active_units = [f.unit for f in facts if f.active]
        past = [i for i, f in enumerate(facts) if not f.active]
        past_units = [facts[i].unit for i in past]
        past_ids = [all_rows[i].get("worker_identity") for i in past]
        summary = (
            fold_history(past_units, past_ids)
            if memo is None
            else memo.reuse(
                "history", (past_units, past_ids), lambda: fold_history(past_units, past_ids)
            )
        )
    else:
        active_units, summary = units, history
    registry_inputs = (active_units, summary.digest)

    if memo is None:
        registry = registry_token(active_units, summary)
        candidate = candidate_token(candidate_units)
        scope_units = [units[i] for i in _scope(facts, anchors)]
        scope_fingerprint = scope_token(scope_units, anchors)
    else:
        registry = memo.reuse(
            "registry", registry_inputs, lambda: registry_token(active_units, summary)
        )
        candidate = memo.reuse(
            "candidate", candidate_units, lambda: candidate_token(candidate_units)
        )
        # _scope reads only identities and identity keys, which a new heartbeat
        # stamp leaves alone (with_beat keeps the very same objects); the scope's
        # token reads only its rows' texts, which beating live rows rarely touch.
        scope_inputs = (list(map(_CANON_IDENTITY, facts)), list(map(_SCOPE_KEYS, facts)), anchors)
        scope_rows = memo.reuse("scope_rows", scope_inputs, lambda: _scope(facts, anchors))
        scope_units = [units[i] for i in scope_rows]
        scope_fingerprint = memo.reuse(
            "scope", (scope_units, anchors), lambda: scope_token(scope_units, anchors)
        )
    # Candidate rows are copied so the plan never aliases a caller's mutable row.
    candidate_rows = sorted(
        ((facts[i].canon_identity, dict(all_rows[i])) for i in candidate_indices),
        key=lambda pair: pair[0],
    )
    counts = Counter(verdict[0] for _, verdict in kept)
    unlisted = history.count if history is not None else 0
    if unlisted:
        counts[REASON_ALREADY_TERMINAL] += unlisted
    anchor_set = set(anchors)
    anchor_keys: frozenset[tuple[str, str]] = (
        frozenset().union(*[f.scope_keys for f in facts if f.canon_identity in anchor_set])
        if anchor_set
        else frozenset()
    )
    return RetirementPlan(
        registry_fingerprint=registry,
        candidate_fingerprint=candidate,
        scope_fingerprint=scope_fingerprint,
        candidates=tuple(candidates),
        preserved=preserved,
        candidate_rows=tuple(row for _, row in candidate_rows),
        preserved_reason_counts=dict(sorted(counts.items())),
        protected=owners,
        fencing=fencing,
        canonical_repository=canonical_repository,
        unlisted_terminal_count=unlisted,
        scope_units=tuple(sorted(scope_units)),
        anchor_identities=tuple(anchors),
        anchor_keys=anchor_keys,
    )


def _scope(facts: Sequence[RowFacts], anchor_identities: Sequence[str]) -> list[int]:
    """``fingerprints.scope_indices`` over memoized identity keys (one hop from the anchors)."""
    anchors = set(anchor_identities)
    if not anchors:
        return []
    anchor_keys: set[tuple[str, str]] = set()
    for f in facts:
        if f.canon_identity in anchors:
            anchor_keys.update(f.scope_keys)
    return [i for i, f in enumerate(facts) if not anchor_keys.isdisjoint(f.scope_keys)]


def _verdict(facts: RowFacts, index: int, moment: Moment, fleet: _FleetContext) -> Verdict:
    """The first requirement this row fails, in the specified order; ``None`` if eligible."""
    identity = facts.worker_identity
    if identity in fleet.duplicate_identities:
        return (
            REASON_CONFLICTING_IDENTITY,
            f"worker identity {identity!r} appears on more than one registry row",
        )
    if facts.static_verdict is not None:
        return facts.static_verdict
    probe = moment.probes[index]
    if moment.live[index]:
        return (REASON_WORKER_LIVE, "worker is live and must not be retired")
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
        return (REASON_PID_ALIVE, f"recorded pid {facts.pid} is still running")
    if moment.fresh[index] is not False:
        return (REASON_HEARTBEAT_FRESH, "heartbeat has not expired under its TTL")
    ownership = moment.ownership[index]
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
    shared = sorted(
        f"{name}={value}" for name, value in fleet.ambiguous_keys.intersection(facts.conflict_keys)
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
