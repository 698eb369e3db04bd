"""A socket frame: its bytes loaded as JSON, and the decoded frame (id, op, token, request)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from json.scanner import make_scanner
from typing import Any

from supervisor.errors import ProtocolError
from supervisor.operations.requests import Request
from supervisor.policy.fast_init import fast_init

__all__ = ["MAX_ID", "MAX_TEXT", "Frame", "load_frame", "peek_request_id"]

#: Longest request id a frame may carry.
MAX_ID = 128
#: Longest token, and longest text in an op's arguments, a frame may carry.
MAX_TEXT = 512


@fast_init
@dataclass(frozen=True, slots=True, kw_only=True)
class Frame:
    """One frame: ``args`` is the op's request (``operations.requests``), checked."""

    id: str | None
    op: str
    token: str | None
    args: Request


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


def load_frame(frame: bytes) -> Any:
    """The frame's JSON value; bad UTF-8, bad JSON or a lone surrogate is a ProtocolError."""
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
