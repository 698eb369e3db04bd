"""The MCP tools over streamable HTTP inside the daemon: loopback only, bearer profile tokens."""

from __future__ import annotations

import json
import socket
from collections.abc import Callable, Generator
from contextlib import contextmanager
from typing import Protocol, runtime_checkable

import anyio
import uvicorn
from anyio.abc import TaskStatus
from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.auth.provider import AccessToken
from starlette.types import ASGIApp, Receive, Scope, Send

from supervisor.errors import Unavailable
from supervisor.observe.logs import get_logger
from supervisor.policy.control.permissions import Profile
from supervisor.settings.profiles import ProfileBook
from supervisor.surfaces.mcp.backend import ToolBackend
from supervisor.surfaces.mcp.http_envelope import answer_by_id
from supervisor.surfaces.mcp.size import DEFAULT_MAX_RESULT_BYTES
from supervisor.surfaces.mcp.tools import build_mcp_server
from supervisor.system.loopback import loopback_listener

__all__ = ["AuthAudit", "ProfileTokenVerifier", "mcp_http_listener", "serve_mcp_http"]

#: How long open HTTP streams get to finish when the daemon stops.
_HTTP_DRAIN_SECONDS = 5

_log = get_logger(surface="mcp")


@runtime_checkable
class AuthAudit(Protocol):
    """What records a request whose token proved no profile (SupervisorHandle does)."""

    async def audit_unauthenticated(
        self, *, surface: str, action: str, reason: str, peer_pid: int | None = None
    ) -> None: ...

    async def audit_profiles_unreadable(
        self, *, surface: str, action: str, reason: str, peer_pid: int | None = None
    ) -> None: ...


class ProfileTokenVerifier:
    """Bearer tokens are profile tokens: accepted when the profiles file lists their hash.

    A token that proves no profile is logged and audited through ``audit`` (when
    given) before the SDK answers 401.
    """

    def __init__(self, profiles: ProfileBook, *, audit: AuthAudit | None = None) -> None:
        self._profiles = profiles
        self._audit = audit

    async def verify_token(self, token: str) -> AccessToken | None:
        profile = self._profiles.authenticate(token)
        if profile is None:
            if self._audit is not None:
                await self._audit.audit_unauthenticated(
                    surface="mcp_http",
                    action="mcp_http_request",
                    reason="the bearer token proves no profile",
                )
            return None
        return AccessToken(token=token, client_id=profile.name, scopes=[])


def _has_bearer(scope: Scope) -> bool:
    return _bearer(scope) is not None


