"""The request type of every links op, made from its declaration (generated; do not
edit): what every surface parses into, what the handle's one ``call`` takes and what the
actor reads."""

# Written by ``python -m tools.gen_declared`` from supervisor/operations/links.py;
# tests/unit/test_declared_current.py fails when this is not what it writes.

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from supervisor.operations.spec import Request
from supervisor.policy.fast_init import fast_init

__all__ = [
    "IncidentLinkGetRequest",
    "IncidentLinkUpsertRequest",
    "NamespaceHealthAssessRequest",
    "NamespaceHealthGateRequest",
]


@fast_init
@dataclass(frozen=True, slots=True, kw_only=True)
class NamespaceHealthAssessRequest(Request):
    """The arguments of ``namespace_health_assess`` (``assess_namespace_health``)."""

    op: ClassVar[str] = "namespace_health_assess"
    alias: ClassVar[str] = "gitea_assess_mcp_namespace_health"
    session_id: str
    namespace: str
    required_tool: str | None = None
    registered_tools: Sequence[str] | str | None = None
    probe_result: Mapping[str, Any] | None = None
    process: Mapping[str, Any] | None = None
    config_path: str | None = None
    configured: bool | None = True
    probe_source: str | None = None


@fast_init
@dataclass(frozen=True, slots=True, kw_only=True)
class NamespaceHealthGateRequest(Request):
    """The arguments of ``namespace_health_gate`` (``namespace_health_gate``)."""

    op: ClassVar[str] = "namespace_health_gate"
    alias: ClassVar[str] = "gitea_namespace_health_gate"
    session_id: str
    task: str


@fast_init
@dataclass(frozen=True, slots=True, kw_only=True)
class IncidentLinkUpsertRequest(Request):
    """The arguments of ``incident_link_upsert`` (``upsert_incident_link``)."""

    op: ClassVar[str] = "incident_link_upsert"
    alias: ClassVar[str] = "gitea_upsert_incident_link"
    gitea_org: str
    gitea_repo: str
    gitea_issue_number: int
    provider: str
    provider_issue_id: str
    provider_base_url: str | None = None
    provider_org: str | None = None
    provider_project: str | None = None
    provider_short_id: str | None = None
    provider_permalink: str | None = None
    fingerprint: str | None = None
    first_seen: str | None = None
    last_seen: str | None = None
    status: str | None = None
    release_resolved_at: str | None = None
    last_sync_at: str | None = None
    linked_pr_numbers: Sequence[int] | None = None
    event_count: int | None = None


@fast_init
@dataclass(frozen=True, slots=True, kw_only=True)
class IncidentLinkGetRequest(Request):
    """The arguments of ``incident_link_get`` (``get_incident_link_for_gitea_issue``)."""

    op: ClassVar[str] = "incident_link_get"
    alias: ClassVar[str] = "gitea_get_incident_link_for_gitea_issue"
    gitea_org: str
    gitea_repo: str
    gitea_issue_number: int
