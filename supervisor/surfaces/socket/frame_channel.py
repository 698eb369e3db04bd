"""One accepted socket connection as newline-delimited frames over an asyncio transport."""

from __future__ import annotations

import asyncio
import socket
from collections import deque
from typing import Final

import anyio

__all__ = ["OVERSIZED", "FrameChannel", "Oversized", "open_frame_channel"]


class Oversized:
    """Stands in the frame queue where a frame longer than the limit started. Nothing after
    it is parsed: where the next frame begins is unknown once a frame is cut."""

    __slots__ = ()


OVERSIZED: Final = Oversized()

#: Frames parsed but not yet answered before the transport stops reading from the peer.
_MAX_QUEUED = 256


class FrameChannel(asyncio.Protocol):
    """Frames in, bytes out, for the one task that serves the connection.

    Why a transport and not a byte stream read in a loop: a transport keeps the
    socket registered with the event loop for the connection's whole life,
    while a stream re-registers it on every read that would block; with one
    heartbeat per round trip that registration, and the extra loop passes
    around it, cost more than the heartbeat itself. It also delivers every
    frame that has arrived at once, so a peer that pipelines its requests is
    served in batches.
    """

    def __init__(self, *, limit: int) -> None:
        self._limit = limit
        self._transport: asyncio.Transport | None = None
        self._buffer = bytearray()
        self._frames: deque[bytes | Oversized] = deque()
        self._cut = False  # an oversized frame was met: parse nothing more
        self._eof = False
        self._lost = False
        self._reading_paused = False
        self._writing_paused = False
        #: Resolves True when there is something to read, False when the idle timer fired.
        self._readable: asyncio.Future[bool] | None = None
        #: Event-loop time since which the serving task has been waiting for a request.
        self._waiting_since: float | None = None
        self._drained: asyncio.Future[None] | None = None

    # -- asyncio.Protocol ---------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self._transport = transport

    def data_received(self, data: bytes) -> None:
        if self._cut:
            return
        buffer = self._buffer
        buffer += data
        start = 0
        while (end := buffer.find(b"\n", start)) >= 0:
            if end - start > self._limit:
                self._cut_here()
                return
            self._frames.append(bytes(buffer[start:end]))
            start = end + 1
        del buffer[:start]
        if len(buffer) > self._limit:
            self._cut_here()
            return
        if len(self._frames) >= _MAX_QUEUED and not self._reading_paused:
            # The serving task catches up before more is read; the peer sees a full socket.
            assert self._transport is not None
            self._transport.pause_reading()
            self._reading_paused = True
        if self._frames:
            # Only a whole frame wakes the serving task: a read that ended mid-frame (a large
            # frame, or one the peer wrote in pieces) leaves it waiting for the rest.
            self._wake_reader()

    def eof_received(self) -> bool:
        self._eof = True
        self._wake_reader()
        # Keep the transport open: a peer that half-closed may still read our answers.
        return True

    def connection_lost(self, exc: Exception | None) -> None:
        self._lost = self._eof = True
        self._wake_reader()
        self._wake_writer()

    def pause_writing(self) -> None:
        self._writing_paused = True

    def resume_writing(self) -> None:
        self._writing_paused = False
        self._wake_writer()

    # -- the serving task's side --------------------------------------------------------

    @property
    def partial(self) -> bool:
        """Bytes of an unfinished frame were left when the peer stopped sending."""
        return bool(self._buffer) and not self._cut

    def idle_since(self) -> float | None:
        """Event-loop time since which the peer has had no request pending, unanswered or
        part-sent; None while it has one (closing it now could lose a request)."""
        if self._buffer or self._lost or self._frames:
            return None
        return self._waiting_since

    async def receive(self, *, idle: float) -> list[bytes | Oversized] | None:
        """Every frame that has arrived, waiting up to ``idle`` seconds for the first; ``[]``
        once the peer stopped sending, None when it sent nothing for ``idle`` seconds.
        An ``OVERSIZED`` entry is always the last one ever returned."""
        if not self._frames and not self._eof:
            loop = asyncio.get_running_loop()
            waiter = self._readable = loop.create_future()
            # A timer on the waiter rather than a cancel scope around it: this runs once
            # per request, and a scope costs several times what the timer does.
            timer = loop.call_later(idle, _expire, waiter)
            self._waiting_since = loop.time()
            try:
                await waiter
            finally:
                timer.cancel()
                self._readable = None
                self._waiting_since = None
            if not waiter.result():
                return None
        frames = list(self._frames)
        self._frames.clear()
        if self._reading_paused and not self._lost and not self._cut:
            assert self._transport is not None
            self._transport.resume_reading()
            self._reading_paused = False
        return frames

    async def send(self, data: bytes, *, limit: float) -> bool:
        """Queue ``data`` for the peer; False when the peer is gone or has not taken our
        bytes within ``limit`` seconds (it stopped reading)."""
        transport = self._transport
        if transport is None or self._lost or transport.is_closing():
            return False
        transport.write(data)
        if not self._writing_paused:
            return True
        with anyio.move_on_after(limit):
            while self._writing_paused and not self._lost:
                self._drained = asyncio.get_running_loop().create_future()
                try:
                    await self._drained
                finally:
                    self._drained = None
        # Still paused here means the limit passed with the peer not reading.
        return not (self._lost or self._writing_paused)

    def close(self) -> None:
        """Close now; bytes the peer has not taken are dropped only if it stopped reading."""
        transport = self._transport
        if transport is None or transport.is_closing():
            return
        if self._writing_paused:
            transport.abort()
        else:
            transport.close()

    def _cut_here(self) -> None:
        self._cut = True
        self._buffer.clear()
        self._frames.append(OVERSIZED)
        assert self._transport is not None
        if not self._reading_paused:
            self._transport.pause_reading()
            self._reading_paused = True
        self._wake_reader()

    def _wake_reader(self) -> None:
        waiter = self._readable
        if waiter is not None and not waiter.done():
            waiter.set_result(True)

    def _wake_writer(self) -> None:
        waiter = self._drained
        if waiter is not None and not waiter.done():
            waiter.set_result(None)


def _expire(waiter: asyncio.Future[bool]) -> None:
    if not waiter.done():
        waiter.set_result(False)


async def open_frame_channel(sock: socket.socket, *, limit: int) -> FrameChannel:
    """Hand an accepted socket to the event loop as a framed channel."""
    channel = FrameChannel(limit=limit)
    await asyncio.get_running_loop().connect_accepted_socket(lambda: channel, sock)
    return channel
