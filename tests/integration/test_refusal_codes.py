"""Every refusal of every operation carries a code listed in docs/wire-protocol.md's table,
on the socket and over MCP (the daemon's tools and the stdio bridge's)."""

from __future__ import annotations

import os
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from mcp import Client as McpClient
from mcp.types import CallToolResult

from supervisor.operations.registry import OPERATIONS
from supervisor.operations.spec import Operation
from supervisor.policy.control.permissions import Profile
from supervisor.settings.config import SocketConfig
from supervisor.settings.profile_edits import create_token
from supervisor.settings.profiles import ProfileBook
from supervisor.surfaces.mcp.bridge import SocketToolBackend
from supervisor.surfaces.mcp.tools import build_mcp_server
from tests.actors.helpers_app import harness
from tests.integration.socket_helpers import serve
from tests.integration.test_operation_reachability import (
    WRONG,
    _minimal,
    _socket,
    _tool_minimal,
    sock_dir,
)

pytestmark = [pytest.mark.integration, pytest.mark.anyio]
__all__ = ["sock_dir"]  # the fixture, shared with the reachability tests

DOC = Path(__file__).resolve().parents[2] / "docs" / "wire-protocol.md"
START, END = "<!-- refusal-codes:start -->", "<!-- refusal-codes:end -->"

BYSTANDER = Profile(name="r-bystander", role_kind="reviewer")
GRANTED = Profile(
    name="r-controller",
    role_kind="controller",
    allowed_operations=frozenset(
        {"gitea.read", "gitea.workflow.lease", "gitea.worker_registry.retire"}
    ),
)
PROFILES = (
    '[profiles.r-bystander]\nrole_kind = "reviewer"\nallowed_operations = []\n\n'
    '[profiles.r-controller]\nrole_kind = "controller"\nallowed_operations = '
    '["gitea.read", "gitea.workflow.lease", "gitea.worker_registry.retire"]\n'
)
#: The workers' own ops: peer credentials, no token.
WORKER_OPS = ("register", "heartbeat", "release")
#: Arguments a granted caller is refused for (over the op's minimal well-shaped ones);
#: ops not listed are asked with their minimal arguments, refused or not.
REFUSED_WHEN_GRANTED: dict[str, list[dict[str, Any]]] = {
    "register": [{"claims": {}}],
    "heartbeat": [{"worker_identity": "wkr-none", "pid": os.getpid(), "fencing_epoch": 0}],
    "release": [{"worker_identity": "wkr-none", "pid": os.getpid(), "fencing_epoch": 0}],
    "apply": [
        {"worker_identities": ["wkr-none"]},
        {"worker_identities": ["wkr-none"], "registry_fingerprint": "r"},
    ],
    "session_upsert": [{"session_id": "not a session"}],
    "allocate": [{"role": "author"}, {"session_id": "not a session"}],
    "assign": [{"kind": "bogus"}, {"session_id": "s-none", "kind": "issue"}],
    "lease_heartbeat": [{"lease_id": "lease-none"}, {"lease_ttl_seconds": -1.0}],
    "lease_release": [{"lease_id": "lease-none"}],
    "assignment_check": [{"kind": "issue", "action": "comment"}],
    "work_item_upsert": [{"kind": "bogus"}],
    "terminal_lock_set": [{"terminal_pr": -1}],
    "terminal_lock_get": [{"org": "not an org"}],
    "namespace_health_assess": [{"session_id": "not a session"}],
    "namespace_health_gate": [{"session_id": "s-none"}],
    "incident_link_upsert": [{"gitea_issue_number": -1}],
    "incident_link_get": [{"gitea_issue_number": -1}],
    "host_plan": [{"host_id": "elsewhere"}],
    "host_apply": [{"host_id": "elsewhere", "worker_identities": ["wkr-none"]}],
}
#: The refusals the issue names, with the code each must carry on every surface.
EXPECTED = {
    ("lease_heartbeat", 0): "unknown_lease",
    ("lease_release", 0): "unknown_lease",
    ("allocate", 0): "role_ineligible",
    ("apply", 0): "invalid_argument",
    ("heartbeat", 0): "unknown_registration",
}


def documented_codes() -> set[str]:
    table = DOC.read_text(encoding="utf-8").split(START, 1)[1].split(END, 1)[0]
    rows = [line for line in table.strip().splitlines()[2:] if line.startswith("|")]
    codes = [re.match(r"\|\s*`([a-z_]+)`\s*\|", row) for row in rows]
    assert all(codes), "every row starts with its code"
    found = [m.group(1) for m in codes if m is not None]
    assert len(found) == len(set(found)), "one row per code"
    return set(found)


def _socket_code(answer: dict[str, Any]) -> str | None:
    """The code of a refused socket answer, None when it was not refused."""
    if answer.get("ok") is False:
        return str(answer["error"]["code"])
    result = answer["result"]
    if isinstance(result, dict) and (result.get("success") is False or result.get("ok") is False):
        return str(result.get("code"))
    return None


def _tool_code(result: CallToolResult) -> str | None:
    if not result.is_error:
        return None
    body = result.structured_content
    assert isinstance(body, dict), result.content
    return str(body.get("code"))


