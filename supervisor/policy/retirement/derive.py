"""Reading one row version into its facts: everything the conjunction needs from the row itself."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from supervisor.policy.canonical import canon
from supervisor.policy.fleet.liveness import STATUS_ACTIVE, pid_evidence_applies, ttl_seconds
from supervisor.policy.fleet.worker_view import RowColumns, foreign_repository, row_columns
from supervisor.policy.stamps import parse_stamp

from .conjunction import identity_proof, static_verdict
from .facts import REQUIRED_IDENTITY_FIELDS, RowFacts
from .fingerprints import stamped_digest, static_digest
from .freshness import epoch_us, fresh_until
from .seen import EvidenceTemplate, FactsContext

__all__ = ["missing_fields", "row_facts"]

_BEAT = "last_heartbeat_at"
_REQUIRED_ORDER = {name: index for index, name in enumerate(REQUIRED_IDENTITY_FIELDS)}


def _missing_besides_beat(row: Mapping[str, Any]) -> tuple[str, ...]:
    return tuple(
        name
        for name in REQUIRED_IDENTITY_FIELDS
        if name != _BEAT and not canon(row.get(name)).strip()
    )


def missing_fields(others: tuple[str, ...], beat_raw: Any) -> list[str]:
    """The required fields that are empty: ``others`` (all but the stamp) and the stamp."""
    if canon(beat_raw).strip():
        return list(others)
    return sorted((*others, _BEAT), key=_REQUIRED_ORDER.__getitem__)


def _conflict_keys(view: RowColumns) -> tuple[tuple[str, str], ...]:
    keys = (
        ("session_id", canon(view.session_id)),
        ("generation_id", canon(view.generation_id)),
        ("process_identity", canon(view.process_identity)),
        ("pid", canon(view.pid)),
    )
    return tuple((name, value) for name, value in keys if value)


def row_facts(row: Mapping[str, Any], context: FactsContext, *, lazy: bool = False) -> RowFacts:
    """The static facts of one row. ``lazy``: the caller never changes ``row``, so its
    evidence template may be built from it later (``EvidenceTemplate``)."""
    view = row_columns(row)
    ttl = ttl_seconds(row)
    foreign = foreign_repository(view.repository_binding, context.canonical_repository)
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
        ttl=ttl,
        beat_us=beat_us,
        fresh_until=fresh_until(beat_us, ttl),
        pid_local=pid_evidence_applies(row, context.host_id),
        # As worker_view.self_contradicting, from the stamps parsed once here.
        self_contradicting=started is None or (beat is not None and started > beat),
        static_verdict=static_verdict(
            view.status, missing_fields(missing_besides_beat, beat_raw), beat
        ),
        repository_unfit=not view.repository_binding or foreign,
        same_incarnation_space=comparable,
        conflict_keys=_conflict_keys(view),
        slot=slot,
        identity_proof=identity_proof(view, context),
        evidence_template=EvidenceTemplate(row, context, lazy=lazy),
        beat_raw=beat_raw,
        static_digest=static,
        started_us=None if started is None else epoch_us(started),
        status=view.status,
        missing_besides_beat=missing_besides_beat,
    )
