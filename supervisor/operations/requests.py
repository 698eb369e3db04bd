"""Each operation's one request type, made from its declaration: what every surface parses
into, what the handle's one ``call`` takes, and what the actor receives."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import fields
from typing import Any, TypeVar

from supervisor.operations.declared import REQUEST_TYPES
from supervisor.operations.spec import Request

__all__ = ["REQUESTS", "Request", "arguments", "given", "request", "request_as"]

_R = TypeVar("_R", bound=Request)

#: op name -> its request type (``operations.declared``, generated), for every declared op.
REQUESTS: Mapping[str, type[Request]] = {kind.op: kind for kind in REQUEST_TYPES}


def request(op: str, **values: Any) -> Request:
    """The request of ``op`` with these arguments (a TypeError names one it does not take)."""
    return REQUESTS[op](**values)


def arguments(request: Request) -> dict[str, Any]:
    """Every argument of ``request`` by name, None for the absent ones."""
    return {f.name: getattr(request, f.name) for f in fields(request)}  # type: ignore[arg-type]


def given(request: Request) -> dict[str, Any]:
    """The arguments ``request`` was given: every field that is not None."""
    return {name: value for name, value in arguments(request).items() if value is not None}


def request_as(request: Request, kind: type[_R]) -> _R:
    """``request`` as ``kind``, the request type of the op being answered: a route that
    brought another op's request is a bug, raised as such."""
    if not isinstance(request, kind):
        raise TypeError(f"{kind.__name__} expected, got {type(request).__name__}")
    return request
