"""The exec socket: one datagram per wrapper (labels plus its stdin), one answer line back.

A separate ``SOCK_SEQPACKET`` socket beside the main one, because the wrapper hands over
a descriptor (``SCM_RIGHTS``) and the main socket's stream reader would drop it. The
peer's pid comes from its credentials, never from the request: the request carries only
labels (client family, server name, namespace, TTL).
"""

from __future__ import annotations

import contextlib
import math
import os
import socket
import sys
from dataclasses import dataclass

import anyio
from anyio.abc import TaskStatus

from actors.mailbox import Outbox, Reply, post
from actors.replies import AdoptResult
from actors.server_guard import AdoptServer, ServerGuardInbox
from supervisor.errors import SupervisorError
from supervisor.observe.logs import get_logger
from supervisor.policy.identity.exec_marker import safe_label
from supervisor.system.peers import peer_credentials
from supervisor.system.unix_stream import accept_socket

__all__ = ["MAX_REQUEST_BYTES", "ExecRequest", "parse_request", "serve_exec_socket"]

_log = get_logger()

MAX_REQUEST_BYTES = 4096
_KEYS = frozenset({"v", "client", "name", "namespace", "ttl"})
#: A wrapper sends one descriptor; room for a few more so extras can be seen and closed.
_FD_ROOM = socket.CMSG_SPACE(8 * 4)


class BadRequest(ValueError):
    """The datagram is not a v1 exec request."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ExecRequest:
    client: str
    name: str
    namespace: str
    ttl: float | None


def parse_request(data: bytes) -> ExecRequest:
    """A v1 request: ``key=value`` lines, labels only; anything else is refused."""
    try:
        text = data.decode("ascii")
    except UnicodeDecodeError:
        raise BadRequest("the request is not ASCII text") from None
    fields: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if not sep or key not in _KEYS or key in fields:
            raise BadRequest(f"unexpected request line {line[:64]!r}")
        fields[key] = value
    if fields.get("v") != "1":
        raise BadRequest("the request must start with v=1")
    labels = {key: fields.get(key, "") for key in ("client", "name", "namespace")}
    for key, value in labels.items():
        if safe_label(value) != value:
            raise BadRequest(f"{key} must be at most 64 characters of [A-Za-z0-9._-]")
    ttl: float | None = None
    if fields.get("ttl"):
        try:
            ttl = float(fields["ttl"])
        except ValueError:
            raise BadRequest("ttl must be a number") from None
        if not math.isfinite(ttl) or ttl <= 0:
            raise BadRequest("ttl must be a positive number of seconds")
    return ExecRequest(
        client=labels["client"], name=labels["name"], namespace=labels["namespace"], ttl=ttl
    )


def _received_fds(ancillary: list[tuple[int, int, bytes]]) -> list[int]:
    fds: list[int] = []
    for level, kind, data in ancillary:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            usable = len(data) - len(data) % 4
            fds.extend(int.from_bytes(data[i : i + 4], sys.byteorder) for i in range(0, usable, 4))
    return fds


def _answer(result: AdoptResult) -> bytes:
    if result.ok:
        return f"registered ok {result.worker_identity}\n".encode()
    detail = " ".join(result.detail.split())
    return f"refused {result.code}\n{detail}\n".encode()


class _ExecServer:
    def __init__(
        self, servers: Outbox[ServerGuardInbox], *, timeout: float, max_connections: int
    ) -> None:
        self._servers = servers
        self._timeout = timeout
        # A flood of wrappers waits at accept (in the kernel's backlog), not in memory here.
        self._slots = anyio.Semaphore(max_connections)

    async def serve(self, listener: socket.socket) -> None:
        async with anyio.create_task_group() as tg:
            while True:
                await self._slots.acquire()
                try:
                    conn = await accept_socket(listener)
                except BaseException:
                    self._slots.release()
                    raise
                tg.start_soon(self._served, conn)

    async def _served(self, conn: socket.socket) -> None:
        try:
            await self._conversation(conn)
        finally:
            self._slots.release()

    async def _conversation(self, conn: socket.socket) -> None:
        with conn:
            fds: list[int] = []
            try:
                with anyio.fail_after(self._timeout):
                    data, fds = await self._receive(conn)
                answer = await self._answer(conn, data, fds)
            except TimeoutError:
                return
            except Exception as exc:
                # One wrapper's request must never take the surface down with it.
                _log.error("exec_request_failed", error=repr(exc))
                answer = _answer(_refused("internal_error", "the request could not be handled"))
            finally:
                for fd in fds:
                    os.close(fd)
            # The wrapper may have given up waiting and gone on to exec the server.
            with contextlib.suppress(OSError):
                conn.send(answer)

    async def _receive(self, conn: socket.socket) -> tuple[bytes, list[int]]:
        while True:
            try:
                data, ancillary, flags, _ = conn.recvmsg(MAX_REQUEST_BYTES, _FD_ROOM)
            except BlockingIOError:
                await anyio.wait_readable(conn)
                continue
            fds = _received_fds(ancillary)
            if flags & (socket.MSG_TRUNC | socket.MSG_CTRUNC):
                for fd in fds:
                    os.close(fd)
                return b"", []
            return data, fds

    async def _answer(self, conn: socket.socket, data: bytes, fds: list[int]) -> bytes:
        """Ask the guard; ``fds`` loses the descriptor the guard takes over."""
        credentials = peer_credentials(conn)
        if credentials is None:
            return _answer(_refused("peer_unknown", "the peer's credentials cannot be read"))
        try:
            request = parse_request(data)
        except BadRequest as exc:
            _log.warning("exec_request_refused", pid=credentials[0], detail=str(exc))
            return _answer(_refused("invalid_request", str(exc)))
        reply: Reply[AdoptResult] = Reply()
        message = AdoptServer(
            pid=credentials[0],
            client=request.client,
            name=request.name,
            namespace=request.namespace,
            ttl=request.ttl,
            stdin_fd=fds[0] if fds else None,
            reply=reply,
        )
        try:
            await post(self._servers, message, actor="server_guard")
        except SupervisorError as exc:
            return _answer(_refused(exc.code, exc.detail))
        del fds[:1]  # delivered: the guard owns the descriptor now
        try:
            return _answer(await reply.wait(actor="server_guard"))
        except SupervisorError as exc:
            return _answer(_refused(exc.code, exc.detail))


def _refused(code: str, detail: str) -> AdoptResult:
    return AdoptResult(ok=False, code=code, detail=detail)


async def serve_exec_socket(
    servers: Outbox[ServerGuardInbox],
    *,
    listener: socket.socket,
    request_seconds: float = 30.0,
    max_connections: int = 256,
    task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED,
) -> None:
    """Serve wrappers on ``listener`` (a bound ``SOCK_SEQPACKET`` socket) until cancelled."""
    task_status.started()
    await _ExecServer(servers, timeout=request_seconds, max_connections=max_connections).serve(
        listener
    )
