"""The operations HTTP listener on loopback: /metrics, /healthz, /readyz and the fleet page."""

from __future__ import annotations

import json
import socket
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass

import anyio
import h11
from anyio.abc import SocketAttribute, SocketListener, SocketStream, TaskStatus

from supervisor.errors import SupervisorError
from supervisor.handle import SupervisorHandle
from supervisor.observe.logs import get_logger
from supervisor.observe.metrics import FleetGauges, Metrics
from supervisor.surfaces.http.fleet_page import PAGE_POST_ROUTES, PAGE_ROUTES, FleetPage
from supervisor.surfaces.http.health import HealthReport
from supervisor.system.loopback import loopback_listener
from supervisor.system.peers import PeerUidLookup, loopback_peer_uid

__all__ = ["OpsRoutes", "Response", "ops_listener", "serve_ops_http"]

_log = get_logger(surface="ops_http")

#: A request line plus headers beyond this is not a scraper or a health probe.
_MAX_REQUEST_BYTES = 16 * 1024
#: The largest request body taken (the page's reap apply sends a plan token).
_MAX_BODY_BYTES = 4096
#: How long a client may take to send its request, and to take the answer.
_IO_SECONDS = 10.0
_JSON = "application/json"


@dataclass(frozen=True, slots=True, kw_only=True)
class Response:
    status: int
    body: bytes
    content_type: str = _JSON
    headers: tuple[tuple[str, str], ...] = ()


def _json(status: int, value: object) -> Response:
    return Response(status=status, body=json.dumps(value, indent=1).encode() + b"\n")


@dataclass(frozen=True, slots=True)
class OpsRoutes:
    """Answers each path by asking the actors (through the handle); holds no fleet state."""

    handle: SupervisorHandle
    metrics: Metrics
    health: Callable[[], Awaitable[HealthReport]]
    page: FleetPage | None = None

    async def respond(
        self,
        method: str,
        path: str,
        headers: Mapping[str, str] | None = None,
        peer_uid: int | None = None,
        *,
        body: bytes = b"",
    ) -> Response:
        """``headers`` keys are lower-case; ``peer_uid`` is the client's, when known."""
        route = path.split("?", 1)[0]
        posted = method == "POST" and self.page is not None and route in PAGE_POST_ROUTES
        if method not in ("GET", "HEAD") and not posted:
            return _json(405, {"error": "method_not_allowed", "detail": "only GET and HEAD"})
        if self.page is not None and route in PAGE_ROUTES:
            page = await self.page.respond(
                route, path, headers or {}, peer_uid, method=method, body=body
            )
            return Response(
                status=page.status,
                body=page.body,
                content_type=page.content_type,
                headers=page.headers,
            )
        if route == "/metrics":
            body = self.metrics.render(await self._gauges())
            return Response(status=200, body=body, content_type=self.metrics.content_type)
        if route in ("/healthz", "/readyz"):
            report = await self.health()
            ok = report.healthy if route == "/healthz" else report.ready
            return _json(200 if ok else 503, report.as_dict())
        return _json(404, {"error": "not_found", "detail": f"no route {route[:100]!r}"})

    async def _gauges(self) -> FleetGauges:
        try:
            counts = await self.handle.fleet_counts()
            owners = await self.handle.lease_owners()
        except SupervisorError as exc:
            # Counters still render; the gauges say they could not be computed.
            _log.warning("metrics_gauges_unavailable", error=exc.detail)
            return FleetGauges(available=False)
        return FleetGauges(
            workers=counts.workers,
            orphaned=counts.orphaned,
            active_leases=owners.active_lease_count,
            available=True,
        )


def ops_listener(host: str, port: int) -> socket.socket:
    """A listening socket on loopback ``host:port`` (claimed at start-up); ``Unavailable``
    when the port cannot be had. ``host`` must already be a loopback IP (config check)."""
    return loopback_listener(host, port, what="ops HTTP")


