"""Typed checks for configuration values (each converts a file value or refuses it), and the
step from a checked table to an actor's settings."""

from __future__ import annotations

import math
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import field, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from supervisor.errors import ConfigError
from supervisor.system.loopback import loopback_address

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

__all__ = [
    "CHECK_KEY",
    "LOG_LEVELS",
    "NON_NEGATIVE",
    "POSITIVE",
    "RENAMED_KEYS",
    "Check",
    "Invalid",
    "boolean_check",
    "carried",
    "current_key",
    "integer_check",
    "log_level_check",
    "loopback_check",
    "mode_check",
    "number_check",
    "optional_text_check",
    "path_check",
    "postgres_url_check",
    "setting",
    "text_check",
]

LOG_LEVELS = ("debug", "info", "warning", "error")

#: Keys renamed in a table, old name -> new name. A file may still give the old name
#: (deprecated), with the same meaning; giving both is refused.
RENAMED_KEYS: dict[str, dict[str, str]] = {
    "exec": {"reap_orphans": "stop_orphans", "reap_grace_seconds": "stop_grace_seconds"}
}


def current_key(table: str, key: str, body: Mapping[str, Any], origin: str) -> str:
    """The name ``key`` of ``[table]`` has now; ConfigError when ``body`` gives both names."""
    new = RENAMED_KEYS.get(table, {}).get(key)
    if new is None:
        return key
    if new in body:
        raise ConfigError(
            f"{table}.{key} is the old name of {table}.{new}: give only {table}.{new} ({origin})"
        )
    return new


class Invalid(Exception):
    """A value does not have the expected form; the loader adds the key and origin."""

    def __init__(self, expected: str) -> None:
        super().__init__(expected)
        self.expected = expected


#: value, directory that relative paths resolve against → the converted value.
Check = Callable[[Any, Path], Any]
CHECK_KEY = "check"


def number_check(expected: str, ok: Callable[[float], bool]) -> Check:
    def check(value: Any, _base: Path) -> float:
        # bool is an int subclass in Python, but `true` for a timeout is a mistake, not 1.
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise Invalid(expected)
        try:
            number = float(value)
        except OverflowError:
            raise Invalid(expected) from None
        # TOML allows inf and nan; neither is a usable interval, share or timeout.
        if not math.isfinite(number) or not ok(number):
            raise Invalid(expected)
        return number

    return check


def integer_check(low: int, high: int | None = None) -> Check:
    expected = f"an integer >= {low}" if high is None else f"an integer from {low} to {high}"

    def check(value: Any, _base: Path) -> int:
        # A float is refused even when whole: counts and sizes are written as integers.
        if isinstance(value, bool) or not isinstance(value, int):
            raise Invalid(expected)
        if value < low or (high is not None and value > high):
            raise Invalid(expected)
        return value

    return check


def boolean_check(value: Any, _base: Path) -> bool:
    if not isinstance(value, bool):
        raise Invalid("true or false")
    return value


def optional_text_check(value: Any, _base: Path) -> str | None:
    if not isinstance(value, str):
        raise Invalid('a string ("" for none)')
    # TOML has no null, so an empty string is how a file says "not set".
    return value.strip() or None


def text_check(value: Any, _base: Path) -> str:
    if not isinstance(value, str) or not value.strip():
        raise Invalid("a non-empty string")
    return value.strip()


def log_level_check(value: Any, _base: Path) -> str:
    level = value.strip().lower() if isinstance(value, str) else None
    if level not in LOG_LEVELS:
        raise Invalid(f"one of {', '.join(LOG_LEVELS)}")
    return level


def path_check(default: Callable[[], Path]) -> Check:
    def check(value: Any, base: Path) -> Path:
        if isinstance(value, os.PathLike):
            value = os.fspath(value)
        if not isinstance(value, str) or "\0" in value:
            raise Invalid('a path string ("" for the default location)')
        if not value:
            return default()
        path = Path(value).expanduser()
        # A relative path in a file means "next to this file", not "wherever the daemon started".
        return path if path.is_absolute() else base / path

    return check


_PG_SCHEMES = ("postgresql://", "postgres://")


def postgres_url_check(value: Any, _base: Path) -> str | None:
    # Only PostgreSQL: SQLite is chosen by leaving the url empty and setting `path`, so
    # one setting never has two spellings.
    expected = 'a "postgresql://..." URL ("" for the SQLite file at path)'
    if not isinstance(value, str) or any(c.isspace() for c in value.strip()):
        raise Invalid(expected)
    url = value.strip()
    if not url:
        return None
    if not url.startswith(_PG_SCHEMES) or not url.split("://", 1)[1]:
        raise Invalid(expected)
    return url


_OCTAL = re.compile(r"[0-7]{1,4}")


def mode_check(value: Any, _base: Path) -> int:
    # A string, not a TOML integer: `mode = 600` would silently be decimal 600 = 0o1130.
    expected = 'an octal permission string like "0600" (at most "0777")'
    if not isinstance(value, str) or not _OCTAL.fullmatch(value):
        raise Invalid(expected)
    mode = int(value, 8)
    if mode > 0o777:
        raise Invalid(expected)
    return mode


def loopback_check(value: Any, _base: Path) -> str:
    address = loopback_address(value) if isinstance(value, str) else None
    if address is None:
        raise Invalid('a loopback IP address such as "127.0.0.1" or "::1"')
    return address


POSITIVE = number_check("a finite number > 0", lambda x: x > 0)
NON_NEGATIVE = number_check("a finite number >= 0", lambda x: x >= 0)


def setting(default: Any, check: Check) -> Any:
    """A dataclass field that also carries how a file or override value for it is checked."""
    return field(default=default, metadata={CHECK_KEY: check})


_Settings = TypeVar("_Settings", bound="DataclassInstance")


def carried(table: DataclassInstance, into: type[_Settings], **given: Any) -> _Settings:
    """``into`` built from every key of ``table`` it spells alike, then ``given``.

    An actor's setting that a table spells alike needs no copy line (a forgotten line
    would silently keep the actor's default); ``given`` covers what is named or
    derived differently, and wins.
    """
    names = {f.name for f in fields(into)}
    shared = {f.name: getattr(table, f.name) for f in fields(table) if f.name in names}
    return into(**{**shared, **given})
