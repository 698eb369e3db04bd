"""Per-row planner facts that neither evidence nor time can change."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, NamedTuple

from supervisor.policy.canonical import canon
from supervisor.policy.evidence import row_pid
from supervisor.policy.fleet.liveness import STATUS_ACTIVE, pid_evidence_applies, ttl_seconds
from supervisor.policy.fleet.worker_view import process_identity
from supervisor.policy.identity.instance import (
    InstanceIdentity,
    assess_instance_identity,
    normalize_client_name,
)
from supervisor.policy.stamps import parse_stamp

from .fingerprints import stamped_digest, static_digest
from .reasons import (
    REASON_ALREADY_TERMINAL,
    REASON_BOOT_UNKNOWN,
    REASON_HOST_UNPROVEN,
    REASON_INCOMPLETE_IDENTITY,
    REASON_PID_ALIVE,
    REASON_UNPARSABLE_HEARTBEAT,
    REASON_UNTRUSTED_PROVENANCE,
)

__all__ = [
    "DYNAMIC_EVIDENCE_KEYS",
    "FOREVER",
    "NO_FRESHNESS",
    "PID_ALIVE_VERDICT",
    "REQUIRED_IDENTITY_FIELDS",
    "EvidenceTemplate",
    "FactsContext",
    "RowFacts",
    "Seen",
    "Verdict",
    "epoch_us",
    "row_facts",
    "verdict_detail",
    "with_beat",
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

#: The verdict of every row whose pid is running: one object, not a tuple and a
#: string per live row (about 1.3 MB at 10,000); ``verdict_detail`` names the pid
#: when an entry is rendered.
PID_ALIVE_VERDICT: tuple[str, str] = (REASON_PID_ALIVE, "recorded pid is still running")


def verdict_detail(verdict: tuple[str, str], facts: RowFacts) -> str:
    """The detail an entry shows for ``verdict`` on the row of ``facts``."""
    if verdict is PID_ALIVE_VERDICT:
        return f"recorded pid {facts.pid} is still running"
    return verdict[1]


_BEAT = "last_heartbeat_at"
_REQUIRED_ORDER = {name: index for index, name in enumerate(REQUIRED_IDENTITY_FIELDS)}

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_US = timedelta(microseconds=1)
#: Past any age two datetimes can be apart (years 1 to 9999): such a TTL never expires.
_AGELESS_TTL = 1e12
#: ``fresh_until`` of a row that is fresh at every instant.
FOREVER = 1 << 62
#: ``fresh_until`` of a row whose freshness is not a boolean (no stamp or no TTL).
NO_FRESHNESS = -(1 << 62)


def epoch_us(moment: datetime) -> int:
    """Whole microseconds since the epoch: exact, so ages computed from it equal
    ``(now - beat).total_seconds()`` to the last bit."""
    return (moment - _EPOCH) // _US


def _fresh_until(beat_us: int | None, ttl: float | None) -> int:
    """The first ``now`` (epoch microseconds) at which ``(now - beat) < ttl`` is false.

    The age test is ``(now_us - beat_us) / 10**6 < ttl`` (exactly what
    ``timedelta.total_seconds`` computes), which is monotone in ``now_us``, so
    one integer says for every future instant whether the row is fresh; a plan
    then compares integers instead of subtracting datetimes.
    """
    if beat_us is None or ttl is None:
        return NO_FRESHNESS
    if ttl > _AGELESS_TTL:
        return FOREVER
    # The test reads only now_us - beat_us, so the edge is beat_us plus an offset
    # that depends on the TTL alone; a registry has a handful of TTLs.
    offset = _EDGES.get(ttl)
    if offset is None:
        offset = _edge(ttl)
        if len(_EDGES) < _MAX_EDGES:
            _EDGES[ttl] = offset
    return beat_us + offset


def _edge(ttl: float) -> int:
    """The least whole number of microseconds ``d`` with ``not (d / 10**6 < ttl)``."""
    low = int(ttl * 1_000_000) - 2
    # Float rounding leaves the guess a few microseconds off: walk to the exact edge.
    while low / 1_000_000 >= ttl:
        low -= 16
    while low / 1_000_000 < ttl:
        low += 1
    return low


#: Edge offsets by TTL (bounded: TTLs come from rows, and rows are input).
_EDGES: dict[float, int] = {}
_MAX_EDGES = 1024


@dataclass(frozen=True, slots=True)
class FactsContext:
    """The plan inputs a row's static facts depend on besides the row itself."""

    host_id: str | None
    boot_id: str | None
    canonical_repository: str | None


