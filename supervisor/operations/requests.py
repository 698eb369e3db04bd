"""Each operation's one request type, made from its declaration: what every surface parses
into, what the handle's one ``call`` takes, and what the actor receives."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import field, fields, make_dataclass
from typing import Any, ClassVar

from supervisor.operations import spec
from supervisor.operations.registry import OPERATIONS
from supervisor.operations.spec import Operation
from supervisor.policy.fast_init import fast_init

__all__ = ["REQUESTS", "Request", "arguments", "given", "request", "request_type"]


class Request:
    """The base of every op's request type: a frozen, slotted, keyword-only dataclass whose
    fields are the op's declared arguments (absent ones are None, or a switch's default)."""

    __slots__ = ()
    #: The op this is a request of (its name on the socket).
    op: ClassVar[str]
    #: The seed's name for it, where the op is also an MCP tool (else the op's name).
    alias: ClassVar[str]


#: The Python type each wire shape is held as once checked (lists become tuples).
_TYPES: Mapping[str, Any] = {
    spec.TEXT: str | None,
    spec.INT: int | None,
    spec.INT_OR_NULL: int | None,
    spec.NUMBER: float | None,
    spec.BOOL: bool | None,
    spec.TEXTS: Sequence[str] | None,
    spec.OBJECTS: Sequence[Any] | None,
    spec.OBJECT: Mapping[str, Any] | None,
    spec.INTS: Sequence[int] | None,
    spec.TEXT_OR_TEXTS: Sequence[str] | str | None,
}


def _camel(name: str) -> str:
    return "".join(part.capitalize() for part in name.split("_"))


def _default(arg: spec.Arg) -> Any:
    return arg.default if arg.shape == spec.BOOL else None


def request_type(op: Operation) -> type[Request]:
    """The request type of ``op``: one field per declared argument, in declared order."""
    # A switch's absence is its default (false, or true where --not-X turns it off);
    # every other absent argument is None, and the actor applies its own default.
    specs = [(arg.name, _TYPES[arg.shape], field(default=_default(arg))) for arg in op.args]
    kind = make_dataclass(
        _camel(op.name),
        specs,
        bases=(Request,),
        namespace={"op": op.name, "alias": op.tool_name or op.name},
        frozen=True,
        slots=True,
        kw_only=True,
    )
    kind.__module__ = __name__
    kind.__doc__ = f"The arguments of ``{op.name}``, as its declaration says (``{op.call}``)."
    # A heartbeat's request is built once per beat: the cheaper __init__ (``fast_init``).
    return fast_init(kind)


#: op name -> its request type, for every declared op.
REQUESTS: Mapping[str, type[Request]] = {name: request_type(op) for name, op in OPERATIONS.items()}


def request(op: str, **values: Any) -> Request:
    """The request of ``op`` with these arguments (a TypeError names one it does not take)."""
    return REQUESTS[op](**values)


def arguments(request: Request) -> dict[str, Any]:
    """Every argument of ``request`` by name, None for the absent ones."""
    return {f.name: getattr(request, f.name) for f in fields(request)}  # type: ignore[arg-type]


def given(request: Request) -> dict[str, Any]:
    """The arguments ``request`` was given: every field that is not None."""
    return {name: value for name, value in arguments(request).items() if value is not None}
