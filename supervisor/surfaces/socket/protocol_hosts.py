"""Socket ops of host leases: their arguments checked against the declared shapes, into
each op's request."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from supervisor.errors import ProtocolError
from supervisor.operations.registry import HOST_OPS, OPERATIONS
from supervisor.operations.requests import Request, request
from supervisor.operations.spec import TEXT

__all__ = ["HOST_OPS", "parse_host_args"]

_MAX_TEXT = 512
_MAX_IDENTITIES = 100_000
_IDENTITIES = "worker_identities"
#: op -> (required text arguments, takes worker_identities), from the declarations.
_SHAPES: Mapping[str, tuple[tuple[str, ...], bool]] = {
    name: (
        tuple(arg.name for arg in OPERATIONS[name].args if arg.shape == TEXT),
        any(arg.name == _IDENTITIES for arg in OPERATIONS[name].args),
    )
    for name in HOST_OPS
}


def parse_host_args(op: str, args: Mapping[str, Any]) -> Request:
    """Shape checks only; the keeper authorizes and the policy decides."""
    required, takes_ids = _SHAPES[op]
    allowed = {*required, *((_IDENTITIES,) if takes_ids else ())}
    unknown = sorted(set(args) - allowed)
    if unknown:
        raise ProtocolError(f"{op} takes no argument(s) {', '.join(unknown)}")
    values: dict[str, str] = {}
    for name in required:
        value = args.get(name)
        if not isinstance(value, str) or not value or len(value) > _MAX_TEXT:
            raise ProtocolError(f"args.{name} must be a non-empty string of <= {_MAX_TEXT}")
        values[name] = value
    if takes_ids:
        raw = args.get(_IDENTITIES)
        if (
            not isinstance(raw, list)
            or len(raw) > _MAX_IDENTITIES
            or not all(isinstance(i, str) and 0 < len(i) <= _MAX_TEXT for i in raw)
        ):
            raise ProtocolError("args.worker_identities must be a list of identity strings")
        return request(op, **values, worker_identities=tuple(raw))
    return request(op, **values)