class EvidenceTemplate:
    """One row's evidence entry with placeholders for each plan's observations,
    built from the row the first time one of its entries is rendered.

    A plan lists its candidates and a few examples per reason, so most rows are
    never rendered, and a built template costs about 800 bytes: 8 MB held for
    nothing at 10,000 live rows when every row carried one. The value, once
    built, is never mutated: each entry copies it and fills in
    DYNAMIC_EVIDENCE_KEYS and ``last_heartbeat_at`` (from ``beat_raw``).

    Lazy only for a row the caller promised never to change (``PlanMemo`` with
    ``trust_identity``); any other row's template is built with its facts.
    """

    __slots__ = ("_context", "_row", "_value")

    def __init__(
        self, row: Mapping[str, Any], context: FactsContext, *, lazy: bool = False
    ) -> None:
        self._row: Mapping[str, Any] | None = row if lazy else None
        self._context: FactsContext | None = context if lazy else None
        self._value: dict[str, Any] | None = (
            None if lazy else _evidence_template(_seen(row, context))
        )

    @property
    def built(self) -> bool:
        return self._value is not None

    def get(self) -> Mapping[str, Any]:
        value = self._value
        if value is None:
            assert self._row is not None
            assert self._context is not None
            value = self._value = _evidence_template(_seen(self._row, self._context))
            # The row is no longer needed: a new version of it must not be kept
            # alive by an old one's facts.
            self._row = self._context = None
        return value

    def for_version(self, row: Mapping[str, Any]) -> EvidenceTemplate:
        """This template for ``row``, another version of the row with equal static
        columns: itself once built, else a lazy one holding ``row`` instead, so
        the old version can be freed."""
        if self._context is None:
            return self
        return EvidenceTemplate(row, self._context, lazy=True)

    def __eq__(self, other: object) -> bool:
        if self is other:
            return True
        if not isinstance(other, EvidenceTemplate):
            return NotImplemented
        return self.get() == other.get()

    # Unhashable, as the dict it stands for (and so the facts holding it).
    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"EvidenceTemplate({self._value!r})" if self.built else "EvidenceTemplate(<lazy>)"


class RowFacts(NamedTuple):
    """Everything about one row version that neither evidence nor ``now`` can change.

    A named tuple rather than a dataclass: one is built per changed row per
    plan, and tuple construction is several times cheaper than a frozen
    dataclass's ``__init__``.
    """

    #: ``fingerprints.row_digest`` of the row: its element of every token.
    digest: bytes
    canon_identity: str
    worker_identity: str | None
    session_id: str | None
    client_instance_id: str | None
    namespace: str | None
    pid: int | None
    process_start_time: str | None
    identity_trusted: bool
    active: bool
    ttl: float | None
    #: The parsed stamp in epoch microseconds (``None`` without a parsable stamp):
    #: an int, not a datetime, as ages are computed from it exactly (``epoch_us``).
    beat_us: int | None
    #: Fresh exactly while ``now_us < fresh_until`` (``NO_FRESHNESS``: fresh is ``None``).
    fresh_until: int
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
    slot: tuple[str, str] | None
    identity_proof: Verdict
    #: An entry's evidence without the plan's observations (``EvidenceTemplate``).
    evidence_template: EvidenceTemplate
    # What ``with_beat`` needs to re-derive the facts for another heartbeat stamp
    # without reading the row again: a live row's stamp is the one column that
    # moves between plans.
    beat_raw: Any
    #: ``fingerprints.static_digest``: ``digest`` without the stamp, for ``with_beat``.
    static_digest: bytes
    #: ``started_at`` in epoch microseconds (``None`` when not a parsable stamp).
    started_us: int | None
    status: str
    #: Required columns other than the stamp that are empty, in required order.
    missing_besides_beat: tuple[str, ...]
    #: The value types of the memo key these facts were derived from (set by the memo).
    types: tuple[type, ...] = ()


