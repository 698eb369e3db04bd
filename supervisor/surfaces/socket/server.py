"""The local socket surface: newline-delimited JSON requests translated into handle calls."""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import anyio
from anyio.abc import TaskGroup, TaskStatus

from supervisor.errors import ProtocolError, SupervisorError
from supervisor.handle import SupervisorHandle
from supervisor.handle.hosts import HostLeaseCalls
from supervisor.observe.logs import get_logger
from supervisor.operations.declared import HeartbeatRequest
from supervisor.operations.requests import request_as
from supervisor.settings.config import SocketConfig
from supervisor.surfaces.socket.beats import beat_answer
from supervisor.surfaces.socket.bind import SocketInUse, bound_listener
from supervisor.surfaces.socket.dispatch import Dispatcher, ProfileLookupWithAuth
from supervisor.surfaces.socket.frame import Frame, peek_request_id
from supervisor.surfaces.socket.frame_channel import FrameChannel, Oversized, open_frame_channel
from supervisor.surfaces.socket.peer_auth import Conversation
from supervisor.surfaces.socket.protocol import decode_request
from supervisor.surfaces.socket.status import ServerFigures
from supervisor.system.peers import peer_credentials
from supervisor.system.probes import ProbeBackend
from supervisor.system.unix_stream import UnixStream, accept_socket
from supervisor.wire import (
    BAD_REQUEST,
    FRAME_TOO_LARGE,
    INTERNAL_ERROR,
    SERVER_BUSY,
    TIMEOUT,
    encode,
    error_frame,
)

__all__ = ["CredentialsReader", "SocketInUse", "serve_socket"]

_log = get_logger()

#: (pid, uid, gid) of a connected peer, or None when the platform cannot say.
CredentialsReader = Callable[[socket.socket], tuple[int, int, int] | None]

#: An idle connection costs a file descriptor and a task; several request timeouts is
#: long enough for a client that keeps one connection between heartbeats.
_IDLE_FACTOR = 4
#: How long a busy or broken connection may take to accept our last frame.
_FAREWELL_SECONDS = 1.0
#: Pause after a failed accept() (e.g. out of file descriptors) so the loop cannot spin.
_ACCEPT_RETRY_SECONDS = 0.1


async def serve_socket(
    handle: SupervisorHandle,
    *,
    settings: SocketConfig,
    profiles: ProfileLookupWithAuth,
    probes: ProbeBackend,
    credentials: CredentialsReader = peer_credentials,
    bound: tuple[socket.socket, Path] | None = None,
    hosts: HostLeaseCalls | None = None,
    task_status: TaskStatus[Path] = anyio.TASK_STATUS_IGNORED,
) -> None:
    """Serve the local socket until cancelled; reports the bound path once listening.

    With ``bound`` (from ``bound_listener``, which the caller keeps open) it serves that
    listener: the daemon claims its socket before starting anything, so a taken path stops
    start-up before the store is opened. Otherwise it claims ``settings.path`` itself,
    raising ``SocketInUse`` when a live server already owns the path and ``ConfigError``
    when the path cannot be used, and removes the socket on exit.
    """
    server = _SocketServer(
        handle,
        settings=settings,
        profiles=profiles,
        probes=probes,
        credentials=credentials,
        hosts=hosts,
    )
    if bound is not None:
        await server.serve_logged(*bound, task_status=task_status)
        return
    with bound_listener(settings) as (listener, path):
        await server.serve_logged(listener, path, task_status=task_status)


