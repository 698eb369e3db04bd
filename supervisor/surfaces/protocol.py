"""The local socket wire protocol: newline-delimited JSON frames, validated into typed requests."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from supervisor.errors import ProtocolError

__all__ = [
    "OPERATOR_OPS",
    "PROTOCOL_VERSION",
    "WORKER_OPS",
    "ApplyArgs",
    "FencedArgs",
    "PlanArgs",
    "RegisterArgs",
    "Request",
    "SnapshotArgs",
    "decode_request",
    "encode",
    "error_frame",
    "ok_frame",
    "parse_worker_identities",
]

PROTOCOL_VERSION = 1
WORKER_OPS = frozenset({"register", "heartbeat", "release"})
OPERATOR_OPS = frozenset({"snapshot", "plan", "apply", "status"})
_MAX_ID = 128
_MAX_TEXT = 512
_MAX_IDENTITIES = 100_000


@dataclass(frozen=True, slots=True, kw_only=True)
class RegisterArgs:
    pid: int | None
    claims: Mapping[str, Any]


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
    expected_manifest: tuple[Mapping[str, Any], ...]
    expected_live_revision: str | None


@dataclass(frozen=True, slots=True, kw_only=True)
class PlanArgs:
    canonical_repository: str | None


@dataclass(frozen=True, slots=True, kw_only=True)
class ApplyArgs:
    registry_fingerprint: str | None
    scope_fingerprint: str | None
    candidate_fingerprint: str
    worker_identities: tuple[str, ...]
    canonical_repository: str | None


Args = RegisterArgs | FencedArgs | SnapshotArgs | PlanArgs | ApplyArgs | None


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
    if not isinstance(value, str) or not value.strip() or len(value) > _MAX_TEXT:
        raise ProtocolError(f"args.{name} must be a non-empty string of at most {_MAX_TEXT} chars")
    return value


def _int(args: Mapping[str, Any], name: str, *, required: bool = True) -> int | None:
    value = args.get(name)
    if value is None and not required:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 0 < value < 2**63:
        raise ProtocolError(f"args.{name} must be a positive integer")
    return value


def parse_worker_identities(raw: object) -> tuple[str, ...]:
    """A list, or a JSON list / comma-separated string (the customer's tools accept all three)."""
    if isinstance(raw, str):
        text = raw.strip()
        if text.startswith("["):
            try:
                raw = json.loads(text)
            except json.JSONDecodeError as exc:
                raise ProtocolError(f"worker_identities is not valid JSON: {exc.msg}") from exc
        else:
            raw = [part.strip() for part in text.split(",") if part.strip()]
    if not isinstance(raw, list) or len(raw) > _MAX_IDENTITIES:
        raise ProtocolError("worker_identities must be a list of strings")
    if not all(isinstance(item, str) and 0 < len(item) <= _MAX_TEXT for item in raw):
        raise ProtocolError("worker_identities must contain only non-empty strings")
    return tuple(item.strip() for item in raw if item.strip())


def _args(op: str, args: Mapping[str, Any]) -> Args:
    if op == "register":
        claims = args.get("claims", {})
        if not isinstance(claims, dict):
            raise ProtocolError("args.claims must be an object")
        return RegisterArgs(pid=_int(args, "pid", required=False), claims=claims)
    if op in ("heartbeat", "release"):
        epoch = args.get("fencing_epoch")
        if isinstance(epoch, bool) or not isinstance(epoch, int) or epoch < 0:
            raise ProtocolError("args.fencing_epoch must be a non-negative integer")
        return FencedArgs(
            worker_identity=str(_text(args, "worker_identity", required=True)),
            pid=int(_int(args, "pid") or 0),
            generation_id=str(_text(args, "generation_id", required=True)),
            fencing_epoch=epoch,
        )
    if op == "snapshot":
        manifest = args.get("expected_manifest", [])
        if not isinstance(manifest, list) or not all(isinstance(m, dict) for m in manifest):
            raise ProtocolError("args.expected_manifest must be a list of objects")
        return SnapshotArgs(
            canonical_repository=_text(args, "canonical_repository"),
            expected_manifest=tuple(manifest),
            expected_live_revision=_text(args, "expected_live_revision"),
        )
    if op == "plan":
        return PlanArgs(canonical_repository=_text(args, "canonical_repository"))
    if op == "apply":
        return ApplyArgs(
            registry_fingerprint=_text(args, "registry_fingerprint"),
            scope_fingerprint=_text(args, "scope_fingerprint"),
            candidate_fingerprint=str(_text(args, "candidate_fingerprint", required=True)),
            worker_identities=parse_worker_identities(args.get("worker_identities", [])),
            canonical_repository=_text(args, "canonical_repository"),
        )
    return None


def decode_request(frame: bytes) -> Request:
    """Parse and validate one frame; anything malformed raises ``ProtocolError``."""
    try:
        data = json.loads(frame)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ProtocolError(f"frame is not valid JSON: {exc}") from exc
    if not isinstance(data, dict):
        raise ProtocolError("frame must be a JSON object")
    version = data.get("v", PROTOCOL_VERSION)
    if version != PROTOCOL_VERSION:
        raise ProtocolError(f"unsupported protocol version {version!r}; this is {PROTOCOL_VERSION}")
    request_id = data.get("id")
    if request_id is not None and (not isinstance(request_id, str) or len(request_id) > _MAX_ID):
        raise ProtocolError(f"id must be a string of at most {_MAX_ID} characters")
    op = data.get("op")
    if not isinstance(op, str) or op not in WORKER_OPS | OPERATOR_OPS:
        raise ProtocolError(f"op must be one of {sorted(WORKER_OPS | OPERATOR_OPS)}")
    token = data.get("token")
    if token is not None and (not isinstance(token, str) or len(token) > _MAX_TEXT):
        raise ProtocolError("token must be a string")
    args = data.get("args", {})
    if not isinstance(args, dict):
        raise ProtocolError("args must be an object")
    return Request(id=request_id, op=op, token=token, args=_args(op, args))


def encode(frame: Mapping[str, Any]) -> bytes:
    return json.dumps(frame, separators=(",", ":"), default=str).encode() + b"\n"


def ok_frame(request_id: str | None, result: Mapping[str, Any]) -> dict[str, Any]:
    return {"v": PROTOCOL_VERSION, "id": request_id, "ok": True, "result": dict(result)}


def error_frame(request_id: str | None, code: str, detail: str) -> dict[str, Any]:
    return {
        "v": PROTOCOL_VERSION,
        "id": request_id,
        "ok": False,
        "error": {"code": code, "detail": detail},
    }
