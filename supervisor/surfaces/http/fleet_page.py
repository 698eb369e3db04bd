"""The read-only fleet page: its HTML and the JSON it refreshes from, behind a token/uid gate."""

from __future__ import annotations

import ipaddress
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs, urlsplit

from supervisor.errors import PermissionDenied, ProfilesUnreadable, SupervisorError
from supervisor.handle import SupervisorHandle
from supervisor.policy.control.permissions import OP_READ, Profile
from supervisor.policy.servers.view import view_dict
from supervisor.surfaces.http.fleet_page_html import PAGE_HTML
from supervisor.surfaces.socket.answers import to_wire
from supervisor.surfaces.socket.dispatch import ProfileLookupWithAuth

__all__ = ["OWNER_VIEWER", "PAGE_POST_ROUTES", "PAGE_ROUTES", "FleetPage", "PageResponse"]

#: Who a same-uid visitor is for the snapshot and plan permission checks: read only.
OWNER_VIEWER = Profile(
    name="local-owner", role_kind="controller", allowed_operations=frozenset({OP_READ})
)

#: The one route that changes something: a POST of a JSON body, which a form on another
#: site cannot send without a preflight this listener never grants.
PAGE_POST_ROUTES = frozenset({"/api/reap/apply"})
PAGE_ROUTES = frozenset(
    {"/", "/api/fleet", "/api/plan", "/api/servers", "/api/reap/plan", *PAGE_POST_ROUTES}
)

_SECURITY_HEADERS = (
    ("x-frame-options", "DENY"),
    ("x-content-type-options", "nosniff"),
    ("referrer-policy", "no-referrer"),
    (
        "content-security-policy",
        "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; "
        "connect-src 'self'; img-src 'self' data:",
    ),
)


@dataclass(frozen=True, slots=True, kw_only=True)
class PageResponse:
    status: int
    body: bytes
    content_type: str
    headers: tuple[tuple[str, str], ...] = _SECURITY_HEADERS


def _json(status: int, value: object) -> PageResponse:
    body = json.dumps(to_wire(value), default=str).encode()
    return PageResponse(status=status, body=body, content_type="application/json")


def _loopback_host(host_header: str) -> bool:
    """The Host header names this machine by a loopback literal or ``localhost``.

    Why: a page on another site that rebinds its DNS name to 127.0.0.1 would be
    same-origin with this listener and, running in the user's browser, pass the
    same-uid check; it cannot make the browser send a loopback Host header.
    """
    host = host_header.strip().lower()
    if host.startswith("["):
        host = host[1 : host.find("]")] if "]" in host else host
    else:
        host = host.rsplit(":", 1)[0] if host.count(":") == 1 else host
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class FleetPage:
    """Answers the page and its two JSON endpoints by asking the actors through the handle."""

    def __init__(self, handle: SupervisorHandle, profiles: ProfileLookupWithAuth | None) -> None:
        self._handle = handle
        self._profiles = profiles

    def _caller(
        self, target: str, headers: Mapping[str, str], peer_uid: int | None
    ) -> Profile | str | ProfilesUnreadable:
        """The profile to act as, or why the request is refused (the profiles file's
        failure when that is why no token can be proved)."""
        if not _loopback_host(headers.get("host", "")):
            return "the Host header must name a loopback address"
        token = _token(target, headers)
        if token:
            profile = self._profiles.authenticate(token) if self._profiles else None
            if profile is not None:
                return profile
            broken = self._profiles.error if self._profiles else None
            if broken is not None:
                return ProfilesUnreadable(f"no token can be proved right now: {broken}")
            return "the token proves no profile"
        if peer_uid is not None and peer_uid == os.geteuid():
            return OWNER_VIEWER
        return (
            "this page needs a profile token (?token= or Authorization: Bearer), or a "
            "browser running as the uid that runs the supervisor"
        )

    async def respond(
        self,
        route: str,
        target: str,
        headers: Mapping[str, str],
        peer_uid: int | None,
        *,
        method: str = "GET",
        body: bytes = b"",
    ) -> PageResponse:
        caller = self._caller(target, headers, peer_uid)
        # Denials like any other: audited (committed) before the refusal is sent.
        if isinstance(caller, ProfilesUnreadable):
            await self._handle.audit_profiles_unreadable(
                surface="fleet_page", action=route, reason=caller.detail
            )
            return _json(503, {"error": caller.code, "detail": caller.detail})
        if isinstance(caller, str):
            await self._handle.audit_unauthenticated(
                surface="fleet_page", action=route, reason=caller
            )
            return _json(401, {"error": "unauthenticated", "detail": caller})
        if route == "/":
            return PageResponse(
                status=200, body=PAGE_HTML.encode(), content_type="text/html; charset=utf-8"
            )
        try:
            if route in PAGE_POST_ROUTES or method == "POST":
                return await self._reap_apply(caller, route, method, headers, body)
            if route == "/api/plan":
                return _json(200, await self._handle.plan(caller))
            if route == "/api/servers":
                return await self._servers(caller)
            if route == "/api/reap/plan":
                return _json(200, await self._handle.reap_plan(caller))
            return _json(200, await self._fleet(caller))
        except SupervisorError as exc:
            return _json(503, {"error": exc.code, "detail": exc.detail})

    async def _reap_apply(
        self, caller: Profile, route: str, method: str, headers: Mapping[str, str], body: bytes
    ) -> PageResponse:
        """Reap the plan whose token the page posts; the handle checks the retire grant
        (a same-uid visitor without a token is a read-only viewer and is refused)."""
        if method != "POST" or route not in PAGE_POST_ROUTES:
            return _json(405, {"error": "method_not_allowed", "detail": f"{route} takes POST"})
        if headers.get("content-type", "").split(";")[0].strip() != "application/json":
            return _json(415, {"error": "bad_request", "detail": "send application/json"})
        try:
            token = json.loads(body).get("plan_token")
        except (ValueError, AttributeError):
            token = None
        if not isinstance(token, str) or not token:
            detail = 'the body must be {"plan_token": "<the plan\'s plan_token>"}'
            return _json(400, {"error": "bad_request", "detail": detail})
        return _json(200, await self._handle.reap_apply(caller, plan_token=token))

    async def _servers(self, caller: Profile) -> PageResponse:
        """The census, to whoever may read a fleet snapshot (it names commands and
        directories of the host's processes)."""
        denied = await self._handle.deny(caller, "snapshot")
        if denied is not None:
            detail = denied["permission"]["reason"]
            return _json(403, {"error": PermissionDenied.code, "detail": detail})
        return _json(200, view_dict(await self._handle.census_report()))

    async def _fleet(self, caller: Profile) -> dict[str, Any]:
        snapshot = dict(await self._handle.snapshot(caller))
        owners = await self._handle.lease_owners()
        snapshot["leases"] = {
            "readable": owners.readable,
            "active_lease_count": owners.active_lease_count,
            "detail": owners.detail,
            "owners": to_wire(owners.owners),
        }
        snapshot["viewer"] = caller.name
        return snapshot


def _token(target: str, headers: Mapping[str, str]) -> str | None:
    auth = headers.get("authorization", "")
    if auth.lower().startswith("bearer "):
        return auth[7:].strip() or None
    values = parse_qs(urlsplit(target).query).get("token")
    return values[0] if values else None
