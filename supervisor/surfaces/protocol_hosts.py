"""Socket ops of host leases: their argument shapes (this module stays light for clients)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from supervisor.errors import ProtocolError

__all__ = ["HOST_OPS", "HostArgs", "parse_host_args"]

HOST_OPS = frozenset({"host_status", "host_plan", "host_apply"})
_MAX_TEXT = 512
_MAX_IDENTITIES = 100_000
#: op -> (required text arguments, takes worker_identities)
_SHAPES: Mapping[str, tuple[tuple[str, ...], bool]] = {
    "host_status": ((), False),
    "host_plan": (("host_id",), False),
    "host_apply": (("host_id", "host_token", "candidate_fingerprint"), True),
}


@dataclass(frozen=True, slots=True, kw_only=True)
class HostArgs:
    op: str
    values: Mapping[str, str]
    worker_identities: tuple[str, ...] = ()


def parse_host_args(op: str, args: Mapping[str, Any]) -> HostArgs:
    """Shape checks only; the keeper authorizes and the policy decides."""
    required, takes_ids = _SHAPES[op]
    allowed = {*required, *(("worker_identities",) if takes_ids else ())}
    unknown = sorted(set(args) - allowed)
    if unknown:
        raise ProtocolError(f"{op} takes no argument(s) {', '.join(unknown)}")
    values: dict[str, str] = {}
    for name in required:
        value = args.get(name)
        if not isinstance(value, str) or not value or len(value) > _MAX_TEXT:
            raise ProtocolError(f"args.{name} must be a non-empty string of <= {_MAX_TEXT}")
        values[name] = value
    identities: tuple[str, ...] = ()
    if takes_ids:
        raw = args.get("worker_identities")
        if (
            not isinstance(raw, list)
            or len(raw) > _MAX_IDENTITIES
            or not all(isinstance(i, str) and 0 < len(i) <= _MAX_TEXT for i in raw)
        ):
            raise ProtocolError("args.worker_identities must be a list of identity strings")
        identities = tuple(raw)
    return HostArgs(op=op, values=values, worker_identities=identities)
