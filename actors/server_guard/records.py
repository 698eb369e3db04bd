"""A wrapped server's exit on record: its row released with the audit event (why, every signal)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from actors.mailbox import Outbox, ask
from actors.server_guard.stopping import StopOutcome
from actors.server_guard.watches import Watched
from actors.writer.inbox import AppendAudit, ReleaseRegistration, WriterInbox, ask_writer
from supervisor.errors import SupervisorError
from supervisor.observe.logs import get_logger

__all__ = ["exit_audit", "release_exited"]

_log = get_logger()


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


async def release_exited(
    writer: Outbox[WriterInbox], server: Watched, reason: str, outcome: StopOutcome, *, stamp: str
) -> None:
    """Release the row of a server whose tree is gone, with its exit record (or record only
    the exit, for a tree that had no row)."""
    audit = exit_audit(server, reason, outcome, stamp=stamp)
    _log.info(
        "server_exit",
        worker_identity=server.worker_identity,
        pid=server.pid,
        reason=reason,
        signalled=len(outcome.signals),
    )
    if server.worker_identity is None:
        await _append_audit(writer, audit)
        return
    identity = server.worker_identity
    ack = await ask_writer(
        writer,
        lambda reply: ReleaseRegistration(
            worker_identity=identity,
            pid=server.pid,
            generation_id=server.generation_id,
            fencing_epoch=server.fencing_epoch,
            stamp=stamp,
            audit=audit,
            reply=reply,
        ),
    )
    if not ack.ok:
        _log.warning(
            "server_release_refused", worker_identity=identity, code=ack.code, detail=ack.detail
        )


async def _append_audit(writer: Outbox[WriterInbox], audit: Mapping[str, Any]) -> None:
    try:
        await ask(
            writer,
            lambda reply: AppendAudit(event=audit, reply=reply),
            actor="registry_writer",
        )
    except SupervisorError as exc:
        _log.warning("audit_write_failed", action="server_exit", detail=exc.detail)
