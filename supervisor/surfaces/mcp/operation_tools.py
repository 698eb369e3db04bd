"""The MCP tools built from the operation declarations: one adapter, every declared tool."""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations

from supervisor.errors import ProtocolError
from supervisor.operations import spec
from supervisor.operations.registry import OPERATIONS, tool_name
from supervisor.operations.requests import Request
from supervisor.operations.spec import Arg, Operation, describe
from supervisor.policy.control.permissions import Profile
from supervisor.surfaces.mcp.answers import tool_answer
from supervisor.surfaces.mcp.backend import ToolBackend
from supervisor.surfaces.socket.protocol import PARSERS

__all__ = [
    "ALLOCATE_TOOL",
    "ASSESS_HEALTH_TOOL",
    "CHECK_TOOL",
    "CONTROL_TOOL_NAMES",
    "GET_LINK_TOOL",
    "HEALTH_GATE_TOOL",
    "HEALTH_TOOL_NAMES",
    "HEARTBEAT_TOOL",
    "RELEASE_TOOL",
    "UPSERT_LINK_TOOL",
    "ToolArgumentError",
    "add_declared_tool",
    "register_operation_tools",
    "tool_request",
]


#: The customer's allocator tool name; the lease tools are named after it.
ALLOCATE_TOOL = tool_name("allocate")
HEARTBEAT_TOOL = tool_name("lease_heartbeat")
RELEASE_TOOL = tool_name("lease_release")
CHECK_TOOL = tool_name("assignment_check")
CONTROL_TOOL_NAMES = (ALLOCATE_TOOL, HEARTBEAT_TOOL, RELEASE_TOOL, CHECK_TOOL)
#: The customer's tool name; the others follow the project's naming.
ASSESS_HEALTH_TOOL = tool_name("namespace_health_assess")
HEALTH_GATE_TOOL = tool_name("namespace_health_gate")
UPSERT_LINK_TOOL = tool_name("incident_link_upsert")
GET_LINK_TOOL = tool_name("incident_link_get")
HEALTH_TOOL_NAMES = (ASSESS_HEALTH_TOOL, HEALTH_GATE_TOOL, UPSERT_LINK_TOOL, GET_LINK_TOOL)

#: The Python type each wire shape is offered as, so the SDK derives the same JSON schema.
_TYPES: Mapping[str, Any] = {
    spec.TEXT: str,
    spec.INT: int,
    spec.NUMBER: float,
    spec.BOOL: bool,
    spec.TEXTS: list[str],
    spec.OBJECTS: list[dict[str, Any]],
    spec.OBJECT: dict[str, Any],
    spec.INTS: list[int],
    spec.TEXT_OR_TEXTS: list[str] | str,
}


class ToolArgumentError(ToolError):
    """A tool's arguments are unusable; the server answers with a structured refusal."""

    def __init__(self, reasons: Sequence[str]) -> None:
        super().__init__("; ".join(reasons))
        self.reasons = tuple(reasons)


def tool_request(
    op: Operation, arguments: Mapping[str, Any], *, blank_is_absent: bool = False
) -> Request:
    """The op's request from a tool's arguments, read by the socket's own parser, so the
    daemon's tools, the stdio bridge (which sends them over the socket) and the socket
    accept and refuse the same input in the same words. With ``blank_is_absent`` (the
    fleet tools) a blank optional text is not given: a model sends "" for "none"."""
    values = {arg.name: arguments[arg.name] for arg in op.args if arg.name in arguments}
    if blank_is_absent:
        values.update({arg.name: None for arg in op.args if _blank(arg, values.get(arg.name))})
    try:
        return PARSERS[op.name](values)
    except ProtocolError as exc:
        raise ToolArgumentError([exc.detail]) from exc


def _blank(arg: Arg, value: object) -> bool:
    text = arg.shape == spec.TEXT and not arg.required
    return text and isinstance(value, str) and not value.strip()


def _signature(op: Operation) -> inspect.Signature:
    assert op.tool is not None
    params = []
    for name, _doc in op.tool.params:
        arg = op.tool.param(op, name)
        kind = _TYPES[arg.shape]
        if arg.required:
            annotation, default = kind, inspect.Parameter.empty
        elif arg.default is None:
            annotation, default = kind | None, None
        else:
            annotation, default = kind, arg.default
        params.append(
            inspect.Parameter(
                name, inspect.Parameter.KEYWORD_ONLY, annotation=annotation, default=default
            )
        )
    return inspect.Signature(params, return_annotation=dict[str, Any])


def add_declared_tool(
    server: MCPServer[Any], op: Operation, call: Callable[..., Awaitable[dict[str, Any]]]
) -> None:
    """Serve ``call`` as the tool ``op`` declares: its name, description, parameters and
    hints; ``call`` gets every parameter by keyword (defaults filled in)."""
    tool = op.tool
    assert tool is not None
    # The SDK reads the parameters from the signature and names the schemas after the
    # function, so both are set as the hand-written tools had them.
    call.__name__ = call.__qualname__ = tool.function
    call.__signature__ = _signature(op)  # type: ignore[attr-defined]
    server.add_tool(
        call,
        name=tool.name,
        description=describe(tool),
        annotations=ToolAnnotations(
            read_only_hint=tool.read_only, destructive_hint=tool.destructive
        ),
    )


def _forward(
    op: Operation, backend: ToolBackend, profile_resolver: Callable[[], Profile | None]
) -> Callable[..., Awaitable[dict[str, Any]]]:
    tool = op.tool
    assert tool is not None

    async def call(**arguments: Any) -> dict[str, Any]:
        # Every parameter arrives (defaults filled in); refused before the backend is asked.
        asked = tool_request(op, arguments)
        return await tool_answer(
            backend.call(profile_resolver(), asked),
            mutating=tool.mutating(arguments),
            lost=tool.lost,
        )

    return call


def register_operation_tools(
    server: MCPServer[Any],
    backend: ToolBackend,
    *,
    profile_resolver: Callable[[], Profile | None],
) -> None:
    """Add every declared operation tool without a hook of its own to ``server`` (the fleet
    tools are ``fleet_tools``'); every decision is the backend's."""
    for op in OPERATIONS.values():
        if op.tool is None or op.tool.hooked:
            continue
        add_declared_tool(server, op, _forward(op, backend, profile_resolver))
