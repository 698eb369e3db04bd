"""UTC timestamp text: the one fixed-width format the registry stores, and a tolerant parser."""

from __future__ import annotations

from datetime import UTC, datetime

__all__ = ["STAMP_FORMAT", "format_stamp", "parse_stamp"]

#: Fixed width so stored stamps also compare correctly as text (lease expiry
#: queries rely on that).
STAMP_FORMAT = "%Y-%m-%dT%H:%M:%S.%fZ"

#: "YYYY-MM-DDTHH:MM:SSZ" is the shortest form that names an instant.
_MIN_STAMP_LENGTH = 20


def format_stamp(moment: datetime) -> str:
    """Render an aware datetime as the registry's UTC stamp."""
    if moment.tzinfo is None:
        # A naive value is ambiguous; refusing here keeps a local-time bug from
        # silently shifting every heartbeat by the host's UTC offset.
        raise ValueError("format_stamp needs an aware datetime")
    return moment.astimezone(UTC).strftime(STAMP_FORMAT)


def parse_stamp(value: object) -> datetime | None:
    """Parse a stored stamp; anything that is not an unambiguous UTC instant is ``None``."""
    if isinstance(value, datetime):
        return value.astimezone(UTC) if value.tzinfo is not None else None
    if not isinstance(value, str):
        return None
    text = value.strip()
    if len(text) < _MIN_STAMP_LENGTH:
        # Date-only and other short forms carry no instant worth trusting.
        return None
    try:
        # fromisoformat is an order of magnitude faster than strptime and, on
        # 3.11, reads the trailing "Z"; the planner parses every row's stamps.
        parsed = datetime.fromisoformat(text)
    except ValueError:
        return None
    if parsed.tzinfo is None:
        return None  # a local time without an offset is ambiguous
    # "...Z" parses to UTC already; converting would only build an equal copy.
    return parsed if parsed.tzinfo is UTC else parsed.astimezone(UTC)
