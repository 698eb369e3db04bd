"""Per-row planner facts that neither evidence nor time can change, and a memo of them."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from operator import itemgetter
from typing import Any, NamedTuple

from .canonical import canon
from .evidence import row_pid
from .fingerprints import FINGERPRINT_FIELDS, identity_keys, row_unit
from .identity import InstanceIdentity, assess_instance_identity, normalize_client_name
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
from .worker_view import process_identity

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

#: Every column a verdict, an evidence entry or a token reads: the token's
#: columns, plus ``client_type``, read only as the fallback for a missing
#: ``client_name`` (and only then part of the key).
_KEY_FIELDS: tuple[str, ...] = (*FINGERPRINT_FIELDS, "client_type")
_CLIENT_NAME_AT = FINGERPRINT_FIELDS.index("client_name")
#: Builds the key in C; rows lacking a column take the ``get`` path.
_KEY_GETTER = itemgetter(*FINGERPRINT_FIELDS)
#: Superseded row versions tolerated before the memo is compacted.
_SLACK = 1024

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

Verdict = tuple[str, str] | None


@dataclass(frozen=True, slots=True)
class FactsContext:
    """The plan inputs a row's static facts depend on besides the row itself."""

    host_id: str | None
    boot_id: str | None
    canonical_repository: str | None


class RowFacts(NamedTuple):
    """Everything about one row version that neither evidence nor ``now`` can change.

    A named tuple rather than a dataclass: one is built per changed row per
    plan, and tuple construction is several times cheaper than a frozen
    dataclass's ``__init__``.
    """

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
    # Tuples, not sets: a memo of many rows should not hold GC-tracked objects it
    # does not need (tuples of strings are untracked by the collector).
    conflict_keys: tuple[tuple[str, str], ...]
    scope_keys: tuple[tuple[str, str], ...]
    slot: tuple[str, str] | None
    identity_proof: Verdict
    evidence_template: Mapping[str, Any]


class _Seen(NamedTuple):
    """The static columns of one row, normalized as ``build_worker_view`` does."""

    worker_identity: str | None
    client_type: str
    client_instance_id: str | None
    identity: InstanceIdentity
    fleet_run_id: str | None
    namespace: str | None
    profile: str | None
    role: str | None
    session_id: str | None
    generation_id: str | None
    fencing_epoch: Any
    process_identity: str | None
    pid: int | None
    host_id: str | None
    boot_id: str | None
    process_start_time: str | None
    repository_binding: str | None
    foreign_repository: bool
    status: str
    ttl: float | None


def _text(row: Mapping[str, Any], name: str) -> str | None:
    text = canon(row.get(name)).strip()
    return text or None


def _seen(row: Mapping[str, Any], context: FactsContext) -> _Seen:
    # Mirrors build_worker_view field by field (the oracle tests hold the two
    # together); the view itself would also judge liveness, which is per plan.
    identity = assess_instance_identity(row.get("client_instance_id"))
    binding = _text(row, "repository_binding")
    canonical = context.canonical_repository
    return _Seen(
        worker_identity=_text(row, "worker_identity"),
        client_type=normalize_client_name(row.get("client_name") or row.get("client_type")),
        client_instance_id=identity.client_instance_id,
        identity=identity,
        fleet_run_id=_text(row, "fleet_run_id"),
        namespace=_text(row, "namespace"),
        profile=_text(row, "profile"),
        role=_text(row, "role"),
        session_id=_text(row, "session_id"),
        generation_id=_text(row, "generation_id"),
        fencing_epoch=row.get("fencing_epoch"),
        process_identity=process_identity(row),
        pid=row_pid(row),
        host_id=_text(row, "host_id"),
        boot_id=_text(row, "boot_id"),
        process_start_time=_text(row, "process_start_time"),
        repository_binding=binding,
        foreign_repository=bool(
            canonical and binding and binding.rstrip("/") != canonical.rstrip("/")
        ),
        status=str(row.get("status") or ""),
        ttl=ttl_seconds(row),
    )


def _missing_fields(row: Mapping[str, Any]) -> list[str]:
    return [name for name in REQUIRED_IDENTITY_FIELDS if not canon(row.get(name)).strip()]


def _conflict_keys(view: _Seen) -> tuple[tuple[str, str], ...]:
    keys = (
        ("session_id", canon(view.session_id)),
        ("generation_id", canon(view.generation_id)),
        ("process_identity", canon(view.process_identity)),
        ("pid", canon(view.pid)),
    )
    return tuple((name, value) for name, value in keys if value)


