"""A socket frame turned into the op's checked request, every op's argument reader included."""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping
from typing import Any, ClassVar

from supervisor.errors import PermissionDenied, ProtocolError
from supervisor.operations.fleet import FLEET_OPERATIONS, PLAN
from supervisor.operations.registry import CONTROL_OPS, HOST_OPS, OPERATIONS
from supervisor.operations.requests import Request, request
from supervisor.operations.spec import (
    BOOL,
    INT,
    INT64_MAX,
    INT_OR_NULL,
    INTS,
    NUMBER,
    OBJECT,
    OBJECTS,
    TEXT,
    TEXT_OR_TEXTS,
    TEXTS,
    Arg,
    Operation,
)
from supervisor.policy.fleet.snapshot import ManifestEntry
from supervisor.surfaces.socket.beats import well_formed_heartbeat
from supervisor.surfaces.socket.frame import MAX_ID, MAX_TEXT, Frame, load_frame
from supervisor.wire import (
    FRAME_TOO_LARGE,
    PROTOCOL_VERSION,
    UNAUTHENTICATED,
    UNKNOWN_OP,
    PlanQuery,
)

__all__ = [
    "CONTROL_SCHEMAS",
    "FLEET_PARSERS",
    "PARSERS",
    "FrameTooLarge",
    "Unauthenticated",
    "UnknownOp",
    "decode_request",
    "parse_control_args",
    "parse_host_args",
    "parse_manifest",
    "parse_plan_query",
    "parse_worker_identities",
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


def decode_request(frame: bytes) -> Frame:
    """Parse and validate one frame; anything malformed raises a ``ProtocolError``."""
    data = load_frame(frame)
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
    if op not in PARSERS:
        raise UnknownOp(f"unknown op {op[:64]!r}; expected one of {_KNOWN_OPS}")
    token = data.get("token")
    if token is not None and (not isinstance(token, str) or len(token) > MAX_TEXT):
        raise ProtocolError("token must be a string")
    args = data.get("args", {})
    if not isinstance(args, dict):
        raise ProtocolError("args must be an object")
    return Frame(id=request_id, op=op, token=token, args=PARSERS[op](args))


_MAX_IDENTITIES = 100_000


def _texts(items: list[Any]) -> bool:
    """Is every item a non-empty string of at most ``MAX_TEXT`` characters?"""
    return all(isinstance(item, str) and 0 < len(item) <= MAX_TEXT for item in items)


# The fleet ops (worker register/heartbeat/release, operator snapshot/plan/apply): their
# arguments read as their declarations say (shapes, bounds, choices and order); keys an
# op does not declare are ignored.

_MAX_CLAIMS = 64
_MAX_MANIFEST = 10_000
#: Claim numbers beyond this are nonsense for a TTL and could overflow float() in the actor.
_MAX_CLAIM_NUMBER = 1e12


def _text(args: Mapping[str, Any], arg: Arg) -> str | None:
    value = args.get(arg.name)
    if value is None:
        if arg.required:
            raise ProtocolError(f"args.{arg.name} is required")
        return None
    if not isinstance(value, str) or not value or value.isspace() or len(value) > MAX_TEXT:
        raise ProtocolError(
            f"args.{arg.name} must be a non-empty string of at most {MAX_TEXT} chars"
        )
    if arg.choices is not None and value not in arg.choices:
        raise ProtocolError(f"args.{arg.name} must be one of {sorted(arg.choices)}")
    return value


def _int(args: Mapping[str, Any], arg: Arg) -> int | None:
    value = args.get(arg.name)
    if value is None and not arg.required:
        return None
    low, high = arg.bounds or (-INT64_MAX - 1, INT64_MAX)
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ProtocolError(f"args.{arg.name} must be {_int_words(low, high)}")
    return value


def _int_words(low: int, high: int) -> str:
    if high == INT64_MAX and low in (0, 1):
        return "a positive integer" if low == 1 else "a non-negative integer"
    return f"an integer in {low}..{high}"


def _flag(args: Mapping[str, Any], arg: Arg) -> bool | None:
    if arg.name not in args:
        return None
    value = args[arg.name]
    if not isinstance(value, bool):
        raise ProtocolError(f"args.{arg.name} must be a boolean")
    return value


def parse_worker_identities(raw: object) -> tuple[str, ...]:
    """A list, or a JSON list / comma-separated string (the customer's tools accept all three)."""
    if isinstance(raw, str):
        text = raw.strip()
        if text.startswith("["):
            try:
                raw = json.loads(text)
            except (ValueError, RecursionError) as exc:
                raise ProtocolError(f"worker_identities is not valid JSON: {exc}") from exc
        else:
            raw = [part.strip() for part in text.split(",") if part.strip()]
    if not isinstance(raw, list) or len(raw) > _MAX_IDENTITIES:
        raise ProtocolError("worker_identities must be a list of strings")
    if not _texts(raw):
        raise ProtocolError("worker_identities must contain only non-empty strings")
    return tuple(item.strip() for item in raw if item.strip())


#: A manifest entry's strings, read as the fleet ops' own.
_INSTANCE_ID = Arg("client_instance_id", TEXT, required=True)
_CLIENT_TYPE = Arg("client_type", TEXT)
_FLEET_RUN_ID = Arg("fleet_run_id", TEXT)


def parse_manifest(raw: object) -> tuple[ManifestEntry, ...]:
    """The operator's approved instances; keys other than the four known ones are ignored."""
    if raw is None:
        return ()
    if not isinstance(raw, list) or len(raw) > _MAX_MANIFEST:
        raise ProtocolError("expected_manifest must be a list of objects")
    entries = []
    for index, item in enumerate(raw):
        where = f"expected_manifest[{index}]"
        if not isinstance(item, dict):
            raise ProtocolError(f"{where} must be an object")
        namespaces = item.get("namespaces") or []
        if not isinstance(namespaces, list) or not _texts(namespaces):
            raise ProtocolError(f"{where}.namespaces must be a list of strings")
        try:
            entry = ManifestEntry(
                client_instance_id=str(_text(item, _INSTANCE_ID)),
                client_type=_text(item, _CLIENT_TYPE),
                fleet_run_id=_text(item, _FLEET_RUN_ID),
                namespaces=tuple(namespaces),
            )
        except ProtocolError as exc:
            raise ProtocolError(f"{where}: {exc.detail.removeprefix('args.')}") from None
        entries.append(entry)
    return tuple(entries)


def _claims(raw: object) -> dict[str, Any]:
    # Only the shape is checked here (flat object of scalars); which claims exist and what
    # they may say is the heartbeat actor's decision, answered as a registration result.
    if not isinstance(raw, dict) or len(raw) > _MAX_CLAIMS:
        raise ProtocolError(f"args.claims must be an object with at most {_MAX_CLAIMS} keys")
    for key, value in raw.items():
        if len(key) > MAX_TEXT:
            raise ProtocolError("args.claims keys must be at most 512 characters")
        if value is None or isinstance(value, bool):
            continue
        if isinstance(value, str):
            if len(value) > MAX_TEXT:
                raise ProtocolError(f"args.claims.{key} must be at most {MAX_TEXT} characters")
            continue
        # Compared without float(): converting a 400-digit integer raises OverflowError.
        if isinstance(value, int) and abs(value) <= _MAX_CLAIM_NUMBER:
            continue
        if isinstance(value, float) and math.isfinite(value) and abs(value) <= _MAX_CLAIM_NUMBER:
            continue
        raise ProtocolError(f"args.claims.{key} must be a string, a finite number, a bool or null")
    return raw


def _own(read: Callable[[object], Any]) -> Callable[[Mapping[str, Any], Arg], Any]:
    # An argument with a reader of its own gets its value as sent, null included.
    return lambda args, arg: read(args[arg.name]) if arg.name in args else None


#: Arguments whose check is more than a shape, by name; the rest are read by shape.
_READ_BY_NAME: Mapping[str, Callable[[Mapping[str, Any], Arg], Any]] = {
    "claims": _own(_claims),
    "expected_manifest": _own(parse_manifest),
    "worker_identities": _own(parse_worker_identities),
}
_READ_BY_SHAPE: Mapping[str, Callable[[Mapping[str, Any], Arg], Any]] = {
    TEXT: _text,
    INT: _int,
    BOOL: _flag,
}


def _values(op: Operation, args: Mapping[str, Any]) -> dict[str, Any]:
    """The op's declared arguments that were given, checked in declared order; absent
    ones (and null strings and integers) are left to the request's defaults. Keys the op
    does not declare are ignored."""
    values = {}
    for arg in op.args:
        read = _READ_BY_NAME.get(arg.name) or _READ_BY_SHAPE[arg.shape]
        value = read(args, arg)
        if value is not None:
            values[arg.name] = value
    return values


def parse_plan_query(args: Mapping[str, Any]) -> PlanQuery:
    """What of a plan to list (see ``plan_pages.PlanQuery``); absent keys take defaults."""
    values = _values(PLAN, args)
    values.pop("canonical_repository", None)
    return PlanQuery(**values)


def _fleet_parser(op: Operation) -> Callable[[Mapping[str, Any]], Request]:
    # status takes no arguments (and ignores any it is given).
    return lambda args: request(op.name, **_values(op, args))


#: Declared fleet op -> the parser of its wire arguments into the op's request.
FLEET_PARSERS: Mapping[str, Callable[[Mapping[str, Any]], Request]] = {
    op.name: _fleet_parser(op) for op in FLEET_OPERATIONS
}


# The control ops (control plane, links, reap): arguments shape-checked, as declared,
# before the handle; keys an op does not declare are refused.

_MAX_ITEMS = 1000

#: op -> argument -> (expected shape, required), from the operation declarations.
CONTROL_SCHEMAS: Mapping[str, Mapping[str, tuple[str, bool]]] = {
    op.name: {arg.name: (arg.shape, arg.required) for arg in op.args}
    for op in OPERATIONS.values()
    if op.name in CONTROL_OPS
}


#: Each list shape, and the shape of every one of its items.
_ITEM_SHAPES: Mapping[str, str] = {TEXTS: TEXT, INTS: INT, OBJECTS: OBJECT}


def _fits(shape: str, value: object) -> bool:
    if shape == TEXT:
        return isinstance(value, str) and len(value) <= MAX_TEXT
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


# The host lease ops: keys an op does not declare are refused.

_IDENTITIES = "worker_identities"
#: op -> (required text arguments, takes worker_identities), from the declarations.
_HOST_SHAPES: Mapping[str, tuple[tuple[str, ...], bool]] = {
    name: (
        tuple(arg.name for arg in OPERATIONS[name].args if arg.shape == TEXT),
        any(arg.name == _IDENTITIES for arg in OPERATIONS[name].args),
    )
    for name in HOST_OPS
}


def parse_host_args(op: str, args: Mapping[str, Any]) -> Request:
    """Shape checks only; the keeper authorizes and the policy decides."""
    required, takes_ids = _HOST_SHAPES[op]
    allowed = {*required, *((_IDENTITIES,) if takes_ids else ())}
    unknown = sorted(set(args) - allowed)
    if unknown:
        raise ProtocolError(f"{op} takes no argument(s) {', '.join(unknown)}")
    values: dict[str, str] = {}
    for name in required:
        value = args.get(name)
        if not isinstance(value, str) or not value or len(value) > MAX_TEXT:
            raise ProtocolError(f"args.{name} must be a non-empty string of <= {MAX_TEXT}")
        values[name] = value
    if takes_ids:
        raw = args.get(_IDENTITIES)
        if not isinstance(raw, list) or len(raw) > _MAX_IDENTITIES or not _texts(raw):
            raise ProtocolError("args.worker_identities must be a list of identity strings")
        return request(op, **values, worker_identities=tuple(raw))
    return request(op, **values)


def _parser(op: str) -> Callable[[Mapping[str, Any]], Request]:
    if op in CONTROL_OPS:
        return lambda args: parse_control_args(op, args)
    if op in HOST_OPS:
        return lambda args: parse_host_args(op, args)
    return FLEET_PARSERS[op]


#: Every declared op -> the parser of its arguments (unknown keys: see each family above).
PARSERS: Mapping[str, Callable[[Mapping[str, Any]], Request]] = {
    op: _parser(op) for op in OPERATIONS
}
_KNOWN_OPS = sorted(PARSERS)
