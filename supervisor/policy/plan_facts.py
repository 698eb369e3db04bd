"""Per-row planner facts that neither evidence nor time can change, and a memo of them."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from .canonical import canon
from .fingerprints import FINGERPRINT_FIELDS, identity_keys, row_unit
from .liveness import STATUS_ACTIVE, pid_evidence_applies, ttl_seconds
from .reasons import (
    REASON_ALREADY_TERMINAL,
    REASON_BOOT_UNKNOWN,
    REASON_HOST_UNPROVEN,
    REASON_INCOMPLETE_IDENTITY,
    REASON_UNPARSABLE_HEARTBEAT,
    REASON_UNTRUSTED_PROVENANCE,
)
from .stamps import parse_stamp
from .worker_view import WorkerView, build_worker_view, self_contradicting

__all__ = [
    "DYNAMIC_EVIDENCE_KEYS",
    "REQUIRED_IDENTITY_FIELDS",
    "FactsContext",
    "PlanMemo",
    "RowFacts",
    "Verdict",
    "row_facts",
]

#: Columns that must hold a value before the conjunction can even be read.
#: The fencing triple is here on purpose: rows written before it existed are
#: preserved permanently rather than retired on weaker evidence.
REQUIRED_IDENTITY_FIELDS: tuple[str, ...] = (
    "worker_identity",
    "client_instance_id",
    "session_id",
    "generation_id",
    "status",
    "started_at",
    "last_heartbeat_at",
    "heartbeat_ttl_seconds",
    "pid",
    "host_id",
    "boot_id",
    "process_start_time",
)

#: Every column a verdict, an evidence entry or a token reads. ``client_type``
#: is the fallback for a missing ``client_name``; the rest are the token's.
_KEY_FIELDS: tuple[str, ...] = (*FINGERPRINT_FIELDS, "client_type")

#: Value types whose equality implies identical canonical text, verdicts and
#: evidence. Other types (datetimes: equal instants in different zones print
#: differently) are never memoized.
_PLAIN_TYPES = frozenset({str, int, float, bool, type(None)})

#: Evidence entries that depend on the probe or on ``now``; every other entry
#: is a function of the row version alone.
DYNAMIC_EVIDENCE_KEYS: tuple[str, ...] = (
    "pid_alive",
    "probed_start_time",
    "heartbeat_age_seconds",
    "heartbeat_fresh",
    "live",
    "ownership_state",
)

#: A placeholder instant for building the static part of a view: nothing kept
#: from that view depends on it.
_ANY_TIME = datetime(2000, 1, 1, tzinfo=UTC)

Verdict = tuple[str, str] | None


@dataclass(frozen=True, slots=True)
class FactsContext:
    """The plan inputs a row's static facts depend on besides the row itself."""

    host_id: str | None
    boot_id: str | None
    canonical_repository: str | None


@dataclass(frozen=True, slots=True, kw_only=True)
class RowFacts:
    """Everything about one row version that neither evidence nor ``now`` can change."""

    unit: str
    canon_identity: str
    worker_identity: str | None
    session_id: str | None
    client_instance_id: str | None
    namespace: str | None
    pid: int | None
    process_start_time: str | None
    identity_trusted: bool
    active: bool
    beat: datetime | None
    ttl: float | None
    pid_local: bool
    self_contradicting: bool
    #: Terminal status, missing fields or an unparsable beat: fixed per row version.
    static_verdict: Verdict
    repository_unfit: bool
    #: Same host and same boot as the judge, so a pid number is comparable.
    same_incarnation_space: bool
    conflict_keys: frozenset[tuple[str, str]]
    scope_keys: frozenset[tuple[str, str]]
    slot: tuple[str, str] | None
    identity_proof: Verdict
    evidence_template: Mapping[str, Any]


def _missing_fields(row: Mapping[str, Any]) -> list[str]:
    return [name for name in REQUIRED_IDENTITY_FIELDS if not canon(row.get(name)).strip()]


def _conflict_keys(view: WorkerView) -> frozenset[tuple[str, str]]:
    keys = {
        ("session_id", canon(view.session_id)),
        ("generation_id", canon(view.generation_id)),
        ("process_identity", canon(view.process_identity)),
        ("pid", canon(view.pid)),
    }
    return frozenset((name, value) for name, value in keys if value)


def _static_verdict(row: Mapping[str, Any], view: WorkerView) -> Verdict:
    if view.status != STATUS_ACTIVE:
        return (REASON_ALREADY_TERMINAL, f"status is {view.status!r}; nothing to retire")
    missing = _missing_fields(row)
    if missing:
        return (
            REASON_INCOMPLETE_IDENTITY,
            f"row lacks field(s) the retirement conjunction reads: {missing}",
        )
    if parse_stamp(row.get("last_heartbeat_at")) is None:
        return (REASON_UNPARSABLE_HEARTBEAT, "last_heartbeat_at is not a parsable UTC stamp")
    return None


def _identity_proof(view: WorkerView, context: FactsContext) -> Verdict:
    """Attribution (launcher-minted instance) plus fencing (same host, known boots)."""
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


