"""The profiles file: roles and grants per profile, proven by tokens whose sha256 it lists."""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import os
import re
import secrets
import stat
import tomllib
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from supervisor.errors import ConfigError
from supervisor.observe.logs import get_logger
from supervisor.policy.control.permissions import Profile
from supervisor.system.atomic_file import replace_atomically
from supervisor.system.lockfile import exclusive

__all__ = [
    "ROLE_KINDS",
    "ProfileBook",
    "ProfileRecord",
    "change_grant",
    "create_token",
    "ensure_profiles_file",
    "hash_token",
    "load_profiles",
]

ROLE_KINDS = ("author", "reviewer", "merger", "controller", "reconciler")

#: TOML bare-key characters only, so the writer never has to quote a table name.
_NAME = re.compile(r"[A-Za-z0-9_-]+")
_OPERATION = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}")
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


def _parse(document: dict[str, Any], origin: Path) -> dict[str, ProfileRecord]:
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


def _read(path: Path) -> tuple[str, dict[str, Any]]:
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
    return _parse(_read(file)[1], file)


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


# --- writing ----------------------------------------------------------------------------------


def _locked(file: Path) -> contextlib.AbstractContextManager[None]:
    """Hold an exclusive lock on ``<file>.lock`` while a writer reads, edits and replaces ``file``.

    The lock lives on a sidecar because ``file`` itself is replaced by a rename, so a
    lock on its inode would guard a file that no longer has the name. Readers need no
    lock; they see the old file or the new one.
    """
    return exclusive(file.with_name(file.name + ".lock"))


def _write_atomically(path: Path, text: str, *, like: os.stat_result | None) -> None:
    # The new file takes the permissions (and, where allowed, the owner) of the one it
    # replaces; a new profiles file keeps the temporary file's 0600.
    replace_atomically(
        path,
        text.encode("utf-8"),
        mode=None if like is None else stat.S_IMODE(like.st_mode),
        owner=None if like is None else (like.st_uid, like.st_gid),
    )


def _resolved(path: str | Path) -> Path:
    # Resolved so a symlinked profiles file is updated where it lives, not replaced by a copy.
    return Path(os.path.realpath(Path(path).expanduser()))


def ensure_profiles_file(path: str | Path, template: str) -> bool:
    """Create the profiles file (mode 0600) from ``template`` unless it exists; True if created."""
    file = _resolved(path)
    file.parent.mkdir(parents=True, exist_ok=True)
    with _locked(file):
        if file.exists():
            return False
        # Never start an operator off a broken file.
        try:
            _parse(tomllib.loads(template), file)
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"profiles template for {file} is not valid TOML: {exc}") from None
        _write_atomically(file, template, like=None)
        return True


def _with_hash(text: str, profile_name: str, digest: str) -> str:
    """``text`` with ``digest`` appended to the profile's token_sha256, all else as it was.

    tomlkit edits the parsed document in place, so comments, blank lines, key
    order and the operator's own formatting survive the rewrite.
    """
    import tomlkit  # noqa: PLC0415 (see _replace_checked)

    document = tomlkit.parse(text)
    body = document["profiles"][profile_name]
    hashes = body.get("token_sha256")
    if hashes is None:
        body["token_sha256"] = [digest]
        return tomlkit.dumps(document)
    hashes.append(digest)
    if len(hashes) == 2 and "\n" not in hashes.as_string():
        hashes.multiline(True)  # one hash a line from the second on: readable, diffable
    return tomlkit.dumps(document)


def _replace_checked(
    file: Path, expected: dict[str, ProfileRecord], rewrite: Callable[[], str]
) -> None:
    """Replace ``file`` with ``rewrite()`` only if it parses to exactly ``expected``: a layout
    tomlkit cannot edit in place is refused, never rewritten without the operator's text."""
    # tomlkit (about 1 MB of RSS) loads only for an edit: the daemon reads profiles with tomllib.
    import tomlkit.exceptions  # noqa: PLC0415

    try:
        new_text = rewrite()
        same = _parse(tomllib.loads(new_text), file) == expected
    except (tomllib.TOMLDecodeError, ConfigError, tomlkit.exceptions.TOMLKitError, LookupError):
        same = False
    except (TypeError, AttributeError):  # a layout tomlkit cannot edit in place
        same = False
    if not same:
        raise ConfigError(f"refusing to rewrite {file}: the rewritten file would differ")
    _write_atomically(file, new_text, like=os.stat(file))


