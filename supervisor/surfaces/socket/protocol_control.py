"""Socket ops of the control plane: arguments shape-checked, as declared, before the handle."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from supervisor.errors import ProtocolError
from supervisor.operations.registry import CONTROL_OPS, OPERATIONS
from supervisor.operations.requests import Request, request
from supervisor.operations.spec import (
    BOOL,
    INT,
    INT_OR_NULL,
    INTS,
    NUMBER,
    OBJECT,
    OBJECTS,
    TEXT,
    TEXT_OR_TEXTS,
    TEXTS,
)

__all__ = ["CONTROL_OPS", "CONTROL_SCHEMAS", "parse_control_args"]

_MAX_TEXT = 512
_MAX_ITEMS = 1000

#: op -> argument -> (expected shape, required), from the operation declarations.
#: Unknown arguments are refused.
CONTROL_SCHEMAS: Mapping[str, Mapping[str, tuple[str, bool]]] = {
    op.name: {arg.name: (arg.shape, arg.required) for arg in op.args}
    for op in OPERATIONS.values()
    if op.name in CONTROL_OPS
}


#: Each list shape, and the shape of every one of its items.
_ITEM_SHAPES: Mapping[str, str] = {TEXTS: TEXT, INTS: INT, OBJECTS: OBJECT}


def _fits(shape: str, value: object) -> bool:
    if shape == TEXT:
        return isinstance(value, str) and len(value) <= _MAX_TEXT
    if shape in (INT, INT_OR_NULL):
        if value is None:
            return shape == INT_OR_NULL
        return isinstance(value, int) and not isinstance(value, bool) and abs(value) < 2**63
    if shape == NUMBER:
        if isinstance(value, bool) or not isinstance(value, int | float):
            return False
        # Compared before any float(): a 400-digit integer would overflow the conversion.
        return abs(value) < 1e12 and (isinstance(value, int) or math.isfinite(value))
    if shape == BOOL:
        return isinstance(value, bool)
    if shape == OBJECT:
        return isinstance(value, dict)
    if shape in _ITEM_SHAPES:
        item = _ITEM_SHAPES[shape]
        return (
            isinstance(value, list)
            and len(value) <= _MAX_ITEMS
            and all(_fits(item, v) for v in value)
        )
    if shape == TEXT_OR_TEXTS:
        return _fits(TEXT, value) or _fits(TEXTS, value)
    raise AssertionError(f"unknown shape {shape!r}")


def parse_control_args(op: str, args: Mapping[str, Any]) -> Request:
    """The op's request (nulls are absent arguments); a wrong shape or unknown key is a
    ProtocolError."""
    schema = CONTROL_SCHEMAS[op]
    unknown = sorted(set(args) - set(schema))
    if unknown:
        raise ProtocolError(f"{op} takes no argument(s) {', '.join(unknown)[:200]}")
    values: dict[str, Any] = {}
    for name, (shape, required) in schema.items():
        if name not in args or (args[name] is None and shape != INT_OR_NULL):
            if required:
                raise ProtocolError(f"args.{name} is required")
            continue
        if not _fits(shape, args[name]):
            raise ProtocolError(f"args.{name} must be {shape}")
        values[name] = args[name]
    return request(op, **values)
