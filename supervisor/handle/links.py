"""Namespace health and incident link steps: each op's request checked and turned into the
one op the writer carries out."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from actors.control.inbox import ControlOp
from actors.control.links import (
    GetIncidentLinks,
    NamespaceHealthGate,
    RecordNamespaceHealth,
    UpsertIncidentLink,
)
from supervisor.handle.checks import ControlStep, optional_text
from supervisor.operations.declared import (
    IncidentLinkGetRequest,
    IncidentLinkUpsertRequest,
    NamespaceHealthAssessRequest,
    NamespaceHealthGateRequest,
)
from supervisor.operations.requests import arguments
from supervisor.policy.control.incident_links import check_incident_link, check_issue_target
from supervisor.policy.control.namespace_health import classify_namespace_probe
from supervisor.policy.control.permissions import Profile
from supervisor.policy.control.plane import ControlPlaneRefusal, check_session_id

__all__ = ["LINK_STEPS"]

_MAX_TOOLS = 1000
_MAX_PATH = 1024


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


def namespace_health_assess(r: NamespaceHealthAssessRequest, profile: Profile | None) -> ControlOp:
    """Classify the probe evidence and record it as the session's verdict for ``namespace``.

    The classification is pure and runs here; the writer stores the verdict, so every
    surface and a restarted daemon see the same gate."""
    sid = check_session_id(r.session_id)
    ns = optional_text(r.namespace, "namespace")
    if ns is None:
        raise _invalid("namespace is required")
    configured = True if r.configured is None else r.configured
    if not isinstance(configured, bool):
        raise _invalid("configured must be true or false")
    if r.probe_source is not None and not isinstance(r.probe_source, str):
        raise _invalid("probe_source must be a string")
    verdict = classify_namespace_probe(
        ns,
        required_tool=optional_text(r.required_tool, "required_tool"),
        registered_tools=_tools(r.registered_tools),
        probe_result=_mapping(r.probe_result, "probe_result"),
        process=_mapping(r.process, "process"),
        config_path=_path(r.config_path),
        configured=configured,
        probe_source=r.probe_source,
    )
    return RecordNamespaceHealth(
        session_id=sid,
        assessment=verdict,
        profile=profile.name if profile else None,
    )


def namespace_health_gate(r: NamespaceHealthGateRequest, profile: Profile | None) -> ControlOp:
    """Whether the session's recorded verdicts let ``task`` (merge_pr, ...) run now."""
    sid = check_session_id(r.session_id)
    task = optional_text(r.task, "task")
    if task is None:
        raise _invalid("task is required")
    return NamespaceHealthGate(session_id=sid, task=task)


def incident_link_upsert(r: IncidentLinkUpsertRequest, profile: Profile | None) -> ControlOp:
    """Create or update the one link for this provider key; it is never a work item."""
    link = check_incident_link(**arguments(r))
    return UpsertIncidentLink(spec=link)


def incident_link_get(r: IncidentLinkGetRequest, profile: Profile | None) -> ControlOp:
    """The link (lowest link_id) and every link pointing at this Gitea issue."""
    org, repo, number = check_issue_target(r.gitea_org, r.gitea_repo, r.gitea_issue_number)
    return GetIncidentLinks(gitea_org=org, gitea_repo=repo, gitea_issue_number=number)


#: Namespace health and incident link op -> its step.
LINK_STEPS: dict[str, ControlStep] = {
    "namespace_health_assess": ControlStep(namespace_health_assess),
    "namespace_health_gate": ControlStep(namespace_health_gate, refusal=(("allowed", False),)),
    "incident_link_upsert": ControlStep(incident_link_upsert),
    "incident_link_get": ControlStep(incident_link_get),
}
