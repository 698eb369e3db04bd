"""The handle's keyword call of every links op: its request, built from the keyword
arguments, handed to the one generic ``call`` (generated; do not edit)."""

# Written by ``python -m tools.gen_declared`` from supervisor/operations/links.py;
# tests/unit/test_declared_current.py fails when this is not what it writes.

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from supervisor.handle.declared.base import Calls
from supervisor.operations.requests import request
from supervisor.policy.control.permissions import Profile

__all__ = ["LinkCalls"]


class LinkCalls(Calls):
    """The links ops."""

    async def assess_namespace_health(
        self,
        profile: Profile | None,
        session_id: str,
        *,
        namespace: str,
        required_tool: str | None = None,
        registered_tools: Sequence[str] | str | None = None,
        probe_result: Mapping[str, Any] | None = None,
        process: Mapping[str, Any] | None = None,
        config_path: str | None = None,
        configured: bool = True,
        probe_source: str | None = None,
    ) -> Mapping[str, Any]:
        """``namespace_health_assess``, as declared in ``supervisor.operations``."""
        answer: Mapping[str, Any] = await self.call(
            profile,
            request(
                "namespace_health_assess",
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
        )
        return answer

    async def namespace_health_gate(
        self,
        profile: Profile | None,
        session_id: str,
        *,
        task: str,
    ) -> Mapping[str, Any]:
        """``namespace_health_gate``, as declared in ``supervisor.operations``."""
        answer: Mapping[str, Any] = await self.call(
            profile,
            request(
                "namespace_health_gate",
                session_id=session_id,
                task=task,
            ),
        )
        return answer

    async def upsert_incident_link(
        self,
        profile: Profile | None,
        gitea_org: str,
        *,
        gitea_repo: str,
        gitea_issue_number: int,
        provider: str,
        provider_issue_id: str,
        provider_base_url: str | None = None,
        provider_org: str | None = None,
        provider_project: str | None = None,
        provider_short_id: str | None = None,
        provider_permalink: str | None = None,
        fingerprint: str | None = None,
        first_seen: str | None = None,
        last_seen: str | None = None,
        status: str | None = None,
        release_resolved_at: str | None = None,
        last_sync_at: str | None = None,
        linked_pr_numbers: Sequence[int] | None = None,
        event_count: int | None = None,
    ) -> Mapping[str, Any]:
        """``incident_link_upsert``, as declared in ``supervisor.operations``."""
        answer: Mapping[str, Any] = await self.call(
            profile,
            request(
                "incident_link_upsert",
                gitea_org=gitea_org,
                gitea_repo=gitea_repo,
                gitea_issue_number=gitea_issue_number,
                provider=provider,
                provider_issue_id=provider_issue_id,
                provider_base_url=provider_base_url,
                provider_org=provider_org,
                provider_project=provider_project,
                provider_short_id=provider_short_id,
                provider_permalink=provider_permalink,
                fingerprint=fingerprint,
                first_seen=first_seen,
                last_seen=last_seen,
                status=status,
                release_resolved_at=release_resolved_at,
                last_sync_at=last_sync_at,
                linked_pr_numbers=linked_pr_numbers,
                event_count=event_count,
            ),
        )
        return answer

    async def get_incident_link_for_gitea_issue(
        self,
        profile: Profile | None,
        gitea_org: str,
        *,
        gitea_repo: str,
        gitea_issue_number: int,
    ) -> Mapping[str, Any]:
        """``incident_link_get``, as declared in ``supervisor.operations``."""
        answer: Mapping[str, Any] = await self.call(
            profile,
            request(
                "incident_link_get",
                gitea_org=gitea_org,
                gitea_repo=gitea_repo,
                gitea_issue_number=gitea_issue_number,
            ),
        )
        return answer
