"""Host lease policy: renewal decisions and the plan for a silent host's rows (pure)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from supervisor.policy.retirement.host_leases import (
    REASON_HOST_ALREADY_TERMINAL,
    REASON_HOST_ID_IN_USE,
    REASON_HOST_IS_LOCAL,
    REASON_HOST_LEASE_EXPIRED,
    REASON_HOST_LEASE_LIVE,
    REASON_HOST_LEASE_RECENT,
    REASON_HOST_LEASE_UNKNOWN,
    REASON_HOST_PROTECTED_OWNER,
    host_token,
    lease_owner_keys,
    plan_host_retirement,
    renew,
)
from supervisor.policy.stamps import format_stamp

NOW = datetime(2026, 11, 30, 12, 0, 0, tzinfo=UTC)
AFTER = 600.0


def lease(**overrides: Any) -> dict[str, Any]:
    row: dict[str, Any] = {
        "host_id": "host-c",
        "boot_id": "boot-c",
        "supervisor_id": "sup-c",
        "status": "live",
        "epoch": 1,
        "expires_at": format_stamp(NOW - timedelta(seconds=AFTER + 1)),
        "retired_rows": None,
        "declared_dead_by": None,
    }
    row.update(overrides)
    return row


def row(identity: str, **overrides: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "worker_identity": identity,
        "host_id": "host-c",
        "status": "active",
        "session_id": f"sess-{identity}",
        "pid": 100 + len(identity),
    }
    base.update(overrides)
    return base


def plan(rows: list[dict[str, Any]], host_lease: dict[str, Any] | None, **kw: Any) -> Any:
    args: dict[str, Any] = {
        "host_id": "host-c",
        "lease": host_lease,
        "local_host_id": "host-b",
        "now": NOW,
        "retire_after_seconds": AFTER,
        "owner_sessions": frozenset(),
        "owner_pids": frozenset(),
    }
    args.update(kw)
    return plan_host_retirement(rows, **args)


def test_first_renewal_inserts_a_live_lease_at_epoch_one() -> None:
    decision = renew(None, host_id="h", boot_id="b", supervisor_id="s", now=NOW, lease_seconds=30)
    assert decision.insert is not None
    assert decision.insert["status"] == "live"
    assert decision.insert["epoch"] == 1
    assert decision.insert["expires_at"] == format_stamp(NOW + timedelta(seconds=30))


def test_a_renewal_by_the_holder_only_extends_the_lease() -> None:
    decision = renew(
        lease(),
        host_id="host-c",
        boot_id="boot-c",
        supervisor_id="sup-c",
        now=NOW,
        lease_seconds=30,
    )
    assert decision.changes is not None
    assert set(decision.changes) == {"renewed_at", "expires_at", "status"}
    assert (decision.epoch, decision.declared_dead) == (1, False)


@pytest.mark.parametrize(
    ("existing", "supervisor_id", "boot_id"),
    [
        (lease(status="declared_dead", declared_dead_by="op", retired_rows=3), "sup-c", "boot-c"),
        (lease(), "sup-c2", "boot-c"),
        (lease(), "sup-c", "boot-c2"),
    ],
    ids=["declared-dead", "new-supervisor", "rebooted"],
)
def test_a_new_incarnation_gets_a_new_epoch(
    existing: dict[str, Any], supervisor_id: str, boot_id: str
) -> None:
    decision = renew(
        existing,
        host_id="host-c",
        boot_id=boot_id,
        supervisor_id=supervisor_id,
        now=NOW,
        lease_seconds=30,
    )
    assert decision.changes is not None
    assert decision.epoch == 2
    assert decision.changes["status"] == "live"
    declared = existing["status"] == "declared_dead"
    assert decision.declared_dead is declared
    assert (decision.declared_dead_by, decision.retired_rows) == (
        ("op", 3) if declared else ("", 0)
    )


def test_a_live_lease_of_another_supervisor_is_not_taken_over() -> None:
    held = lease(expires_at=format_stamp(NOW + timedelta(seconds=5)))
    decision = renew(
        held,
        host_id="host-c",
        boot_id="boot-c",
        supervisor_id="sup-other",
        now=NOW,
        lease_seconds=30,
    )
    assert decision.refused == REASON_HOST_ID_IN_USE
    assert decision.insert is None
    assert decision.changes is None


@pytest.mark.parametrize(
    ("host_lease", "local", "reason"),
    [
        (
            lease(expires_at=format_stamp(NOW + timedelta(seconds=1))),
            "host-b",
            REASON_HOST_LEASE_LIVE,
        ),
        (
            lease(expires_at=format_stamp(NOW - timedelta(seconds=AFTER - 1))),
            "host-b",
            REASON_HOST_LEASE_RECENT,
        ),
        (None, "host-b", REASON_HOST_LEASE_UNKNOWN),
        (lease(expires_at="garbage"), "host-b", REASON_HOST_LEASE_UNKNOWN),
        (lease(), "host-c", REASON_HOST_IS_LOCAL),
    ],
    ids=["live", "recent", "no-lease", "bad-expiry", "local"],
)
def test_a_host_that_is_not_long_silent_keeps_every_row(
    host_lease: dict[str, Any] | None, local: str, reason: str
) -> None:
    result = plan([row("w1"), row("w2")], host_lease, local_host_id=local)
    assert result.refused == reason
    assert result.candidates == ()
    assert [e.reason_code for e in result.preserved] == [reason, reason]


def test_a_long_silent_host_yields_its_active_rows_except_lease_owners() -> None:
    rows = [
        row("w1"),
        row("w2", status="released"),
        row("w3"),
        row("w4", host_id="host-a"),  # another host's row is never in the plan
    ]
    owners = lease_owner_keys([{"session_id": "sess-w3", "owner_pid": None}])
    result = plan(rows, lease(), owner_sessions=owners[0], owner_pids=owners[1])
    assert [(e.worker_identity, e.reason_code) for e in result.candidates] == [
        ("w1", REASON_HOST_LEASE_EXPIRED)
    ]
    assert [(e.worker_identity, e.reason_code) for e in result.preserved] == [
        ("w2", REASON_HOST_ALREADY_TERMINAL),
        ("w3", REASON_HOST_PROTECTED_OWNER),
    ]


def test_tokens_move_with_the_lease_and_the_candidates_only() -> None:
    base = plan([row("w1")], lease())
    assert plan([row("w1")], lease()) == base
    assert plan([row("w1")], lease(epoch=2)).host_token != base.host_token
    assert plan([row("w1"), row("w5")], lease()).candidate_fingerprint != (
        base.candidate_fingerprint
    )
    # A row of another host joining the registry moves nothing of this plan.
    other = plan([row("w1"), row("x", host_id="host-a")], lease())
    assert (other.host_token, other.candidate_fingerprint) == (
        base.host_token,
        base.candidate_fingerprint,
    )
    assert host_token(None) != host_token(lease())
