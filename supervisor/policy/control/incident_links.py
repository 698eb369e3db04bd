"""Incident links: a monitoring provider's issue mapped to the Gitea issue filed for it."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from supervisor.policy.stamps import parse_stamp

from .plane import ControlPlaneRefusal, check_name

__all__ = [
    "INCIDENT_KEY_FIELDS",
    "INCIDENT_LINK_COLUMNS",
    "INCIDENT_OBSERVATION_FIELDS",
    "INCIDENT_SCOPE_FIELDS",
    "INCIDENT_TARGET_FIELDS",
    "IncidentLinkSpec",
    "LegacyCollapse",
    "check_incident_link",
    "check_issue_target",
    "decode_pr_numbers",
    "normalize_scope",
    "plan_legacy_collapse",
]

#: The optional scope of a provider issue id; stored as '' (never NULL) when absent.
INCIDENT_SCOPE_FIELDS: tuple[str, ...] = ("provider_base_url", "provider_org", "provider_project")
#: One link per value of these, whatever the caller omitted.
INCIDENT_KEY_FIELDS: tuple[str, ...] = ("provider", *INCIDENT_SCOPE_FIELDS, "provider_issue_id")
INCIDENT_TARGET_FIELDS: tuple[str, ...] = ("gitea_org", "gitea_repo", "gitea_issue_number")
#: What a provider reports about its issue; a legacy collapse needs them all to agree.
#: Two parts, because the stored columns put the Gitea target between them.
_PROVIDER_NAMING: tuple[str, ...] = ("provider_short_id", "provider_permalink", "fingerprint")
_PROVIDER_STATE: tuple[str, ...] = (
    "linked_pr_numbers",
    "first_seen",
    "last_seen",
    "event_count",
    "status",
    "release_resolved_at",
    "last_sync_at",
)
INCIDENT_OBSERVATION_FIELDS: tuple[str, ...] = (*_PROVIDER_NAMING, *_PROVIDER_STATE)
INCIDENT_LINK_COLUMNS: tuple[str, ...] = (
    "link_id",
    *INCIDENT_KEY_FIELDS,
    *_PROVIDER_NAMING,
    *INCIDENT_TARGET_FIELDS,
    *_PROVIDER_STATE,
    "created_at",
    "updated_at",
)

_PROVIDER = re.compile(r"[a-z][a-z0-9._-]{0,63}\Z")
_STATUS = re.compile(r"[a-z][a-z0-9_-]{0,31}\Z")
_MAX_TEXT = 200
_MAX_URL = 512
_MAX_PRS = 100
_STAMP_FIELDS = ("first_seen", "last_seen", "release_resolved_at", "last_sync_at")
_URL_FIELDS = ("provider_base_url", "provider_permalink")


def _bad(detail: str) -> ControlPlaneRefusal:
    return ControlPlaneRefusal("invalid_incident_link", detail)


def normalize_scope(value: object) -> str:
    """None, blank and whitespace all mean "no scope", stored as ''."""
    if value is None:
        return ""
    if not isinstance(value, str):
        raise _bad("provider scope fields must be strings")
    return value.strip()


def _text(value: object, what: str, limit: int = _MAX_TEXT) -> str:
    if not isinstance(value, str) or not 0 < len(value.strip()) <= limit:
        raise _bad(f"{what} must be 1-{limit} characters")
    return value.strip()


def _no_credentials(value: str, what: str) -> None:
    # A URL with user:pass@ would store a secret in the control plane (and echo it back).
    if "@" in urlsplit(value).netloc:
        raise _bad(f"{what} must not carry credentials")


def _count(value: object, what: str, *, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not minimum <= value < 2**31:
        raise _bad(f"{what} must be an integer >= {minimum}")
    return value


def check_issue_target(org: object, repo: object, number: object) -> tuple[str, str, int]:
    """The Gitea issue a link points at, under the work-reference name rules."""
    try:
        names = check_name(org, "gitea_org"), check_name(repo, "gitea_repo")
    except ControlPlaneRefusal as exc:
        raise _bad(exc.detail) from None
    return (*names, _count(number, "gitea_issue_number", minimum=1))


@dataclass(frozen=True, slots=True, kw_only=True)
class IncidentLinkSpec:
    """A validated upsert: the key, the target, and only the observations the caller gave."""

    key: tuple[str, str, str, str, str]
    target: tuple[str, str, int]
    observations: tuple[tuple[str, Any], ...]

    def key_row(self) -> dict[str, Any]:
        return dict(zip(INCIDENT_KEY_FIELDS, self.key, strict=True))

    def target_row(self) -> dict[str, Any]:
        return dict(zip(INCIDENT_TARGET_FIELDS, self.target, strict=True))


def _observation(name: str, value: object) -> Any:
    if name in _STAMP_FIELDS:
        # Checked, then kept as the provider wrote it: a reader comparing what it sent
        # with what it reads back must find the same text.
        if parse_stamp(value) is None or len(str(value)) > _MAX_TEXT:
            raise _bad(f"{name} must be an ISO 8601 timestamp with a UTC offset")
        return str(value).strip()
    if name == "event_count":
        return _count(value, name, minimum=0)
    if name == "linked_pr_numbers":
        if not isinstance(value, list | tuple) or len(value) > _MAX_PRS:
            raise _bad(f"linked_pr_numbers must be a list of at most {_MAX_PRS} PR numbers")
        numbers = [_count(v, "linked_pr_numbers entry", minimum=1) for v in value]
        return tuple(dict.fromkeys(numbers))
    if name == "status":
        text = value.strip().lower() if isinstance(value, str) else ""
        if not _STATUS.match(text):
            raise _bad("status must be a lower-case word such as open or resolved")
        return text
    text = _text(value, name, _MAX_URL if name in _URL_FIELDS else _MAX_TEXT)
    if name in _URL_FIELDS:
        _no_credentials(text, name)
    return text


def check_incident_link(
    *,
    provider: object,
    provider_issue_id: object,
    gitea_org: object,
    gitea_repo: object,
    gitea_issue_number: object,
    provider_base_url: object = None,
    provider_org: object = None,
    provider_project: object = None,
    **observations: object,
) -> IncidentLinkSpec:
    """Validate everything before any SQL; None observations mean "keep what is stored"."""
    unknown = sorted(set(observations) - set(INCIDENT_OBSERVATION_FIELDS))
    if unknown:
        raise _bad(f"unknown incident link field(s): {', '.join(unknown)}")
    name = provider.strip().lower() if isinstance(provider, str) else ""
    if not _PROVIDER.match(name):
        raise _bad("provider must be a plain name of 1-64 letters, digits, '.', '_' or '-'")
    base_url = normalize_scope(provider_base_url)
    if len(base_url) > _MAX_URL:
        raise _bad(f"provider_base_url must be at most {_MAX_URL} characters")
    if base_url:
        _no_credentials(base_url, "provider_base_url")
    scope = (base_url, normalize_scope(provider_org), normalize_scope(provider_project))
    if any(len(part) > _MAX_TEXT for part in scope[1:]):
        raise _bad(f"provider scope fields must be at most {_MAX_TEXT} characters")
    issue_id = _text(provider_issue_id, "provider_issue_id")
    given = tuple(
        (field, _observation(field, observations[field]))
        for field in INCIDENT_OBSERVATION_FIELDS
        if observations.get(field) is not None
    )
    return IncidentLinkSpec(
        key=(name, *scope, issue_id),
        target=check_issue_target(gitea_org, gitea_repo, gitea_issue_number),
        observations=given,
    )


def decode_pr_numbers(raw: object) -> list[int]:
    """The stored JSON list back as ints (anything unreadable reads as no PRs)."""
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except ValueError:
            return []
    if not isinstance(raw, list):
        return []
    return [v for v in raw if isinstance(v, int) and not isinstance(v, bool)]


# --- the legacy (nullable scope) layout --------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class LegacyCollapse:
    """What migrating a legacy table does: every surviving row (scope normalized), the
    link ids to drop, and the conflicts that forbid the whole migration."""

    keep: tuple[Mapping[str, Any], ...]
    drop_ids: tuple[int, ...]
    conflicts: tuple[str, ...]


def _scope_text(value: object) -> str:
    return value.strip() if isinstance(value, str) else ("" if value is None else str(value))


def _legacy_key(row: Mapping[str, Any]) -> tuple[str, ...]:
    scope = tuple(_scope_text(row.get(field)) for field in INCIDENT_SCOPE_FIELDS)
    return (str(row.get("provider")), *scope, str(row.get("provider_issue_id")))


def plan_legacy_collapse(rows: Sequence[Mapping[str, Any]]) -> LegacyCollapse:
    """Group by the normalized key; twins collapse only when every field agrees.

    A missing column reads as NULL, and NULL against a value is a difference: keeping
    one row of a group that disagrees would silently throw the other's data away.
    """
    groups: dict[tuple[str, ...], list[Mapping[str, Any]]] = {}
    for row in sorted(rows, key=lambda r: int(r["link_id"])):
        groups.setdefault(_legacy_key(row), []).append(row)
    keep: list[Mapping[str, Any]] = []
    drop: list[int] = []
    conflicts: list[str] = []
    for key, group in groups.items():
        label = ", ".join(f"{f}={v!r}" for f, v in zip(INCIDENT_KEY_FIELDS, key, strict=True))
        first = group[0]
        targets = {tuple(r.get(f) for f in INCIDENT_TARGET_FIELDS) for r in group}
        if len(targets) > 1:
            conflicts.append(
                f"conflicting Gitea targets for incident link ({label}): {sorted(targets, key=str)}"
            )
            continue
        differing = [f for f in INCIDENT_OBSERVATION_FIELDS if len({r.get(f) for r in group}) > 1]
        if differing:
            conflicts.append(
                f"conflicting observation metadata for incident link ({label}): "
                f"{', '.join(differing)} differ"
            )
            continue
        scope = dict(zip(INCIDENT_SCOPE_FIELDS, key[1:4], strict=True))
        keep.append({**first, **scope})
        drop.extend(int(r["link_id"]) for r in group[1:])
    return LegacyCollapse(keep=tuple(keep), drop_ids=tuple(drop), conflicts=tuple(conflicts))
