"""Request/response connections to a running supervisor's socket, async and sync, one at a time."""

from __future__ import annotations

import contextlib
import os
import socket
import threading
from collections.abc import Awaitable, Mapping
from types import TracebackType
from typing import Any, ClassVar, Self

import anyio
from anyio.abc import AsyncResource
from anyio.streams.buffered import BufferedByteReceiveStream

from supervisor.client.calls import Calls, answer_too_large
from supervisor.client.frames import MAX_RESPONSE_BYTES, connection_dropped, parse_result
from supervisor.client.remote import RemoteError
from supervisor.system.unix_stream import UnixStream, connect_unix_stream

__all__ = ["AsyncClient", "Client"]

_RECV_CHUNK = 65536


class AsyncClient(Calls[Awaitable[Mapping[str, Any]]], AsyncResource):
    """One connection to the supervisor; requests on it are serialized by a lock.

    The connection is made on entry (or on first use) and remade when the
    server has closed it while idle; a failure mid-request drops it. Leaving
    ``async with`` closes it (``AsyncResource``).
    """

    _HUNG_UP: ClassVar[tuple[type[BaseException], ...]] = (
        anyio.EndOfStream,
        anyio.IncompleteRead,
        anyio.BrokenResourceError,
        OSError,
    )

    def _init_transport(self) -> None:
        self._stream: UnixStream | None = None
        self._reader: BufferedByteReceiveStream | None = None
        self._lock = anyio.Lock()

    async def __aenter__(self) -> Self:
        await self.connect()
        return self

    async def connect(self) -> None:
        if self._stream is not None:
            return
        try:
            with anyio.fail_after(self.timeout):
                stream = await connect_unix_stream(self.socket_path)
        except (OSError, TimeoutError) as exc:
            raise self._unreachable(exc) from None
        self._stream, self._reader = stream, BufferedByteReceiveStream(stream)

    async def aclose(self) -> None:
        stream, self._stream, self._reader = self._stream, None, None
        if stream is not None:
            await anyio.aclose_forcefully(stream)

    async def request(
        self, op: str, args: Mapping[str, Any] | None = None, *, token: str | None = None
    ) -> Mapping[str, Any]:
        """Send one request and return its result; error frames raise ``RemoteError``s."""
        async with self._lock:
            if self._stream is not None and connection_dropped(self._stream.raw_socket):
                await self.aclose()
            await self.connect()
            assert self._stream is not None
            assert self._reader is not None
            request_id, frame = self._frame(op, args, token)
            try:
                with anyio.fail_after(self.timeout):
                    # The server may have refused the frame part-way (too large) and hung
                    # up: its answer is still there to read, and says more than a reset.
                    with contextlib.suppress(anyio.BrokenResourceError):
                        await self._stream.send(frame)
                    try:
                        line = await self._reader.receive_until(b"\n", MAX_RESPONSE_BYTES)
                    except anyio.DelimiterNotFound:
                        raise answer_too_large() from None
                return parse_result(line, request_id)
            except RemoteError:
                raise  # an answer, in step with the server: the connection stays
            except BaseException as exc:
                await self.aclose()
                if (lost := self._lost(op, exc)) is None:
                    raise
                raise lost from None


class Client(Calls[Mapping[str, Any]]):
    """The same API as ``AsyncClient``, blocking, over the standard ``socket`` module."""

    _HUNG_UP: ClassVar[tuple[type[BaseException], ...]] = (EOFError, OSError)

    def _init_transport(self) -> None:
        self._sock: socket.socket | None = None
        self._buffer = bytearray()
        self._lock = threading.Lock()

    def __enter__(self) -> Self:
        self.connect()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def connect(self) -> None:
        if self._sock is not None:
            return
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(self.timeout)
        try:
            sock.connect(os.fspath(self.socket_path))
        except OSError as exc:
            sock.close()
            raise self._unreachable(exc) from None
        self._sock = sock
        self._buffer.clear()

    def close(self) -> None:
        sock, self._sock = self._sock, None
        self._buffer.clear()
        if sock is not None:
            sock.close()

    def _readline(self, sock: socket.socket) -> bytes:
        start = 0
        while (index := self._buffer.find(b"\n", start)) < 0:
            if len(self._buffer) > MAX_RESPONSE_BYTES:
                raise answer_too_large()
            start = len(self._buffer)
            chunk = sock.recv(_RECV_CHUNK)
            if not chunk:
                raise EOFError
            self._buffer.extend(chunk)
        line = bytes(self._buffer[:index])
        del self._buffer[: index + 1]
        return line

    def request(
        self, op: str, args: Mapping[str, Any] | None = None, *, token: str | None = None
    ) -> Mapping[str, Any]:
        """Send one request and return its result; error frames raise ``RemoteError``s."""
        with self._lock:
            if self._sock is not None and (self._buffer or connection_dropped(self._sock)):
                self.close()
            self.connect()
            sock = self._sock
            assert sock is not None
            request_id, frame = self._frame(op, args, token)
            try:
                with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                    # As in AsyncClient.request: a refusal may be waiting behind the hang-up.
                    sock.sendall(frame)
                return parse_result(self._readline(sock), request_id)
            except RemoteError:
                raise
            except BaseException as exc:
                self.close()
                if (lost := self._lost(op, exc)) is None:
                    raise
                raise lost from None
