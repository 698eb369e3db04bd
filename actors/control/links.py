"""Namespace health verdicts and incident links: each op checked from its request, and written
in the writer's transaction."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from actors.control.context import ControlContext, event
from actors.replies import WriteAck
from supervisor.errors import StoreError
from supervisor.operations.declared import (
    IncidentLinkGetRequest,
    IncidentLinkUpsertRequest,
    NamespaceHealthAssessRequest,
    NamespaceHealthGateRequest,
)
from supervisor.operations.requests import arguments
from supervisor.policy.control.incident_links import (
    IncidentLinkSpec,
    check_incident_link,
    check_issue_target,
)
from supervisor.policy.control.namespace_health import (
    classify_namespace_probe,
    gate_task_for_action,
    mutation_gate_from_session,
    required_namespace_for_task,
)
from supervisor.policy.control.permissions import Profile
from supervisor.policy.control.plane import ControlPlaneRefusal, check_session_id, optional_text
from supervisor.store.base import ControlTx, Row

__all__ = [
    "GetIncidentLinks",
    "NamespaceHealthGate",
    "RecordNamespaceHealth",
    "UpsertIncidentLink",
    "namespace_gate",
]

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


@dataclass(frozen=True, slots=True, kw_only=True)
class RecordNamespaceHealth:
    """Store a classified probe as the session's latest verdict for its namespace."""

    session_id: str
    #: The classifier's result (policy.namespace_health.classify_namespace_probe).
    assessment: Mapping[str, Any]
    profile: str | None = None

    @classmethod
    def check(
        cls, r: NamespaceHealthAssessRequest, profile: Profile | None
    ) -> RecordNamespaceHealth:
        """Classify the probe evidence as the session's verdict for ``namespace``.

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
        return cls(session_id=sid, assessment=verdict, profile=profile.name if profile else None)

    async def write(self, ctx: ControlContext, control: ControlTx) -> WriteAck:
        return await _record_health(ctx, control, self)


@dataclass(frozen=True, slots=True, kw_only=True)
class NamespaceHealthGate:
    """Read-only: would the session's recorded verdicts let ``task`` run now?"""

    session_id: str
    task: str

    @classmethod
    def check(cls, r: NamespaceHealthGateRequest, profile: Profile | None) -> NamespaceHealthGate:
        """Whether the session's recorded verdicts let ``task`` (merge_pr, ...) run now."""
        sid = check_session_id(r.session_id)
        task = optional_text(r.task, "task")
        if task is None:
            raise _invalid("task is required")
        return cls(session_id=sid, task=task)

    async def write(self, ctx: ControlContext, control: ControlTx) -> WriteAck:
        task = self.task
        reasons = await _gate_reasons(control, self.session_id, task)
        data = {
            "success": True,
            "allowed": not reasons,
            "task": task,
            "namespace": required_namespace_for_task(task),
            "reasons": reasons,
            "session_id": self.session_id,
        }
        return WriteAck(ok=True, data=data)


@dataclass(frozen=True, slots=True, kw_only=True)
class UpsertIncidentLink:
    """Create or update the link for one provider key; never touches work items."""

    spec: IncidentLinkSpec

    @classmethod
    def check(cls, r: IncidentLinkUpsertRequest, profile: Profile | None) -> UpsertIncidentLink:
        return cls(spec=check_incident_link(**arguments(r)))

    async def write(self, ctx: ControlContext, control: ControlTx) -> WriteAck:
        return await _upsert_link(ctx, control, self)


