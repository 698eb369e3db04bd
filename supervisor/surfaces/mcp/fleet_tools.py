"""The fleet MCP tools (snapshot, plan, apply): declared with their operations, their
arguments read by the socket's own parser, answered by a backend's call."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from mcp.server.mcpserver import MCPServer

from supervisor.operations.registry import operation, tool_name
from supervisor.operations.requests import Request, given
from supervisor.operations.spec import Operation
from supervisor.policy.control.permissions import Profile
from supervisor.surfaces.mcp.answers import tool_answer
from supervisor.surfaces.mcp.backend import ToolBackend
from supervisor.surfaces.mcp.operation_tools import add_declared_tool, tool_request
from supervisor.surfaces.mcp.size import fit_result

__all__ = [
    "APPLY_TOOL",
    "PLAN_TOOL",
    "SNAPSHOT_TOOL",
    "TOOL_NAMES",
    "ProfileResolver",
    "register_fleet_tools",
]


SNAPSHOT, PLAN, APPLY = operation("snapshot"), operation("plan"), operation("apply")
SNAPSHOT_TOOL = tool_name("snapshot")
PLAN_TOOL = tool_name("plan")
APPLY_TOOL = tool_name("apply")
TOOL_NAMES = (SNAPSHOT_TOOL, PLAN_TOOL, APPLY_TOOL)

ProfileResolver = Callable[[], Profile | None]


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
    result: dict[str, Any], arguments: Mapping[str, Any], asked: Request, max_result_bytes: int
) -> dict[str, Any]:
    """``result`` with the audit context it was asked in (remote, host, org, repo), cut to size."""
    result["repository"] = {
        "remote": arguments["remote"],
        "host": arguments["host"],
        "org": arguments["org"],
        "repo": arguments["repo"],
        # The supervisor's default applies when none was given; report the one it used.
        "canonical_repository": result.get("canonical_repository")
        or given(asked).get("canonical_repository"),
    }
    return fit_result(result, _body_budget(max_result_bytes))


#: Each fleet tool's operation, and whether its answer reports the repository it was asked
#: about (plan and apply; a snapshot has none of its own).
_HOOKS: tuple[tuple[Operation, bool], ...] = ((SNAPSHOT, False), (PLAN, True), (APPLY, True))


def register_fleet_tools(
    server: MCPServer[Any],
    backend: ToolBackend,
    *,
    profile_resolver: ProfileResolver,
    max_result_bytes: int,
) -> None:
    """Add the snapshot, plan and apply tools to ``server`` as their operations declare
    them, each handing the backend's ``call`` the op's request, read by the socket's
    parser (``tool_request``); every decision is the backend's."""

    def hook(op: Operation, located: bool) -> Callable[..., Awaitable[dict[str, Any]]]:
        async def call(**a: Any) -> dict[str, Any]:
            asked = tool_request(op, a, blank_is_absent=True)  # refused before the backend
            result = await _answer(op, a, backend.call(profile_resolver(), asked))
            if located:
                return _located(result, a, asked, max_result_bytes)
            return fit_result(result, _body_budget(max_result_bytes))

        return call

    for op, located in _HOOKS:
        add_declared_tool(server, op, hook(op, located))
