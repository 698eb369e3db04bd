"""Engine-neutral control-plane operations inside one write transaction (``WriteTx.control()``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

__all__ = ["ControlTx"]

Row = dict[str, Any]


class ControlTx(Protocol):
    """Sessions, work items, leases, assignments, terminal locks, events, namespace health
    verdicts and incident links, in the enclosing transaction (reads see its uncommitted
    writes; failures are StoreError).

    Every status change is a guarded update that names the status it expects, so a
    transition is a compare-and-swap even when several supervisors share a database.
    """

    async def session(self, session_id: str) -> Row | None:
        """One session row, or None."""
        ...

    async def put_session(self, row: Mapping[str, Any]) -> None:
        """Insert a session or update only the given columns (session_id, status required)."""
        ...

    async def work_items(self, keys: Sequence[str]) -> list[Row]:
        """Work item rows for these keys (missing keys are simply absent)."""
        ...

    async def put_work_item(self, row: Mapping[str, Any]) -> None:
        """Insert a work item or update the given columns; the kind must be issue or pr."""
        ...

    async def item_leases(self, keys: Sequence[str]) -> list[Row]:
        """Leases whose status is active on any of these work items, oldest first."""
        ...

    async def lease(self, lease_id: str) -> Row | None: ...

    async def insert_lease(self, row: Mapping[str, Any]) -> None:
        """A new lease; an existing lease_id, or a second active lease on one item, fails."""
        ...

    async def update_lease(
        self, lease_id: str, *, expected_status: str, changes: Mapping[str, Any]
    ) -> bool:
        """Apply ``changes`` only if the lease still has ``expected_status``."""
        ...

    async def assignment(self, *, work_item_key: str, session_id: str) -> Row | None:
        """The active assignment of this session on this item (actions decoded to tuples)."""
        ...

    async def assignment_by_lease(self, lease_id: str) -> Row | None:
        """The assignment made with this lease, whatever its status."""
        ...

    async def insert_assignment(self, row: Mapping[str, Any]) -> None: ...

    async def update_assignments(
        self, lease_ids: Sequence[str], *, expected_status: str, changes: Mapping[str, Any]
    ) -> int:
        """Apply ``changes`` to the assignments of these leases still in ``expected_status``."""
        ...

    async def active_terminal_lock(self, *, remote: str, org: str, repo: str) -> Row | None: ...

    async def insert_terminal_lock(self, row: Mapping[str, Any]) -> None:
        """A new lock; a second active lock for one repository fails."""
        ...

    async def update_terminal_lock(
        self, lock_id: str, *, expected_status: str, changes: Mapping[str, Any]
    ) -> bool: ...

    async def append_event(self, event: Mapping[str, Any]) -> None:
        """Append one control event; ``detail`` is stored as JSON with sorted keys."""
        ...

    async def events(self, *, work_item_key: str | None = None, limit: int = 100) -> list[Row]:
        """The newest ``limit`` events (optionally of one item), oldest of them first."""
        ...

    # --- namespace health verdicts and incident links (schema version 4) --------------

    async def namespace_health(self, session_id: str) -> list[Row]:
        """The session's latest verdict per namespace (flags as bools, assessment decoded)."""
        ...

    async def put_namespace_health(self, row: Mapping[str, Any]) -> None:
        """Store a verdict, replacing the session's previous one for that namespace."""
        ...

    async def incident_link(self, key: Mapping[str, Any]) -> Row | None:
        """The link with this provider key (provider, the three scope fields, issue id)."""
        ...

    async def insert_incident_link(self, row: Mapping[str, Any]) -> int:
        """A new link; answers its store-generated link_id."""
        ...

    async def update_incident_link(self, link_id: int, changes: Mapping[str, Any]) -> bool: ...

    async def incident_links_for_issue(
        self, *, gitea_org: str, gitea_repo: str, gitea_issue_number: int
    ) -> list[Row]:
        """Every link pointing at this Gitea issue, lowest link_id first."""
        ...
