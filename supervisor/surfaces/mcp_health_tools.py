"""MCP tools for namespace health verdicts and incident links, as thin adapters to a backend."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations

from supervisor.policy.control.permissions import Profile
from supervisor.surfaces.mcp_answers import tool_answer

__all__ = [
    "ASSESS_HEALTH_TOOL",
    "GET_LINK_TOOL",
    "HEALTH_GATE_TOOL",
    "HEALTH_TOOL_NAMES",
    "UPSERT_LINK_TOOL",
    "HealthToolBackend",
    "register_health_tools",
]

#: The customer's tool name; the others follow the project's naming.
ASSESS_HEALTH_TOOL = "gitea_assess_mcp_namespace_health"
HEALTH_GATE_TOOL = "gitea_namespace_health_gate"
UPSERT_LINK_TOOL = "gitea_upsert_incident_link"
GET_LINK_TOOL = "gitea_get_incident_link_for_gitea_issue"
HEALTH_TOOL_NAMES = (ASSESS_HEALTH_TOOL, HEALTH_GATE_TOOL, UPSERT_LINK_TOOL, GET_LINK_TOOL)

_LOST = (
    "no answer came back, so whether the record changed is unknown; sending the same "
    "call again is safe (the latest verdict or observation replaces the stored one)"
)


@runtime_checkable
class HealthToolBackend(Protocol):
    """SupervisorHandle in the daemon, the socket client in the stdio bridge."""

    async def assess_namespace_health(
        self,
        profile: Profile | None,
        *,
        session_id: str,
        namespace: str,
        required_tool: str | None = None,
        registered_tools: Sequence[str] | str | None = None,
        probe_result: Mapping[str, Any] | None = None,
        process: Mapping[str, Any] | None = None,
        config_path: str | None = None,
        configured: bool = True,
        probe_source: str | None = None,
    ) -> Mapping[str, Any]: ...

    async def namespace_health_gate(
        self, profile: Profile | None, *, session_id: str, task: str
    ) -> Mapping[str, Any]: ...

    async def upsert_incident_link(
        self,
        profile: Profile | None,
        *,
        provider: str,
        provider_issue_id: str,
        gitea_org: str,
        gitea_repo: str,
        gitea_issue_number: int,
        provider_base_url: str | None = None,
        provider_org: str | None = None,
        provider_project: str | None = None,
        provider_short_id: str | None = None,
        provider_permalink: str | None = None,
        fingerprint: str | None = None,
        linked_pr_numbers: Sequence[int] | None = None,
        first_seen: str | None = None,
        last_seen: str | None = None,
        event_count: int | None = None,
        status: str | None = None,
        release_resolved_at: str | None = None,
        last_sync_at: str | None = None,
    ) -> Mapping[str, Any]: ...

    async def get_incident_link_for_gitea_issue(
        self, profile: Profile | None, *, gitea_org: str, gitea_repo: str, gitea_issue_number: int
    ) -> Mapping[str, Any]: ...


def register_health_tools(
    server: MCPServer[Any],
    backend: HealthToolBackend,
    *,
    profile_resolver: Callable[[], Profile | None],
) -> None:
    """Add the namespace health and incident link tools to ``server``."""

    @server.tool(
        name=ASSESS_HEALTH_TOOL,
        annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False),
    )
    async def assess_tool(
        *,
        session_id: str,
        namespace: str,
        probe_source: str | None = None,
        probe_result: dict[str, Any] | None = None,
        registered_tools: list[str] | str | None = None,
        required_tool: str | None = None,
        process: dict[str, Any] | None = None,
        config_path: str | None = None,
        configured: bool = True,
    ) -> dict[str, Any]:
        """Record whether an MCP namespace can really invoke its required tool.

        A tool registered in a server proves nothing about the client's live
        connection to it (a closed one fails with "client is closing: EOF"). Call a
        cheap tool (gitea_whoami; gitea_list_profiles for gitea-tools) through the
        namespace, then pass the result here with probe_source="client_namespace":
        only that source can prove the namespace. The verdict is stored for your
        session; review and merge through gitea_require_valid_assignment are refused
        with namespace_unhealthy while the latest verdict for gitea-reviewer or
        gitea-merger is broken or not client-proven. On EOF, reconnect the namespace
        through the client (not by killing PIDs), re-probe and record again.

        Args:
            session_id: Your session id.
            namespace: The mcpServers entry, e.g. gitea-merger.
            probe_source: client_namespace, offline_spawn or unknown.
            probe_result: The call's outcome: success, result, error (or message,
                stderr, exception) and optionally error_type.
            registered_tools: Tool names the server lists (optional static check).
            required_tool: The tool to prove (default: the namespace's cheap read tool).
            process: Optional pid, profile and env of the server process (only
                non-secret GITEA_* launcher keys are ever shown).
            config_path: The client configuration the namespace was launched from.
            configured: false when the client has no entry for the namespace.
        """
        return await tool_answer(
            backend.assess_namespace_health(
                profile_resolver(),
                session_id=session_id,
                namespace=namespace,
                required_tool=required_tool,
                registered_tools=registered_tools,
                probe_result=probe_result,
                process=process,
                config_path=config_path,
                configured=configured,
                probe_source=probe_source,
            ),
            mutating=True,
            lost=_LOST,
        )

    @server.tool(
        name=HEALTH_GATE_TOOL,
        annotations=ToolAnnotations(read_only_hint=True, destructive_hint=False),
    )
    async def gate_tool(*, session_id: str, task: str) -> dict[str, Any]:
        """Whether your recorded namespace health lets a task run (allowed, reasons).

        Args:
            session_id: Your session id.
            task: merge_pr (needs gitea-merger), submit_review or review_pr (need
                gitea-reviewer); any other task needs no namespace.
        """
        return await tool_answer(
            backend.namespace_health_gate(profile_resolver(), session_id=session_id, task=task),
            mutating=False,
            lost=_LOST,
        )

    @server.tool(
        name=UPSERT_LINK_TOOL,
        annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False),
    )
    async def upsert_link_tool(
        *,
        provider: str,
        provider_issue_id: str,
        gitea_org: str,
        gitea_repo: str,
        gitea_issue_number: int,
        provider_base_url: str | None = None,
        provider_org: str | None = None,
        provider_project: str | None = None,
        provider_short_id: str | None = None,
        provider_permalink: str | None = None,
        fingerprint: str | None = None,
        linked_pr_numbers: list[int] | None = None,
        first_seen: str | None = None,
        last_seen: str | None = None,
        event_count: int | None = None,
        status: str | None = None,
        release_resolved_at: str | None = None,
        last_sync_at: str | None = None,
    ) -> dict[str, Any]:
        """Link a monitoring provider's issue to the Gitea issue filed for it.

        One link per provider key (provider, base URL, org, project, issue id;
        omitted or blank scope is ''); asking again updates the same link, and an
        omitted field keeps its stored value. A link is never work: the Gitea
        issue is what the allocator hands out. Controller and reconciler only.

        Args:
            provider: Any monitoring provider name (sentry, glitchtip, ...).
            provider_issue_id: The provider's issue id.
            gitea_org: Owner of the Gitea repository.
            gitea_repo: Gitea repository name.
            gitea_issue_number: The Gitea issue filed for the incident.
            provider_base_url: The provider instance (no credentials in URLs).
            provider_org: The provider's organisation.
            provider_project: The provider's project.
            provider_short_id: The provider's short id.
            provider_permalink: Link to the provider's issue page.
            fingerprint: The provider's grouping fingerprint.
            linked_pr_numbers: Pull requests that address the incident.
            first_seen: UTC timestamp.
            last_seen: UTC timestamp.
            event_count: Events seen so far.
            status: open, resolved, ...
            release_resolved_at: UTC timestamp.
            last_sync_at: UTC timestamp of this observation.
        """
        return await tool_answer(
            backend.upsert_incident_link(
                profile_resolver(),
                provider=provider,
                provider_issue_id=provider_issue_id,
                gitea_org=gitea_org,
                gitea_repo=gitea_repo,
                gitea_issue_number=gitea_issue_number,
                provider_base_url=provider_base_url,
                provider_org=provider_org,
                provider_project=provider_project,
                provider_short_id=provider_short_id,
                provider_permalink=provider_permalink,
                fingerprint=fingerprint,
                linked_pr_numbers=linked_pr_numbers,
                first_seen=first_seen,
                last_seen=last_seen,
                event_count=event_count,
                status=status,
                release_resolved_at=release_resolved_at,
                last_sync_at=last_sync_at,
            ),
            mutating=True,
            lost=_LOST,
        )

    @server.tool(
        name=GET_LINK_TOOL,
        annotations=ToolAnnotations(read_only_hint=True, destructive_hint=False),
    )
    async def get_link_tool(
        *, gitea_org: str, gitea_repo: str, gitea_issue_number: int
    ) -> dict[str, Any]:
        """The incident link(s) pointing at a Gitea issue (incident_link: lowest link_id).

        Args:
            gitea_org: Owner of the Gitea repository.
            gitea_repo: Gitea repository name.
            gitea_issue_number: The Gitea issue number.
        """
        return await tool_answer(
            backend.get_incident_link_for_gitea_issue(
                profile_resolver(),
                gitea_org=gitea_org,
                gitea_repo=gitea_repo,
                gitea_issue_number=gitea_issue_number,
            ),
            mutating=False,
            lost=_LOST,
        )
