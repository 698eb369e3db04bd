"""Compare-and-swap tokens over registry rows and leases; content only, never observation time."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from supervisor.policy.canonical import canon, digest, digest_elements, serialize

from .history import EMPTY_HISTORY, HistoryFold, HistorySummary

__all__ = [
    "FENCING_FIELDS",
    "FINGERPRINT_FIELDS",
    "FINGERPRINT_STANDING_FIELDS",
    "FINGERPRINT_WORKER_FIELDS",
    "LEASE_FINGERPRINT_FIELDS",
    "ROW_DIGEST_BYTES",
    "SCOPE_KEY_NAMES",
    "STATIC_FINGERPRINT_FIELDS",
    "candidate_fingerprint",
    "candidate_token",
    "history_summary",
    "identity_keys",
    "is_history",
    "lease_fingerprint",
    "registry_fingerprint",
    "registry_token",
    "row_digest",
    "row_unit",
    "scope_fingerprint",
    "scope_indices",
    "scope_rows",
    "scope_token",
    "sharing_positions",
    "stamped_digest",
    "static_digest",
]

#: The worker a registration names: who it is, for whom, and which process.
FINGERPRINT_WORKER_FIELDS: tuple[str, ...] = (
    "worker_identity",
    "client_name",
    "client_instance_id",
    "session_id",
    "generation_id",
    "role",
    "profile",
    "namespace",
    "remote",
    "repository_binding",
    "pid",
    "process_identity",
    "transport",
)
#: Where the registration stands: its stamps, its status and its enrollment.
FINGERPRINT_STANDING_FIELDS: tuple[str, ...] = (
    "started_at",
    "last_heartbeat_at",
    "heartbeat_ttl_seconds",
    "fencing_epoch",
    "status",
    "fleet_run_id",
    "authenticated_account",
    "instance_id_provenance",
)
#: Which incarnation of the process, on which boot of which machine.
FENCING_FIELDS: tuple[str, ...] = ("host_id", "boot_id", "process_start_time")
#: Retirement-relevant columns, in the fixed order that is part of the token
#: contract. Left out on purpose: ``token_fingerprint`` (credential-adjacent),
#: the ``*_revision`` columns (restart drift, not retirement input) and the
#: ``retired_*``/``released_at`` bookkeeping written by the supervisor itself.
#: Three parts because the stored columns (``store.schema.tables``) put those
#: left-out columns between them.
FINGERPRINT_FIELDS: tuple[str, ...] = (
    *FINGERPRINT_WORKER_FIELDS,
    *FINGERPRINT_STANDING_FIELDS,
    *FENCING_FIELDS,
)

_BEAT = "last_heartbeat_at"
#: FINGERPRINT_FIELDS but the heartbeat stamp, the one column a live row moves
#: between two plans: a row's digest is built around it (``row_digest``).
STATIC_FINGERPRINT_FIELDS: tuple[str, ...] = tuple(f for f in FINGERPRINT_FIELDS if f != _BEAT)
#: Bytes of one row digest: 128 bits, far past any registry's birthday bound.
ROW_DIGEST_BYTES = 16

#: Ownership-relevant lease fields. A heartbeat stamp advancing on a lease is
#: deliberately absent so lease churn does not abort an unrelated apply.
LEASE_FINGERPRINT_FIELDS: tuple[str, ...] = (
    "lease_id",
    "role",
    "work_item_key",
    "status",
    "session_id",
    "owner_pid",
    "session_pid",
    "generation",
)

#: Identity keys that tie rows into one decision scope.
SCOPE_KEY_NAMES: tuple[str, ...] = (
    "worker_identity",
    "session_id",
    "generation_id",
    "process_identity",
    "pid",
    "instance_namespace",
)

_Row = Mapping[str, Any]


def row_unit(row: _Row) -> str:
    """One row's canonical serialization; compute once and reuse for every token."""
    return serialize(row, FINGERPRINT_FIELDS)


def static_digest(row: _Row) -> bytes:
    """The digest of one row's token columns but the stamp (``row_digest``'s first half)."""
    text = serialize(row, STATIC_FINGERPRINT_FIELDS)
    return hashlib.blake2b(
        text.encode("utf-8"), digest_size=ROW_DIGEST_BYTES, person=b"fsb-row-static"
    ).digest()


def stamped_digest(static: bytes, beat: Any) -> bytes:
    """``row_digest`` from a row's ``static_digest`` and its ``last_heartbeat_at``."""
    # ``static`` is fixed-length, so the stamp's text needs no separator.
    return hashlib.blake2b(
        static + canon(beat).encode("utf-8"), digest_size=ROW_DIGEST_BYTES, person=b"fsb-row"
    ).digest()


def row_digest(row: _Row) -> bytes:
    """One row's element of every registry, candidate and scope token.

    A function of exactly the ``FINGERPRINT_FIELDS`` (as ``row_unit``), built in
    two steps so a new heartbeat stamp costs one short hash: a planner keeps
    16 bytes per row instead of the row's whole text.
    """
    return stamped_digest(static_digest(row), row.get(_BEAT))


def is_history(row: _Row) -> bool:
    """Exactly the planner's test: any status other than ``active`` is history."""
    return str(row.get("status") or "") != "active"


