"""The profiles file: roles and grants per profile, proven by tokens whose sha256 it lists."""

from __future__ import annotations

import hashlib
import hmac
import os
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from supervisor.errors import ConfigError
from supervisor.observe.logs import get_logger
from supervisor.policy.control.permissions import Profile
from supervisor.policy.identity.worker_env import NAMESPACES

__all__ = [
    "OPERATION",
    "ROLE_KINDS",
    "ProfileBook",
    "ProfileRecord",
    "hash_token",
    "load_profiles",
    "parse_profiles",
    "read_profiles_file",
]

#: A profile's role kind names the namespace it works in.
ROLE_KINDS = NAMESPACES

#: TOML bare-key characters only, so the writer never has to quote a table name.
_NAME = re.compile(r"[A-Za-z0-9_-]+")
OPERATION = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}")
_SHA256 = re.compile(r"[0-9a-f]{64}")
_OPERATION_KEYS = ("allowed_operations", "forbidden_operations")
_KEYS = ("role_kind", *_OPERATION_KEYS, "token_sha256")

_log = get_logger()


@dataclass(frozen=True, slots=True, kw_only=True)
class ProfileRecord:
    """A profile's grants plus the hashes of the tokens that prove it (never the tokens)."""

    profile: Profile
    token_sha256: frozenset[str]


def hash_token(token: str) -> str:
    """Lowercase hex sha256 of the token's UTF-8 bytes: the form stored in the file."""
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def _string_list(value: Any, where: str, *, pattern: re.Pattern[str] | None = None) -> list[str]:
    expected = "64 lowercase hex digits" if pattern else "a non-empty string"
    if not isinstance(value, list):
        raise ConfigError(f"{where} must be a list of strings ({expected} each), got {value!r}")
    items: list[str] = []
    for item in value:
        valid = isinstance(item, str) and bool(item.strip())
        if not valid or (pattern is not None and not pattern.fullmatch(item)):
            raise ConfigError(f"{where} entries must each be {expected}, got {item!r}")
        items.append(item)
    return items


def parse_profiles(document: dict[str, Any], origin: Path) -> dict[str, ProfileRecord]:
    unknown = sorted(set(document) - {"profiles"})
    if unknown:
        raise ConfigError(
            f"unknown top-level key {unknown[0]!r} in {origin}; expected [profiles.*]"
        )
    tables = document.get("profiles", {})
    if not isinstance(tables, dict):
        raise ConfigError(f"profiles in {origin} must be tables like [profiles.NAME]")
    records: dict[str, ProfileRecord] = {}
    owner_of: dict[str, str] = {}
    for name, body in tables.items():
        where = f"profiles.{name}"
        if not _NAME.fullmatch(name):
            raise ConfigError(f"profile name {name!r} in {origin} must use only A-Z a-z 0-9 _ -")
        if not isinstance(body, dict):
            raise ConfigError(f"{where} in {origin} must be a table like [{where}]")
        for key in body:
            if key not in _KEYS:
                raise ConfigError(
                    f"unknown key {where}.{key} in {origin}; keys of a profile: {', '.join(_KEYS)}"
                )
        role = body.get("role_kind")
        if role not in ROLE_KINDS:
            roles = ", ".join(ROLE_KINDS)
            raise ConfigError(f"{where}.role_kind in {origin} must be one of {roles}, got {role!r}")
        allowed, forbidden = (
            _string_list(body.get(key, []), f"{where}.{key} in {origin}") for key in _OPERATION_KEYS
        )
        hashes = _string_list(
            body.get("token_sha256", []), f"{where}.token_sha256 in {origin}", pattern=_SHA256
        )
        for digest in hashes:
            # One token proving two profiles would make authentication ambiguous: refuse it.
            other = owner_of.setdefault(digest, name)
            if other != name:
                raise ConfigError(
                    f"{where}.token_sha256 in {origin} repeats a hash listed under "
                    f"profiles.{other}; each token may prove only one profile"
                )
        records[name] = ProfileRecord(
            profile=Profile(
                name=name,
                role_kind=role,
                allowed_operations=frozenset(allowed),
                forbidden_operations=frozenset(forbidden),
            ),
            token_sha256=frozenset(hashes),
        )
    return records


def read_profiles_file(path: Path) -> tuple[str, dict[str, Any]]:
    try:
        text = path.read_bytes().decode("utf-8")
    except FileNotFoundError:
        raise ConfigError(f"profiles file {path} does not exist") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"profiles file {path} is not valid TOML: {exc}") from None
    except OSError as exc:
        raise ConfigError(f"profiles file {path} cannot be read: {exc.strerror or exc}") from None
    try:
        return text, tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"profiles file {path} is not valid TOML: {exc}") from None


def load_profiles(path: str | Path) -> dict[str, ProfileRecord]:
    """Parse and validate the profiles file; any problem raises ConfigError naming the key."""
    file = Path(path).expanduser()
    return parse_profiles(read_profiles_file(file)[1], file)


_Stamp = tuple[int, int, int, int]


def _stamp(path: Path) -> _Stamp | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    # The inode catches an atomic replace, ctime an in-place edit within one mtime tick.
    return (st.st_mtime_ns, st.st_size, st.st_ino, st.st_ctime_ns)


class ProfileBook:
    """Reads the profiles file on demand; a missing or broken file grants nothing (fail closed).

    File reads are synchronous and small; callers on an event loop may run
    them in a worker thread if the file lives on slow storage.
    """

    def __init__(self, path: str | Path) -> None:
        self._path = Path(path).expanduser()
        self._records: dict[str, ProfileRecord] = {}
        self._stamp: _Stamp | None = None
        self._loaded = False
        self._error: str | None = None

    @property
    def path(self) -> Path:
        return self._path

    @property
    def error(self) -> str | None:
        """Why the last read failed, or None when it succeeded."""
        return self._error

    def _load(self) -> None:
        # Stat before reading: if the file changes in between, the next stat differs and the
        # newer content is read then; the reverse order could pin stale content to a new stamp.
        stamp = _stamp(self._path)
        self._loaded, self._stamp = True, stamp
        try:
            self._records = load_profiles(self._path)
        except ConfigError as exc:
            # A revoked grant must not survive a botched edit, so a broken file empties the book.
            self._records, self._error = {}, exc.detail
            raise
        self._error = None

    def _load_quietly(self) -> None:
        try:
            self._load()
        except ConfigError as exc:
            _log.warning("profiles_unreadable", path=str(self._path), detail=exc.detail)

    def reload(self) -> None:
        """Re-read the file now; raises ConfigError (and then grants nothing) when it is bad."""
        self._load()

    def authenticate(self, token: str) -> Profile | None:
        """The profile whose listed hash matches sha256(token), or None."""
        if not self._loaded or _stamp(self._path) != self._stamp:
            self._load_quietly()
        if not token:
            return None
        digest = hash_token(token)
        found: Profile | None = None
        for record in self._records.values():
            for stored in record.token_sha256:
                # Constant-time, and no early exit, so timing does not tell which entry matched.
                if hmac.compare_digest(digest, stored):
                    found = record.profile
        return found

    def get(self, name: str) -> Profile | None:
        """The named profile as the file says right now; None (deny) if absent or unreadable.

        Always re-reads the file: this is the check made immediately before a
        mutation, so an operator's revocation applies to the very next apply.
        """
        self._load_quietly()
        record = self._records.get(name)
        return record.profile if record is not None else None
