"""What a reap writes down: one audit event per target, and each target as the answer shows it."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from actors.audit import audit_row
from actors.reap.trees import TargetResult
from supervisor.policy.control.permissions import Profile
from supervisor.policy.refusal import refused
from supervisor.policy.servers.reap_rules import (
    CODE_REAP_INCOMPLETE,
    OUTCOME_APPLIED,
    TARGET_SURVIVED,
)
from supervisor.policy.servers.reap_view import entry_dict

__all__ = ["REAP_ACTION", "applied_answer", "reap_refusal", "target_dict", "target_event"]

#: The audit action of an apply and of each target it reaped.
REAP_ACTION = "reap_apply"


def target_dict(result: TargetResult) -> dict[str, Any]:
    """One target as planned, and what became of it."""
    return {
        **entry_dict(result.entry),
        "outcome": result.outcome,
        "signals": {str(pid): list(names) for pid, names in sorted(result.signals.items())},
        "exit_seen": result.exit_seen,
        "rss_bytes_freed": result.rss_bytes_freed,
        "survivors": list(result.survivors),
    }


def target_event(
    profile: Profile | None, result: TargetResult, *, plan_token: str, at: datetime
) -> dict[str, Any]:
    """The ``audit_events`` row of one target: who, the process (pid, start, command), the
    evidence it was reaped on, the signals sent, whether its exit was seen, the RSS freed."""
    server = result.entry.server
    detail = {
        "pid": server.process.pid,
        "start": server.process.start,
        "command": list(server.command),
        "reason_code": result.entry.reason_code,
        "evidence": [result.entry.detail, *server.evidence],
        "members": [m.pid for m in result.entry.members],
        "signals": {str(pid): list(names) for pid, names in sorted(result.signals.items())},
        "exit_seen": result.exit_seen,
        "rss_bytes_freed": result.rss_bytes_freed,
        "plan_token": plan_token,
        "mutation_performed": bool(result.signals),
    }
    return audit_row(profile, REAP_ACTION, result.outcome, detail, at=at)


def reap_refusal(code: str, reasons: Sequence[str], **extra: Any) -> dict[str, Any]:
    """A refused apply: nothing was signalled, why, and its stable ``code``."""
    return refused(code, *reasons, reaped_count=0, **extra)


def applied_answer(plan_token: str, results: Sequence[TargetResult]) -> dict[str, Any]:
    """The answer of an apply that ran: a success when no target's tree survived."""
    survived = [r for r in results if r.outcome == TARGET_SURVIVED]
    freed = [r.rss_bytes_freed for r in results if r.rss_bytes_freed is not None]
    answer: dict[str, Any] = {
        "success": not survived,
        "outcome": OUTCOME_APPLIED,
        "plan_token": plan_token,
        "target_count": len(results),
        "reaped_count": sum(1 for r in results if r.exit_seen),
        "rss_bytes_freed": sum(freed),
        "targets": [target_dict(r) for r in results],
        "mutation_performed": any(r.signals for r in results),
    }
    if survived:
        answer["code"] = CODE_REAP_INCOMPLETE
        answer["reasons"] = [
            f"pid {r.entry.server.process.pid}: {list(r.survivors)} still run after SIGKILL"
            for r in survived
        ]
    return answer
