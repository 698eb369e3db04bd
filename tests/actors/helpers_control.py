"""Shared set-up for control-plane actor tests: profiles with lease grants, calls, DB reads."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta
from pathlib import Path
from typing import Any

from supervisor.policy.control.permissions import Profile
from supervisor.policy.stamps import format_stamp
from tests.actors.harness import START, Harness
from tests.actors.profiles import (
    AUTHOR_P,
    CONTROLLER_P,
    LOOKER_P,
    MERGER_P,
    RECONCILER_P,
    REVIEWER_P,
)
from tests.store.rowdata import raw_query

__all__ = [
    "AUTHOR_P",
    "CONTROLLER_P",
    "LOOKER_P",
    "MERGER_P",
    "RECONCILER_P",
    "REVIEWER_P",
    "SHA_1",
    "SHA_2",
    "active_leases",
    "assign",
    "at",
    "check",
    "events",
]

SHA_1 = "1" * 40
SHA_2 = "2" * 40

WHERE: dict[str, Any] = {"remote": "prgs", "org": "org", "repo": "repo"}


def at(seconds: float) -> str:
    """The stored stamp ``seconds`` after the harness start."""
    return format_stamp(START + timedelta(seconds=seconds))


async def assign(
    h: Harness,
    session: str,
    number: int,
    *,
    kind: str = "issue",
    role: str = "author",
    profile: Profile = CONTROLLER_P,
    **extra: Any,
) -> Mapping[str, Any]:
    return await h.handle.assign_and_lease(
        profile, session_id=session, role=role, kind=kind, number=number, **WHERE, **extra
    )


async def check(
    h: Harness, session: str, number: int, action: str, *, kind: str = "issue"
) -> Mapping[str, Any]:
    return await h.handle.require_valid_assignment(
        AUTHOR_P, session_id=session, kind=kind, number=number, action=action, **WHERE
    )


def _path(h: Harness) -> Path:
    return h.store.path


def events(h: Harness, *, kind: str | None = None) -> list[tuple[Any, ...]]:
    """(kind, work_item_key, session_id, lease_id) of every committed control event."""
    rows = raw_query(
        _path(h),
        "SELECT kind, work_item_key, session_id, lease_id FROM control_events ORDER BY event_id",
    )
    return [r for r in rows if kind is None or r[0] == kind]


def active_leases(h: Harness) -> list[tuple[Any, ...]]:
    """(lease_id, work_item_key, session_id) of every active lease in the database."""
    return raw_query(
        _path(h),
        "SELECT lease_id, work_item_key, session_id FROM leases WHERE status = 'active' "
        "ORDER BY lease_id",
    )
