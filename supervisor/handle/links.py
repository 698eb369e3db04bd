"""Namespace health and incident link calls of the handle: validate, authorize, send."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, NotRequired, TypedDict, Unpack

from actors.writer.control.inbox import (
    GetIncidentLinks,
    NamespaceHealthGate,
    RecordNamespaceHealth,
    UpsertIncidentLink,
)
from supervisor.handle.checks import WriterCalls, WriterMessage, optional_text, writer_call
from supervisor.policy.control.incident_links import check_incident_link, check_issue_target
from supervisor.policy.control.namespace_health import classify_namespace_probe
from supervisor.policy.control.permissions import Profile
from supervisor.policy.control.plane import ControlPlaneRefusal, check_session_id

__all__ = ["HealthLinkCalls", "IncidentLinkArgs"]

_MAX_TOOLS = 1000
_MAX_PATH = 1024


class IncidentLinkArgs(TypedDict):
    """``upsert_incident_link``'s keyword arguments: the provider's issue, the Gitea issue
    it is linked to, and observations (an absent or None one keeps what is stored)."""

    provider: str
    provider_issue_id: str
    gitea_org: str
    gitea_repo: str
    gitea_issue_number: int
    provider_base_url: NotRequired[str | None]
    provider_org: NotRequired[str | None]
    provider_project: NotRequired[str | None]
    provider_short_id: NotRequired[str | None]
    provider_permalink: NotRequired[str | None]
    fingerprint: NotRequired[str | None]
    linked_pr_numbers: NotRequired[Sequence[int] | None]
    first_seen: NotRequired[str | None]
    last_seen: NotRequired[str | None]
    event_count: NotRequired[int | None]
    status: NotRequired[str | None]
    release_resolved_at: NotRequired[str | None]
    last_sync_at: NotRequired[str | None]


def _invalid(detail: str) -> ControlPlaneRefusal:
    return ControlPlaneRefusal("invalid_argument", detail)


def _tools(value: object) -> str | list[str] | None:
    if value is None:
        return None
    if isinstance(value, str):
        return value
    if (
        not isinstance(value, list | tuple | set | frozenset)
        or len(value) > _MAX_TOOLS
        or not all(isinstance(v, str) and len(v) <= 200 for v in value)
    ):
        raise _invalid("registered_tools must be a tool name or a list of tool names")
    return sorted(value) if isinstance(value, set | frozenset) else list(value)


def _mapping(value: object, what: str) -> Mapping[str, Any] | None:
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise _invalid(f"{what} must be an object")
    return value


def _path(value: object) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not 0 < len(value) <= _MAX_PATH:
        raise _invalid(f"config_path must be 1-{_MAX_PATH} characters")
    return value


class HealthLinkCalls(WriterCalls):
    """Mixed into ControlPlaneCalls. The classification is pure and runs here; the writer
    stores the verdict, so every surface and a restarted daemon see the same gate."""

    @writer_call("namespace_health_assess")
    def assess_namespace_health(
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
    ) -> WriterMessage:
        """Classify the probe evidence and record it as the session's verdict for ``namespace``."""
        sid = check_session_id(session_id)
        ns = optional_text(namespace, "namespace")
        if ns is None:
            raise _invalid("namespace is required")
        if not isinstance(configured, bool):
            raise _invalid("configured must be true or false")
        if probe_source is not None and not isinstance(probe_source, str):
            raise _invalid("probe_source must be a string")
        verdict = classify_namespace_probe(
            ns,
            required_tool=optional_text(required_tool, "required_tool"),
            registered_tools=_tools(registered_tools),
            probe_result=_mapping(probe_result, "probe_result"),
            process=_mapping(process, "process"),
            config_path=_path(config_path),
            configured=configured,
            probe_source=probe_source,
        )
        return lambda reply: RecordNamespaceHealth(
            session_id=sid,
            assessment=verdict,
            profile=profile.name if profile else None,
            reply=reply,
        )

    @writer_call("namespace_health_gate", allowed=False)
    def namespace_health_gate(
        self, profile: Profile | None, *, session_id: str, task: str
    ) -> WriterMessage:
        """Whether the session's recorded verdicts let ``task`` (merge_pr, ...) run now."""
        sid = check_session_id(session_id)
        checked_task = optional_text(task, "task")
        if checked_task is None:
            raise _invalid("task is required")
        return lambda reply: NamespaceHealthGate(session_id=sid, task=checked_task, reply=reply)

    @writer_call("incident_link_upsert")
    def upsert_incident_link(
        self, profile: Profile | None, **link: Unpack[IncidentLinkArgs]
    ) -> WriterMessage:
        """Create or update the one link for this provider key; it is never a work item."""
        spec = check_incident_link(**link)
        return lambda reply: UpsertIncidentLink(spec=spec, reply=reply)

    @writer_call("incident_link_get")
    def get_incident_link_for_gitea_issue(
        self, profile: Profile | None, *, gitea_org: str, gitea_repo: str, gitea_issue_number: int
    ) -> WriterMessage:
        """The link (lowest link_id) and every link pointing at this Gitea issue."""
        org, repo, number = check_issue_target(gitea_org, gitea_repo, gitea_issue_number)
        return lambda reply: GetIncidentLinks(
            gitea_org=org, gitea_repo=repo, gitea_issue_number=number, reply=reply
        )