class Seen(NamedTuple):
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
    started_at: Any
    last_heartbeat_at: Any


def _text(row: Mapping[str, Any], name: str) -> str | None:
    text = canon(row.get(name)).strip()
    return text or None


def _seen(row: Mapping[str, Any], context: FactsContext) -> Seen:
    # Mirrors build_worker_view field by field (the oracle tests hold the two
    # together); the view itself would also judge liveness, which is per plan.
    identity = assess_instance_identity(row.get("client_instance_id"))
    binding = _text(row, "repository_binding")
    canonical = context.canonical_repository
    return Seen(
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
        started_at=row.get("started_at"),
        last_heartbeat_at=row.get("last_heartbeat_at"),
    )


def _missing_besides_beat(row: Mapping[str, Any]) -> tuple[str, ...]:
    return tuple(
        name
        for name in REQUIRED_IDENTITY_FIELDS
        if name != _BEAT and not canon(row.get(name)).strip()
    )


def _missing_fields(others: tuple[str, ...], beat_raw: Any) -> list[str]:
    if canon(beat_raw).strip():
        return list(others)
    return sorted((*others, _BEAT), key=_REQUIRED_ORDER.__getitem__)


def _conflict_keys(view: Seen) -> tuple[tuple[str, str], ...]:
    keys = (
        ("session_id", canon(view.session_id)),
        ("generation_id", canon(view.generation_id)),
        ("process_identity", canon(view.process_identity)),
        ("pid", canon(view.pid)),
    )
    return tuple((name, value) for name, value in keys if value)


def _static_verdict(status: str, missing: list[str], beat: datetime | None) -> Verdict:
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


def _identity_proof(view: Seen, context: FactsContext) -> Verdict:
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


def _evidence_template(v: Seen) -> dict[str, Any]:
    """An entry's evidence with placeholders where each plan writes its own observations."""
    # Key order is the rendered order; a plan copies this dict (several times
    # cheaper than building it) and overwrites DYNAMIC_EVIDENCE_KEYS.
    return {
        "worker_identity": v.worker_identity,
        "client_type": v.client_type,
        "client_instance_id": v.client_instance_id,
        "fleet_run_id": v.fleet_run_id,
        "namespace": v.namespace,
        "profile": v.profile,
        "declared_role": v.role,
        "session_id": v.session_id,
        "generation_id": v.generation_id,
        "fencing_epoch": v.fencing_epoch,
        "process_identity": v.process_identity,
        "pid": v.pid,
        "pid_alive": None,
        "probed_start_time": None,
        "host_id": v.host_id,
        "boot_id": v.boot_id,
        "process_start_time": v.process_start_time,
        "repository_binding": v.repository_binding,
        "foreign_repository": v.foreign_repository,
        "status": v.status,
        "started_at": v.started_at,
        # Filled per entry from ``beat_raw``: a new stamp then needs no new template.
        "last_heartbeat_at": None,
        "heartbeat_ttl_seconds": v.ttl,
        "heartbeat_age_seconds": None,
        "heartbeat_fresh": None,
        "live": False,
        "ownership_state": "",
        "instance_id_provenance": v.identity.provenance,
        "instance_identity_trusted": v.identity.trusted,
    }


