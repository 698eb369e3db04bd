"""The fleet MCP tools (snapshot, plan, apply): declared with their operations, each answered
by a hook from tool arguments to a backend's call, with the socket's own parsers."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, TypeVar

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

from supervisor.errors import ProtocolError
from supervisor.operations.registry import operation, tool_name
from supervisor.operations.requests import request
from supervisor.operations.spec import Operation
from supervisor.policy.control.permissions import Profile
from supervisor.surfaces.mcp.answers import tool_answer
from supervisor.surfaces.mcp.backend import ToolBackend
from supervisor.surfaces.mcp.operation_tools import add_declared_tool
from supervisor.surfaces.mcp.size import fit_result
from supervisor.surfaces.socket.protocol import (
    parse_manifest,
    parse_plan_query,
    parse_worker_identities,
)

__all__ = [
    "APPLY_TOOL",
    "PLAN_TOOL",
    "SNAPSHOT_TOOL",
    "TOOL_NAMES",
    "ProfileResolver",
    "ToolArgumentError",
    "register_fleet_tools",
]


SNAPSHOT, PLAN, APPLY = operation("snapshot"), operation("plan"), operation("apply")
SNAPSHOT_TOOL = tool_name("snapshot")
PLAN_TOOL = tool_name("plan")
APPLY_TOOL = tool_name("apply")
TOOL_NAMES = (SNAPSHOT_TOOL, PLAN_TOOL, APPLY_TOOL)

_T = TypeVar("_T")

ProfileResolver = Callable[[], Profile | None]


class ToolArgumentError(ToolError):
    """A tool's arguments are unusable; the server answers with a structured refusal."""

    def __init__(self, reasons: Sequence[str]) -> None:
        super().__init__("; ".join(reasons))
        self.reasons = tuple(reasons)


def _optional_text(value: str | None) -> str | None:
    # A blank string from a model means "not given"; the socket protocol would refuse it.
    return value if value is not None and value.strip() else None


def _parsed(parse: Callable[[object], _T], raw: object) -> _T:
    """The socket protocol's own parser, so both surfaces accept and refuse the same input."""
    try:
        return parse(raw)
    except ProtocolError as exc:
        raise ToolArgumentError([exc.detail]) from exc


def _body_budget(max_result_bytes: int) -> int:
    # A tool result carries the answer twice (structured content, and the SDK's
    # indented JSON text of it), so one copy gets a third of the whole budget.
    return max(1024, max_result_bytes // 3)


async def _answer(
    op: Operation, arguments: Mapping[str, Any], call: Awaitable[Mapping[str, Any]]
) -> dict[str, Any]:
    tool = op.tool
    assert tool is not None
    return await tool_answer(
        call,
        mutating=tool.mutating(arguments),
        lost=tool.lost,
        refused_extra=dict(tool.refused_extra) or None,
    )


def _located(
    result: dict[str, Any], arguments: Mapping[str, Any], max_result_bytes: int
) -> dict[str, Any]:
    """``result`` with the audit context it was asked in (remote, host, org, repo), cut to size."""
    result["repository"] = {
        "remote": arguments["remote"],
        "host": arguments["host"],
        "org": arguments["org"],
        "repo": arguments["repo"],
        # The supervisor's default applies when none was given; report the one it used.
        "canonical_repository": result.get("canonical_repository")
        or _optional_text(arguments["canonical_repository"]),
    }
    return fit_result(result, _body_budget(max_result_bytes))


def _snapshot_values(a: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "canonical_repository": _optional_text(a["canonical_repository"]),
        "expected_manifest": _parsed(parse_manifest, a["expected_manifest"]),
        "expected_live_revision": _optional_text(a["expected_live_revision"]),
        "include_history": a["include_history"] is True,
    }


def _plan_values(a: Mapping[str, Any]) -> dict[str, Any]:
    wanted: dict[str, Any] = {
        key: value
        for key, value in {
            "reason": _optional_text(a["reason"]),
            "namespace": _optional_text(a["namespace"]),
            "instance": _optional_text(a["instance"]),
            "limit": a["limit"],
            "cursor": _optional_text(a["cursor"]),
            "full": a["full"],
        }.items()
        if value is not None
    }
    # Checked as the socket checks a plan's listing; sent as its fields.
    _parsed(lambda _raw: parse_plan_query(wanted), wanted)
    return {"canonical_repository": _optional_text(a["canonical_repository"]), **wanted}


def _apply_values(a: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "candidate_fingerprint": a["candidate_fingerprint"],
        "worker_identities": _parsed(parse_worker_identities, a["worker_identities"]),
        "registry_fingerprint": _optional_text(a["registry_fingerprint"]),
        "scope_fingerprint": _optional_text(a["scope_fingerprint"]),
        "canonical_repository": _optional_text(a["canonical_repository"]),
        "override_mass_guard": a["override_mass_guard"] is True,
    }


#: Each fleet tool: its operation, the backend's keyword arguments read from the tool's
#: arguments (refusals come before the backend is asked), and whether its answer reports
#: the repository it was asked about (plan and apply; a snapshot has none of its own).
_HOOKS: tuple[tuple[Operation, Callable[[Mapping[str, Any]], dict[str, Any]], bool], ...] = (
    (SNAPSHOT, _snapshot_values, False),
    (PLAN, _plan_values, True),
    (APPLY, _apply_values, True),
)


def register_fleet_tools(
    server: MCPServer[Any],
    backend: ToolBackend,
    *,
    profile_resolver: ProfileResolver,
    max_result_bytes: int,
) -> None:
    """Add the snapshot, plan and apply tools to ``server`` as their operations declare
    them, each handing the backend's ``call`` the op's request its hook reads (as the
    socket does); every decision is the backend's."""

    def hook(
        op: Operation, values_of: Callable[[Mapping[str, Any]], dict[str, Any]], located: bool
    ) -> Callable[..., Awaitable[dict[str, Any]]]:
        async def call(**a: Any) -> dict[str, Any]:
            asked = request(op.name, **values_of(a))
            result = await _answer(op, a, backend.call(profile_resolver(), asked))
            if located:
                return _located(result, a, max_result_bytes)
            return fit_result(result, _body_budget(max_result_bytes))

        return call

    for op, values_of, located in _HOOKS:
        add_declared_tool(server, op, hook(op, values_of, located))