def _audit_missing_bearer(app: ASGIApp, audit: AuthAudit) -> ASGIApp:
    """The SDK answers 401 to a request without a bearer token before any verifier sees
    it; record that like a wrong token (CORS preflights carry no token by design)."""

    async def asgi(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope.get("method") != "OPTIONS" and not _has_bearer(scope):
            await audit.audit_unauthenticated(
                surface="mcp_http", action="mcp_http_request", reason="no bearer token was given"
            )
        await app(scope, receive, send)

    return asgi


def _bearer(scope: Scope) -> str | None:
    for name, value in scope.get("headers", ()):
        if name.lower() == b"authorization":
            text = value.decode("latin-1")
            return text[7:].strip() if text.lower().startswith("bearer ") else None
    return None


def _refuse_while_profiles_unreadable(
    app: ASGIApp, profiles: ProfileBook, audit: AuthAudit | None
) -> ASGIApp:
    """While the profiles file cannot be read no bearer token can be checked: answer 503
    ``profiles_unreadable`` with the cause rather than the SDK's 401, which would send
    the operator after a token that may be fine. Audited (through ``audit``) before the
    answer, as every denial is."""

    async def asgi(scope: Scope, receive: Receive, send: Send) -> None:
        token = _bearer(scope) if scope["type"] == "http" else None
        if token and profiles.authenticate(token) is None and profiles.error is not None:
            reason = f"no token can be proved right now: {profiles.error}"
            if audit is not None:
                await audit.audit_profiles_unreadable(
                    surface="mcp_http", action="mcp_http_request", reason=reason
                )
            body = json.dumps(
                {"error": "profiles_unreadable", "error_description": reason}
            ).encode()
            headers = [
                (b"content-type", b"application/json"),
                (b"content-length", b"%d" % len(body)),
            ]
            await send({"type": "http.response.start", "status": 503, "headers": headers})
            await send({"type": "http.response.body", "body": body})
            return
        await app(scope, receive, send)

    return asgi


def _http_profile(profiles: ProfileBook) -> Callable[[], Profile | None]:
    def resolve() -> Profile | None:
        access = get_access_token()
        # Re-proved per tool call, so a token revoked mid-session stops at the next call.
        return profiles.authenticate(access.token) if access is not None else None

    return resolve


def mcp_http_listener(host: str, port: int) -> socket.socket:
    """A socket listening on loopback ``host:port``; ``ConfigError`` or ``Unavailable`` if not."""
    return loopback_listener(host, port, what="MCP HTTP")


class _EmbeddedUvicorn(uvicorn.Server):
    """uvicorn inside the daemon's event loop: signals stay the daemon's to handle."""

    @contextmanager
    def capture_signals(self) -> Generator[None, None, None]:
        # uvicorn would install its own SIGTERM/SIGINT handlers and re-raise the signal
        # when it stops; the daemon already drains on those signals by cancelling us.
        yield


async def _run_uvicorn(http: _EmbeddedUvicorn, sock: socket.socket, stopped: anyio.Event) -> None:
    # Shielded: on cancellation the caller sets should_exit and uvicorn drains in order.
    with anyio.CancelScope(shield=True):
        try:
            await http.serve(sockets=[sock])
        except SystemExit as exc:
            # uvicorn exits the process when the app's startup fails; here that is an error.
            raise Unavailable("the MCP HTTP application failed to start") from exc
        finally:
            stopped.set()


async def serve_mcp_http(
    handle: ToolBackend,
    *,
    profiles: ProfileBook,
    host: str = "127.0.0.1",
    port: int = 8765,
    sock: socket.socket | None = None,
    max_result_bytes: int = DEFAULT_MAX_RESULT_BYTES,
    task_status: TaskStatus[str] = anyio.TASK_STATUS_IGNORED,
) -> None:
    """Serve the tools over streamable HTTP at ``http://host:port/mcp`` until cancelled.

    Inside the daemon, on a loopback IP only. Every request must carry
    ``Authorization: Bearer <profile token>``; the token is checked against the
    profiles file on each request and again on each tool call (so a token whose
    hash is removed stops working at once), and the profile it proves is the
    caller the supervisor authorizes. Reports the endpoint URL (with the bound
    port, so ``port=0`` works) once it accepts connections. ``sock`` is a listener from
    ``mcp_http_listener`` to serve instead of binding ``host:port`` here (it is closed on exit).
    """
    if sock is None:
        sock = mcp_http_listener(host, port)
    try:
        await _serve_http(handle, profiles, sock, task_status, max_result_bytes)
    finally:
        sock.close()  # uvicorn closes it too once it started; closing twice is harmless


async def _serve_http(
    handle: ToolBackend,
    profiles: ProfileBook,
    sock: socket.socket,
    task_status: TaskStatus[str],
    max_result_bytes: int,
) -> None:
    host, port = sock.getsockname()[:2]
    base = f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"
    audit = handle if isinstance(handle, AuthAudit) else None
    server = build_mcp_server(
        handle,
        profile_resolver=_http_profile(profiles),
        token_verifier=ProfileTokenVerifier(profiles, audit=audit),
        issuer_url=base,
        max_result_bytes=max_result_bytes,
    )
    # host= makes the SDK reject Host/Origin headers that are not loopback (DNS rebinding).
    app: ASGIApp = server.streamable_http_app(host=host)
    # Every request with a readable id is answered by that id, an unreadable one too.
    app = answer_by_id(app)
    if audit is not None:
        app = _audit_missing_bearer(app, audit)
    app = _refuse_while_profiles_unreadable(app, profiles, audit)
    config = uvicorn.Config(
        app,
        http="h11",
        ws="none",
        lifespan="on",
        log_config=None,
        access_log=False,
        timeout_graceful_shutdown=_HTTP_DRAIN_SECONDS,
    )
    http = _EmbeddedUvicorn(config)
    stopped = anyio.Event()
    async with anyio.create_task_group() as tg:
        tg.start_soon(_run_uvicorn, http, sock, stopped)
        try:
            while not http.started:
                if stopped.is_set():
                    raise Unavailable("the MCP HTTP server stopped while starting")
                await anyio.sleep(0.01)
            _log.info("mcp_http_ready", url=f"{base}/mcp")
            task_status.started(f"{base}/mcp")
            await anyio.sleep_forever()
        finally:
            http.should_exit = True
