"""The control-plane MCP tools: the allocator and the lease tools, as thin adapters to a backend."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations

from supervisor.policy.control.permissions import Profile
from supervisor.surfaces.mcp_answers import tool_answer
from supervisor.surfaces.mcp_health_tools import HealthToolBackend, register_health_tools

__all__ = [
    "ALLOCATE_TOOL",
    "CHECK_TOOL",
    "CONTROL_TOOL_NAMES",
    "HEARTBEAT_TOOL",
    "RELEASE_TOOL",
    "ControlToolBackend",
    "register_control_tools",
]

#: The customer's allocator tool name; the lease tools are named after it.
ALLOCATE_TOOL = "gitea_allocate_next_work"
HEARTBEAT_TOOL = "gitea_heartbeat_work_lease"
RELEASE_TOOL = "gitea_release_work_lease"
CHECK_TOOL = "gitea_require_valid_assignment"
CONTROL_TOOL_NAMES = (ALLOCATE_TOOL, HEARTBEAT_TOOL, RELEASE_TOOL, CHECK_TOOL)

_LOST_LEASE_ANSWER = (
    "no answer came back, so whether the lease changed is unknown; asking again is "
    "safe (a session asking for what it holds gets its own lease back)"
)


@runtime_checkable
class ControlToolBackend(Protocol):
    """What the control tools call (SupervisorHandle in the daemon, the socket client in
    the stdio bridge); ``profile`` is the caller the MCP transport authenticated."""

    async def allocate_next_work(
        self,
        profile: Profile | None,
        *,
        session_id: str,
        remote: str,
        org: str,
        repo: str,
        candidates: Sequence[Mapping[str, Any]],
        role: str | None = None,
        apply: bool = False,
        lease_ttl_seconds: float | None = None,
        owner_pid: int | None = None,
    ) -> Mapping[str, Any]: ...

    async def heartbeat_lease(
        self,
        profile: Profile | None,
        *,
        session_id: str,
        lease_id: str,
        lease_ttl_seconds: float | None = None,
    ) -> Mapping[str, Any]: ...

    async def release_lease(
        self, profile: Profile | None, *, session_id: str, lease_id: str
    ) -> Mapping[str, Any]: ...

    async def require_valid_assignment(
        self,
        profile: Profile | None,
        *,
        session_id: str,
        remote: str,
        org: str,
        repo: str,
        kind: str,
        number: int,
        action: str,
    ) -> Mapping[str, Any]: ...


async def _answer(call: Awaitable[Mapping[str, Any]], *, mutating: bool) -> dict[str, Any]:
    return await tool_answer(call, mutating=mutating, lost=_LOST_LEASE_ANSWER)


def register_control_tools(
    server: MCPServer[Any],
    backend: ControlToolBackend,
    *,
    profile_resolver: Callable[[], Profile | None],
) -> None:
    """Add the allocator and lease tools (and, when the backend has them, the namespace
    health and incident link tools) to ``server``; every decision is the backend's."""

    @server.tool(
        name=ALLOCATE_TOOL,
        annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False),
    )
    async def allocate_tool(
        *,
        session_id: str,
        remote: str,
        org: str,
        repo: str,
        candidates: list[dict[str, Any]],
        apply: bool = False,
        role: str | None = None,
        lease_ttl_seconds: float | None = None,
        owner_pid: int | None = None,
    ) -> dict[str, Any]:
        """Ask the controller-owned allocator for your next issue or pull request.

        Do not pick work yourself: call this with apply=false to preview, then
        apply=true to take the item. With apply the supervisor routes the
        candidates and leases the pick in one transaction, so two sessions never
        hold the same item. Outcomes: assigned_work (with lease_proof: lease id,
        expiry, expected head, allowed and forbidden actions), wait (another
        session holds it; owner_session_id names it), blocked_by_terminal_path,
        no_safe_work, role_ineligible, preview. Skipped candidates come with reasons.

        Args:
            session_id: Your session id (the one your worker registered with).
            remote: Gitea remote name.
            org: Repository owner.
            repo: Repository name.
            candidates: Open issues and pull requests, each an object with kind
                ("issue" or "pr"), number, and optionally state, labels, title,
                priority, head_sha, created_at and the routing signals
                request_changes_current_head, approval_on_current_head,
                approval_stale, approval_contaminated, mergeable, blocked,
                dependency_unmet, dependency_reason. Monitoring incidents are refused.
            apply: false previews; true reserves the selected item.
            role: Your role; defaults to your profile's role (another is refused).
            lease_ttl_seconds: Lease length; renew it with the heartbeat tool.
            owner_pid: Your worker's pid, so retirement protects the lease owner.
        """
        return await _answer(
            backend.allocate_next_work(
                profile_resolver(),
                session_id=session_id,
                remote=remote,
                org=org,
                repo=repo,
                candidates=candidates,
                role=role,
                apply=apply,
                lease_ttl_seconds=lease_ttl_seconds,
                owner_pid=owner_pid,
            ),
            mutating=apply,
        )

    @server.tool(
        name=HEARTBEAT_TOOL,
        annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False),
    )
    async def heartbeat_tool(
        session_id: str, lease_id: str, lease_ttl_seconds: float | None = None
    ) -> dict[str, Any]:
        """Keep a work lease alive; an expired or foreign lease is refused.

        Args:
            session_id: The session that holds the lease.
            lease_id: The lease_id from gitea_allocate_next_work.
            lease_ttl_seconds: New lease length (default: the length it was granted with).
        """
        return await _answer(
            backend.heartbeat_lease(
                profile_resolver(),
                session_id=session_id,
                lease_id=lease_id,
                lease_ttl_seconds=lease_ttl_seconds,
            ),
            mutating=True,
        )

    @server.tool(
        name=RELEASE_TOOL,
        annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False),
    )
    async def release_tool(session_id: str, lease_id: str) -> dict[str, Any]:
        """Give a work lease back when the work is done or abandoned (releasing twice is fine).

        Args:
            session_id: The session that holds the lease.
            lease_id: The lease to release.
        """
        return await _answer(
            backend.release_lease(profile_resolver(), session_id=session_id, lease_id=lease_id),
            mutating=True,
        )

    @server.tool(
        name=CHECK_TOOL,
        annotations=ToolAnnotations(read_only_hint=True, destructive_hint=False),
    )
    async def check_tool(
        *,
        session_id: str,
        remote: str,
        org: str,
        repo: str,
        kind: str,
        number: int,
        action: str,
    ) -> dict[str, Any]:
        """The mutation gate: may this session perform this action on this item now?

        success is true only with a live lease, an action the assignment allows (and
        does not forbid), an item that is not merged or closed, and a head that has
        not moved since the assignment pinned it. Check before every mutation.

        Args:
            session_id: Your session id.
            remote: Gitea remote name.
            org: Repository owner.
            repo: Repository name.
            kind: "issue" or "pr".
            number: The issue or pull request number.
            action: The action about to be taken (implement, push, review, merge, ...).
        """
        return await _answer(
            backend.require_valid_assignment(
                profile_resolver(),
                session_id=session_id,
                remote=remote,
                org=org,
                repo=repo,
                kind=kind,
                number=number,
                action=action,
            ),
            mutating=False,
        )

    if isinstance(backend, HealthToolBackend):
        register_health_tools(server, backend, profile_resolver=profile_resolver)