class _SocketServer:
    """Per-listener state: the connection count and the collaborators each request needs."""

    def __init__(
        self,
        handle: SupervisorHandle,
        *,
        settings: SocketConfig,
        profiles: ProfileLookupWithAuth,
        probes: ProbeBackend,
        credentials: CredentialsReader,
        hosts: HostLeaseCalls | None = None,
    ) -> None:
        self._handle = handle
        self._settings = settings
        self._credentials = credentials
        self._timeout = settings.request_timeout_seconds
        self._idle = settings.request_timeout_seconds * _IDLE_FACTOR
        self._active = 0
        #: Connections being served, each counted in ``_active`` until it ends or is evicted.
        self._live: dict[FrameChannel, None] = {}
        self._path = Path(settings.path)
        self._dispatcher = Dispatcher(
            handle,
            profiles=profiles,
            probes=probes,
            hosts=hosts,
            figures=self._figures,
            timeout=self._timeout,
        )

    def _figures(self) -> ServerFigures:
        return ServerFigures(
            socket_path=self._path,
            active_connections=self._active,
            max_connections=self._settings.max_connections,
        )

    async def serve_logged(
        self, listener: socket.socket, path: Path, *, task_status: TaskStatus[Path]
    ) -> None:
        _log.info("socket_listening", path=str(path), mode=f"{self._settings.mode:04o}")
        task_status.started(path)
        try:
            await self.serve(listener, path)
        finally:
            _log.info("socket_closed", path=str(path))

    async def serve(self, listener: socket.socket, path: Path) -> None:
        self._path = path
        async with anyio.create_task_group() as tg:
            while True:
                try:
                    sock = await accept_socket(listener)
                except OSError as exc:
                    _log.warning("socket_accept_failed", error=repr(exc))
                    await anyio.sleep(_ACCEPT_RETRY_SECONDS)
                    continue
                self._admit(tg, sock)

    def _admit(self, tg: TaskGroup, sock: socket.socket) -> None:
        if self._active >= self._settings.max_connections and not self._evict_idle():
            detail = f"the supervisor already serves {self._active} connections; retry later"
            tg.start_soon(self._farewell, UnixStream(sock), error_frame(None, SERVER_BUSY, detail))
            return
        # Counted here, not in the task, so a burst of accepts cannot overshoot the limit.
        self._active += 1
        tg.start_soon(self._connection, sock)

    def _evict_idle(self) -> bool:
        """Close the connection idle longest, if idle long enough, to make room: a worker
        that keeps a connection between heartbeats reconnects on its next one, while a
        newcomer refused ``server_busy`` would have had its heartbeat turned away."""
        now = asyncio.get_running_loop().time()
        bound = self._settings.evict_idle_after_seconds
        oldest: FrameChannel | None = None
        oldest_since = now - bound
        for channel in self._live:
            since = channel.idle_since()
            if since is not None and since <= oldest_since:
                oldest, oldest_since = channel, since
        if oldest is None:
            return False
        del self._live[oldest]
        self._active -= 1
        _log.info("socket_idle_evicted", idle_seconds=round(now - oldest_since, 3))
        oldest.close()
        return True

    async def _farewell(self, stream: UnixStream, frame: Mapping[str, Any]) -> None:
        async with stream:
            with (
                anyio.move_on_after(_FAREWELL_SECONDS),
                contextlib.suppress(anyio.BrokenResourceError, anyio.ClosedResourceError, OSError),
            ):
                await stream.send(encode(frame))

    async def _connection(self, sock: socket.socket) -> None:
        channel: FrameChannel | None = None
        try:
            peer = Conversation(self._credentials(sock))
            channel = await open_frame_channel(sock, limit=self._settings.max_frame_bytes)
            self._live[channel] = None
            await self._converse(channel, peer)
        except Exception:
            # A connection's failure is its own; the listener and other peers carry on.
            _log.exception("socket_connection_failed")
        finally:
            # An evicted connection was uncounted (and forgotten) when it was evicted.
            if channel is None or channel in self._live:
                self._active -= 1
            if channel is not None:
                self._live.pop(channel, None)
            if channel is not None:
                channel.close()
            else:
                sock.close()

    async def _converse(self, channel: FrameChannel, peer: Conversation) -> None:
        limit = self._settings.max_frame_bytes
        while True:
            frames = await channel.receive(idle=self._idle)
            if frames is None:
                _log.debug("socket_idle_closed", idle_seconds=self._idle)
                return
            if not frames:
                if channel.partial:
                    # The peer half-closed mid-frame; it may still be reading.
                    detail = "connection closed before the frame's terminating newline"
                    await channel.send(
                        encode(error_frame(None, BAD_REQUEST, detail)), limit=_FAREWELL_SECONDS
                    )
                return
            answers, cut = await self._answer_all(frames, peer)
            if cut:
                # Bytes of the oversized frame may still be in flight, so where the next frame
                # starts is unknown: answer once and close.
                detail = f"frames are limited to {limit} bytes"
                answers.append(encode(error_frame(None, FRAME_TOO_LARGE, detail)))
            sent = await channel.send(
                b"".join(answers), limit=_FAREWELL_SECONDS if cut else self._timeout
            )
            if cut or not sent:
                return

    async def _answer_all(
        self, frames: Sequence[bytes | Oversized], peer: Conversation
    ) -> tuple[list[bytes], bool]:
        """Encoded answers, in frame order, and whether an oversized frame ended the batch.

        Consecutive heartbeats are answered together (``_beats``); any other request is
        answered alone and in order, so a pipelined register-then-heartbeat still works.
        """
        answers: list[bytes] = []
        run: list[tuple[Frame, bytes]] = []
        for frame in frames:
            if isinstance(frame, Oversized):
                answers += await self._beats(run, peer)
                return answers, True
            try:
                request = decode_request(frame)
            except ProtocolError as exc:
                answers += await self._beats(run, peer)
                run = []
                answers.append(encode(error_frame(peek_request_id(frame), exc.code, exc.detail)))
                continue
            if request.op == "heartbeat":
                run.append((request, frame))
                continue
            answers += await self._beats(run, peer)
            run = []
            answers.append(encode(await self._dispatcher.respond(request, peer)))
        answers += await self._beats(run, peer)
        return answers, False

    async def _beats(self, run: Sequence[tuple[Frame, bytes]], peer: Conversation) -> list[bytes]:
        """Answer a run of heartbeat requests with one hand-off to the heartbeat actor."""
        if not run:
            return []
        answers: list[bytes | None] = [None] * len(run)
        accepted: list[tuple[int, HeartbeatRequest]] = []
        for index, (request, _) in enumerate(run):
            args = request_as(request.args, HeartbeatRequest)
            try:
                await self._authorize_pid(args.pid, peer, "heartbeat")
            except SupervisorError as exc:
                answers[index] = encode(error_frame(request.id, exc.code, exc.detail))
                continue
            accepted.append((index, args))
        if accepted:
            try:
                results = await self._handle.heartbeat_many(
                    [a for _, a in accepted], timeout=self._timeout
                )
            except TimeoutError:
                detail = (
                    f"heartbeat did not complete within {self._timeout}s; it may still take effect"
                )
                for index, _ in accepted:
                    answers[index] = encode(error_frame(run[index][0].id, TIMEOUT, detail))
            except SupervisorError as exc:
                for index, _ in accepted:
                    answers[index] = encode(error_frame(run[index][0].id, exc.code, exc.detail))
            except Exception:
                _log.exception("socket_request_failed", op="heartbeat")
                detail = "the supervisor failed on this request"
                for index, _ in accepted:
                    answers[index] = encode(error_frame(run[index][0].id, INTERNAL_ERROR, detail))
            else:
                for (index, _), result in zip(accepted, results, strict=True):
                    answers[index] = beat_answer(run[index][0].id, result)
        return [a for a in answers if a is not None]

    async def _authorize_pid(self, pid: int, peer: Conversation, op: str) -> None:
        await self._dispatcher.authorize_pid(pid, peer, op)
