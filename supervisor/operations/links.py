"""Namespace health verdicts and incident links: their operations, declared once."""

from __future__ import annotations

from supervisor.operations.rules import ANY_READ, OPERATOR_LEASE
from supervisor.operations.spec import (
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
_SESSION = Arg("session_id", TEXT, required=True, cli=Flag("--session"))

# Any session may report and read its own namespace health.
NAMESPACE_HEALTH_ASSESS = Operation.gated(
    "namespace_health_assess",
    ANY_READ,
    call="assess_namespace_health",
    args=(
        _SESSION,
        Arg("namespace", TEXT, required=True, cli=Flag("--namespace", "e.g. gitea-merger")),
        Arg(
            "required_tool",
            TEXT,
            cli=Flag("--tool", "the required tool (default: the namespace's)"),
        ),
        Arg(
            "registered_tools",
            TEXT_OR_TEXTS,
            cli=Flag.comma("--tools", "tools the server lists"),
        ),
        Arg(
            "probe_result",
            OBJECT,
            cli=Flag(
                "--probe-result",
                "JSON file (or -) with success, result, error",
                kind="json_object",
                what="the probe result",
            ),
        ),
        Arg(
            "process",
            OBJECT,
            cli=Flag(
                "--process",
                "JSON file with pid, profile, env",
                kind="json_object",
                what="the process",
            ),
        ),
        Arg(
            "config_path",
            TEXT,
            cli=Flag("--config-path", "client configuration the namespace came from"),
        ),
        Arg.switch("configured", "--not-configured", "the client has no entry", default=True),
        Arg(
            "probe_source",
            TEXT,
            cli=Flag(
                "--probe-source", "client_namespace (the only proof), offline_spawn or unknown"
            ),
        ),
    ),
    tool=Tool(
        "gitea_assess_mcp_namespace_health",
        "assess_tool",
        """\
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
        (
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
        _LOST,
        success_is_verdict=True,
    ),
    command=Command(
        "work",
        "health",
        "record a namespace health probe for a session (exit 0 if healthy)",
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

NAMESPACE_HEALTH_GATE = Operation.gated(
    "namespace_health_gate",
    ANY_READ,
    args=(
        _SESSION,
        Arg(
            "task", TEXT, required=True, cli=Flag("--task", "merge_pr, submit_review or review_pr")
        ),
    ),
    tool=Tool(
        "gitea_namespace_health_gate",
        "gate_tool",
        "Whether your recorded namespace health lets a task run (allowed, reasons).",
        (
            ("session_id", "Your session id."),
            (
                "task",
                "merge_pr (needs gitea-merger), submit_review or review_pr (need\n"
                "gitea-reviewer); any other task needs no namespace.",
            ),
        ),
        _LOST,
        read_only=True,
    ),
    command=Command(
        "work", "health-gate", "exit 0 only if recorded namespace health lets the task run"
    ),
)

_ISSUE = (
    Arg("gitea_org", TEXT, required=True, cli=Flag("--gitea-org")),
    Arg("gitea_repo", TEXT, required=True, cli=Flag("--gitea-repo")),
    Arg("gitea_issue_number", INT, required=True, cli=Flag("--gitea-issue", type=int)),
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
    "work", "link", "show (or with --provider, upsert) the incident link of a Gitea issue"
)

# An incident link is written by the monitoring bridge, an operator boundary; anyone
# may read it.
INCIDENT_LINK_UPSERT = Operation.gated(
    "incident_link_upsert",
    OPERATOR_LEASE,
    call="upsert_incident_link",
    args=(
        *_ISSUE,
        Arg(
            "provider",
            TEXT,
            required=True,
            cli=Flag("--provider", "monitoring provider (sentry, glitchtip, ...)"),
        ),
        Arg(
            "provider_issue_id",
            TEXT,
            required=True,
            cli=Flag("--issue-id", "the provider's issue id (needed with --provider)"),
        ),
        *(Arg(name, shape=TEXT, cli=Flag(flag)) for name, flag in _LINK_TEXTS),
        Arg(
            "linked_pr_numbers",
            INTS,
            cli=Flag.comma("--prs", "linked PR numbers", kind="ints"),
        ),
        Arg("event_count", INT, cli=Flag("--events", type=int, help="event count")),
    ),
    when=("--provider",),
    tool=Tool(
        "gitea_upsert_incident_link",
        "upsert_link_tool",
        """\
Link a monitoring provider's issue to the Gitea issue filed for it.

One link per provider key (provider, base URL, org, project, issue id;
omitted or blank scope is ''); asking again updates the same link, and an
omitted field keeps its stored value. A link is never work: the Gitea
issue is what the allocator hands out. Controller and reconciler only.""",
        (
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
        _LOST,
    ),
    command=_LINK,
)

INCIDENT_LINK_GET = Operation(
    "incident_link_get",
    "get_incident_link_for_gitea_issue",
    {"incident_link_read": ANY_READ},
    args=_ISSUE,
    tool=Tool(
        "gitea_get_incident_link_for_gitea_issue",
        "get_link_tool",
        "The incident link(s) pointing at a Gitea issue (incident_link: lowest link_id).",
        (
            ("gitea_org", "Owner of the Gitea repository."),
            ("gitea_repo", "Gitea repository name."),
            ("gitea_issue_number", "The Gitea issue number."),
        ),
        _LOST,
        read_only=True,
    ),
    command=_LINK,
)

LINK_OPERATIONS = (
    NAMESPACE_HEALTH_ASSESS,
    NAMESPACE_HEALTH_GATE,
    INCIDENT_LINK_UPSERT,
    INCIDENT_LINK_GET,
)
