"""Application-instance identity: minting trusted ids, judging trust, the launcher env."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import lru_cache

from .worker_env import (
    ENV_CLIENT,
    ENV_FLEET_RUN,
    ENV_INSTANCE,
    ENV_MANAGED,
    ENV_PROFILE,
    ENV_PROVENANCE,
    ENV_SESSION,
)

__all__ = [
    "CLIENT_ALIASES",
    "PROTECTED_ENV_KEYS",
    "PROVENANCE_LEGACY",
    "PROVENANCE_MALFORMED",
    "PROVENANCE_MISSING",
    "PROVENANCE_TRUSTED",
    "UNKNOWN_CLIENT",
    "InstanceIdentity",
    "UntrustedInstanceError",
    "assess_instance_identity",
    "mint_instance_id",
    "namespace_worker_env",
    "normalize_client_name",
]

UNKNOWN_CLIENT = "unknown"
CLIENT_ALIASES: Mapping[str, str] = {
    "codex": "codex",
    "openai_codex": "codex",
    "claude": "claude_code",
    "claude_code": "claude_code",
    "claudecode": "claude_code",
    "gemini": "gemini",
    "gemini_cli": "gemini",
    "grok": "grok",
    "cursor": "cursor",
}

PROVENANCE_TRUSTED = "trusted_launcher"
PROVENANCE_LEGACY = "legacy_incomplete"
PROVENANCE_MISSING = "missing"
PROVENANCE_MALFORMED = "malformed"

#: Keys a caller's extra environment may never override: they carry the
#: launcher's attribution, and letting them be replaced would let any config
#: snippet claim a trusted identity.
PROTECTED_ENV_KEYS = frozenset({ENV_CLIENT, ENV_INSTANCE, ENV_PROVENANCE, ENV_MANAGED})

_LEGACY_PREFIXES = ("pid-", "proc-", "legacy-")
_TRUSTED = re.compile(
    r"^inst-(?P<client>[a-z0-9_]+)-(?P<stamp>\d{8}T\d{6}Z)-(?P<digest>[0-9a-f]{12})$"
)
_STAMP_FORMAT = "%Y%m%dT%H%M%SZ"


class UntrustedInstanceError(ValueError):
    """A launcher operation was asked to propagate an instance id it cannot vouch for."""


@dataclass(frozen=True, slots=True, kw_only=True)
class InstanceIdentity:
    """How far a ``client_instance_id`` can be trusted, and why."""

    client_instance_id: str | None
    trusted: bool
    provenance: str
    reason: str


def normalize_client_name(raw: object) -> str:
    """Map a client name to its family; anything unrecognised is ``unknown``."""
    if not isinstance(raw, str):
        return UNKNOWN_CLIENT
    key = raw.strip().lower().replace("-", "_").replace(" ", "_")
    return CLIENT_ALIASES.get(key, UNKNOWN_CLIENT)


def mint_instance_id(client_type: object, *, now: datetime, nonce: str) -> str:
    """A trusted id for one application launch; ``nonce`` must be fresh randomness."""
    if now.tzinfo is None:
        raise ValueError("mint_instance_id needs an aware datetime")
    if not nonce:
        raise ValueError("mint_instance_id needs a non-empty nonce")
    client = normalize_client_name(client_type)
    stamp = now.astimezone(UTC).strftime(_STAMP_FORMAT)
    material = f"{client}\x1f{stamp}\x1f{nonce}".encode()
    return f"inst-{client}-{stamp}-{hashlib.sha256(material).hexdigest()[:12]}"


def assess_instance_identity(raw: object) -> InstanceIdentity:
    """Trusted only in the exact launcher format; placeholders and free text never are."""
    return _assess(raw.strip() if isinstance(raw, str) else "")


@lru_cache(maxsize=4096)
def _assess(text: str) -> InstanceIdentity:
    # Cached: a fleet has few launches (five workers share one) but the planner
    # assesses every row, and the verdict is a pure function of the text. Bounded
    # low: 65,536 entries held about 1.4 MB for a 10,000-row fleet of distinct ids.
    if not text:
        return InstanceIdentity(
            client_instance_id=None,
            trusted=False,
            provenance=PROVENANCE_MISSING,
            reason=f"no client_instance_id; the launcher must set {ENV_INSTANCE} once per launch",
        )
    if text.lower().startswith(_LEGACY_PREFIXES):
        return InstanceIdentity(
            client_instance_id=text,
            trusted=False,
            provenance=PROVENANCE_LEGACY,
            reason=f"{text!r} is a pid/process placeholder, not a launcher-minted id",
        )
    match = _TRUSTED.match(text)
    if match is None or not _valid_stamp(match.group("stamp")):
        return InstanceIdentity(
            client_instance_id=text,
            trusted=False,
            provenance=PROVENANCE_MALFORMED,
            reason=f"{text!r} does not have the launcher form inst-<client>-<stamp>-<12 hex>",
        )
    return InstanceIdentity(
        client_instance_id=text, trusted=True, provenance=PROVENANCE_TRUSTED, reason=""
    )


def _valid_stamp(stamp: str) -> bool:
    """``stamp`` (``\\d{8}T\\d{6}Z`` by the pattern) names a real instant, as
    ``strptime(stamp, _STAMP_FORMAT)`` would accept it: ASCII digits only (the pattern's
    ``\\d`` also takes other scripts' digits, strptime does not), and fields that make a
    date and time. Read by slicing: strptime costs ~30 us, and a fleet of distinct
    launches assesses every row's id (the cache above holds only 4,096)."""
    if not stamp.isascii():
        return False
    try:
        datetime(
            int(stamp[0:4]),
            int(stamp[4:6]),
            int(stamp[6:8]),
            int(stamp[9:11]),
            int(stamp[11:13]),
            int(stamp[13:15]),
        )
    except ValueError:
        return False
    return True


def namespace_worker_env(
    *,
    profile: str,
    client_type: object,
    client_instance_id: str,
    session_id: str | None = None,
    fleet_run_id: str | None = None,
    extra_env: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """Environment for one namespace worker of a trusted launch.

    Refuses an untrusted id rather than propagating it: a launcher that passes
    a placeholder along would turn guesswork into apparently trusted identity.
    """
    assessed = assess_instance_identity(client_instance_id)
    if not assessed.trusted or assessed.client_instance_id is None:
        raise UntrustedInstanceError(assessed.reason)
    env: dict[str, str] = {}
    for key, value in (extra_env or {}).items():
        if key not in PROTECTED_ENV_KEYS:
            env[str(key)] = str(value)
    env.update(
        {
            ENV_PROFILE: profile,
            ENV_MANAGED: "1",
            ENV_CLIENT: normalize_client_name(client_type),
            ENV_INSTANCE: assessed.client_instance_id,
            ENV_PROVENANCE: PROVENANCE_TRUSTED,
        }
    )
    if session_id:
        env[ENV_SESSION] = session_id
    if fleet_run_id:
        env[ENV_FLEET_RUN] = fleet_run_id
    return env
