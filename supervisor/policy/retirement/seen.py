"""One row's static columns as the plan reads them, and the evidence template built from them."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

from supervisor.policy.canonical import canon
from supervisor.policy.evidence import row_pid
from supervisor.policy.fleet.liveness import ttl_seconds
from supervisor.policy.fleet.worker_view import process_identity
from supervisor.policy.identity.instance import (
    InstanceIdentity,
    assess_instance_identity,
    normalize_client_name,
)

__all__ = ["DYNAMIC_EVIDENCE_KEYS", "EvidenceTemplate", "FactsContext", "Seen", "seen", "text_of"]

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


@dataclass(frozen=True, slots=True)
class FactsContext:
    """The plan inputs a row's static facts depend on besides the row itself."""

    host_id: str | None
    boot_id: str | None
    canonical_repository: str | None


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


def text_of(row: Mapping[str, Any], name: str) -> str | None:
    """A column's canonical text, stripped; ``None`` when empty."""
    text = canon(row.get(name)).strip()
    return text or None


def seen(row: Mapping[str, Any], context: FactsContext) -> Seen:
    # Mirrors build_worker_view field by field (the oracle tests hold the two
    # together); the view itself would also judge liveness, which is per plan.
    identity = assess_instance_identity(row.get("client_instance_id"))
    binding = text_of(row, "repository_binding")
    canonical = context.canonical_repository
    return Seen(
        worker_identity=text_of(row, "worker_identity"),
        client_type=normalize_client_name(row.get("client_name") or row.get("client_type")),
        client_instance_id=identity.client_instance_id,
        identity=identity,
        fleet_run_id=text_of(row, "fleet_run_id"),
        namespace=text_of(row, "namespace"),
        profile=text_of(row, "profile"),
        role=text_of(row, "role"),
        session_id=text_of(row, "session_id"),
        generation_id=text_of(row, "generation_id"),
        fencing_epoch=row.get("fencing_epoch"),
        process_identity=process_identity(row),
        pid=row_pid(row),
        host_id=text_of(row, "host_id"),
        boot_id=text_of(row, "boot_id"),
        process_start_time=text_of(row, "process_start_time"),
        repository_binding=binding,
        foreign_repository=bool(
            canonical and binding and binding.rstrip("/") != canonical.rstrip("/")
        ),
        status=str(row.get("status") or ""),
        ttl=ttl_seconds(row),
        started_at=row.get("started_at"),
        last_heartbeat_at=row.get("last_heartbeat_at"),
    )


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
            None if lazy else _evidence_template(seen(row, context))
        )

    @property
    def built(self) -> bool:
        return self._value is not None

    def get(self) -> Mapping[str, Any]:
        value = self._value
        if value is None:
            assert self._row is not None
            assert self._context is not None
            value = self._value = _evidence_template(seen(self._row, self._context))
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
