"""Compare-and-swap tokens: content only, order-free, and moved by exactly the relevant fields."""

from __future__ import annotations

import hashlib
from datetime import timedelta
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from supervisor.policy.canonical import canon, digest
from supervisor.policy.retirement.fingerprints import (
    FINGERPRINT_FIELDS,
    LEASE_FINGERPRINT_FIELDS,
    candidate_fingerprint,
    identity_keys,
    lease_fingerprint,
    registry_fingerprint,
    row_digest,
    row_unit,
    scope_fingerprint,
    scope_rows,
    sharing_positions,
    stamped_digest,
    static_digest,
)

from .rows import NOW, ago, make_plan, row, trusted_instance

EXCLUDED_COLUMNS = (
    "token_fingerprint",
    "startup_revision",
    "loaded_revision",
    "parity_revision",
    "live_revision",
    "retired_at",
    "retired_by",
    "retirement_reason",
    "released_at",
)


def _fleet() -> list[dict[str, Any]]:
    return [row("w-1", pid=101), row("w-2", pid=102), row("w-3", pid=103)]


def _changed(value: Any) -> Any:
    if isinstance(value, bool):
        return not value
    if isinstance(value, int | float):
        return value + 7
    return f"{canon(value)}-moved"


# --- registry_fingerprint -----------------------------------------------------------------


def test_field_contract_has_24_fields_including_fencing_triple() -> None:
    assert len(FINGERPRINT_FIELDS) == 24
    assert len(set(FINGERPRINT_FIELDS)) == 24
    assert {"host_id", "boot_id", "process_start_time"} <= set(FINGERPRINT_FIELDS)
    assert not set(EXCLUDED_COLUMNS) & set(FINGERPRINT_FIELDS)


def test_same_contents_observed_at_different_times_give_same_plan_tokens() -> None:
    rows = _fleet()
    early = make_plan(rows, now=NOW)
    late = make_plan(rows, now=NOW + timedelta(hours=1))
    assert early.candidate_worker_identities == late.candidate_worker_identities
    assert early.registry_fingerprint == late.registry_fingerprint
    assert early.candidate_fingerprint == late.candidate_fingerprint
    assert early.scope_fingerprint == late.scope_fingerprint


def test_row_order_does_not_matter() -> None:
    rows = _fleet()
    reordered = [rows[2], rows[0], rows[1]]
    assert registry_fingerprint(rows) == registry_fingerprint(reordered)
    assert candidate_fingerprint(rows) == candidate_fingerprint(reordered)
    assert scope_fingerprint(rows, ["w-1", "w-3"]) == scope_fingerprint(reordered, ["w-3", "w-1"])


def test_integral_float_ttl_hashes_like_int() -> None:
    as_int = [row("w-1", pid=101, heartbeat_ttl_seconds=900)]
    as_float = [row("w-1", pid=101, heartbeat_ttl_seconds=900.0)]
    assert registry_fingerprint(as_int) == registry_fingerprint(as_float)
    assert candidate_fingerprint(as_int) == candidate_fingerprint(as_float)
    # A genuinely different TTL still moves it.
    assert registry_fingerprint(as_int) != registry_fingerprint(
        [row("w-1", pid=101, heartbeat_ttl_seconds=900.5)]
    )


@pytest.mark.parametrize("field", FINGERPRINT_FIELDS)
def test_every_relevant_field_moves_the_registry_token(field: str) -> None:
    rows = _fleet()
    baseline = registry_fingerprint(rows)
    moved = [dict(r) for r in rows]
    moved[1][field] = _changed(moved[1][field])
    assert registry_fingerprint(moved) != baseline


@pytest.mark.parametrize("field", FINGERPRINT_FIELDS)
def test_clearing_a_relevant_field_moves_the_registry_token(field: str) -> None:
    rows = _fleet()
    moved = [dict(r) for r in rows]
    moved[0][field] = None
    assert registry_fingerprint(moved) != registry_fingerprint(rows)


@pytest.mark.parametrize("column", EXCLUDED_COLUMNS)
def test_excluded_columns_do_not_move_the_registry_token(column: str) -> None:
    rows = _fleet()
    moved = [dict(r) for r in rows]
    moved[0][column] = "2026-07-30T07:00:00.000000Z-changed"
    assert registry_fingerprint(moved) == registry_fingerprint(rows)


def test_row_creation_and_deletion_move_the_registry_token() -> None:
    rows = _fleet()
    baseline = registry_fingerprint(rows)
    assert registry_fingerprint(rows[:2]) != baseline
    assert registry_fingerprint([*rows, row("w-4", pid=104)]) != baseline
    assert registry_fingerprint([]) != baseline


