"""The local socket wire protocol: newline-delimited JSON frames, validated into typed requests."""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import re
from collections.abc import Callable, Mapping, Set
from dataclasses import dataclass, field
from datetime import datetime
from enum import Enum
from json.scanner import make_scanner
from typing import Any, ClassVar

from actors.replies import HeartbeatResult
from supervisor.errors import PermissionDenied, ProtocolError
from supervisor.policy.fast_init import fast_init
from supervisor.policy.fleet.snapshot import ManifestEntry
from supervisor.policy.retirement.reasons import PLAN_REASON_CODES
from supervisor.surfaces.protocol_control import CONTROL_OPS, ControlArgs, parse_control_args
from supervisor.surfaces.protocol_hosts import HOST_OPS, HostArgs, parse_host_args
from supervisor.wire import (
    DEFAULT_EXAMPLES,
    DEFAULT_PAGE,
    FRAME_TOO_LARGE,
    MAX_EXAMPLES,
    MAX_PAGE,
    PROTOCOL_VERSION,
    UNAUTHENTICATED,
    UNKNOWN_OP,
    PlanQuery,
    encode,
)

__all__ = [
    "CONTROL_OPS",
    "OPERATOR_OPS",
    "WORKER_OPS",
    "ApplyArgs",
    "ControlArgs",
    "FencedArgs",
    "FrameTooLarge",
    "PlanArgs",
    "RegisterArgs",
    "Request",
    "SnapshotArgs",
    "Unauthenticated",
    "UnknownOp",
    "beat_answer",
    "decode_request",
    "parse_manifest",
    "parse_plan_query",
    "parse_worker_identities",
    "peek_request_id",
    "to_wire",
]

WORKER_OPS = frozenset({"register", "heartbeat", "release"})
OPERATOR_OPS = frozenset({"snapshot", "plan", "apply", "status"})
_MAX_ID = 128
_MAX_TEXT = 512
_MAX_IDENTITIES = 100_000
_MAX_CLAIMS = 64
_MAX_MANIFEST = 10_000
#: Claim numbers beyond this are nonsense for a TTL and could overflow float() in the actor.
_MAX_CLAIM_NUMBER = 1e12


class UnknownOp(ProtocolError):
    """The frame names an operation this protocol does not have."""

    code: ClassVar[str] = UNKNOWN_OP


class FrameTooLarge(ProtocolError):
    """A frame exceeded the size limit; the stream cannot be resynchronized after it."""

    code: ClassVar[str] = FRAME_TOO_LARGE


class Unauthenticated(PermissionDenied):
    """An operator request carried no token, or one that proves no profile."""

    code: ClassVar[str] = UNAUTHENTICATED


@dataclass(frozen=True, slots=True, kw_only=True)
class RegisterArgs:
    pid: int | None
    claims: Mapping[str, Any]


@fast_init
@dataclass(frozen=True, slots=True, kw_only=True)
class FencedArgs:
    """Heartbeat and release name the registration they belong to, in full."""

    worker_identity: str
    pid: int
    generation_id: str
    fencing_epoch: int


@dataclass(frozen=True, slots=True, kw_only=True)
class SnapshotArgs:
    canonical_repository: str | None
    expected_manifest: tuple[ManifestEntry, ...]
    expected_live_revision: str | None
    include_history: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class PlanArgs:
    canonical_repository: str | None
    query: PlanQuery = field(default_factory=PlanQuery)


@dataclass(frozen=True, slots=True, kw_only=True)
class ApplyArgs:
    registry_fingerprint: str | None
    scope_fingerprint: str | None
    candidate_fingerprint: str
    worker_identities: tuple[str, ...]
    canonical_repository: str | None


Args = (
    RegisterArgs | FencedArgs | SnapshotArgs | PlanArgs | ApplyArgs | ControlArgs | HostArgs | None
)


@fast_init
@dataclass(frozen=True, slots=True, kw_only=True)
class Request:
    id: str | None
    op: str
    token: str | None
    args: Args


def _text(args: Mapping[str, Any], name: str, *, required: bool = False) -> str | None:
    value = args.get(name)
    if value is None:
        if required:
            raise ProtocolError(f"args.{name} is required")
        return None
    if not isinstance(value, str) or not value or value.isspace() or len(value) > _MAX_TEXT:
        raise ProtocolError(f"args.{name} must be a non-empty string of at most {_MAX_TEXT} chars")
    return value


def _int(args: Mapping[str, Any], name: str, *, required: bool = True) -> int | None:
    value = args.get(name)
    if value is None and not required:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 0 < value < 2**63:
        raise ProtocolError(f"args.{name} must be a positive integer")
    return value


def _bounded(args: Mapping[str, Any], name: str, default: int, low: int, high: int) -> int:
    value = args.get(name)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ProtocolError(f"args.{name} must be an integer in {low}..{high}")
    return value


def _flag(args: Mapping[str, Any], name: str) -> bool:
    value = args.get(name, False)
    if not isinstance(value, bool):
        raise ProtocolError(f"args.{name} must be a boolean")
    return value


