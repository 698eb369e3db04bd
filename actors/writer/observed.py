"""The census's writes: the observed MCP servers of this host, first sight to gone."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from actors.mailbox import Reply
from actors.replies import WriteAck
from supervisor.store.base import WriteTx

__all__ = ["RecordObservedServers", "record_observed"]


@dataclass(frozen=True, slots=True, kw_only=True)
class RecordObservedServers:
    """Record these observed servers (``observed_servers`` rows): a first sight inserts,
    a later one moves ``last_seen`` and sets ``owner_gone_at`` and ``gone_at`` once."""

    rows: tuple[Mapping[str, Any], ...]
    reply: Reply[WriteAck] | None = None


async def record_observed(tx: WriteTx, message: RecordObservedServers) -> WriteAck:
    observed = tx.observed()
    for row in message.rows:
        await observed.record(row)
    return WriteAck(ok=True, data={"recorded": len(message.rows)})
