"""`fleet-supervisor work health|health-gate|link`: namespace health verdicts, incident links."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from supervisor.errors import ProtocolError

__all__ = ["LINK_COMMANDS", "add_link_parsers", "format_links", "link_request", "link_succeeded"]

LINK_COMMANDS = frozenset({"health", "health-gate", "link"})


def _json_object(source: str | None, what: str) -> Any:
    if source is None:
        return None
    try:
        text = sys.stdin.read() if source == "-" else Path(source).read_text(encoding="utf-8")
        value = json.loads(text)
    except (OSError, ValueError) as exc:
        raise ProtocolError(f"cannot read {what} from {source}: {exc}") from None
    if not isinstance(value, dict):
        raise ProtocolError(f"{what} in {source} must be a JSON object")
    return value


def _names(text: str | None) -> list[str] | None:
    return None if text is None else [t.strip() for t in text.split(",") if t.strip()]


def _numbers(text: str | None) -> list[int] | None:
    if text is None:
        return None
    try:
        return [int(t) for t in text.split(",") if t.strip()]
    except ValueError:
        raise ProtocolError(f"--prs must be comma-separated PR numbers, got {text!r}") from None


def add_link_parsers(sub: Callable[[str, str], argparse.ArgumentParser]) -> None:
    """Add the health and link subcommands through ``work``'s subparser factory."""
    health = sub("health", "record a namespace health probe for a session (exit 0 if healthy)")
    health.add_argument("--session", required=True)
    health.add_argument("--namespace", required=True, help="e.g. gitea-merger")
    health.add_argument(
        "--probe-source", help="client_namespace (the only proof), offline_spawn or unknown"
    )
    health.add_argument("--probe-result", help="JSON file (or -) with success, result, error")
    health.add_argument("--tools", help="comma-separated tools the server lists")
    health.add_argument("--tool", help="the required tool (default: the namespace's)")
    health.add_argument("--process", help="JSON file with pid, profile, env")
    health.add_argument("--config-path", help="client configuration the namespace came from")
    health.add_argument("--not-configured", action="store_true", help="the client has no entry")

    gate = sub("health-gate", "exit 0 only if recorded namespace health lets the task run")
    gate.add_argument("--session", required=True)
    gate.add_argument("--task", required=True, help="merge_pr, submit_review or review_pr")

    link = sub("link", "show (or with --provider, upsert) the incident link of a Gitea issue")
    link.add_argument("--gitea-org", required=True)
    link.add_argument("--gitea-repo", required=True)
    link.add_argument("--gitea-issue", type=int, required=True)
    link.add_argument("--provider", help="monitoring provider (sentry, glitchtip, ...)")
    link.add_argument("--issue-id", help="the provider's issue id (needed with --provider)")
    for flag in (
        "base-url",
        "provider-org",
        "provider-project",
        "short-id",
        "permalink",
        "fingerprint",
        "first-seen",
        "last-seen",
        "status",
        "resolved-at",
        "synced-at",
    ):
        link.add_argument(f"--{flag}")
    link.add_argument("--prs", help="comma-separated linked PR numbers")
    link.add_argument("--events", type=int, help="event count")


def link_request(args: argparse.Namespace) -> tuple[str, dict[str, Any]]:
    command = args.work_command
    if command == "health":
        return "namespace_health_assess", {
            "session_id": args.session,
            "namespace": args.namespace,
            "probe_source": args.probe_source,
            "probe_result": _json_object(args.probe_result, "the probe result"),
            "registered_tools": _names(args.tools),
            "required_tool": args.tool,
            "process": _json_object(args.process, "the process"),
            "config_path": args.config_path,
            "configured": not args.not_configured,
        }
    if command == "health-gate":
        return "namespace_health_gate", {"session_id": args.session, "task": args.task}
    issue = {
        "gitea_org": args.gitea_org,
        "gitea_repo": args.gitea_repo,
        "gitea_issue_number": args.gitea_issue,
    }
    if args.provider is None:
        return "incident_link_get", issue
    if args.issue_id is None:
        raise ProtocolError("--issue-id is required with --provider")
    return "incident_link_upsert", {
        **issue,
        "provider": args.provider,
        "provider_issue_id": args.issue_id,
        "provider_base_url": args.base_url,
        "provider_org": args.provider_org,
        "provider_project": args.provider_project,
        "provider_short_id": args.short_id,
        "provider_permalink": args.permalink,
        "fingerprint": args.fingerprint,
        "first_seen": args.first_seen,
        "last_seen": args.last_seen,
        "status": args.status,
        "release_resolved_at": args.resolved_at,
        "last_sync_at": args.synced_at,
        "linked_pr_numbers": _numbers(args.prs),
        "event_count": args.events,
    }


def link_succeeded(command: str, result: Mapping[str, Any]) -> bool:
    if command == "health-gate":
        return bool(result.get("success")) and result.get("allowed") is True
    return bool(result.get("success"))


def format_links(result: Mapping[str, Any]) -> list[str]:
    """Summary lines for health verdicts and incident links (empty for anything else)."""
    lines = [
        f"{key}: {result[key]}"
        for key in ("namespace", "required_tool", "probe_source", "healthy", "error_type", "task")
        if key in result and result[key] is not None
    ]
    lines.extend(f"remediation: {step}" for step in result.get("remediation") or [])
    if "incident_link" in result:
        links = result.get("incident_links") or (
            [result["incident_link"]] if result["incident_link"] else []
        )
        lines.extend(
            f"incident link {x.get('link_id')}: {x.get('provider')} {x.get('provider_issue_id')} "
            f"-> {x.get('gitea_org')}/{x.get('gitea_repo')}#{x.get('gitea_issue_number')} "
            f"({x.get('status')})"
            for x in links
        )
        if not links:
            lines.append("incident link: none")
    return lines
