"""What the plan knows about one row version that neither evidence nor ``now`` can change."""

from __future__ import annotations

from typing import Any, NamedTuple

from .seen import EvidenceTemplate

__all__ = ["REQUIRED_IDENTITY_FIELDS", "RowFacts", "Verdict"]

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

#: A row's verdict: the first requirement it fails as ``(reason_code, detail)``,
#: or ``None`` when it meets every one (a retirement candidate).
Verdict = tuple[str, str] | None


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
    # What the incremental planner needs to re-derive the facts for another heartbeat stamp
    # without reading the row again: a live row's stamp is the one column that
    # moves between plans.
    beat_raw: Any
    #: ``fingerprints.static_digest``: ``digest`` without the stamp, for a new stamp.
    static_digest: bytes
    #: ``started_at`` in epoch microseconds (``None`` when not a parsable stamp).
    started_us: int | None
    status: str
    #: Required columns other than the stamp that are empty, in required order.
    missing_besides_beat: tuple[str, ...]
    #: The value types of the memo key the facts were derived from (set by the incremental memo).
    types: tuple[type, ...] = ()