def _evidence_template(view: WorkerView, row: Mapping[str, Any]) -> dict[str, Any]:
    # Key order is the rendered order; the dynamic entries are overwritten per plan.
    return {
        "worker_identity": view.worker_identity,
        "client_type": view.client_type,
        "client_instance_id": view.client_instance_id,
        "fleet_run_id": view.fleet_run_id,
        "namespace": view.namespace,
        "profile": view.profile,
        "declared_role": view.role,
        "session_id": view.session_id,
        "generation_id": view.generation_id,
        "fencing_epoch": view.fencing_epoch,
        "process_identity": view.process_identity,
        "pid": view.pid,
        "pid_alive": None,
        "probed_start_time": None,
        "host_id": view.host_id,
        "boot_id": view.boot_id,
        "process_start_time": view.process_start_time,
        "repository_binding": view.repository_binding,
        "foreign_repository": view.foreign_repository,
        "status": view.status,
        "started_at": row.get("started_at"),
        "last_heartbeat_at": row.get("last_heartbeat_at"),
        "heartbeat_ttl_seconds": view.liveness.heartbeat_ttl_seconds,
        "heartbeat_age_seconds": None,
        "heartbeat_fresh": None,
        "live": False,
        "ownership_state": "",
        "instance_id_provenance": view.identity.provenance,
        "instance_identity_trusted": view.identity.trusted,
    }


def row_facts(row: Mapping[str, Any], context: FactsContext) -> RowFacts:
    """The static facts of one row, derived through the same view the snapshot uses."""
    view = build_worker_view(
        row,
        now=_ANY_TIME,
        evidence={},
        current_host_id=context.host_id,
        canonical_repository=context.canonical_repository,
    )
    active = view.status == STATUS_ACTIVE
    slot = (
        (view.client_instance_id, view.namespace)
        if active and view.client_instance_id and view.namespace
        else None
    )
    comparable = bool(
        context.host_id
        and view.host_id == context.host_id
        and context.boot_id
        and view.boot_id == context.boot_id
    )
    return RowFacts(
        unit=row_unit(row),
        canon_identity=canon(row.get("worker_identity")),
        worker_identity=view.worker_identity,
        session_id=view.session_id,
        client_instance_id=view.client_instance_id,
        namespace=view.namespace,
        pid=view.pid,
        process_start_time=view.process_start_time,
        identity_trusted=view.identity.trusted,
        active=active,
        beat=parse_stamp(row.get("last_heartbeat_at")),
        ttl=ttl_seconds(row),
        pid_local=pid_evidence_applies(row, context.host_id),
        self_contradicting=self_contradicting(row),
        static_verdict=_static_verdict(row, view),
        repository_unfit=not view.repository_binding or view.foreign_repository,
        same_incarnation_space=comparable,
        conflict_keys=_conflict_keys(view),
        scope_keys=frozenset(identity_keys(row)),
        slot=slot,
        identity_proof=_identity_proof(view, context),
        evidence_template=_evidence_template(view, row),
    )


def _memoizable(key: tuple[Any, ...], types: tuple[type, ...]) -> bool:
    if not _PLAIN_TYPES.issuperset(types):
        return False
    # -0.0 == 0.0 with one type, yet a raw value (fencing_epoch) is shown as
    # stored; such rows are simply recomputed every time.
    return not (float in types and 0.0 in key and any(type(v) is float and v == 0 for v in key))


class PlanMemo:
    """Row facts by row content, so a plan recomputes only rows that changed.

    Pure: no I/O and no clock; a hit returns exactly what ``row_facts`` would,
    because the key holds every column the facts read, with their types.
    One memo serves one planner at a time; it is not meant to be shared
    across threads.
    """

    __slots__ = ("_context", "_facts", "_registry", "hits", "misses")

    def __init__(self) -> None:
        self._context: FactsContext | None = None
        self._facts: dict[tuple[Any, ...], tuple[tuple[type, ...], RowFacts]] = {}
        self._registry: tuple[list[str], str] | None = None
        self.hits = 0
        self.misses = 0

    def __len__(self) -> int:
        return len(self._facts)

    def facts(self, rows: Iterable[Mapping[str, Any]], context: FactsContext) -> list[RowFacts]:
        """Facts for every row, in order; rows unchanged since an earlier call cost a lookup."""
        if context != self._context:
            self._facts.clear()
            self._context = context
        cache = self._facts
        found: dict[tuple[Any, ...], tuple[tuple[type, ...], RowFacts]] = {}
        out: list[RowFacts] = []
        hits = 0
        for row in rows:
            key = tuple(map(row.get, _KEY_FIELDS))
            types = tuple(map(type, key))
            held = cache.get(key)
            if held is not None and held[0] == types:
                hits += 1
                found[key] = held
                out.append(held[1])
                continue
            facts = row_facts(row, context)
            if _memoizable(key, types):
                found[key] = (types, facts)
            out.append(facts)
        # Only the row versions of this plan are kept, so memory follows the
        # registry's size instead of its history.
        self._facts = found
        self.hits += hits
        self.misses += len(out) - hits
        return out

    def registry_token(self, units: list[str], compute: Callable[[list[str]], str]) -> str:
        """``compute(units)``, reused while the units are the same list of texts."""
        held = self._registry
        if held is not None and held[0] == units:
            return held[1]
        token = compute(units)
        self._registry = (units, token)
        return token
