"""Socket ops of the control plane: the argument shapes of each op, checked before the handle."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from supervisor.errors import ProtocolError

__all__ = ["CONTROL_OPS", "CONTROL_SCHEMAS", "ControlArgs", "parse_control_args"]

# Only the JSON shape is checked here; what the values may be (work kinds, roles, TTL
# bounds, ...) is the policy's decision, applied by the handle so that the socket, the
# MCP tools and in-process callers all get the same answer for the same input.
_TEXT = "a string"
_INT = "an integer"
_INT_OR_NULL = "an integer or null"
_NUMBER = "a finite number"
_BOOL = "true or false"
_TEXTS = "a list of strings"
_OBJECTS = "a list of objects"
_OBJECT = "an object"
_INTS = "a list of integers"
_TEXT_OR_TEXTS = "a string or a list of strings"

_MAX_TEXT = 512
_MAX_ITEMS = 1000

_REPO = {"remote": (_TEXT, True), "org": (_TEXT, True), "repo": (_TEXT, True)}
_ITEM = {**_REPO, "kind": (_TEXT, True), "number": (_INT, True)}
_LEASE = {"session_id": (_TEXT, True), "lease_id": (_TEXT, True)}
_ISSUE = {
    "gitea_org": (_TEXT, True),
    "gitea_repo": (_TEXT, True),
    "gitea_issue_number": (_INT, True),
}
_LINK_TEXTS = (
    "provider_base_url",
    "provider_org",
    "provider_project",
    "provider_short_id",
    "provider_permalink",
    "fingerprint",
    "first_seen",
    "last_seen",
    "status",
    "release_resolved_at",
    "last_sync_at",
)

#: op -> argument -> (expected shape, required). Unknown arguments are refused.
CONTROL_SCHEMAS: Mapping[str, Mapping[str, tuple[str, bool]]] = {
    "session_upsert": {
        "session_id": (_TEXT, True),
        "role": (_TEXT, False),
        "namespace": (_TEXT, False),
        "worker_identity": (_TEXT, False),
        "pid": (_INT, False),
        "status": (_TEXT, False),
    },
    "work_item_upsert": {
        **_ITEM,
        "state": (_TEXT, False),
        "current_head_sha": (_TEXT, False),
        "title": (_TEXT, False),
        "priority": (_INT, False),
    },
    "assign": {
        **_ITEM,
        "session_id": (_TEXT, True),
        "role": (_TEXT, True),
        "expected_head_sha": (_TEXT, False),
        "allowed_actions": (_TEXTS, False),
        "forbidden_actions": (_TEXTS, False),
        "phase": (_TEXT, False),
        "lease_ttl_seconds": (_NUMBER, False),
        "owner_pid": (_INT, False),
    },
    "allocate": {
        **_REPO,
        "session_id": (_TEXT, True),
        "candidates": (_OBJECTS, True),
        "role": (_TEXT, False),
        "apply": (_BOOL, False),
        "lease_ttl_seconds": (_NUMBER, False),
        "owner_pid": (_INT, False),
    },
    "assignment_check": {**_ITEM, "session_id": (_TEXT, True), "action": (_TEXT, True)},
    "lease_heartbeat": {**_LEASE, "lease_ttl_seconds": (_NUMBER, False)},
    "lease_release": dict(_LEASE),
    # terminal_pr must be present: null clears the lock, so a missing value must not.
    "terminal_lock_set": {
        **_REPO,
        "terminal_pr": (_INT_OR_NULL, True),
        "review_id": (_TEXT, False),
        "decision": (_TEXT, False),
    },
    "terminal_lock_get": dict(_REPO),
    "namespace_health_assess": {
        "session_id": (_TEXT, True),
        "namespace": (_TEXT, True),
        "required_tool": (_TEXT, False),
        "registered_tools": (_TEXT_OR_TEXTS, False),
        "probe_result": (_OBJECT, False),
        "process": (_OBJECT, False),
        "config_path": (_TEXT, False),
        "configured": (_BOOL, False),
        "probe_source": (_TEXT, False),
    },
    "namespace_health_gate": {"session_id": (_TEXT, True), "task": (_TEXT, True)},
    "incident_link_upsert": {
        **_ISSUE,
        "provider": (_TEXT, True),
        "provider_issue_id": (_TEXT, True),
        **dict.fromkeys(_LINK_TEXTS, (_TEXT, False)),
        "linked_pr_numbers": (_INTS, False),
        "event_count": (_INT, False),
    },
    "incident_link_get": dict(_ISSUE),
}
CONTROL_OPS: frozenset[str] = frozenset(CONTROL_SCHEMAS)


@dataclass(frozen=True, slots=True, kw_only=True)
class ControlArgs:
    """A control op's arguments, shape-checked, keyed as the handle's keyword arguments."""

    op: str
    values: Mapping[str, Any]


def _fits(shape: str, value: object) -> bool:
    if shape == _TEXT:
        return isinstance(value, str) and len(value) <= _MAX_TEXT
    if shape in (_INT, _INT_OR_NULL):
        if value is None:
            return shape == _INT_OR_NULL
        return isinstance(value, int) and not isinstance(value, bool) and abs(value) < 2**63
    if shape == _NUMBER:
        if isinstance(value, bool) or not isinstance(value, int | float):
            return False
        # Compared before any float(): a 400-digit integer would overflow the conversion.
        return abs(value) < 1e12 and (isinstance(value, int) or math.isfinite(value))
    if shape == _BOOL:
        return isinstance(value, bool)
    if shape == _TEXTS:
        return (
            isinstance(value, list)
            and len(value) <= _MAX_ITEMS
            and all(isinstance(v, str) and len(v) <= _MAX_TEXT for v in value)
        )
    if shape == _OBJECT:
        return isinstance(value, dict)
    if shape == _INTS:
        return (
            isinstance(value, list)
            and len(value) <= _MAX_ITEMS
            and all(_fits(_INT, v) for v in value)
        )
    if shape == _TEXT_OR_TEXTS:
        return _fits(_TEXT, value) or _fits(_TEXTS, value)
    if shape == _OBJECTS:
        return (
            isinstance(value, list)
            and len(value) <= _MAX_ITEMS
            and all(isinstance(v, dict) for v in value)
        )
    raise AssertionError(f"unknown shape {shape!r}")


def parse_control_args(op: str, args: Mapping[str, Any]) -> ControlArgs:
    """The op's arguments with nulls dropped; a wrong shape or unknown key is a ProtocolError."""
    schema = CONTROL_SCHEMAS[op]
    unknown = sorted(set(args) - set(schema))
    if unknown:
        raise ProtocolError(f"{op} takes no argument(s) {', '.join(unknown)[:200]}")
    values: dict[str, Any] = {}
    for name, (shape, required) in schema.items():
        if name not in args or (args[name] is None and shape != _INT_OR_NULL):
            if required:
                raise ProtocolError(f"args.{name} is required")
            continue
        if not _fits(shape, args[name]):
            raise ProtocolError(f"args.{name} must be {shape}")
        values[name] = args[name]
    return ControlArgs(op=op, values=values)
