"""MCP over stdio where every line gets an answer: an unreadable request is a JSON-RPC error."""

from __future__ import annotations

import json
from typing import Any, Self

import anyio
from anyio.abc import AsyncResource
from mcp.server.mcpserver import MCPServer
from mcp.server.stdio import stdio_server
from mcp.shared.message import SessionMessage
from mcp.types import PARSE_ERROR, JSONRPCError
from pydantic import ValidationError

from supervisor.surfaces.mcp.unreadable import refusal, unreadable_answer

__all__ = ["AnsweringReadStream", "serve_stdio"]


async def serve_stdio(server: MCPServer[Any]) -> None:
    """``server.run_stdio_async()``, except that a line the SDK cannot read is answered.

    Why: the SDK's stdio transport hands a line it cannot parse (invalid JSON, or a
    string holding a lone UTF-16 surrogate, which its strict parser refuses) to the
    session as an exception, and the session only logs it, so the client waits for
    an answer that never comes. ``_lowlevel_server`` is the SDK's own attribute for
    what ``run_stdio_async`` runs; the stdio tests fail if it moves.
    """
    lowlevel = server._lowlevel_server
    async with stdio_server() as (read_stream, write_stream):
        await lowlevel.run(
            AnsweringReadStream(read_stream, write_stream),
            write_stream,
            lowlevel.create_initialization_options(),
        )


class AnsweringReadStream(AsyncResource):
    """The transport's read stream, minus unreadable lines, each answered on the way; as a
    context manager it closes the stream on exit (``AsyncResource``)."""

    def __init__(self, inner: Any, write_stream: Any) -> None:
        self._inner = inner
        self._write = write_stream

    @property
    def last_context(self) -> Any:
        # The SDK restores the sender's context from this (see ReadStream's docs).
        return getattr(self._inner, "last_context", None)

    async def receive(self) -> SessionMessage:
        while True:
            item = await self._inner.receive()
            if not isinstance(item, Exception):
                return item  # type: ignore[no-any-return]
            await self._write.send(SessionMessage(_error_for(item)))

    async def aclose(self) -> None:
        await self._inner.aclose()

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> SessionMessage:
        try:
            return await self.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError):
            raise StopAsyncIteration from None


def _error_for(failure: Exception) -> JSONRPCError:
    """Parse error (id null) for text that is not JSON; otherwise an error answered by the
    request's id when one can be read: invalid params for a request whose ``params`` are
    not an object, invalid request for any other JSON the SDK refuses (such as a lone
    surrogate escape)."""
    found = _input_of(failure)
    data: object = found
    if isinstance(found, str):
        try:
            data = json.loads(found)
        except (ValueError, RecursionError):
            return refusal(
                None, PARSE_ERROR, "Parse error: the line is not valid JSON", reason="not JSON"
            )
    failure_shapes = failure if isinstance(failure, ValidationError) else None
    return unreadable_answer(data, failure_shapes)


def _input_of(failure: Exception) -> str | dict[str, Any] | None:
    """The refused line (text the JSON parser saw) or, when the JSON parsed but a field
    did not fit, the message object itself (what a missing-field error reports)."""
    if not isinstance(failure, ValidationError):
        return None
    errors = failure.errors()
    for error in errors:
        if error.get("type") == "json_invalid" and (line := _text(error.get("input"))) is not None:
            return line
    for error in errors:
        if isinstance(error.get("input"), dict):
            return dict(error["input"])
    for error in errors:
        if len(error.get("loc", ())) <= 1 and (line := _text(error.get("input"))) is not None:
            return line
    return None


def _text(value: object) -> str | None:
    """The text a parser error reports as its input (bytes decoded), else None."""
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return value if isinstance(value, str) else None