def test_token_shapes_are_prefixed() -> None:
    rows = _fleet()
    assert registry_fingerprint(rows).startswith("registryfp-")
    assert candidate_fingerprint(rows).startswith("candidatefp-")
    assert scope_fingerprint(rows, ["w-1"]).startswith("scopefp-")
    assert lease_fingerprint([]).startswith("leasefp-")


# --- candidate_fingerprint -----------------------------------------------------------------


def test_candidate_fingerprint_pins_exactly_the_candidate_rows() -> None:
    rows = [*_fleet(), row("w-done", pid=104, status="released")]
    plan = make_plan(rows)
    assert plan.candidate_worker_identities == ("w-1", "w-2", "w-3")
    assert plan.candidate_fingerprint == candidate_fingerprint(rows[:3])
    # Narrowing or widening the approved set gives another token.
    assert plan.candidate_fingerprint != candidate_fingerprint(rows[:2])
    assert plan.candidate_fingerprint != candidate_fingerprint(rows)
    # The preserved row is part of the registry token but not of the candidate token.
    assert plan.registry_fingerprint == registry_fingerprint(rows)
    assert plan.candidate_fingerprint != candidate_fingerprint([])


def test_candidate_fingerprint_moves_when_a_candidate_row_changes() -> None:
    rows = _fleet()
    changed = [dict(r) for r in rows]
    changed[0]["last_heartbeat_at"] = ago(7000)
    assert candidate_fingerprint(rows) != candidate_fingerprint(changed)


# --- scope_fingerprint ---------------------------------------------------------------------

_SHARED_KEY_NEIGHBOURS: dict[str, dict[str, Any]] = {
    "worker_identity": {"worker_identity": "w-1"},
    "session_id": {"session_id": "sess-w-1"},
    "generation_id": {"generation_id": "gen-w-1"},
    "process_identity": {"process_identity": "proc-w-1"},
    "pid": {"pid": 101},
    "instance_namespace": {"client_instance_id": trusted_instance("w-1"), "namespace": "author"},
}


def _scope_fleet(shared: dict[str, Any]) -> list[dict[str, Any]]:
    anchor = row("w-1", pid=101)
    overrides = dict(shared)
    pid = overrides.pop("pid", 201)
    neighbour = row("w-n", pid=pid, age=30.0, **overrides)
    unrelated = row("w-far", pid=301, age=30.0)
    return [anchor, neighbour, unrelated]


@pytest.mark.parametrize("key", sorted(_SHARED_KEY_NEIGHBOURS))
def test_scope_moves_when_a_row_sharing_an_identity_key_changes(key: str) -> None:
    rows = _scope_fleet(_SHARED_KEY_NEIGHBOURS[key])
    assert len(scope_rows(rows, ["w-1"])) == 2
    baseline = scope_fingerprint(rows, ["w-1"])
    moved = [dict(r) for r in rows]
    moved[1]["last_heartbeat_at"] = ago(5)
    assert scope_fingerprint(moved, ["w-1"]) != baseline


def test_scope_ignores_an_unrelated_rows_heartbeat() -> None:
    rows = _scope_fleet(_SHARED_KEY_NEIGHBOURS["session_id"])
    moved = [dict(r) for r in rows]
    moved[2]["last_heartbeat_at"] = ago(1)
    assert scope_fingerprint(moved, ["w-1"]) == scope_fingerprint(rows, ["w-1"])
    # ...while the whole-registry token does move.
    assert registry_fingerprint(moved) != registry_fingerprint(rows)


def test_instance_alone_or_namespace_alone_does_not_join_the_scope() -> None:
    anchor = row("w-1", pid=101)
    same_instance = row(
        "w-a", pid=201, namespace="reviewer", client_instance_id=anchor["client_instance_id"]
    )
    same_namespace = row("w-b", pid=202)
    scope = scope_rows([anchor, same_instance, same_namespace], ["w-1"])
    assert [r["worker_identity"] for r in scope] == ["w-1"]


def test_instance_without_namespace_ties_nothing() -> None:
    instance = trusted_instance("w-1")
    anchor = row("w-1", pid=101, namespace=None, client_instance_id=instance)
    other = row("w-2", pid=102, namespace=None, client_instance_id=instance)
    assert [r["worker_identity"] for r in scope_rows([anchor, other], ["w-1"])] == ["w-1"]


def test_a_row_joining_the_scope_moves_it() -> None:
    rows = _scope_fleet(_SHARED_KEY_NEIGHBOURS["generation_id"])
    joined = [*rows, row("w-late", pid=401, session_id="sess-w-1")]
    assert scope_fingerprint(joined, ["w-1"]) != scope_fingerprint(rows, ["w-1"])