def _known(records: dict[str, ProfileRecord], name: str, file: Path) -> ProfileRecord:
    if name not in records:
        known = ", ".join(records) or "none"
        raise ConfigError(f"unknown profile {name!r} in {file}; profiles: {known}")
    return records[name]


def create_token(path: str | Path, profile_name: str) -> str:
    """Mint a token for `profile_name`, store only its hash in the file, return it (shown once).

    The whole read-edit-replace runs under an exclusive lock on a sidecar
    ``<file>.lock``, so concurrent calls each add their hash. The file is
    replaced atomically, keeps its permissions, and keeps every comment and
    the operator's formatting: only the profile's ``token_sha256`` changes.
    """
    file = _resolved(path)
    with _locked(file):
        text, document = _read(file)
        records = _parse(document, file)
        _known(records, profile_name, file)
        # Prefixed so a token never starts with '-': `--token <value>` would read it as a flag.
        token = f"fst_{secrets.token_urlsafe(32)}"
        digest = hash_token(token)
        old = records[profile_name]
        expected = {
            **records,
            profile_name: ProfileRecord(
                profile=old.profile, token_sha256=old.token_sha256 | {digest}
            ),
        }
        _replace_checked(file, expected, lambda: _with_hash(text, profile_name, digest))
    return token


def _with_operation(text: str, profile_name: str, operation: str, *, grant: bool) -> str:
    """``text`` with ``operation`` granted (in allowed, out of forbidden) or revoked (out
    of allowed), every comment and the rest of the layout as they were (tomlkit)."""
    import tomlkit  # noqa: PLC0415 (see _replace_checked)

    document = tomlkit.parse(text)
    body = document["profiles"][profile_name]
    allowed, forbidden = body.get("allowed_operations"), body.get("forbidden_operations")
    if not grant:
        _drop(allowed, operation)
        return tomlkit.dumps(document)
    if allowed is None:
        body["allowed_operations"] = [operation]
    elif operation not in allowed:
        allowed.append(operation)
    _drop(forbidden, operation)  # forbidden wins over allowed: lift it, or nothing changes
    return tomlkit.dumps(document)


def _drop(listed: Any, operation: str) -> None:
    """Remove every ``operation`` from a tomlkit array (``None``: the key is absent)."""
    while listed is not None and operation in listed:
        listed.remove(operation)


def change_grant(path: str | Path, profile_name: str, operation: str, *, grant: bool) -> bool:
    """Grant ``operation`` to a profile (allowed, no longer forbidden) or revoke it (no longer
    allowed); False when it already was so. Lock, check and atomic, comment-keeping write
    as ``create_token``; the daemon re-reads the file before every mutation."""
    if not _OPERATION.fullmatch(operation):
        raise ConfigError(f"operation {operation!r} must look like gitea.worker_registry.retire")
    file = _resolved(path)
    with _locked(file):
        text, document = _read(file)
        records = _parse(document, file)
        old = _known(records, profile_name, file).profile
        allowed, forbidden = set(old.allowed_operations), set(old.forbidden_operations)
        if grant:
            allowed.add(operation)
            forbidden.discard(operation)
        else:
            allowed.discard(operation)
        if allowed == set(old.allowed_operations) and forbidden == set(old.forbidden_operations):
            return False
        profile = replace(
            old, allowed_operations=frozenset(allowed), forbidden_operations=frozenset(forbidden)
        )
        record = ProfileRecord(profile=profile, token_sha256=records[profile_name].token_sha256)
        _replace_checked(
            file,
            {**records, profile_name: record},
            lambda: _with_operation(text, profile_name, operation, grant=grant),
        )
    return True
