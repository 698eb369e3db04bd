"""Observed servers as ``observed_servers`` rows, and rows of an earlier run read back."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from actors.census.tracked import Tracked

__all__ = ["decoded", "gone_row", "observed_row"]

_LISTS = ("command", "env_keys", "evidence")


def observed_row(
    server: Tracked, *, host_id: str, boot_id: str, stamp: str, gone: bool = False
) -> dict[str, Any]:
    """The row of one observed server as of ``stamp`` (its first sight's facts, what it
    runs now, today's ``last_seen``, and the first stamps its owner and itself were seen
    gone)."""
    record = server.server
    owner = record.owner.process if record.owner is not None else None
    return {
        "host_id": host_id,
        "boot_id": boot_id,
        "pid": server.process.pid,
        "process_start_time": server.process.start,
        "provenance": record.provenance,
        "command": json.dumps(list(record.command)),
        "cwd": record.cwd,
        "env_keys": json.dumps(list(record.env_keys)),
        "uid": record.uid,
        "owner_pid": owner.pid if owner is not None else None,
        "owner_start_time": owner.start if owner is not None else None,
        "owner_name": record.owner.name if record.owner is not None else None,
        "evidence": json.dumps(list(record.evidence)),
        "first_seen": record.first_seen,
        "last_seen": stamp,
        "owner_gone_at": server.owner_gone_at,
        "gone_at": stamp if gone else None,
    }


def gone_row(row: Mapping[str, Any], stamp: str) -> dict[str, Any]:
    """A stored row (as ``decoded`` gives it) whose process was not found again."""
    encoded = {k: json.dumps(list(v)) if k in _LISTS else v for k, v in row.items()}
    return {**encoded, "last_seen": row["last_seen"], "gone_at": stamp}


def decoded(row: Mapping[str, Any]) -> dict[str, Any]:
    """A stored row with its JSON lists as lists (an unreadable one as empty)."""
    out = dict(row)
    for key in _LISTS:
        try:
            value = json.loads(str(row.get(key) or "[]"))
        except ValueError:
            value = []
        out[key] = [str(v) for v in value] if isinstance(value, list) else []
    return out