def test_scope_token_depends_on_the_anchor_set() -> None:
    rows = _fleet()
    assert scope_fingerprint(rows, ["w-1"]) != scope_fingerprint(rows, ["w-1", "w-2"])
    assert scope_fingerprint(rows, ["w-1", "w-1"]) == scope_fingerprint(rows, ["w-1"])


# --- lease_fingerprint ---------------------------------------------------------------------


def _lease(lease_id: str, **overrides: Any) -> dict[str, Any]:
    lease: dict[str, Any] = {
        "lease_id": lease_id,
        "role": "author",
        "work_item_key": f"issue-{lease_id}",
        "status": "active",
        "session_id": f"sess-{lease_id}",
        "owner_pid": 500,
        "session_pid": 501,
        "generation": 3,
        "phase": "work",
        "acquired_at": ago(600),
        "heartbeat_at": ago(60),
        "expires_at": ago(-600),
    }
    lease.update(overrides)
    return lease


def test_lease_token_moves_on_acquire_and_release() -> None:
    leases = [_lease("L1")]
    baseline = lease_fingerprint(leases)
    assert lease_fingerprint([*leases, _lease("L2")]) != baseline
    assert lease_fingerprint([]) != baseline
    assert lease_fingerprint([_lease("L1", status="released")]) != baseline


@pytest.mark.parametrize("field", LEASE_FINGERPRINT_FIELDS)
def test_lease_token_moves_on_ownership_fields(field: str) -> None:
    leases = [_lease("L1"), _lease("L2")]
    moved = [dict(lease) for lease in leases]
    moved[0][field] = _changed(moved[0][field])
    assert lease_fingerprint(moved) != lease_fingerprint(leases)


def test_lease_token_ignores_lease_heartbeat() -> None:
    leases = [_lease("L1"), _lease("L2")]
    moved = [dict(lease) for lease in leases]
    moved[0]["heartbeat_at"] = ago(1)
    assert lease_fingerprint(moved) == lease_fingerprint(leases)
    assert lease_fingerprint(list(reversed(leases))) == lease_fingerprint(leases)


@given(
    version=st.text(max_size=12),
    units=st.lists(st.text(max_size=30), max_size=12),
)
def test_digest_hashes_exactly_the_joined_sorted_record(version: str, units: list[str]) -> None:
    # Tokens are compared across versions of this code (a plan by one daemon, the
    # apply by its successor), so the piecewise hashing must equal the joined form.
    material = "\x1e".join([version, str(len(units)), *sorted(units)])
    expected = "p-" + hashlib.sha256(material.encode("utf-8")).hexdigest()[:32]
    assert digest(version, units, "p") == expected


_VALUES = st.one_of(
    st.none(),
    st.sampled_from(["", "a", "1", "2026-07-30T06:00:00.000000Z", "\x1fx=", "last_heartbeat_at="]),
    st.integers(-2, 2),
    st.floats(allow_nan=False, width=16),
)


@given(
    a=st.fixed_dictionaries({}, optional=dict.fromkeys(FINGERPRINT_FIELDS, _VALUES)),
    b=st.fixed_dictionaries({}, optional=dict.fromkeys(FINGERPRINT_FIELDS, _VALUES)),
)
def test_row_digests_are_equal_exactly_when_row_texts_are(
    a: dict[str, Any], b: dict[str, Any]
) -> None:
    # Tokens hash digests where they once hashed texts: the same content must still
    # give the same element, and any difference in a token column another one.
    assert (row_digest(a) == row_digest(b)) == (row_unit(a) == row_unit(b))
    merged = {**a, **{k: v for k, v in b.items() if k == "last_heartbeat_at"}}
    assert stamped_digest(static_digest(a), merged.get("last_heartbeat_at")) == row_digest(merged)


_KEY_VALUES = st.one_of(
    st.none(), st.sampled_from(["", "a", "b", "a/b", "1", " a"]), st.integers(0, 2)
)
_KEY_COLUMNS = (
    "worker_identity",
    "session_id",
    "generation_id",
    "process_identity",
    "pid",
    "client_instance_id",
    "namespace",
)


@given(
    rows=st.lists(
        st.fixed_dictionaries({}, optional=dict.fromkeys(_KEY_COLUMNS, _KEY_VALUES)), max_size=8
    ),
    anchors=st.lists(st.integers(0, 7), max_size=3),
)
def test_sharing_positions_are_the_rows_whose_identity_keys_meet_the_keys(
    rows: list[dict[str, Any]], anchors: list[int]
) -> None:
    keys = set().union(*(identity_keys(rows[i]) for i in anchors if i < len(rows)))
    want = [i for i, r in enumerate(rows) if identity_keys(r) & keys]
    assert sharing_positions(rows, keys) == want
