"""Namespace health verdicts and incident links: their operations, declared once."""

from __future__ import annotations

from supervisor.operations.rules import ANY_READ, OPERATOR_LEASE
from supervisor.operations.spec import (
    BOOL,
    INT,
    INTS,
    OBJECT,
    TEXT,
    TEXT_OR_TEXTS,
    Arg,
    Command,
    Flag,
    Operation,
    Tool,
)

__all__ = ["LINK_OPERATIONS"]

_LOST = (
    "no answer came back, so whether the record changed is unknown; sending the same "
    "call again is safe (the latest verdict or observation replaces the stored one)"
)
_SESSION = Arg(name="session_id", shape=TEXT, required=True, cli=Flag(flag="--session"))

# Any session may report and read its own namespace health.
NAMESPACE_HEALTH_ASSESS = Operation(
    name="namespace_health_assess",
    call="assess_namespace_health",
    tasks={"namespace_health_assess": ANY_READ},
    args=(
        _SESSION,
        Arg(
            name="namespace",
            shape=TEXT,
            required=True,
            cli=Flag(flag="--namespace", help="e.g. gitea-merger"),
        ),
        Arg(
            name="required_tool",
            shape=TEXT,
            cli=Flag(flag="--tool", help="the required tool (default: the namespace's)"),
        ),
        Arg(
            name="registered_tools",
            shape=TEXT_OR_TEXTS,
            cli=Flag(flag="--tools", help="comma-separated tools the server lists", kind="list"),
        ),
        Arg(
            name="probe_result",
            shape=OBJECT,
            cli=Flag(
                flag="--probe-result",
                help="JSON file (or -) with success, result, error",
                kind="json_object",
                what="the probe result",
            ),
        ),
        Arg(
            name="process",
            shape=OBJECT,
            cli=Flag(
                flag="--process",
                help="JSON file with pid, profile, env",
                kind="json_object",
                what="the process",
            ),
        ),
        Arg(
            name="config_path",
            shape=TEXT,
            cli=Flag(flag="--config-path", help="client configuration the namespace came from"),
        ),
        Arg(
            name="configured",
            shape=BOOL,
            default=True,
            cli=Flag(flag="--not-configured", help="the client has no entry", kind="false"),
        ),
        Arg(
            name="probe_source",
            shape=TEXT,
            cli=Flag(
                flag="--probe-source",
                help="client_namespace (the only proof), offline_spawn or unknown",
            ),
        ),
    ),
    tool=Tool(
        name="gitea_assess_mcp_namespace_health",
        function="assess_tool",
        summary="""\
Record whether an MCP namespace can really invoke its required tool.

A tool registered in a server proves nothing about the client's live
connection to it (a closed one fails with "client is closing: EOF"). Call a
cheap tool (gitea_whoami; gitea_list_profiles for gitea-tools) through the
namespace, then pass the result here with probe_source="client_namespace":
only that source can prove the namespace. The verdict is stored for your
session; review and merge through gitea_require_valid_assignment are refused
with namespace_unhealthy while the latest verdict for gitea-reviewer or
gitea-merger is broken or not client-proven. On EOF, reconnect the namespace
through the client (not by killing PIDs), re-probe and record again.""",
        params=(
            ("session_id", "Your session id."),
            ("namespace", "The mcpServers entry, e.g. gitea-merger."),
            ("probe_source", "client_namespace, offline_spawn or unknown."),
            (
                "probe_result",
                "The call's outcome: success, result, error (or message,\n"
                "stderr, exception) and optionally error_type.",
            ),
            ("registered_tools", "Tool names the server lists (optional static check)."),
            ("required_tool", "The tool to prove (default: the namespace's cheap read tool)."),
            (
                "process",
                "Optional pid, profile and env of the server process (only\n"
                "non-secret GITEA_* launcher keys are ever shown).",
            ),
            ("config_path", "The client configuration the namespace was launched from."),
            ("configured", "false when the client has no entry for the namespace."),
        ),
        read_only=False,
        mutating=True,
        lost=_LOST,
        success_is_verdict=True,
    ),
    command=Command(
        group="work",
        name="health",
        help="record a namespace health probe for a session (exit 0 if healthy)",
        order=(
            "--session",
            "--namespace",
            "--probe-source",
            "--probe-result",
            "--tools",
            "--tool",
            "--process",
            "--config-path",
            "--not-configured",
        ),
    ),
)

NAMESPACE_HEALTH_GATE = Operation(
    name="namespace_health_gate",
    call="namespace_health_gate",
    tasks={"namespace_health_gate": ANY_READ},
    args=(
        _SESSION,
        Arg(
            name="task",
            shape=TEXT,
            required=True,
            cli=Flag(flag="--task", help="merge_pr, submit_review or review_pr"),
        ),
    ),
    tool=Tool(
        name="gitea_namespace_health_gate",
        function="gate_tool",
        summary="Whether your recorded namespace health lets a task run (allowed, reasons).",
        params=(
            ("session_id", "Your session id."),
            (
                "task",
                "merge_pr (needs gitea-merger), submit_review or review_pr (need\n"
                "gitea-reviewer); any other task needs no namespace.",
            ),
        ),
        read_only=True,
        mutating=False,
        lost=_LOST,
    ),
    command=Command(
        group="work",
        name="health-gate",
        help="exit 0 only if recorded namespace health lets the task run",
    ),
)