async def serve_ops_http(
    routes: OpsRoutes,
    *,
    sock: socket.socket | None = None,
    host: str = "127.0.0.1",
    port: int = 0,
    peer_uid: PeerUidLookup = loopback_peer_uid,
    task_status: TaskStatus[str] = anyio.TASK_STATUS_IGNORED,
) -> None:
    """Serve until cancelled on ``sock`` (else on a new listener at ``host:port``);
    reports the base URL (with the bound port) once listening.

    ``peer_uid`` tells which uid a connection comes from (the page's same-uid gate).
    """
    listener = await SocketListener.from_socket(
        sock if sock is not None else ops_listener(host, port)
    )
    async with listener:
        bound = listener.extra(SocketAttribute.local_address)
        bound_host, bound_port = str(bound[0]), int(bound[1])
        shown = f"[{bound_host}]" if ":" in bound_host else bound_host
        url = f"http://{shown}:{bound_port}"
        _log.info("ops_http_listening", url=url)
        task_status.started(url)

        async def serve_one(stream: SocketStream) -> None:
            async with stream:
                try:
                    await _exchange(stream, routes, peer_uid)
                except Exception:
                    # One client's failure is its own; the listener carries on.
                    _log.exception("ops_http_request_failed")

        await listener.serve(serve_one)


def _uid_of(stream: SocketStream, lookup: PeerUidLookup) -> int | None:
    ours = stream.extra(SocketAttribute.local_address)
    peer = stream.extra(SocketAttribute.remote_address)
    if not isinstance(ours, tuple) or not isinstance(peer, tuple):
        return None
    return lookup((str(ours[0]), int(ours[1])), (str(peer[0]), int(peer[1])))


async def _receive(conn: h11.Connection, stream: SocketStream) -> bool:
    """Feed the peer's next bytes to ``conn``; False once it is done or broke the protocol."""
    try:
        data = await stream.receive(_MAX_REQUEST_BYTES)
    except (anyio.EndOfStream, anyio.BrokenResourceError):
        data = b""
    try:
        conn.receive_data(data)
    except h11.RemoteProtocolError:
        return False
    return bool(data)


async def _read_request(
    conn: h11.Connection, stream: SocketStream
) -> tuple[h11.Request, bytes] | None:
    """The request and its body (at most ``_MAX_BODY_BYTES``), or None when the peer sends
    no whole request in time, a larger body, or something that is not HTTP/1.1."""
    request: h11.Request | None = None
    body = b""
    with anyio.move_on_after(_IO_SECONDS):
        while True:
            try:
                event = conn.next_event()
            except h11.RemoteProtocolError:
                return None
            if event is h11.NEED_DATA:
                if not await _receive(conn, stream):
                    return None
            elif isinstance(event, h11.Request):
                request = event
            elif isinstance(event, h11.Data):
                body += event.data
                if len(body) > _MAX_BODY_BYTES:
                    return None
            elif isinstance(event, h11.EndOfMessage) and request is not None:
                return request, body
            elif isinstance(event, h11.ConnectionClosed):
                return None
    return None


async def _exchange(stream: SocketStream, routes: OpsRoutes, lookup: PeerUidLookup) -> None:
    conn = h11.Connection(h11.SERVER, max_incomplete_event_size=_MAX_REQUEST_BYTES)
    received_request = await _read_request(conn, stream)
    if received_request is None:
        return
    request, body = received_request
    method = request.method.decode("ascii", "replace")
    target = request.target.decode("ascii", "replace")
    received = {
        name.decode("latin-1").lower(): value.decode("latin-1") for name, value in request.headers
    }
    # Only the page asks who is calling: the lookup reads the whole TCP table (ms on a
    # busy host), which a scrape or a health probe must not pay.
    wants_uid = routes.page is not None and target.split("?", 1)[0] in PAGE_ROUTES
    peer_uid = _uid_of(stream, lookup) if wants_uid else None
    response = await routes.respond(method, target, received, peer_uid, body=body)
    headers = [
        ("content-type", response.content_type),
        ("content-length", str(len(response.body))),
        ("cache-control", "no-store"),
        ("connection", "close"),
        *response.headers,
    ]
    with anyio.move_on_after(_IO_SECONDS):
        await stream.send(conn.send(h11.Response(status_code=response.status, headers=headers)))
        if method != "HEAD":
            await stream.send(conn.send(h11.Data(data=response.body)))
        await stream.send(conn.send(h11.EndOfMessage()))
