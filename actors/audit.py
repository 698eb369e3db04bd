"""The audit trail: one row per decision or refusal, committed through the writer before
the caller hears the answer."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from actors.mailbox import Outbox, ask
from actors.replies import WriteAck
from actors.writer.inbox import AppendAudit, WriterInbox
from supervisor.errors import SupervisorError
from supervisor.observe.logs import get_logger
from supervisor.policy.control.permissions import Profile
from supervisor.policy.stamps import format_stamp

__all__ = [
    "AUDITED_KEYS",
    "audit_event",
    "audit_refusal",
    "audit_row",
    "mark_unrecorded",
    "write_audit",
]

_log = get_logger()

#: Tries of one audit write before its failure is reported to the caller.
AUDIT_ATTEMPTS = 3

#: Result fields worth keeping in the audit trail: tokens, counts, outcome.
#: Profiles' secrets never reach a result, so none can reach the audit log.
AUDITED_KEYS: tuple[str, ...] = (
    "outcome",
    "code",
    "registry_fingerprint",
    "candidate_fingerprint",
    "scope_fingerprint",
    "compared_token",
    "expected_registry_fingerprint",
    "expected_scope_fingerprint",
    "expected_candidate_fingerprint",
    "requested_count",
    "assessed_count",
    "candidate_count",
    "preserved_count",
    "retired_count",
    "mutation_performed",
    "reasons",
    "mass_guard",
    "mass_guard_overridden",
)


def audit_row(
    profile: Profile | None, action: str, outcome: str, detail: Mapping[str, Any], *, at: datetime
) -> dict[str, Any]:
    """One ``audit_events`` row: when, who (profile and role), what, its outcome, and detail."""
    return {
        "at": format_stamp(at),
        "actor": profile.name if profile else None,
        "role": profile.role_kind if profile else None,
        "action": action,
        "outcome": outcome,
        "detail": dict(detail),
    }


def audit_event(
    profile: Profile | None, action: str, result: Mapping[str, Any], *, at: datetime
) -> dict[str, Any]:
    """The audit row of a decision's answer: its outcome and numbers (``AUDITED_KEYS``)."""
    detail = {key: result.get(key) for key in AUDITED_KEYS if key in result}
    detail["retired"] = [r.get("worker_identity") for r in result.get("retired") or []]
    outcome = result.get("outcome") or ("allowed" if result.get("success") else "refused")
    return audit_row(profile, action, outcome, detail, at=at)


async def write_audit(writer: Outbox[WriterInbox], event: Mapping[str, Any]) -> str | None:
    """Append one audit event through the writer; None once committed, else why not.

    Retried a few times (a busy database, or a batch that failed around it, passes);
    a failure is returned, never swallowed, so the caller can refuse or say so.
    """
    failure = ""
    for _ in range(AUDIT_ATTEMPTS):
        try:
            ack: WriteAck = await ask(
                writer,
                lambda reply: AppendAudit(event=event, reply=reply),
                actor="registry_writer",
            )
        except SupervisorError as exc:
            failure = f"{exc.code}: {exc.detail}"
            break  # the writer is gone: asking again cannot help
        if ack.ok:
            return None
        failure = f"{ack.code}: {ack.detail}"
    _log.error("audit_write_failed", action=event.get("action"), detail=failure)
    return failure


def mark_unrecorded(result: dict[str, Any], what: str, failure: str) -> None:
    """Say in ``result`` itself that the trail has no row of it."""
    result["audit_recorded"] = False
    result["reasons"] = [
        *(result.get("reasons") or []),
        f"this {what} could not be written to the audit trail: {failure}",
    ]


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
