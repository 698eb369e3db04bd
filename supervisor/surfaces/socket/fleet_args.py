"""Arguments of the fleet ops (worker register/heartbeat/release, operator snapshot/plan/
apply): one parser per declared op, each checking the shape its declaration names."""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from supervisor.errors import ProtocolError
from supervisor.operations.fleet import FLEET_OPERATIONS
from supervisor.policy.fast_init import fast_init
from supervisor.policy.fleet.snapshot import ManifestEntry
from supervisor.policy.retirement.reasons import PLAN_REASON_CODES
from supervisor.wire import DEFAULT_EXAMPLES, DEFAULT_PAGE, MAX_EXAMPLES, MAX_PAGE, PlanQuery

__all__ = [
    "FLEET_PARSERS",
    "MAX_TEXT",
    "ApplyArgs",
    "FencedArgs",
    "FleetArgs",
    "PlanArgs",
    "RegisterArgs",
    "SnapshotArgs",
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


FleetArgs = RegisterArgs | FencedArgs | SnapshotArgs | PlanArgs | ApplyArgs | None


def _text(args: Mapping[str, Any], name: str, *, required: bool = False) -> str | None:
    value = args.get(name)
    if value is None:
        if required:
            raise ProtocolError(f"args.{name} is required")
        return None
    if not isinstance(value, str) or not value or value.isspace() or len(value) > MAX_TEXT:
        raise ProtocolError(f"args.{name} must be a non-empty string of at most {MAX_TEXT} chars")
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
    if not all(isinstance(item, str) and 0 < len(item) <= MAX_TEXT for item in raw):
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
            isinstance(n, str) and 0 < len(n) <= MAX_TEXT for n in namespaces
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


def _register(args: Mapping[str, Any]) -> RegisterArgs:
    return RegisterArgs(
        pid=_int(args, "pid", required=False), claims=_claims(args.get("claims", {}))
    )


def _fenced(args: Mapping[str, Any]) -> FencedArgs:
    epoch = args.get("fencing_epoch")
    if isinstance(epoch, bool) or not isinstance(epoch, int) or not 0 <= epoch < 2**63:
        raise ProtocolError("args.fencing_epoch must be a non-negative integer")
    return FencedArgs(
        worker_identity=str(_text(args, "worker_identity", required=True)),
        pid=int(_int(args, "pid") or 0),
        generation_id=str(_text(args, "generation_id", required=True)),
        fencing_epoch=epoch,
    )


def _snapshot(args: Mapping[str, Any]) -> SnapshotArgs:
    return SnapshotArgs(
        canonical_repository=_text(args, "canonical_repository"),
        expected_manifest=parse_manifest(args.get("expected_manifest")),
        expected_live_revision=_text(args, "expected_live_revision"),
        include_history=_flag(args, "include_history"),
    )


def _plan(args: Mapping[str, Any]) -> PlanArgs:
    return PlanArgs(
        canonical_repository=_text(args, "canonical_repository"), query=parse_plan_query(args)
    )


def _apply(args: Mapping[str, Any]) -> ApplyArgs:
    return ApplyArgs(
        registry_fingerprint=_text(args, "registry_fingerprint"),
        scope_fingerprint=_text(args, "scope_fingerprint"),
        candidate_fingerprint=str(_text(args, "candidate_fingerprint", required=True)),
        worker_identities=parse_worker_identities(args.get("worker_identities", [])),
        canonical_repository=_text(args, "canonical_repository"),
    )


def _nothing(args: Mapping[str, Any]) -> None:
    del args  # status takes no arguments (and ignores any it is given)


_PARSERS: Mapping[str, Callable[[Mapping[str, Any]], FleetArgs]] = {
    "register": _register,
    "heartbeat": _fenced,
    "release": _fenced,
    "snapshot": _snapshot,
    "plan": _plan,
    "apply": _apply,
    "status": _nothing,
}


def _by_declaration() -> Mapping[str, Callable[[Mapping[str, Any]], FleetArgs]]:
    declared = [op.name for op in FLEET_OPERATIONS]
    if sorted(declared) != sorted(_PARSERS):
        raise AssertionError(f"fleet parsers {sorted(_PARSERS)} != declared ops {declared}")
    return {name: _PARSERS[name] for name in declared}


#: Declared fleet op -> the parser of its wire arguments.
FLEET_PARSERS = _by_declaration()
