"""``fleet-supervisor work ...``: allocate, assign, renew, release, check and lock work items."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from supervisor.cli_links import (
    LINK_COMMANDS,
    add_link_parsers,
    format_links,
    link_request,
    link_succeeded,
)
from supervisor.errors import ProtocolError

__all__ = ["add_work_parser", "format_work", "succeeded", "work_request"]


def _repo(sub: argparse.ArgumentParser) -> None:
    sub.add_argument("--remote", required=True, help="Gitea remote name")
    sub.add_argument("--org", required=True)
    sub.add_argument("--repo", required=True)


def _item(sub: argparse.ArgumentParser) -> None:
    _repo(sub)
    sub.add_argument("--kind", required=True, help="issue or pr")
    sub.add_argument("--number", type=int, required=True)


def add_work_parser(
    commands: Any, *, parser_class: type[argparse.ArgumentParser], token_help: str
) -> None:
    """Add ``work`` and its subcommands to the CLI's subparsers."""
    work = commands.add_parser("work", help="control plane: leases, assignments, allocation")
    subs = work.add_subparsers(dest="work_command", required=True, parser_class=parser_class)

    def sub(name: str, text: str) -> argparse.ArgumentParser:
        parser: argparse.ArgumentParser = subs.add_parser(name, help=text)
        parser.add_argument("--token", help=token_help)
        parser.add_argument("--json", action="store_true", help="machine-readable output")
        return parser

    allocate = sub("allocate", "route candidates to your role; --apply takes the pick")
    _repo(allocate)
    allocate.add_argument("--session", required=True)
    allocate.add_argument(
        "--candidates", required=True, help="JSON file with a list of candidates, or - for stdin"
    )
    allocate.add_argument("--role", help="default: the profile's role")
    allocate.add_argument("--apply", action="store_true", help="reserve (default: preview)")
    allocate.add_argument("--ttl", type=float, help="lease seconds")
    allocate.add_argument("--owner-pid", type=int)

    assign = sub("assign", "lease one named item to a session (operator roles)")
    _item(assign)
    assign.add_argument("--session", required=True)
    assign.add_argument("--role", required=True)
    assign.add_argument("--head", help="expected head sha (required for a pr)")
    assign.add_argument("--allow", help="comma-separated allowed actions (default: role's)")
    assign.add_argument("--forbid", help="comma-separated forbidden actions (default: role's)")
    assign.add_argument("--ttl", type=float, help="lease seconds")
    assign.add_argument("--owner-pid", type=int)

    for name, text in (("heartbeat", "renew a lease"), ("release", "give a lease back")):
        lease = sub(name, text)
        lease.add_argument("--session", required=True)
        lease.add_argument("--lease", required=True, help="lease id")
        if name == "heartbeat":
            lease.add_argument("--ttl", type=float, help="new lease seconds")

    check = sub("check", "the mutation gate: exit 0 only if the action is covered now")
    _item(check)
    check.add_argument("--session", required=True)
    check.add_argument("--action", required=True)

    item = sub("item", "record an item's state or head (e.g. merged, or a new push)")
    _item(item)
    item.add_argument("--state", help="open, closed or merged")
    item.add_argument("--head", help="current head sha")
    item.add_argument("--title")
    item.add_argument("--priority", type=int)

    lock = sub("lock", "show, set or clear the repository's terminal-review lock")
    _repo(lock)
    change = lock.add_mutually_exclusive_group()
    change.add_argument("--set", dest="set_pr", type=int, metavar="PR", help="lock on this PR")
    change.add_argument("--clear", action="store_true")
    lock.add_argument("--decision")
    lock.add_argument("--review-id")

    add_link_parsers(sub)


def _actions(text: str | None) -> list[str] | None:
    return None if text is None else [a.strip() for a in text.split(",") if a.strip()]


def _candidates(source: str) -> Any:
    try:
        text = sys.stdin.read() if source == "-" else Path(source).read_text(encoding="utf-8")
        return json.loads(text)
    except (OSError, ValueError) as exc:
        raise ProtocolError(f"cannot read candidates from {source}: {exc}") from None


def work_request(args: argparse.Namespace) -> tuple[str, dict[str, Any]]:
    """The socket op and its arguments for a parsed ``work`` command."""
    command = args.work_command
    if command in LINK_COMMANDS:
        return link_request(args)
    where = {"remote": getattr(args, "remote", None), "org": getattr(args, "org", None)}
    where["repo"] = getattr(args, "repo", None)
    if command == "allocate":
        return "allocate", {
            **where,
            "session_id": args.session,
            "candidates": _candidates(args.candidates),
            "role": args.role,
            "apply": args.apply,
            "lease_ttl_seconds": args.ttl,
            "owner_pid": args.owner_pid,
        }
    item = {**where, "kind": getattr(args, "kind", None), "number": getattr(args, "number", None)}
    if command == "assign":
        return "assign", {
            **item,
            "session_id": args.session,
            "role": args.role,
            "expected_head_sha": args.head,
            "allowed_actions": _actions(args.allow),
            "forbidden_actions": _actions(args.forbid),
            "lease_ttl_seconds": args.ttl,
            "owner_pid": args.owner_pid,
        }
    if command == "heartbeat":
        lease = {"session_id": args.session, "lease_id": args.lease}
        return "lease_heartbeat", {**lease, "lease_ttl_seconds": args.ttl}
    if command == "release":
        return "lease_release", {"session_id": args.session, "lease_id": args.lease}
    if command == "check":
        return "assignment_check", {**item, "session_id": args.session, "action": args.action}
    if command == "item":
        return "work_item_upsert", {
            **item,
            "state": args.state,
            "current_head_sha": args.head,
            "title": args.title,
            "priority": args.priority,
        }
    if args.set_pr is None and not args.clear:
        return "terminal_lock_get", where
    return "terminal_lock_set", {
        **where,
        "terminal_pr": args.set_pr,
        "decision": args.decision,
        "review_id": args.review_id,
    }


def succeeded(command: str, result: Mapping[str, Any]) -> bool:
    """Whether the command got what it asked for (the exit status scripts branch on)."""
    if command in LINK_COMMANDS:
        return link_succeeded(command, result)
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
