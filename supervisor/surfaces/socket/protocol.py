"""The local socket wire protocol: newline-delimited JSON frames, validated into typed requests."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from json.scanner import make_scanner
from typing import Any, ClassVar

from supervisor.errors import PermissionDenied, ProtocolError
from supervisor.operations.registry import CONTROL_OPS, HOST_OPS, OPERATIONS
from supervisor.operations.requests import Request
from supervisor.surfaces.socket.beats import well_formed_heartbeat
from supervisor.surfaces.socket.fleet_args import FLEET_PARSERS, MAX_TEXT
from supervisor.surfaces.socket.frame import MAX_ID, Frame
from supervisor.surfaces.socket.protocol_control import parse_control_args
from supervisor.surfaces.socket.protocol_hosts import parse_host_args
from supervisor.wire import FRAME_TOO_LARGE, PROTOCOL_VERSION, UNAUTHENTICATED, UNKNOWN_OP

__all__ = [
    "FrameTooLarge",
    "Unauthenticated",
    "UnknownOp",
    "decode_request",
    "peek_request_id",
]


class UnknownOp(ProtocolError):
    """The frame names an operation this protocol does not have."""

    code: ClassVar[str] = UNKNOWN_OP


class FrameTooLarge(ProtocolError):
    """A frame exceeded the size limit; the stream cannot be resynchronized after it."""

    code: ClassVar[str] = FRAME_TOO_LARGE


class Unauthenticated(PermissionDenied):
    """An operator request carried no token, or one that proves no profile."""

    code: ClassVar[str] = UNAUTHENTICATED


def _parser(op: str) -> Callable[[Mapping[str, Any]], Request]:
    if op in CONTROL_OPS:
        return lambda args: parse_control_args(op, args)
    if op in HOST_OPS:
        return lambda args: parse_host_args(op, args)
    return FLEET_PARSERS[op]


#: Every declared op -> the parser of its arguments (unknown keys: see each parser).
_PARSERS: Mapping[str, Callable[[Mapping[str, Any]], Request]] = {
    op: _parser(op) for op in OPERATIONS
}


#: Built once: ``json.loads`` rebuilds its decoder on every call, and every heartbeat
#: is decoded once (its answer is encoded by ``supervisor.wire.encode``).
_DECODER = json.JSONDecoder()


# typeshed types make_scanner's argument as the scanner class itself; it takes a decoder.
_SCAN: Callable[[str, int], tuple[Any, int]] = make_scanner(_DECODER)  # type: ignore[arg-type]


#: A JSON escape that may decode to half of a UTF-16 surrogate pair.
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")
_SURROGATE = re.compile("[\ud800-\udfff]")


def _has_lone_surrogate(value: Any) -> bool:
    """Does any string in ``value`` (keys included) hold an unpaired surrogate? Such a
    string cannot be encoded as UTF-8, so the database, the log and every answer that
    echoes it would fail on it later. A loop, not recursion: the frame may nest as deep
    as the decoder allowed."""
    pending = [value]
    while pending:
        item = pending.pop()
        if type(item) is str:
            if _SURROGATE.search(item) is not None:
                return True
        elif type(item) is dict:
            pending.extend(item)
            pending.extend(item.values())
        elif type(item) is list:
            pending.extend(item)
    return False


def _load(frame: bytes) -> Any:
    value = _parse(frame)
    # Raw surrogate bytes are already bad UTF-8; only an escape can make one, so frames
    # without such an escape (every heartbeat a client library sends) skip the walk.
    if (
        b"\\u" in frame
        and _SURROGATE_ESCAPE.search(frame) is not None
        and _has_lone_surrogate(value)
    ):
        raise ProtocolError("frame holds a lone UTF-16 surrogate (\\ud800-\\udfff escape)")
    return value


def _parse(frame: bytes) -> Any:
    try:
        # Frames are UTF-8 by definition; bad bytes raise UnicodeDecodeError, a ValueError.
        text = frame.decode("utf-8")
        # A bare object with nothing around it (what clients send) goes straight to the
        # C scanner; anything else, and anything it refuses, takes the full decode so
        # errors and surrounding whitespace are handled exactly as json.loads does.
        if text[:1] == "{":
            try:
                value, end = _SCAN(text, 0)
            except (ValueError, StopIteration, RecursionError):
                pass
            else:
                if end == len(text):
                    return value
        return _DECODER.decode(text)
    # ValueError covers JSONDecodeError, bad UTF-8 and integers past the digit limit;
    # RecursionError is what deeply nested arrays raise.
    except (ValueError, RecursionError) as exc:
        raise ProtocolError(f"frame is not valid JSON: {str(exc)[:200]}") from None


def peek_request_id(frame: bytes) -> str | None:
    """The frame's id when it has a usable one, so even a rejected request is answered by id."""
    try:
        data = json.loads(frame)
    except (ValueError, RecursionError):
        return None
    request_id = data.get("id") if isinstance(data, dict) else None
    if not isinstance(request_id, str) or len(request_id) > MAX_ID:
        return None
    return None if _SURROGATE.search(request_id) else request_id


_KNOWN_OPS = sorted(_PARSERS)


def decode_request(frame: bytes) -> Frame:
    """Parse and validate one frame; anything malformed raises a ``ProtocolError``."""
    data = _load(frame)
    return well_formed_heartbeat(data) or _decoded(data)


def _decoded(data: Any) -> Frame:
    if not isinstance(data, dict):
        raise ProtocolError("frame must be a JSON object")
    version = data.get("v", PROTOCOL_VERSION)
    # bool is an int and 1.0 == 1 in Python; neither is a version number on the wire.
    if type(version) is not int or version != PROTOCOL_VERSION:
        raise ProtocolError(
            f"unsupported protocol version {str(version)[:32]}; this is {PROTOCOL_VERSION}"
        )
    request_id = data.get("id")
    if request_id is not None and (not isinstance(request_id, str) or len(request_id) > MAX_ID):
        raise ProtocolError(f"id must be a string of at most {MAX_ID} characters")
    op = data.get("op")
    if not isinstance(op, str):
        raise ProtocolError(f"op must be a string, one of {_KNOWN_OPS}")
    if op not in _PARSERS:
        raise UnknownOp(f"unknown op {op[:64]!r}; expected one of {_KNOWN_OPS}")
    token = data.get("token")
    if token is not None and (not isinstance(token, str) or len(token) > MAX_TEXT):
        raise ProtocolError("token must be a string")
    args = data.get("args", {})
    if not isinstance(args, dict):
        raise ProtocolError("args must be an object")
    return Frame(id=request_id, op=op, token=token, args=_PARSERS[op](args))
