"""Edits of the profiles file (tokens, grants, a first file): locked, checked, atomic, and
keeping the operator's comments and layout."""

from __future__ import annotations

import contextlib
import os
import secrets
import stat
import tomllib
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from supervisor.errors import ConfigError
from supervisor.settings.profiles import (
    OPERATION,
    ProfileRecord,
    hash_token,
    parse_profiles,
    read_profiles_file,
)
from supervisor.system.atomic_file import replace_atomically
from supervisor.system.lockfile import exclusive

__all__ = ["change_grant", "create_token", "ensure_profiles_file"]


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
            parse_profiles(tomllib.loads(template), file)
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
        same = parse_profiles(tomllib.loads(new_text), file) == expected
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
        text, document = read_profiles_file(file)
        records = parse_profiles(document, file)
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
    if not OPERATION.fullmatch(operation):
        raise ConfigError(f"operation {operation!r} must look like gitea.worker_registry.retire")
    file = _resolved(path)
    with _locked(file):
        text, document = read_profiles_file(file)
        records = parse_profiles(document, file)
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
