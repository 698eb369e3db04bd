"""The one timestamp format the store compares: fixed-width UTC 'YYYY-MM-DDTHH:MM:SS.ffffffZ'."""

from __future__ import annotations

import re
from datetime import datetime
from typing import TypeGuard

from supervisor.errors import StoreError
from supervisor.policy import stamps as policy_stamps

__all__ = ["STAMP_EXAMPLE", "format_stamp", "is_stamp", "require_stamp"]

# Deadlines are compared in SQL as text (portable, index-friendly, no engine date
# functions). Text order equals time order only when every stamp has the same width,
# the same zone and the same precision, hence this exact shape and nothing looser.
_STAMP_RE = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z\Z")

STAMP_EXAMPLE = "2024-01-31T23:59:59.000000Z"


def format_stamp(moment: datetime) -> str:
    """Render an aware datetime as the store's fixed-width UTC stamp (the policy's format)."""
    try:
        return policy_stamps.format_stamp(moment)
    except ValueError as exc:
        # A naive datetime has no defined instant; guessing its zone would
        # silently reorder deadlines.
        raise StoreError(f"stamps need an aware datetime: {exc}") from exc


def is_stamp(value: object) -> TypeGuard[str]:
    """Whether ``value`` is a string in the store's fixed-width stamp format."""
    return isinstance(value, str) and _STAMP_RE.match(value) is not None


def require_stamp(value: object, what: str) -> str:
    """Return ``value`` if it is a well-formed stamp, else raise StoreError naming ``what``."""
    if not is_stamp(value):
        raise StoreError(f"{what} must be a UTC stamp like {STAMP_EXAMPLE!r}, got {value!r}")
    return value