def _static_verdict(row: Mapping[str, Any], view: _Seen, beat: datetime | None) -> Verdict:
    if view.status != STATUS_ACTIVE:
        return (REASON_ALREADY_TERMINAL, f"status is {view.status!r}; nothing to retire")
    missing = _missing_fields(row)
    if missing:
        return (
            REASON_INCOMPLETE_IDENTITY,
            f"row lacks field(s) the retirement conjunction reads: {missing}",
        )
    if beat is None:
        return (REASON_UNPARSABLE_HEARTBEAT, "last_heartbeat_at is not a parsable UTC stamp")
    return None


def _identity_proof(view: _Seen, context: FactsContext) -> Verdict:
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


def _evidence_template(view: _Seen, row: Mapping[str, Any]) -> dict[str, Any]:
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
        "heartbeat_ttl_seconds": view.ttl,
        "heartbeat_age_seconds": None,
        "heartbeat_fresh": None,
        "live": False,
        "ownership_state": "",
        "instance_id_provenance": view.identity.provenance,
        "instance_identity_trusted": view.identity.trusted,
    }


def row_facts(row: Mapping[str, Any], context: FactsContext) -> RowFacts:
    """The static facts of one row."""
    view = _seen(row, context)
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
    beat = parse_stamp(row.get("last_heartbeat_at"))
    started = parse_stamp(row.get("started_at"))
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
        beat=beat,
        ttl=view.ttl,
        pid_local=pid_evidence_applies(row, context.host_id),
        # As worker_view.self_contradicting, from the stamps parsed once here.
        self_contradicting=started is None or (beat is not None and started > beat),
        static_verdict=_static_verdict(row, view, beat),
        repository_unfit=not view.repository_binding or view.foreign_repository,
        same_incarnation_space=comparable,
        conflict_keys=_conflict_keys(view),
        scope_keys=tuple(identity_keys(row)),
        slot=slot,
        identity_proof=_identity_proof(view, context),
        evidence_template=_evidence_template(view, row),
    )


def _key(row: Mapping[str, Any], *, fast: bool) -> tuple[Any, ...] | None:
    """The memo key, or ``None`` when the C path cannot read the row (then use ``_slow_key``)."""
    # Plain dicts only: a subclass may answer a missing column (defaultdict)
    # differently from ``get``, which is what every reader of the row uses.
    if not fast or type(row) is not dict:
        return None
    try:
        key: tuple[Any, ...] = _KEY_GETTER(row)
    except KeyError:
        return None
    return key if key[_CLIENT_NAME_AT] else (*key, row.get("client_type"))


def _slow_key(row: Mapping[str, Any]) -> tuple[Any, ...]:
    key = tuple(map(row.get, FINGERPRINT_FIELDS))
    return key if key[_CLIENT_NAME_AT] else (*key, row.get("client_type"))


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

    _facts: dict[tuple[Any, ...], tuple[tuple[type, ...], RowFacts]]

    def __init__(self) -> None:
        self._context: FactsContext | None = None
        self._facts = {}
        self._registry: tuple[list[str], str] | None = None
        self.hits = 0
        self.misses = 0

    def __len__(self) -> int:
        return len(self._facts)

    def facts(self, rows: Sequence[Mapping[str, Any]], context: FactsContext) -> list[RowFacts]:
        """Facts for every row, in order; rows unchanged since an earlier call cost a lookup."""
        if context != self._context:
            self._facts.clear()
            self._context = context
        cache = self._facts
        out: list[RowFacts] = []
        append = out.append
        misses = 0
        # Rows of one plan come from one source; once one lacks a column the
        # rest are read with ``get`` instead of raising per row.
        fast = True
        for row in rows:
            key = _key(row, fast=fast)
            if key is None:
                fast = False
                key = _slow_key(row)
            types = tuple(map(type, key))
            held = cache.get(key)
            if held is not None and held[0] == types:
                append(held[1])
                continue
            misses += 1
            facts = row_facts(row, context)
            if _memoizable(key, types):
                cache[key] = (types, facts)
            append(facts)
        if len(cache) > 2 * len(out) + _SLACK:
            # Keep only this plan's row versions, so memory follows the registry's
            # size instead of its history.
            keep = {_key(row, fast=True) or _slow_key(row) for row in rows}
            self._facts = {key: held for key, held in cache.items() if key in keep}
        self.hits += len(out) - misses
        self.misses += misses
        return out

    def registry_token(self, units: list[str], compute: Callable[[list[str]], str]) -> str:
        """``compute(units)``, reused while the units are the same list of texts."""
        held = self._registry
        if held is not None and held[0] == units:
            return held[1]
        token = compute(units)
        self._registry = (units, token)
        return token
