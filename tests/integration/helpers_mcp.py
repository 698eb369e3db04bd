"""Shared set-up for the MCP surface tests: a stale fleet, tool calls and their refusals."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mcp import Client
from mcp.types import CallToolResult

from tests.actors.harness import Harness
from tests.actors.helpers_retirement import PAST_TTL, enroll, ensure_swept

__all__ = ["call", "call_error", "plan_tokens", "refused_arguments", "stale_fleet"]


async def call(client: Client, tool: str, **arguments: Any) -> dict[str, Any]:
    """The structured content of a call that did what it was asked (not flagged ``isError``)."""
    return await _structured(client, tool, arguments, is_error=False)


async def call_error(client: Client, tool: str, **arguments: Any) -> dict[str, Any]:
    """The structured content of a refused, denied or failed call, which must be flagged."""
    return await _structured(client, tool, arguments, is_error=True)


async def _structured(
    client: Client, tool: str, arguments: dict[str, Any], *, is_error: bool
) -> dict[str, Any]:
    result = await client.call_tool(tool, arguments)
    assert isinstance(result, CallToolResult)
    assert result.is_error is is_error, result.content
    assert isinstance(result.structured_content, dict)
    return result.structured_content


async def refused_arguments(client: Client, tool: str, **arguments: Any) -> dict[str, Any]:
    result = await client.call_tool(tool, arguments)
    assert isinstance(result, CallToolResult)
    assert result.is_error is True
    body = result.structured_content
    assert isinstance(body, dict), result.content
    assert body["success"] is False
    assert body["error"] == "bad_request"
    assert body["mutation_performed"] is False
    assert body["reasons"]
    return body


async def stale_fleet(h: Harness) -> tuple[dict[str, Any], dict[str, Any]]:
    """One dead worker past its TTL (a candidate) and one live, heartbeating worker."""
    await ensure_swept(h)
    dead = await enroll(h)
    alive = await enroll(h, namespace="reviewer")
    h.probes.kill(int(dead["pid"]))
    await h.clock.advance(PAST_TTL)
    await h.beat(alive)
    await ensure_swept(h)
    return dead, alive


def plan_tokens(planned: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "candidate_fingerprint": planned["candidate_fingerprint"],
        "worker_identities": planned["candidate_worker_identities"],
    }