def history_summary(rows: Iterable[_Row]) -> HistorySummary:
    """From scratch: the set digest of the historical rows among ``rows`` (active ones skipped)."""
    fold = HistoryFold()
    for row in rows:
        if is_history(row):
            fold.add(row_unit(row), row.get("worker_identity"))
    return fold.summary()


def registry_token(active_digests: Iterable[bytes], history: HistorySummary = EMPTY_HISTORY) -> str:
    """``registry_fingerprint`` from the active rows' ``row_digest`` and the history digest.

    v3: the sorted digests of the active rows plus the MuHash set digest of
    every historical row (``history.HistorySummary``). Both parts are content
    only and order-free, so the token still moves on any relevant change, and
    the store can keep the history part current one row at a time instead of
    the planner re-reading every terminal row per plan. (v2 hashed each active
    row's whole text, which a planner then had to hold for every row.)
    """
    return digest_elements(
        "registryfp-v3", active_digests, "registryfp", tail="history=" + history.digest
    )


def candidate_token(digests: Iterable[bytes]) -> str:
    """``candidate_fingerprint`` from the candidate rows' ``row_digest``."""
    return digest_elements("candidatefp-v2", digests, "candidatefp")


def scope_token(digests: Iterable[bytes], anchor_identities: Iterable[str]) -> str:
    """``scope_fingerprint`` from the scope rows' ``row_digest`` and the anchors."""
    anchors = sorted({str(identity) for identity in anchor_identities})
    # The anchor list itself participates, so a scope that happens to contain
    # the same rows for a different requested set still yields another token.
    return digest_elements("scopefp-v2", digests, "scopefp", tail="anchors=" + "\x1d".join(anchors))


def registry_fingerprint(rows: Iterable[_Row], history: HistorySummary | None = None) -> str:
    """Token over every row of the registry (the strict compare-and-swap).

    With ``history`` (the store's maintained summary of every historical row)
    only the active rows among ``rows`` are read; without it ``rows`` must be
    the whole registry and the history digest is computed from them.
    """
    listed = rows if isinstance(rows, list) else list(rows)
    active = [row_digest(row) for row in listed if not is_history(row)]
    return registry_token(active, history if history is not None else history_summary(listed))


def candidate_fingerprint(candidate_rows: Iterable[_Row]) -> str:
    """Token over exactly the approved candidate rows, so apply cannot widen or narrow them."""
    return candidate_token(row_digest(row) for row in candidate_rows)


def identity_keys(row: _Row) -> set[tuple[str, str]]:
    """The identity keys of one row; empty values tie nothing together."""
    keys: set[tuple[str, str]] = set()
    for name in ("worker_identity", "session_id", "generation_id", "process_identity", "pid"):
        text = canon(row.get(name))
        if text:
            keys.add((name, text))
    instance = canon(row.get("client_instance_id"))
    namespace = canon(row.get("namespace"))
    if instance and namespace:
        keys.add(("instance_namespace", f"{instance}/{namespace}"))
    return keys


def sharing_positions(rows: Sequence[_Row], keys: Iterable[tuple[str, str]]) -> list[int]:
    """Positions of the rows carrying any of ``keys`` (as ``identity_keys`` names them).

    The same answer as testing ``identity_keys(row) & keys`` row by row, without
    building a set per row: a planner runs it over the whole registry whenever a
    row's identity columns change, instead of holding every row's keys.
    """
    by_name: dict[str, set[str]] = {}
    for name, value in keys:
        by_name.setdefault(name, set()).add(value)
    pairs = by_name.pop("instance_namespace", None)
    named = list(by_name.items())
    out: list[int] = []
    for index, row in enumerate(rows):
        get = row.get
        # A key's text is never empty, so an empty column matches nothing.
        if any(canon(get(name)) in values for name, values in named):
            out.append(index)
        elif pairs:
            instance = canon(get("client_instance_id"))
            namespace = canon(get("namespace"))
            if instance and namespace and f"{instance}/{namespace}" in pairs:
                out.append(index)
    return out


def scope_indices(rows: Sequence[_Row], anchor_identities: Iterable[str]) -> list[int]:
    """Positions of the anchors plus every row sharing any identity key with one of them.

    One hop only: the scope is what an operator's decision about these anchors
    could depend on, not the transitive closure of the whole fleet.
    """
    anchors = {str(identity) for identity in anchor_identities}
    if not anchors:
        return []
    anchor_keys: set[tuple[str, str]] = set()
    for row in rows:
        if canon(row.get("worker_identity")) in anchors:
            anchor_keys |= identity_keys(row)
    return [i for i, row in enumerate(rows) if identity_keys(row) & anchor_keys]


def scope_rows(rows: Sequence[_Row], anchor_identities: Iterable[str]) -> list[_Row]:
    """The rows of the decision scope of the given anchors."""
    return [rows[i] for i in scope_indices(rows, anchor_identities)]


def scope_fingerprint(rows: Sequence[_Row], anchor_identities: Iterable[str]) -> str:
    """Token over the decision scope of the given candidates (the scoped compare-and-swap)."""
    anchors = list(anchor_identities)
    return scope_token((row_digest(r) for r in scope_rows(rows, anchors)), anchors)


def lease_fingerprint(leases: Iterable[_Row]) -> str:
    """Token over the ownership-relevant fields of the given (active) leases."""
    return digest(
        "leasefp-v1", [serialize(lease, LEASE_FINGERPRINT_FIELDS) for lease in leases], "leasefp"
    )
