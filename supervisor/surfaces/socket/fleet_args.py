"""Arguments of the fleet ops (worker register/heartbeat/release, operator snapshot/plan/
apply), read into each op's request as their declarations say: shapes, bounds, choices
and order."""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping
from typing import Any

from supervisor.errors import ProtocolError
from supervisor.operations.fleet import FLEET_OPERATIONS, PLAN
from supervisor.operations.requests import Request, request
from supervisor.operations.spec import BOOL, INT, INT64_MAX, TEXT, Arg, Operation
from supervisor.policy.fleet.snapshot import ManifestEntry
from supervisor.wire import PlanQuery

__all__ = [
    "FLEET_PARSERS",
    "MAX_TEXT",
    "parse_manifest",
    "parse_plan_query",
    "parse_worker_identities",
]

MAX_TEXT = 512
_MAX_IDENTITIES = 100_000
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
    if not all(isinstance(item, str) and 0 < len(item) <= MAX_TEXT for item in raw):
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
        if not isinstance(namespaces, list) or not all(
            isinstance(n, str) and 0 < len(n) <= MAX_TEXT for n in namespaces
        ):
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


def _parser(op: Operation) -> Callable[[Mapping[str, Any]], Request]:
    # status takes no arguments (and ignores any it is given).
    return lambda args: request(op.name, **_values(op, args))


#: Declared fleet op -> the parser of its wire arguments into the op's request.
FLEET_PARSERS: Mapping[str, Callable[[Mapping[str, Any]], Request]] = {
    op.name: _parser(op) for op in FLEET_OPERATIONS
}
