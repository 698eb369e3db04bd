"""A refusal or denial on the audit trail, committed before it is answered."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from actors.mailbox import Outbox
from actors.retirement.records import audit_event, mark_unrecorded, write_audit
from actors.writer.inbox import WriterInbox
from supervisor.policy.control.permissions import Profile

__all__ = ["audit_refusal"]


async def audit_refusal(
    writer: Outbox[WriterInbox],
    profile: Profile | None,
    action: str,
    result: dict[str, Any],
    *,
    at: datetime,
) -> None:
    """Write the refusal ``result`` of ``action`` to ``audit_events`` through the writer
    (who, what, outcome, code and reasons) and wait for its commit, so it is on record
    before the caller hears of it. A write that fails is said in ``result`` itself
    (``audit_recorded: false``); the caller is refused either way."""
    failure = await write_audit(writer, audit_event(profile, action, result, at=at))
    if failure is not None:
        mark_unrecorded(result, "refusal", failure)