_ISSUE = (
    Arg(name="gitea_org", shape=TEXT, required=True, cli=Flag(flag="--gitea-org")),
    Arg(name="gitea_repo", shape=TEXT, required=True, cli=Flag(flag="--gitea-repo")),
    Arg(
        name="gitea_issue_number",
        shape=INT,
        required=True,
        cli=Flag(flag="--gitea-issue", type=int),
    ),
)
#: The incident link's optional texts, with the CLI flag each is given by.
_LINK_TEXTS = (
    ("provider_base_url", "--base-url"),
    ("provider_org", "--provider-org"),
    ("provider_project", "--provider-project"),
    ("provider_short_id", "--short-id"),
    ("provider_permalink", "--permalink"),
    ("fingerprint", "--fingerprint"),
    ("first_seen", "--first-seen"),
    ("last_seen", "--last-seen"),
    ("status", "--status"),
    ("release_resolved_at", "--resolved-at"),
    ("last_sync_at", "--synced-at"),
)
_LINK = Command(
    group="work",
    name="link",
    help="show (or with --provider, upsert) the incident link of a Gitea issue",
)

# An incident link is written by the monitoring bridge, an operator boundary; anyone
# may read it.
INCIDENT_LINK_UPSERT = Operation(
    name="incident_link_upsert",
    call="upsert_incident_link",
    tasks={"incident_link_upsert": OPERATOR_LEASE},
    args=(
        *_ISSUE,
        Arg(
            name="provider",
            shape=TEXT,
            required=True,
            cli=Flag(flag="--provider", help="monitoring provider (sentry, glitchtip, ...)"),
        ),
        Arg(
            name="provider_issue_id",
            shape=TEXT,
            required=True,
            cli=Flag(flag="--issue-id", help="the provider's issue id (needed with --provider)"),
        ),
        *(Arg(name=name, shape=TEXT, cli=Flag(flag=flag)) for name, flag in _LINK_TEXTS),
        Arg(
            name="linked_pr_numbers",
            shape=INTS,
            cli=Flag(flag="--prs", help="comma-separated linked PR numbers", kind="ints"),
        ),
        Arg(name="event_count", shape=INT, cli=Flag(flag="--events", type=int, help="event count")),
    ),
    when=("--provider",),
    tool=Tool(
        name="gitea_upsert_incident_link",
        function="upsert_link_tool",
        summary="""\
Link a monitoring provider's issue to the Gitea issue filed for it.

One link per provider key (provider, base URL, org, project, issue id;
omitted or blank scope is ''); asking again updates the same link, and an
omitted field keeps its stored value. A link is never work: the Gitea
issue is what the allocator hands out. Controller and reconciler only.""",
        params=(
            ("provider", "Any monitoring provider name (sentry, glitchtip, ...)."),
            ("provider_issue_id", "The provider's issue id."),
            ("gitea_org", "Owner of the Gitea repository."),
            ("gitea_repo", "Gitea repository name."),
            ("gitea_issue_number", "The Gitea issue filed for the incident."),
            ("provider_base_url", "The provider instance (no credentials in URLs)."),
            ("provider_org", "The provider's organisation."),
            ("provider_project", "The provider's project."),
            ("provider_short_id", "The provider's short id."),
            ("provider_permalink", "Link to the provider's issue page."),
            ("fingerprint", "The provider's grouping fingerprint."),
            ("linked_pr_numbers", "Pull requests that address the incident."),
            ("first_seen", "UTC timestamp."),
            ("last_seen", "UTC timestamp."),
            ("event_count", "Events seen so far."),
            ("status", "open, resolved, ..."),
            ("release_resolved_at", "UTC timestamp."),
            ("last_sync_at", "UTC timestamp of this observation."),
        ),
        read_only=False,
        mutating=True,
        lost=_LOST,
    ),
    command=_LINK,
)

INCIDENT_LINK_GET = Operation(
    name="incident_link_get",
    call="get_incident_link_for_gitea_issue",
    tasks={"incident_link_read": ANY_READ},
    args=_ISSUE,
    tool=Tool(
        name="gitea_get_incident_link_for_gitea_issue",
        function="get_link_tool",
        summary="The incident link(s) pointing at a Gitea issue (incident_link: lowest link_id).",
        params=(
            ("gitea_org", "Owner of the Gitea repository."),
            ("gitea_repo", "Gitea repository name."),
            ("gitea_issue_number", "The Gitea issue number."),
        ),
        read_only=True,
        mutating=False,
        lost=_LOST,
    ),
    command=_LINK,
)

LINK_OPERATIONS = (
    NAMESPACE_HEALTH_ASSESS,
    NAMESPACE_HEALTH_GATE,
    INCIDENT_LINK_UPSERT,
    INCIDENT_LINK_GET,
)
