"""Streamable HTTP answers by the request's id: the SDK's id-less envelope errors, completed."""

from __future__ import annotations

import json
from collections.abc import Sequence

from mcp.server.transport_security import DEFAULT_MAX_REQUEST_BODY_SIZE
from mcp.types import PARSE_ERROR, JSONRPCError, jsonrpc_message_adapter
from pydantic import ValidationError
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from supervisor.surfaces.mcp.unreadable import (
    INVALID_PARAMS,
    INVALID_REQUEST,
    readable_id,
    unreadable_answer,
)

__all__ = ["answer_by_id"]

#: The SDK's codes for a body it could not read as a JSON-RPC message.
_ENVELOPE_CODES = frozenset({PARSE_ERROR, INVALID_REQUEST, INVALID_PARAMS})


def answer_by_id(app: ASGIApp, *, max_body: int = DEFAULT_MAX_REQUEST_BODY_SIZE) -> ASGIApp:
    """``app`` (the SDK's streamable HTTP app), except that its JSON-RPC error for a body
    it could not read carries the request's id when that can be read, and says what
    was wrong: invalid params (-32602) for a request whose ``params`` are not an
    object, invalid request (-32600) for another unreadable request (a lone surrogate
    escape, a wrong ``jsonrpc``).

    Why: the SDK answers such a body with id null (and -32602 for any shape
    problem), so the client cannot tell which request failed and waits for it. The
    SDK still decides everything (authentication, Host checks, sessions, the answer's
    status): only a 400 JSON-RPC error with id null is completed, from the body the
    SDK read (recorded as it reads it, up to ``max_body`` bytes).
    """

    async def asgi(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope.get("method") != "POST":
            await app(scope, receive, send)
            return
        body = bytearray()
        recorded = True
        held: list[Message] = []

        async def recording_receive() -> Message:
            nonlocal recorded
            message = await receive()
            if message["type"] == "http.request" and recorded:
                body.extend(message.get("body", b""))
                if len(body) > max_body:
                    recorded = False
                    body.clear()
            return message

        async def holding_send(message: Message) -> None:
            if not held and not _json_400(message):
                await send(message)
                return
            held.append(message)
            if message["type"] == "http.response.body" and not message.get("more_body", False):
                for out in _completed(held, bytes(body) if recorded else None):
                    await send(out)
                held.clear()

        await app(scope, recording_receive, holding_send)
        for out in held:  # an answer the app left unfinished goes out as it was
            await send(out)

    return asgi


def _json_400(message: Message) -> bool:
    if message["type"] != "http.response.start" or message.get("status") != 400:
        return False
    headers: dict[bytes, bytes] = dict(message.get("headers", ()))
    return headers.get(b"content-type", b"").startswith(b"application/json")


def _completed(held: Sequence[Message], request: bytes | None) -> list[Message]:
    """The held answer, its error completed when it is the SDK's id-less envelope error."""
    start, bodies = held[0], held[1:]
    answer = b"".join(m.get("body", b"") for m in bodies)
    better = _better_error(answer, request) if request is not None else None
    if better is None:
        return list(held)
    text = better.model_dump_json(by_alias=True, exclude_none=True).encode()
    headers = [(k, v) for k, v in start.get("headers", ()) if k.lower() != b"content-length"]
    headers.append((b"content-length", b"%d" % len(text)))
    return [
        {**start, "headers": headers},
        {"type": "http.response.body", "body": text, "more_body": False},
    ]


def _better_error(answer: bytes, request: bytes) -> JSONRPCError | None:
    try:
        sdk = json.loads(answer)
        data = json.loads(request)
    except (ValueError, RecursionError):
        return None  # the body is not JSON at all: the SDK's parse error (id null) stands
    error = sdk.get("error") if isinstance(sdk, dict) else None
    if not isinstance(error, dict) or sdk.get("id") is not None:
        return None
    if error.get("code") not in _ENVELOPE_CODES or readable_id(data) is None:
        return None
    try:
        jsonrpc_message_adapter.validate_python(data, by_name=False)
    except ValidationError as failure:
        return unreadable_answer(data, failure)
    if error.get("code") == PARSE_ERROR:
        # Python reads what the SDK's strict parser refused (a lone surrogate escape).
        return unreadable_answer(data, None)
    # A readable request refused for something else (a missing session): the SDK's
    # error as it was, answered by the request's id.
    return JSONRPCError.model_validate({**sdk, "id": readable_id(data)})