def parse_plan_query(args: Mapping[str, Any]) -> PlanQuery:
    """What of a plan to list (see ``plan_pages.PlanQuery``); absent keys take defaults."""
    full = _flag(args, "full")
    reason = _text(args, "reason")
    if reason is not None and reason not in PLAN_REASON_CODES:
        raise ProtocolError(f"args.reason must be one of {sorted(PLAN_REASON_CODES)}")
    return PlanQuery(
        full=full,
        reason=reason,
        namespace=_text(args, "namespace"),
        instance=_text(args, "instance"),
        limit=_bounded(args, "limit", DEFAULT_PAGE, 1, MAX_PAGE),
        cursor=_text(args, "cursor"),
        examples=_bounded(args, "examples", DEFAULT_EXAMPLES, 0, MAX_EXAMPLES),
    )


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
    if not all(isinstance(item, str) and 0 < len(item) <= _MAX_TEXT for item in raw):
        raise ProtocolError("worker_identities must contain only non-empty strings")
    return tuple(item.strip() for item in raw if item.strip())


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
            isinstance(n, str) and 0 < len(n) <= _MAX_TEXT for n in namespaces
        ):
            raise ProtocolError(f"{where}.namespaces must be a list of strings")
        try:
            entry = ManifestEntry(
                client_instance_id=str(_text(item, "client_instance_id", required=True)),
                client_type=_text(item, "client_type"),
                fleet_run_id=_text(item, "fleet_run_id"),
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
        if len(key) > _MAX_TEXT:
            raise ProtocolError("args.claims keys must be at most 512 characters")
        if value is None or isinstance(value, bool):
            continue
        if isinstance(value, str):
            if len(value) > _MAX_TEXT:
                raise ProtocolError(f"args.claims.{key} must be at most {_MAX_TEXT} characters")
            continue
        # Compared without float(): converting a 400-digit integer raises OverflowError.
        if isinstance(value, int) and abs(value) <= _MAX_CLAIM_NUMBER:
            continue
        if isinstance(value, float) and math.isfinite(value) and abs(value) <= _MAX_CLAIM_NUMBER:
            continue
        raise ProtocolError(f"args.claims.{key} must be a string, a finite number, a bool or null")
    return raw


def _args(op: str, args: Mapping[str, Any]) -> Args:
    if op in CONTROL_OPS:
        return parse_control_args(op, args)
    if op in HOST_OPS:
        return parse_host_args(op, args)
    if op == "register":
        return RegisterArgs(
            pid=_int(args, "pid", required=False), claims=_claims(args.get("claims", {}))
        )
    if op in ("heartbeat", "release"):
        epoch = args.get("fencing_epoch")
        if isinstance(epoch, bool) or not isinstance(epoch, int) or not 0 <= epoch < 2**63:
            raise ProtocolError("args.fencing_epoch must be a non-negative integer")
        return FencedArgs(
            worker_identity=str(_text(args, "worker_identity", required=True)),
            pid=int(_int(args, "pid") or 0),
            generation_id=str(_text(args, "generation_id", required=True)),
            fencing_epoch=epoch,
        )
    if op == "snapshot":
        return SnapshotArgs(
            canonical_repository=_text(args, "canonical_repository"),
            expected_manifest=parse_manifest(args.get("expected_manifest")),
            expected_live_revision=_text(args, "expected_live_revision"),
            include_history=_flag(args, "include_history"),
        )
    if op == "plan":
        return PlanArgs(
            canonical_repository=_text(args, "canonical_repository"), query=parse_plan_query(args)
        )
    if op == "apply":
        return ApplyArgs(
            registry_fingerprint=_text(args, "registry_fingerprint"),
            scope_fingerprint=_text(args, "scope_fingerprint"),
            candidate_fingerprint=str(_text(args, "candidate_fingerprint", required=True)),
            worker_identities=parse_worker_identities(args.get("worker_identities", [])),
            canonical_repository=_text(args, "canonical_repository"),
        )
    return None


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
    if not isinstance(request_id, str) or len(request_id) > _MAX_ID:
        return None
    return None if _SURROGATE.search(request_id) else request_id


_ALL_OPS = WORKER_OPS | OPERATOR_OPS | CONTROL_OPS | HOST_OPS
_KNOWN_OPS = sorted(_ALL_OPS)


def decode_request(frame: bytes) -> Request:
    """Parse and validate one frame; anything malformed raises a ``ProtocolError``."""
    data = _load(frame)
    return _well_formed_heartbeat(data) or _decoded(data)


def _well_formed_heartbeat(data: Any) -> Request | None:
    """The request ``_decoded`` would return for a heartbeat with nothing to refuse, else None.

    Every worker heartbeat comes through here, so the checks of ``_decoded``, ``_text``
    and ``_int`` are inlined for the one op; any frame they would refuse (or that is
    not a heartbeat) is left to ``_decoded``, which raises the proper error.
    """
    if type(data) is not dict or data.get("op") != "heartbeat":
        return None
    version = data.get("v", PROTOCOL_VERSION)
    request_id = data.get("id")
    token = data.get("token")
    args = data.get("args")
    if (
        type(version) is not int
        or version != PROTOCOL_VERSION
        or not (request_id is None or (type(request_id) is str and len(request_id) <= _MAX_ID))
        or not (token is None or (type(token) is str and len(token) <= _MAX_TEXT))
        or type(args) is not dict
    ):
        return None
    identity = args.get("worker_identity")
    generation = args.get("generation_id")
    pid = args.get("pid")
    epoch = args.get("fencing_epoch")
    if (
        type(identity) is not str
        or not 0 < len(identity) <= _MAX_TEXT
        or identity.isspace()
        or type(generation) is not str
        or not 0 < len(generation) <= _MAX_TEXT
        or generation.isspace()
        or type(pid) is not int
        or not 0 < pid < 2**63
        or type(epoch) is not int
        or not 0 <= epoch < 2**63
    ):
        return None
    return Request(
        id=request_id,
        op="heartbeat",
        token=token,
        args=FencedArgs(
            worker_identity=identity, pid=pid, generation_id=generation, fencing_epoch=epoch
        ),
    )


def _decoded(data: Any) -> Request:
    if not isinstance(data, dict):
        raise ProtocolError("frame must be a JSON object")
    version = data.get("v", PROTOCOL_VERSION)
    # bool is an int and 1.0 == 1 in Python; neither is a version number on the wire.
    if type(version) is not int or version != PROTOCOL_VERSION:
        raise ProtocolError(
            f"unsupported protocol version {str(version)[:32]}; this is {PROTOCOL_VERSION}"
        )
    request_id = data.get("id")
    if request_id is not None and (not isinstance(request_id, str) or len(request_id) > _MAX_ID):
        raise ProtocolError(f"id must be a string of at most {_MAX_ID} characters")
    op = data.get("op")
    if not isinstance(op, str):
        raise ProtocolError(f"op must be a string, one of {_KNOWN_OPS}")
    if op not in _ALL_OPS:
        raise UnknownOp(f"unknown op {op[:64]!r}; expected one of {_KNOWN_OPS}")
    token = data.get("token")
    if token is not None and (not isinstance(token, str) or len(token) > _MAX_TEXT):
        raise ProtocolError("token must be a string")
    args = data.get("args", {})
    if not isinstance(args, dict):
        raise ProtocolError("args must be an object")
    return Request(id=request_id, op=op, token=token, args=_args(op, args))


@functools.cache
def _field_names(cls: type) -> tuple[str, ...]:
    return tuple(f.name for f in dataclasses.fields(cls))


def to_wire(value: Any) -> Any:
    """Results as plain JSON values: dataclasses and mappings to dicts, sets sorted to lists."""
    if value is None or type(value) in _PLAIN:
        return value
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        # Field names cached per class and plain values taken as they are: every heartbeat
        # answer passes through here.
        fields = ((name, getattr(value, name)) for name in _field_names(type(value)))
        return {n: v if v is None or type(v) in _PLAIN else to_wire(v) for n, v in fields}
    if isinstance(value, Mapping):
        return {str(k): to_wire(v) for k, v in value.items()}
    if isinstance(value, Set):
        items = [to_wire(v) for v in value]
        try:
            return sorted(items)
        except TypeError:
            return items
    if isinstance(value, list | tuple):
        return [to_wire(v) for v in value]
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, Enum):
        return to_wire(value.value)
    if value is None or isinstance(value, str | int | float | bool):
        return value
    return str(value)


