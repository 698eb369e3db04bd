"""The audit event the server guard writes with each release: why, and every signal sent."""

from __future__ import annotations

from typing import Any

from actors.servers.stopping import StopOutcome
from actors.servers.watches import Watched

__all__ = ["exit_audit"]


def exit_audit(server: Watched, reason: str, outcome: StopOutcome, *, stamp: str) -> dict[str, Any]:
    """One ``audit_events`` row (``action = server_exit``, ``outcome`` = the exit reason)."""
    return {
        "at": stamp,
        "actor": "server_guard",
        "role": None,
        "action": "server_exit",
        "outcome": reason,
        "detail": {
            "worker_identity": server.worker_identity,
            "pid": server.pid,
            "process_start_time": server.start,
            "client_pid": server.client[0],
            "client_process_start_time": server.client[1],
            "name": server.name,
            "signals": {str(pid): sent for pid, sent in sorted(outcome.signals.items())},
        },
    }
