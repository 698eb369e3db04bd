"""What the retirement actor keeps between plans besides the memo: per-row probe inputs."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from supervisor.policy.evidence import row_pid
from supervisor.policy.fleet.liveness import STATUS_ACTIVE
from supervisor.policy.fleet.orphans import client_candidate
from supervisor.policy.incremental.row_columns import RowColumn
from supervisor.policy.retirement.history import identity_irregular

__all__ = ["PlanColumns", "active_pid"]


def active_pid(row: Mapping[str, Any]) -> int | None:
    """The pid to probe for a row: an active row's valid pid, else None."""
    if str(row.get("status") or "") != STATUS_ACTIVE:
        return None
    return row_pid(row)


def _irregular(row: Mapping[str, Any]) -> bool:
    return identity_irregular(row.get("worker_identity"))


class PlanColumns:
    """Each plan row's worker pid, client pid and identity check, and the pid list to probe.

    Kept per row object (``RowColumn``), so a plan over the store's cached view
    reads only the rows that changed since the last plan.
    """

    __slots__ = ("_clients", "_host", "_last", "_workers", "irregular")

    def __init__(self) -> None:
        self._workers = RowColumn(active_pid)
        self._host: str | None = None
        self._clients: RowColumn[int | None] | None = None
        self._last: tuple[list[int | None], list[int | None], tuple[int, ...]] | None = None
        self.irregular = RowColumn(_irregular)

    def _client_column(self, host: str | None) -> RowColumn[int | None]:
        if self._clients is None or self._host != host:
            self._host = host
            self._clients = RowColumn(lambda row: client_candidate(row, host))
        return self._clients

    def probe_list(
        self, rows: Sequence[Mapping[str, Any]], host: str | None
    ) -> tuple[tuple[int, ...], list[int | None]]:
        """The sorted pids to probe (workers and launching clients), and each row's client pid."""
        workers = self._workers.of(rows)
        clients = self._client_column(host).of(rows)
        last = self._last
        if last is not None and last[0] == workers and last[1] == clients:
            return last[2], clients
        pids = tuple(sorted({p for p in (*workers, *clients) if p is not None}))
        self._last = (workers, clients, pids)
        return pids, clients
