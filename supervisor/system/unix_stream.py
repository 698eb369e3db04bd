"""A small anyio byte stream over a non-blocking Unix socket, safe to cancel mid-read."""

from __future__ import annotations

import os
import socket
from collections.abc import Awaitable, Callable, Mapping
from functools import partial
from typing import Any, TypeVar

import anyio
import anyio.lowlevel
from anyio.abc import ByteStream, SocketAttribute

__all__ = ["UnixStream", "accept_socket", "connect_unix_stream"]

_T = TypeVar("_T")

# Why not anyio's own UNIX socket streams: on asyncio they wait by registering
# `future.set_result` as the selector callback, so a read cancelled in the same
# loop iteration in which its socket turns readable ends in an "Exception in
# callback Future.set_result … InvalidStateError" from the event loop. A server
# cancels blocked reads at every shutdown and idle timeout, so that race is
# routine here. `anyio.wait_readable`/`wait_writable` tolerate it; everything
# below waits through them.


class UnixStream(ByteStream):
    """One connected Unix stream socket; ``receive`` and ``send`` may be used by one task each."""

    def __init__(self, sock: socket.socket) -> None:
        sock.setblocking(False)
        self._sock = sock
        self._closed = False

    @property
    def raw_socket(self) -> socket.socket:
        return self._sock

    @property
    def extra_attributes(self) -> Mapping[Any, Callable[[], Any]]:
        return {
            SocketAttribute.raw_socket: lambda: self._sock,
            SocketAttribute.family: lambda: socket.AF_UNIX,
        }

    async def receive(self, max_bytes: int = 65536) -> bytes:
        await anyio.lowlevel.checkpoint()
        data = await self._retry(partial(self._sock.recv, max_bytes), anyio.wait_readable)
        if not data:
            raise anyio.EndOfStream
        return data

    async def send(self, item: bytes) -> None:
        await anyio.lowlevel.checkpoint()
        view = memoryview(item)
        while view:
            sent = await self._retry(partial(self._sock.send, view), anyio.wait_writable)
            view = view[sent:]

    async def _retry(
        self, attempt: Callable[[], _T], wait: Callable[[socket.socket], Awaitable[None]]
    ) -> _T:
        """``attempt`` one non-blocking call, waiting with ``wait`` until the socket is ready
        for it; a closed stream or a socket error ends it the way anyio's streams do."""
        while True:
            if self._closed:
                raise anyio.ClosedResourceError
            try:
                return attempt()
            except BlockingIOError:
                await wait(self._sock)
            except OSError as exc:
                raise anyio.BrokenResourceError from exc

    async def send_eof(self) -> None:
        try:
            self._sock.shutdown(socket.SHUT_WR)
        except OSError as exc:
            raise anyio.BrokenResourceError from exc
        await anyio.lowlevel.checkpoint()

    async def aclose(self) -> None:
        if not self._closed:
            self._closed = True
            # Wakes any task still waiting on this socket before its fd number can be reused.
            anyio.notify_closing(self._sock)
            self._sock.close()
        await anyio.lowlevel.cancel_shielded_checkpoint()


async def connect_unix_stream(path: str | os.PathLike[str]) -> UnixStream:
    """Connect to a listening Unix socket; OSError (e.g. FileNotFoundError) when nobody listens."""
    await anyio.lowlevel.checkpoint()
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.setblocking(False)
    try:
        while True:
            try:
                sock.connect(os.fspath(path))
            except BlockingIOError:
                # For Unix sockets this means a full accept backlog: wait and try again.
                await anyio.wait_writable(sock)
                continue
            return UnixStream(sock)
    except BaseException:
        sock.close()
        raise


async def accept_socket(listener: socket.socket) -> socket.socket:
    """Wait for and accept one connection on a listening, non-blocking Unix socket."""
    await anyio.lowlevel.checkpoint()
    while True:
        try:
            conn, _ = listener.accept()
        except BlockingIOError:
            await anyio.wait_readable(listener)
            continue
        conn.setblocking(False)
        return conn