@dataclass(frozen=True, slots=True, kw_only=True)
class GetIncidentLinks:
    """The link (lowest link_id) and every link pointing at this Gitea issue."""

    gitea_org: str
    gitea_repo: str
    gitea_issue_number: int

    @classmethod
    def check(cls, r: IncidentLinkGetRequest, profile: Profile | None) -> GetIncidentLinks:
        org, repo, number = check_issue_target(r.gitea_org, r.gitea_repo, r.gitea_issue_number)
        return cls(gitea_org=org, gitea_repo=repo, gitea_issue_number=number)

    async def write(self, ctx: ControlContext, control: ControlTx) -> WriteAck:
        links = await control.incident_links_for_issue(
            gitea_org=self.gitea_org,
            gitea_repo=self.gitea_repo,
            gitea_issue_number=self.gitea_issue_number,
        )
        data = {
            "success": True,
            "incident_link": links[0] if links else None,
            "incident_links": links,
        }
        return WriteAck(ok=True, data=data)


async def _gate_reasons(control: ControlTx, session_id: str, task: str) -> list[str]:
    if required_namespace_for_task(task) is None:
        return []  # no read for a task no namespace gates
    rows = await control.namespace_health(session_id)
    return mutation_gate_from_session(task, {str(r["namespace"]): r for r in rows})


async def namespace_gate(
    control: ControlTx, session_id: str, action: str
) -> tuple[str | None, list[str]]:
    """The gated task ``action`` performs (if any) and why the session may not do it now."""
    task = gate_task_for_action(action)
    if task is None:
        return None, []
    return task, await _gate_reasons(control, session_id, task)


async def _record_health(
    ctx: ControlContext, control: ControlTx, message: RecordNamespaceHealth
) -> WriteAck:
    _, stamp = ctx.now()
    verdict = message.assessment
    namespace = str(verdict["namespace"])
    earlier = [
        r for r in await control.namespace_health(message.session_id) if r["namespace"] == namespace
    ]
    row: Row = {
        "session_id": message.session_id,
        "namespace": namespace,
        "required_tool": verdict["required_tool"],
        "probe_source": verdict["probe_source"],
        "healthy": verdict["healthy"],
        "ide_namespace_proven": verdict["ide_namespace_proven"],
        "blocks_merge_workflow": verdict["blocks_merge_workflow"],
        "error_type": verdict["error_type"],
        "assessment": dict(verdict),
        "profile": message.profile,
        "assessed_at": stamp,
    }
    await control.put_namespace_health(row)
    await event(
        control,
        stamp,
        "namespace_health_recorded",
        session_id=message.session_id,
        namespace=namespace,
        required_tool=verdict["required_tool"],
        probe_source=verdict["probe_source"],
        healthy=verdict["healthy"],
        ide_namespace_proven=verdict["ide_namespace_proven"],
        error_type=verdict["error_type"],
        replaced=bool(earlier),
    )
    data = {**verdict, "session_id": message.session_id, "assessed_at": stamp}
    return WriteAck(ok=True, data=data)


def _comparable(value: Any) -> Any:
    return list(value) if isinstance(value, tuple) else value


async def _upsert_link(
    ctx: ControlContext, control: ControlTx, message: UpsertIncidentLink
) -> WriteAck:
    _, stamp = ctx.now()
    spec = message.spec
    key = spec.key_row()
    found = await control.incident_link(key)
    given: Row = {**spec.target_row(), **dict(spec.observations)}
    if found is None:
        row: Row = {**key, **given, "created_at": stamp, "updated_at": stamp}
        row.setdefault("status", "open")
        link_id = await control.insert_incident_link(row)
        changed = sorted(given)
        kind = "incident_link_created"
    else:
        link_id = int(found["link_id"])
        changed = sorted(k for k, v in given.items() if found.get(k) != _comparable(v))
        if changed:
            changes = {k: given[k] for k in changed}
            if not await control.update_incident_link(link_id, {**changes, "updated_at": stamp}):
                raise StoreError(f"incident link {link_id} vanished during its update")
        kind = "incident_link_changed" if changed else ""
    if kind:
        await event(
            control,
            stamp,
            kind,
            link_id=link_id,
            **key,
            **spec.target_row(),
            fields=changed,
        )
    link = await control.incident_link(key)
    return WriteAck(ok=True, data={"success": True, "incident_link": link})