def row_facts(row: Mapping[str, Any], context: FactsContext, *, lazy: bool = False) -> RowFacts:
    """The static facts of one row. ``lazy``: the caller never changes ``row``, so its
    evidence template may be built from it later (``EvidenceTemplate``)."""
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
    beat_raw = row.get(_BEAT)
    beat = parse_stamp(beat_raw)
    beat_us = None if beat is None else epoch_us(beat)
    started = parse_stamp(row.get("started_at"))
    missing_besides_beat = _missing_besides_beat(row)
    static = static_digest(row)
    return RowFacts(
        digest=stamped_digest(static, beat_raw),
        canon_identity=canon(row.get("worker_identity")),
        worker_identity=view.worker_identity,
        session_id=view.session_id,
        client_instance_id=view.client_instance_id,
        namespace=view.namespace,
        pid=view.pid,
        process_start_time=view.process_start_time,
        identity_trusted=view.identity.trusted,
        active=active,
        ttl=view.ttl,
        beat_us=beat_us,
        fresh_until=_fresh_until(beat_us, view.ttl),
        pid_local=pid_evidence_applies(row, context.host_id),
        # As worker_view.self_contradicting, from the stamps parsed once here.
        self_contradicting=started is None or (beat is not None and started > beat),
        static_verdict=_static_verdict(
            view.status, _missing_fields(missing_besides_beat, beat_raw), beat
        ),
        repository_unfit=not view.repository_binding or view.foreign_repository,
        same_incarnation_space=comparable,
        conflict_keys=_conflict_keys(view),
        slot=slot,
        identity_proof=_identity_proof(view, context),
        evidence_template=EvidenceTemplate(row, context, lazy=lazy),
        beat_raw=beat_raw,
        static_digest=static,
        started_us=None if started is None else epoch_us(started),
        status=view.status,
        missing_besides_beat=missing_besides_beat,
    )


def with_beat(facts: RowFacts, beat_raw: Any, row: Mapping[str, Any] | None = None) -> RowFacts:
    """``row_facts`` of the same row with ``last_heartbeat_at`` set to ``beat_raw``.

    Only the stamp-dependent facts are re-derived (the parsed beat, the
    unparsable-beat and missing-field verdicts, the self-contradiction, the
    unit text and the evidence entry), which is what lets a plan after a round
    of heartbeats skip rebuilding every live row from scratch. ``row``: the new
    version itself, when the facts were built lazily from the old one.
    """
    beat = parse_stamp(beat_raw)
    beat_us = None if beat is None else epoch_us(beat)
    started_us = facts.started_us
    # A list and _make instead of _replace: a plan after a round of heartbeats
    # re-derives every live row, and _replace walks all fields in Python.
    values = list(facts)
    values[_AT_DIGEST] = stamped_digest(facts.static_digest, beat_raw)
    values[_AT_BEAT_US] = beat_us
    values[_AT_FRESH_UNTIL] = _fresh_until(beat_us, facts.ttl)
    values[_AT_CONTRADICTING] = started_us is None or (beat_us is not None and started_us > beat_us)
    if beat is not None and facts.status == STATUS_ACTIVE and not facts.missing_besides_beat:
        # The common case, settled without building the missing-field list: a parsed
        # stamp is never blank, so nothing is missing and there is no static verdict.
        values[_AT_STATIC] = None
    else:
        values[_AT_STATIC] = _static_verdict(
            facts.status, _missing_fields(facts.missing_besides_beat, beat_raw), beat
        )
    values[_AT_BEAT_RAW] = beat_raw
    if row is not None:
        # The stamp is no part of a template, but an unbuilt one holds its row.
        values[_AT_TEMPLATE] = facts.evidence_template.for_version(row)
    return RowFacts._make(values)


_FIELDS = RowFacts._fields
_AT_DIGEST = _FIELDS.index("digest")
_AT_BEAT_US = _FIELDS.index("beat_us")
_AT_FRESH_UNTIL = _FIELDS.index("fresh_until")
_AT_CONTRADICTING = _FIELDS.index("self_contradicting")
_AT_STATIC = _FIELDS.index("static_verdict")
_AT_BEAT_RAW = _FIELDS.index("beat_raw")
_AT_TEMPLATE = _FIELDS.index("evidence_template")
