"""Liveness verdicts, pid evidence lookup and stamp parsing."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest

from supervisor.policy.evidence import UNKNOWN, PidEvidence, evidence_for, row_pid
from supervisor.policy.fleet.liveness import assess_liveness, pid_evidence_applies, ttl_seconds
from supervisor.policy.stamps import format_stamp, parse_stamp

from .rows import FRESH_AGE, HOST, NOW, OTHER_HOST, STALE_AGE, TTL, ago, row


def _assess(r: dict[str, Any], pid_alive: bool | None, host: str | None = HOST) -> Any:
    return assess_liveness(r, now=NOW, pid_alive=pid_alive, current_host_id=host)


@pytest.mark.parametrize("pid_alive", [True, None])
def test_fresh_heartbeat_with_pid_alive_or_unknown_is_live(pid_alive: bool | None) -> None:
    verdict = _assess(row("w", pid=101, age=FRESH_AGE), pid_alive)
    assert verdict.live
    assert verdict.heartbeat_fresh is True
    assert verdict.pid_alive is pid_alive
    assert verdict.reason == "heartbeat fresh"


def test_dead_pid_withdraws_liveness_from_a_fresh_heartbeat() -> None:
    verdict = _assess(row("w", pid=101, age=FRESH_AGE), False)
    assert not verdict.live
    assert verdict.heartbeat_fresh is True
    assert verdict.reason == "pid is known dead"


def test_alive_pid_never_grants_liveness_to_an_expired_heartbeat() -> None:
    verdict = _assess(row("w", pid=101, age=STALE_AGE), True)
    assert not verdict.live
    assert verdict.heartbeat_fresh is False
    assert verdict.reason == "heartbeat expired"


def test_heartbeat_exactly_ttl_old_is_not_fresh() -> None:
    verdict = _assess(row("w", pid=101, age=float(TTL)), True)
    assert verdict.heartbeat_age_seconds == TTL
    assert verdict.heartbeat_fresh is False
    assert not verdict.live


def test_heartbeat_just_younger_than_ttl_is_fresh() -> None:
    beat = format_stamp(NOW - timedelta(seconds=TTL) + timedelta(microseconds=1))
    verdict = _assess(row("w", pid=101, last_heartbeat_at=beat), True)
    assert verdict.heartbeat_fresh is True
    assert verdict.live


@pytest.mark.parametrize("stamp", ["not-a-stamp", "", "  ", None, 12345, "2026-13-01T00:00:00Z"])
def test_unparsable_heartbeat_has_unknown_freshness(stamp: object) -> None:
    verdict = _assess(row("w", pid=101, last_heartbeat_at=stamp), True)
    assert verdict.heartbeat_fresh is None
    assert verdict.heartbeat_age_seconds is None
    assert not verdict.live
    assert verdict.reason == "last heartbeat is missing or unparsable"


@pytest.mark.parametrize(
    "ttl", [None, 0, -5, 0.0, "abc", float("nan"), float("inf"), True, False, [900]]
)
def test_invalid_ttl_gives_unknown_freshness(ttl: object) -> None:
    r = row("w", pid=101, age=FRESH_AGE, heartbeat_ttl_seconds=ttl)
    assert ttl_seconds(r) is None
    verdict = _assess(r, True)
    assert verdict.heartbeat_fresh is None
    assert verdict.heartbeat_age_seconds == FRESH_AGE
    assert not verdict.live
    assert verdict.reason == "heartbeat TTL is missing or invalid"


@pytest.mark.parametrize(("ttl", "expected"), [(900, 900.0), (900.0, 900.0), ("60", 60.0)])
def test_ttl_accepts_numeric_forms(ttl: object, expected: float) -> None:
    assert ttl_seconds({"heartbeat_ttl_seconds": ttl}) == expected


@pytest.mark.parametrize("status", ["released", "superseded", "retired", "", None, "ACTIVE"])
def test_non_active_row_is_never_live(status: str | None) -> None:
    verdict = _assess(row("w", pid=101, age=FRESH_AGE, status=status), True)
    assert not verdict.live
    assert not verdict.active
    assert verdict.reason == "registration is not active"


def test_foreign_host_row_ignores_local_pid_evidence() -> None:
    r = row("w", pid=101, age=FRESH_AGE, host_id=OTHER_HOST)
    assert not pid_evidence_applies(r, HOST)
    verdict = _assess(r, False)
    assert verdict.live
    assert verdict.pid_alive is None
    assert not verdict.pid_evidence_local


def test_same_host_row_takes_local_pid_evidence() -> None:
    verdict = _assess(row("w", pid=101, age=FRESH_AGE), False)
    assert verdict.pid_evidence_local
    assert verdict.pid_alive is False


@pytest.mark.parametrize(
    ("recorded", "current"), [(None, HOST), ("", HOST), ("   ", HOST), (OTHER_HOST, None)]
)
def test_unprovable_host_binding_takes_local_evidence(
    recorded: str | None, current: str | None
) -> None:
    # A row with no host recorded cannot be shown to be foreign; neither can any row
    # when this host is unknown. The local answer is used (and plan fencing refuses later).
    assert pid_evidence_applies({"host_id": recorded}, current)


# --- evidence lookup -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (101, 101),
        ("101", 101),
        (101.0, 101),
        (101.5, None),
        (0, None),
        (-3, None),
        (True, None),
        (None, None),
        ("pid-101", None),
    ],
)
def test_row_pid(raw: object, expected: int | None) -> None:
    assert row_pid({"pid": raw}) == expected


def test_evidence_for_unprobed_pid_is_unknown_never_dead() -> None:
    evidence = {101: PidEvidence(alive=False)}
    assert evidence_for({"pid": 101}, evidence).alive is False
    assert evidence_for({"pid": 102}, evidence) == UNKNOWN
    assert evidence_for({"pid": None}, evidence) == UNKNOWN


# --- stamps --------------------------------------------------------------------------------


def test_stamp_round_trip_and_accepted_forms() -> None:
    moment = datetime(2026, 7, 30, 6, 59, 1, 250000, tzinfo=UTC)
    assert parse_stamp(format_stamp(moment)) == moment
    assert parse_stamp("2026-07-30T06:59:01Z") == moment.replace(microsecond=0)
    assert parse_stamp("2026-07-30T08:59:01+02:00") == moment.replace(microsecond=0)
    offset = datetime(2026, 7, 30, 8, 59, 1, 250000, tzinfo=timezone(timedelta(hours=2)))
    assert parse_stamp(offset) == moment
    assert parse_stamp(datetime(2026, 7, 30, 6, 59, 1)) is None
    assert ago(0) == format_stamp(NOW)


def test_format_stamp_refuses_naive_datetimes() -> None:
    with pytest.raises(ValueError, match="aware"):
        format_stamp(datetime(2026, 7, 30, 7, 0, 0))