#: Exact types that are already JSON values (subclasses such as enums take the long way).
_PLAIN = frozenset({str, int, float, bool})


def beat_answer(request_id: str | None, result: HeartbeatResult) -> bytes:
    """``encode(ok_frame(request_id, to_wire(result)))`` for a heartbeat, built directly:
    every heartbeat is answered through here."""
    identity, code, detail = result.worker_identity, result.code, result.detail
    stamp, ok = result.last_heartbeat_at, result.ok
    if (
        type(identity) is str
        and type(code) is str
        and type(detail) is str
        and (stamp is None or type(stamp) is str)
        and (request_id is None or type(request_id) is str)
        and type(ok) is bool
    ):
        # The encoder's own C string escaper, so the bytes are exactly the generic ones.
        return (
            f'{{"v":{PROTOCOL_VERSION},"id":{_json_text(request_id)},"ok":true,"result":'
            f'{{"ok":{"true" if ok else "false"},"code":{_ESCAPE(code)},'
            f'"detail":{_ESCAPE(detail)},"worker_identity":{_ESCAPE(identity)},'
            f'"last_heartbeat_at":{_json_text(stamp)}}}}}\n'
        ).encode()
    wire = {
        "ok": result.ok,
        "code": result.code,
        "detail": result.detail,
        "worker_identity": result.worker_identity,
        "last_heartbeat_at": result.last_heartbeat_at,
    }
    frame = {"v": PROTOCOL_VERSION, "id": request_id, "ok": True, "result": wire}
    return encode(frame)


_ESCAPE = json.encoder.encode_basestring_ascii


def _json_text(value: str | None) -> str:
    return "null" if value is None else _ESCAPE(value)
