"""Canonical text encoding of field values and the digest every registry token is built from."""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterable, Mapping, Sequence
from functools import lru_cache
from typing import Any

__all__ = ["UNIT_SEPARATOR", "canon", "digest", "digest_elements", "serialize"]

#: Between the ``name=value`` units of one serialized record.
UNIT_SEPARATOR = "\x1f"
_UNIT = UNIT_SEPARATOR
_RECORD = "\x1e"


def canon(value: Any) -> str:
    """Stable text for one value, independent of how the database typed it.

    A TTL stored as REAL comes back as ``900.0`` while a caller may hold ``900``;
    both must produce the same token, so integral floats print as integers.
    """
    kind = type(value)
    # Exact-type fast paths first: most values are text or small integers.
    if kind is str:
        return value  # type: ignore[no-any-return]
    if kind is int:
        return str(value)
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        if math.isnan(value) or math.isinf(value):
            return repr(value)
        if value.is_integer():
            return str(int(value))
        return repr(value)
    return str(value)


@lru_cache(maxsize=16)
def _prefixes(fields: tuple[str, ...]) -> tuple[tuple[str, str], ...]:
    return tuple((name, f"{name}=") for name in fields)


def serialize(record: Mapping[str, Any], fields: Sequence[str]) -> str:
    """One record as ``name=value`` units in the fixed field order."""
    get = record.get
    # A list (not a generator) and cached prefixes: the planner serializes
    # every row of the registry on every plan.
    return _UNIT.join([prefix + canon(get(name)) for name, prefix in _prefixes(tuple(fields))])


def digest(version: str, units: Iterable[str], prefix: str) -> str:
    """Order-independent digest: units are sorted so iteration order never matters."""
    ordered = sorted(units)
    # The hash of ``_RECORD.join([version, count, *ordered])``, fed piece by piece:
    # joining first held the whole registry's text twice (as str, then as bytes),
    # about 14 MB at 10,000 rows on top of everything a plan keeps.
    hasher = hashlib.sha256(f"{version}{_RECORD}{len(ordered)}".encode())
    update = hasher.update
    record = _RECORD.encode()
    for unit in ordered:
        update(record)
        update(unit.encode("utf-8"))
    return f"{prefix}-{hasher.hexdigest()[:32]}"


def digest_elements(version: str, elements: Iterable[bytes], prefix: str, tail: str = "") -> str:
    """``digest`` over fixed-length binary elements (row digests), then ``tail``.

    Elements are sorted, so order never matters; all are one length, so their
    concatenation needs no separator to be read back unambiguously.
    """
    ordered = sorted(elements)
    hasher = hashlib.sha256(f"{version}{_RECORD}{len(ordered)}{_RECORD}".encode())
    hasher.update(b"".join(ordered))
    hasher.update(f"{_RECORD}{tail}".encode())
    return f"{prefix}-{hasher.hexdigest()[:32]}"
