"""MCP namespace health: classify probe evidence and gate review and merge on recorded verdicts."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

__all__ = [
    "ACTION_GATE_TASKS",
    "DEFAULT_NAMESPACES",
    "DEFAULT_REQUIRED_TOOL",
    "EOF_PATTERNS",
    "GATED_TASKS",
    "GATE_NAMESPACE_UNHEALTHY",
    "PROBE_SOURCES",
    "PROBE_SOURCE_CLIENT",
    "PROBE_SOURCE_OFFLINE",
    "PROBE_SOURCE_UNKNOWN",
    "REQUIRED_NAMESPACE_TOOLS",
    "SAFE_ENV_KEYS",
    "TASK_REQUIRED_NAMESPACES",
    "classify_namespace_probe",
    "gate_task_for_action",
    "mutation_gate_from_session",
    "namespace_health_blocks_task",
    "normalize_probe_source",
    "required_namespace_for_task",
    "required_tool_for",
]

#: The cheap read tool that must answer through each namespace before it counts as usable.
REQUIRED_NAMESPACE_TOOLS: Mapping[str, str] = {
    "gitea-author": "gitea_whoami",
    "gitea-reviewer": "gitea_whoami",
    "gitea-merger": "gitea_whoami",
    "gitea-tools": "gitea_list_profiles",
}
DEFAULT_REQUIRED_TOOL: Final = "gitea_whoami"
#: What an offline probe checks when no namespace is named.
DEFAULT_NAMESPACES: tuple[str, ...] = tuple(REQUIRED_NAMESPACE_TOOLS)

#: Which namespace a mutation task goes through; every other task needs none.
TASK_REQUIRED_NAMESPACES: Mapping[str, str] = {
    "merge_pr": "gitea-merger",
    "submit_review": "gitea-reviewer",
    "review_pr": "gitea-reviewer",
}
GATED_TASKS: frozenset[str] = frozenset(TASK_REQUIRED_NAMESPACES)

#: The mutation gate's refusal code when a recorded verdict forbids the action.
GATE_NAMESPACE_UNHEALTHY: Final = "namespace_unhealthy"

#: The mutation gate's actions that go through a gated task (others are not gated).
ACTION_GATE_TASKS: Mapping[str, str] = {
    "merge": "merge_pr",
    "review": "submit_review",
    "approve": "submit_review",
    "request_changes": "submit_review",
}

PROBE_SOURCE_CLIENT: Final = "client_namespace"
PROBE_SOURCE_OFFLINE: Final = "offline_spawn"
PROBE_SOURCE_UNKNOWN: Final = "unknown"
PROBE_SOURCES: tuple[str, ...] = (PROBE_SOURCE_CLIENT, PROBE_SOURCE_OFFLINE, PROBE_SOURCE_UNKNOWN)

#: Substrings (of the lower-cased error) that mean the transport is closed, most specific first.
EOF_PATTERNS: tuple[str, ...] = (
    "client is closing: eof",
    "transport closed",
    "connection closed",
    "broken pipe",
    "end of file",
    "eof",
)

#: The only environment keys diagnostics may show. An allowlist, not a filter: a key
#: nobody thought of (a token, a DSN) can never slip through.
SAFE_ENV_KEYS: tuple[str, ...] = (
    "GITEA_MCP_PROFILE",
    "GITEA_PROFILE_NAME",
    "GITEA_SERVICE",
    "GITEA_EXECUTION_ROLE",
    "GITEA_MCP_CONFIG",
    "GITEA_MCP_CLIENT",
)

_ERROR_FIELDS = ("error", "message", "stderr", "exception")


def normalize_probe_source(value: object) -> str:
    """``client_namespace``, ``offline_spawn`` or ``unknown`` (trimmed, case ignored)."""
    text = value.strip().lower() if isinstance(value, str) else ""
    return text if text in PROBE_SOURCES else PROBE_SOURCE_UNKNOWN


def required_tool_for(namespace: str, required_tool: str | None = None) -> str:
    return required_tool or REQUIRED_NAMESPACE_TOOLS.get(namespace) or DEFAULT_REQUIRED_TOOL


def required_namespace_for_task(task: object) -> str | None:
    return TASK_REQUIRED_NAMESPACES.get(task.strip() if isinstance(task, str) else "")


def gate_task_for_action(action: str) -> str | None:
    """The gated task an assignment-gate action performs, if any."""
    return ACTION_GATE_TASKS.get(action)


def namespace_health_blocks_task(task: object, healthy: bool) -> bool:
    """A broken namespace blocks exactly the review and merge tasks."""
    if healthy:
        return False
    return (task.strip() if isinstance(task, str) else "") in GATED_TASKS


def _tool_list(value: object) -> list[str] | None:
    if value is None:
        return None
    if isinstance(value, list | tuple | set | frozenset):
        return [str(v) for v in value]
    return [str(value)]


def _error_type(probe: Mapping[str, Any], message: str) -> str:
    given = probe.get("error_type")
    if given is not None and str(given).strip():
        return str(given).strip()
    if not message:
        return ""
    lowered = message.lower()
    if any(pattern in lowered for pattern in EOF_PATTERNS):
        return "namespace_eof"
    if "timeout" in lowered:
        return "namespace_timeout"
    return "namespace_call_failed"


def _safe_env(process: Mapping[str, Any] | None) -> dict[str, str]:
    if not isinstance(process, Mapping):
        return {}
    env = process.get("env") or process.get("environment") or {}
    if not isinstance(env, Mapping):
        return {}
    return {key: str(env[key]) for key in SAFE_ENV_KEYS if env.get(key) not in (None, "")}


def _reasons(
    *,
    ns: str,
    tool: str,
    configured: bool,
    registered: bool | None,
    error_type: str,
    source: str,
    probed: bool,
) -> list[str]:
    reasons: list[str] = []
    if not configured:
        reasons.append(f"MCP namespace '{ns}' is not configured in the client.")
    if registered is False:
        reasons.append(f"Required tool '{tool}' is not registered in namespace '{ns}'.")
    by_type = {
        "live_probe_missing": f"No live invocation proof was given for '{ns}.{tool}'.",
        "namespace_eof": f"Namespace '{ns}' hit EOF (closed transport) while invoking '{tool}'.",
        "namespace_timeout": f"Namespace '{ns}' timed out while invoking '{tool}'.",
        "namespace_call_failed": f"Namespace '{ns}' failed while invoking '{tool}'.",
    }
    if error_type in by_type:
        reasons.append(by_type[error_type])
    if source == PROBE_SOURCE_OFFLINE:
        reasons.append(
            "The probe source is offline_spawn (a separate subprocess handshake); it does "
            "not prove the client-managed namespace is healthy."
        )
    elif source == PROBE_SOURCE_UNKNOWN and probed:
        reasons.append(
            "The probe source was unspecified, so this is no proof of the client namespace; "
            "supply the evidence again with probe_source='client_namespace'."
        )
    return reasons


def _remediation(*, ns: str, tool: str, proven: bool, source: str, pid: object) -> list[str]:
    if proven:
        return [f"The client-managed namespace '{ns}' can invoke '{tool}' (probe_source={source})."]
    steps = [
        f"Reconnect the '{ns}' namespace through the MCP client (reconnect or relaunch the "
        f"client), invoke '{tool}' through it and record the result with "
        "probe_source='client_namespace'.",
        "Offline subprocess probes and killing or respawning server PIDs are not a repair of "
        "the client namespace; do not treat them as one.",
    ]
    if pid and source != PROBE_SOURCE_OFFLINE:
        steps.append(
            f"PID {pid} is informational only; recovery is a client-side reconnect, "
            "not an action on the process."
        )
    return steps


def classify_namespace_probe(
    namespace: str,
    *,
    required_tool: str | None = None,
    registered_tools: object = None,
    probe_result: Mapping[str, Any] | None = None,
    process: Mapping[str, Any] | None = None,
    config_path: str | None = None,
    profile: str | None = None,
    configured: bool = True,
    probe_source: str | None = None,
) -> dict[str, Any]:
    """Whether ``namespace`` can really invoke its required tool, from the evidence given.

    Static registration only says the server knows the tool; only a successful call
    seen through the client-managed connection (``client_namespace``) proves the path
    a review or merge will use.
    """
    ns = (namespace or "").strip() if isinstance(namespace, str) else ""
    tool = required_tool_for(ns, required_tool)
    source = normalize_probe_source(probe_source)
    listed = _tool_list(registered_tools)
    registered = None if listed is None else tool in listed
    probe: Mapping[str, Any] = probe_result if isinstance(probe_result, Mapping) else {}
    probed = bool(probe)
    message = next((str(probe[f]) for f in _ERROR_FIELDS if probe.get(f)), "")
    error_type = _error_type(probe, message)
    # Overrides, first match wins: the most basic missing precondition is the one named.
    if not configured:
        error_type = "namespace_not_configured"
    elif registered is False:
        error_type = "tool_missing"
    elif not probed:
        error_type = "live_probe_missing"
    elif not probe.get("success") and not error_type:
        error_type = "namespace_call_failed"
    callable_now = bool(configured and probed and probe.get("success"))
    healthy = bool(configured and registered is not False and callable_now)
    proven = healthy and source == PROBE_SOURCE_CLIENT
    # An offline probe is a diagnostic: it neither proves nor blocks anything.
    blocks = False if source == PROBE_SOURCE_OFFLINE else not healthy
    pid = process.get("pid") if isinstance(process, Mapping) else None
    profile_name = profile or (process.get("profile") if isinstance(process, Mapping) else None)
    return {
        "success": healthy,
        "healthy": healthy,
        "namespace": ns,
        "required_tool": tool,
        "configured": bool(configured),
        "registered_tools_checked": listed is not None,
        "required_tool_registered": registered,
        "required_tool_callable": callable_now,
        "probe_source": source,
        "ide_namespace_proven": proven,
        "error_type": None if healthy else error_type,
        "error_message": message or None,
        "reasons": _reasons(
            ns=ns,
            tool=tool,
            configured=bool(configured),
            registered=registered,
            error_type=error_type,
            source=source,
            probed=probed,
        ),
        "remediation": _remediation(ns=ns, tool=tool, proven=proven, source=source, pid=pid),
        "diagnostics": {
            "namespace": ns,
            "required_tool": tool,
            "process_pid": pid,
            "profile": profile_name,
            "env": _safe_env(process),
            "config_path": config_path,
            "probe_source": source,
        },
        "blocks_merge_workflow": blocks,
    }


def mutation_gate_from_session(
    task: object, session_health: Mapping[str, Mapping[str, Any]] | None
) -> list[str]:
    """Reasons ``task`` must not run now, from the session's recorded verdicts; [] allows.

    No verdict for the namespace means nobody assessed it yet: no gate. A verdict that
    is not from the client path never authorizes, whatever it says.
    """
    ns = required_namespace_for_task(task)
    if ns is None:
        return []
    entry = (session_health or {}).get(ns)
    if not entry:
        return []
    doing = (task.strip() if isinstance(task, str) else "") or "the mutation"
    source = normalize_probe_source(entry.get("probe_source"))
    if source != PROBE_SOURCE_CLIENT:
        return [
            f"the recorded health of '{ns}' has probe_source={source}, not client_namespace; "
            f"probe it through the client-managed namespace before {doing}"
        ]
    healthy = bool(entry.get("healthy"))
    if entry.get("ide_namespace_proven") and healthy:
        return []
    if entry.get("blocks_merge_workflow") or not healthy:
        detail = entry.get("error_type") or "unhealthy"
        return [
            f"namespace '{ns}' is recorded {detail} (probe_source={source}); repair it "
            f"through the client before {doing} (fail closed)"
        ]
    return [
        f"namespace '{ns}' is not proven through the client; record a client_namespace "
        f"probe before {doing} (fail closed)"
    ]
