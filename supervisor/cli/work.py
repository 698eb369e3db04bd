"""``fleet-supervisor work ...``: allocate, assign, renew, release, check and lock work items."""

from __future__ import annotations

import argparse
import json
from collections.abc import Mapping
from typing import Any

from supervisor.cli.common import EXIT_OK, EXIT_REFUSED, emit
from supervisor.cli.operations import add_group_parser, ask_declared, operation_request
from supervisor.settings.config import Settings

__all__ = [
    "add_work_parser",
    "format_links",
    "format_work",
    "run_work",
    "succeeded",
    "work_request",
]

LINK_COMMANDS = frozenset({"health", "health-gate", "link"})


def add_work_parser(commands: Any, *, parser_class: type[argparse.ArgumentParser]) -> None:
    """Add ``work`` and its subcommands (one per declared command) to the CLI's subparsers."""
    help = "control plane: leases, assignments, allocation"
    add_group_parser(commands, "work", help, parser_class=parser_class)


def run_work(args: argparse.Namespace, settings: Settings) -> int:
    """``fleet-supervisor work <command>``: one request, its summary, its exit status."""
    result = ask_declared("work", args.work_command, args, settings.socket.path)
    emit(result, args.json, format_work)
    return EXIT_OK if succeeded(args.work_command, result) else EXIT_REFUSED


def work_request(args: argparse.Namespace) -> tuple[str, dict[str, Any]]:
    """The socket op and its arguments for a parsed ``work`` command."""
    return operation_request("work", args.work_command, args)


def succeeded(command: str, result: Mapping[str, Any]) -> bool:
    """Whether the command got what it asked for (the exit status scripts branch on)."""
    if command in LINK_COMMANDS:
        return _link_succeeded(command, result)
    if not result.get("success"):
        return False
    if command == "allocate":
        return result.get("outcome") in ("assigned_work", "preview")
    if command == "assign":
        return result.get("outcome") == "assigned"
    return True


_SUMMARY_KEYS = (
    "outcome",
    "code",
    "reason",
    "session_id",
    "role",
    "work_item_key",
    "lease_id",
    "assignment_id",
    "expires_at",
    "expected_head_sha",
    "owner_session_id",
    "status",
    "allowed",
    "next_command",
)


def format_work(result: Mapping[str, Any]) -> str:
    """A short human summary; ``--json`` prints everything."""
    lines = [f"{key}: {result[key]}" for key in _SUMMARY_KEYS if result.get(key) is not None]
    selected = result.get("selected")
    if isinstance(selected, Mapping):
        lines.append(f"selected: {selected.get('kind')}#{selected.get('number')}")
    assignment = result.get("assignment")
    if isinstance(assignment, Mapping):
        lines.extend(
            f"{key}: {assignment[key]}"
            for key in ("lease_id", "expires_at", "allowed_actions", "forbidden_actions")
            if assignment.get(key)
        )
    if "terminal_lock" in result:
        lock = result["terminal_lock"]
        shown = f"PR #{lock.get('terminal_pr')} ({lock.get('decision')})" if lock else "none"
        lines.append(f"terminal lock: {shown}")
    lines.extend(
        f"skipped {s.get('kind')}#{s.get('number')}: {s.get('reason')}"
        for s in result.get("skipped") or []
    )
    lines.extend(format_links(result))
    lines.extend(f"reason: {r}" for r in result.get("reasons") or [])
    return "\n".join(lines) or json.dumps(result, default=str)


def _link_succeeded(command: str, result: Mapping[str, Any]) -> bool:
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