@asynccontextmanager
async def _surfaces(tmp_path: Path, sock_dir: Path) -> AsyncIterator[dict[str, Any]]:
    profiles = tmp_path / "profiles.toml"
    profiles.write_text(PROFILES, encoding="utf-8")
    tokens = {p.name: create_token(profiles, p.name) for p in (BYSTANDER, GRANTED)}
    config = SocketConfig(path=sock_dir / "s.sock")
    async with (
        harness(tmp_path) as h,
        serve(h, config, ProfileBook(profiles), hosts=h.supervisor.hosts) as path,
        SocketToolBackend(path, tokens[BYSTANDER.name], timeout=10.0) as bystander_backend,
        SocketToolBackend(path, tokens[GRANTED.name], timeout=10.0) as granted_backend,
        McpClient(build_mcp_server(h.handle, profile_resolver=lambda: BYSTANDER)) as d_bystander,
        McpClient(build_mcp_server(h.handle, profile_resolver=lambda: GRANTED)) as d_granted,
        McpClient(build_mcp_server(bystander_backend, profile_resolver=lambda: None)) as b_by,
        McpClient(build_mcp_server(granted_backend, profile_resolver=lambda: None)) as b_granted,
    ):
        # The supervisor reads a grant again before each write from its profile source,
        # which must know these profiles as the daemon's profiles file does.
        h.profiles.by_name.update({p.name: p for p in (BYSTANDER, GRANTED)})
        yield {
            "h": h,
            "path": path,
            "profiles": profiles,
            "tokens": tokens,
            "mcp": {BYSTANDER.name: (d_bystander, b_by), GRANTED.name: (d_granted, b_granted)},
        }


def _tool_args(op: Operation, args: dict[str, Any]) -> dict[str, Any]:
    assert op.tool is not None
    offered = {name for name, _ in op.tool.params}
    return {**_tool_minimal(op), **{k: v for k, v in args.items() if k in offered}}


async def test_every_refusal_of_every_op_carries_a_documented_code(
    tmp_path: Path, sock_dir: Path
) -> None:
    documented = documented_codes()
    seen: dict[tuple[str, str], set[str | None]] = {}

    def note(op: str, surface: str, code: str | None) -> None:
        seen.setdefault((op, surface), set()).add(code)

    async with _surfaces(tmp_path, sock_dir) as s:
        for op in OPERATIONS.values():
            minimal = _minimal(op)
            asked: list[tuple[str, str, dict[str, Any]]] = [
                (BYSTANDER.name, "denied", minimal),
                *(
                    (GRANTED.name, f"granted{i}", {**minimal, **extra})
                    for i, extra in enumerate(REFUSED_WHEN_GRANTED.get(op.name, [minimal]))
                ),
            ]
            wrong = next((a for a in op.args if a.required and a.shape in WRONG), None)
            if wrong is not None:
                asked.append((GRANTED.name, "wrong", {**minimal, wrong.name: WRONG[wrong.shape]}))
            for who, case, args in asked:
                answer = await _socket(s["path"], op.name, s["tokens"][who], args)
                note(op.name, f"socket/{case}", _socket_code(answer))
                if op.tool is None:
                    continue
                for side, client in zip(("daemon", "bridge"), s["mcp"][who], strict=True):
                    result = await client.call_tool(op.tool.name, _tool_args(op, args))
                    assert isinstance(result, CallToolResult)
                    note(op.name, f"{side}/{case}", _tool_code(result))
            if op.name not in (*WORKER_OPS, "status"):
                # No token at all: unauthenticated, wherever a token is needed (the socket's
                # owner may read status without one).
                answer = await _socket(s["path"], op.name, None, minimal)
                note(op.name, "socket/no-token", _socket_code(answer))
        audit = await s["h"].store.read_audit(limit=100_000)
        # A profiles file that cannot be read: no token can be proved, on any op that needs one.
        s["profiles"].write_text("[profiles.broken\n", encoding="utf-8")
        for op in OPERATIONS.values():
            if op.name not in WORKER_OPS:
                answer = await _socket(s["path"], op.name, s["tokens"][GRANTED.name], _minimal(op))
                note(op.name, "socket/profiles-unreadable", _socket_code(answer))

    codes = {code for found in seen.values() for code in found}
    assert None in codes  # some asks were answered, not refused: the check below is real
    refusals = {code for code in codes if code is not None}
    assert refusals <= documented, sorted(refusals - documented)
    # Every op was refused at least once on every surface it has.
    for op in OPERATIONS.values():
        surfaces = ("socket", "daemon", "bridge") if op.tool is not None else ("socket",)
        for surface in surfaces:
            refused = {
                code
                for (name, where), found in seen.items()
                if name == op.name and where.startswith(surface)
                for code in found
            } - {None}
            assert refused, (op.name, surface)
        if op.name not in WORKER_OPS:
            assert seen[(op.name, "socket/profiles-unreadable")] == {"profiles_unreadable"}
        if op.tasks:
            assert seen[(op.name, "socket/denied")] == {"permission_denied"}, op.name
            if op.name != "status":
                assert seen[(op.name, "socket/no-token")] == {"unauthenticated"}, op.name
            if op.tool is not None:
                assert seen[(op.name, "daemon/denied")] == {"permission_denied"}, op.name
                assert seen[(op.name, "bridge/denied")] == {"permission_denied"}, op.name
    # Every denial is on the audit trail, as a refusal of its op with its code.
    denials = {
        e["action"]
        for e in audit
        if e["outcome"] == "refused" and e["detail"].get("code") == "permission_denied"
    }
    for (name, where), found in seen.items():
        if where.endswith("/denied") and found == {"permission_denied"}:
            assert name in denials, name
    for (name, index), code in EXPECTED.items():
        op = OPERATIONS[name]
        surfaces = ("socket", "daemon", "bridge") if op.tool is not None else ("socket",)
        for surface in surfaces:
            assert seen[(name, f"{surface}/granted{index}")] == {code}, (name, surface)


def test_the_table_lists_each_code_once() -> None:
    assert {"permission_denied", "role_ineligible", "unknown_lease"} <= documented_codes()
