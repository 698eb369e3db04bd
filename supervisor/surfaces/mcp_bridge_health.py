"""The stdio bridge's namespace health and incident link calls: one daemon request each."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from supervisor.policy.control.permissions import Profile

__all__ = ["SocketHealthCalls"]


class SocketHealthCalls:
    """Mixed into SocketControlCalls; the daemon authenticates the bridge's token."""

    #: Provided by SocketControlCalls: one request, a lost answer reported as unavailable.
    _control: Callable[[str, Mapping[str, Any]], Awaitable[Mapping[str, Any]]]

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
    ) -> Mapping[str, Any]:
        del profile
        tools = (
            registered_tools
            if registered_tools is None or isinstance(registered_tools, str)
            else list(registered_tools)
        )
        return await self._control(
            "namespace_health_assess",
            {
                "session_id": session_id,
                "namespace": namespace,
                "required_tool": required_tool,
                "registered_tools": tools,
                "probe_result": dict(probe_result) if probe_result is not None else None,
                "process": dict(process) if process is not None else None,
                "config_path": config_path,
                "configured": configured,
                "probe_source": probe_source,
            },
        )

    async def namespace_health_gate(
        self, profile: Profile | None, *, session_id: str, task: str
    ) -> Mapping[str, Any]:
        del profile
        return await self._control(
            "namespace_health_gate", {"session_id": session_id, "task": task}
        )

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
    ) -> Mapping[str, Any]:
        del profile
        return await self._control(
            "incident_link_upsert",
            {
                "provider": provider,
                "provider_issue_id": provider_issue_id,
                "gitea_org": gitea_org,
                "gitea_repo": gitea_repo,
                "gitea_issue_number": gitea_issue_number,
                "provider_base_url": provider_base_url,
                "provider_org": provider_org,
                "provider_project": provider_project,
                "provider_short_id": provider_short_id,
                "provider_permalink": provider_permalink,
                "fingerprint": fingerprint,
                "linked_pr_numbers": (
                    list(linked_pr_numbers) if linked_pr_numbers is not None else None
                ),
                "first_seen": first_seen,
                "last_seen": last_seen,
                "event_count": event_count,
                "status": status,
                "release_resolved_at": release_resolved_at,
                "last_sync_at": last_sync_at,
            },
        )

    async def get_incident_link_for_gitea_issue(
        self, profile: Profile | None, *, gitea_org: str, gitea_repo: str, gitea_issue_number: int
    ) -> Mapping[str, Any]:
        del profile
        return await self._control(
            "incident_link_get",
            {
                "gitea_org": gitea_org,
                "gitea_repo": gitea_repo,
                "gitea_issue_number": gitea_issue_number,
            },
        )
