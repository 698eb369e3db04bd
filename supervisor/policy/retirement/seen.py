"""The plan's context for a row's static facts, and the evidence template built from its columns."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from supervisor.policy.fleet.liveness import ttl_seconds
from supervisor.policy.fleet.worker_view import foreign_repository, row_columns

__all__ = ["DYNAMIC_EVIDENCE_KEYS", "EvidenceTemplate", "FactsContext"]

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


def _evidence_template(row: Mapping[str, Any], context: FactsContext) -> dict[str, Any]:
    """An entry's evidence with placeholders where each plan writes its own observations."""
    v = row_columns(row)
    foreign = foreign_repository(v.repository_binding, context.canonical_repository)
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
        "foreign_repository": foreign,
        "status": v.status,
        "started_at": row.get("started_at"),
        # Filled per entry from ``beat_raw``: a new stamp then needs no new template.
        "last_heartbeat_at": None,
        "heartbeat_ttl_seconds": ttl_seconds(row),
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
        self._value: dict[str, Any] | None = None if lazy else _evidence_template(row, context)

    @property
    def built(self) -> bool:
        return self._value is not None

    def get(self) -> Mapping[str, Any]:
        value = self._value
        if value is None:
            assert self._row is not None
            assert self._context is not None
            value = self._value = _evidence_template(self._row, self._context)
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
