"""The MCP server: the fleet tools and every declared operation tool, one refusal rule."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from mcp.server.auth.provider import TokenVerifier
from mcp.server.auth.settings import AuthSettings
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError
from mcp.types import (
    CallToolResult,
    ContentBlock,
    InputRequiredResult,
    TextContent,
)
from pydantic import AnyHttpUrl, ValidationError

from supervisor.errors import ProtocolError
from supervisor.operations.registry import TOOLS
from supervisor.operations.spec import Tool
from supervisor.policy.refusal import refused
from supervisor.surfaces.mcp.backend import ToolBackend
from supervisor.surfaces.mcp.fleet_tools import ProfileResolver, register_fleet_tools
from supervisor.surfaces.mcp.operation_tools import ToolArgumentError, register_operation_tools
from supervisor.surfaces.mcp.results import flag_error
from supervisor.surfaces.mcp.size import DEFAULT_MAX_RESULT_BYTES
from supervisor.version import package_version

__all__ = ["build_mcp_server"]


def _declared(name: str) -> Tool | None:
    """The tool ``name`` as its operation declares it (None for a name no op serves)."""
    op = TOOLS.get(name)
    return op.tool if op is not None else None


def _text_block(body: Mapping[str, Any]) -> list[ContentBlock]:
    # Clients that ignore structured content still get the whole answer.
    return [TextContent(type="text", text=json.dumps(body, indent=2, default=str))]


def _argument_refusal(tool: str, reasons: Sequence[str]) -> CallToolResult:
    body = refused(ProtocolError.code, *reasons, error=ProtocolError.code, tool=tool)
    declared = _declared(tool)
    if declared is not None:
        body.update(declared.refused_extra)
    return CallToolResult(content=_text_block(body), structured_content=body, is_error=True)


def _validation_reasons(error: ValidationError) -> list[str]:
    # Field paths and messages only: echoing rejected values adds nothing for the caller.
    return [
        f"{'.'.join(str(part) for part in item['loc']) or 'arguments'}: {item['msg']}"
        for item in error.errors()
    ]


class _FleetServer(MCPServer[Any]):
    """Turns argument problems into the structured refusal every other failure already is,
    and marks every refusal, denial and failure ``isError`` (one rule for every tool)."""

    async def call_tool(
        self, name: str, arguments: dict[str, Any], context: Context[Any, Any] | None = None
    ) -> CallToolResult | InputRequiredResult:
        try:
            result = await super().call_tool(name, arguments, context)
            if isinstance(result, CallToolResult):
                declared = _declared(name)
                return flag_error(
                    result,
                    ok_outcomes=declared.ok_outcomes if declared is not None else None,
                    success_is_verdict=declared is not None and declared.success_is_verdict,
                )
            return result
        except ToolError as exc:
            cause = exc.__cause__
            if isinstance(cause, ToolArgumentError):
                return _argument_refusal(name, cause.reasons)
            # The SDK raises a plain ToolError from the ValidationError of its input schema.
            if isinstance(cause, ValidationError) and not isinstance(exc, UnexpectedToolError):
                return _argument_refusal(name, _validation_reasons(cause))
            raise


def build_mcp_server(
    backend: ToolBackend,
    *,
    profile_resolver: ProfileResolver,
    token_verifier: TokenVerifier | None = None,
    issuer_url: str = "http://127.0.0.1",
    max_result_bytes: int = DEFAULT_MAX_RESULT_BYTES,
) -> MCPServer[Any]:
    """An MCP server exposing the three fleet tools over ``backend``, plus every tool the
    operation declarations define (allocator, leases, mutation gate, namespace health,
    incident links), every one answered by the backend's ``call``.

    ``profile_resolver`` is called once per tool call and names the caller to
    the backend, which makes every role and operation decision. With
    ``token_verifier`` the streamable HTTP app refuses requests without a
    bearer token the verifier accepts (``issuer_url`` only fills the SDK's
    required setting; no authorization server is served). Snapshot and plan
    answers are cut to ``max_result_bytes`` (``mcp_size.fit_result``).
    """
    auth = (
        # resource_server_url=None: tokens are the supervisor's own, not audience-bound OAuth.
        AuthSettings(issuer_url=AnyHttpUrl(issuer_url), resource_server_url=None)
        if token_verifier is not None
        else None
    )
    server = _FleetServer(
        "fleet-supervisor",
        version=package_version(),
        instructions=(
            "Fleet supervisor tools: snapshot the worker fleet, plan the retirement of "
            "conclusively stale worker registrations, and apply a plan under compare-and-swap; "
            "take work only through gitea_allocate_next_work and its leases."
        ),
        token_verifier=token_verifier,
        auth=auth,
        # The SDK's basicConfig would otherwise print every request at INFO on stderr.
        log_level="WARNING",
    )

    register_fleet_tools(
        server, backend, profile_resolver=profile_resolver, max_result_bytes=max_result_bytes
    )
    register_operation_tools(server, backend, profile_resolver=profile_resolver)
    return server
