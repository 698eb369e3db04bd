"""Request/response connections to a running supervisor's socket, async and sync, one at a time."""

from __future__ import annotations

import contextlib
import itertools
import os
import socket
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, Self

import anyio
from anyio.streams.buffered import BufferedByteReceiveStream

from supervisor.client.frames import (
    MAX_RESPONSE_BYTES,
    RemoteError,
    apply_args,
    connection_dropped,
    fenced_args,
    parse_result,
    register_args,
    snapshot_args,
)
from supervisor.errors import ProtocolError, Unavailable
from supervisor.system.unix_stream import UnixStream, connect_unix_stream
from supervisor.wire import PlanQuery, query_args, request_frame

__all__ = ["AsyncClient", "Client"]

_RECV_CHUNK = 65536


class AsyncClient:
    """One connection to the supervisor; requests on it are serialized by a lock.

    The connection is made on entry (or on first use) and remade when the
    server has closed it while idle; a failure mid-request drops it.
    """

    def __init__(
        self,
        socket_path: str | os.PathLike[str],
        *,
        token: str | None = None,
        timeout: float = 30.0,
    ) -> None:
        self.socket_path = Path(socket_path)
        self.token = token
        self.timeout = timeout
        self._stream: UnixStream | None = None
        self._reader: BufferedByteReceiveStream | None = None
        self._lock = anyio.Lock()
        self._ids = itertools.count(1)

    async def __aenter__(self) -> Self:
        await self.connect()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def connect(self) -> None:
        if self._stream is not None:
            return
        try:
            with anyio.fail_after(self.timeout):
                stream = await connect_unix_stream(self.socket_path)
        except (OSError, TimeoutError) as exc:
            raise Unavailable(f"cannot reach the supervisor at {self.socket_path}: {exc}") from None
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
            request_id = str(next(self._ids))
            frame = request_frame(
                request_id, op, args or {}, token if token is not None else self.token
            )
            try:
                with anyio.fail_after(self.timeout):
                    # The server may have refused the frame part-way (too large) and hung
                    # up: its answer is still there to read, and says more than a reset.
                    with contextlib.suppress(anyio.BrokenResourceError):
                        await self._stream.send(frame)
                    line = await self._reader.receive_until(b"\n", MAX_RESPONSE_BYTES)
            except TimeoutError:
                await self.aclose()
                raise Unavailable(f"no answer to {op} within {self.timeout}s") from None
            except anyio.DelimiterNotFound:
                await self.aclose()
                raise ProtocolError(
                    "the supervisor's answer exceeds the client's size limit"
                ) from None
            except (anyio.EndOfStream, anyio.IncompleteRead, anyio.BrokenResourceError, OSError):
                await self.aclose()
                raise Unavailable(f"the supervisor closed the connection during {op}") from None
            except BaseException:
                # Cancelled mid-request: the answer would arrive for nobody, so never reuse.
                await self.aclose()
                raise
            try:
                return parse_result(line, request_id)
            except ProtocolError as exc:
                if not isinstance(exc, RemoteError):
                    await self.aclose()  # out of step with the server
                raise

    async def register(
        self, claims: Mapping[str, Any], pid: int | None = None
    ) -> Mapping[str, Any]:
        return await self.request("register", register_args(claims, pid))

    async def heartbeat(self, registration: Mapping[str, Any]) -> Mapping[str, Any]:
        return await self.request("heartbeat", fenced_args(registration))

    async def release(self, registration: Mapping[str, Any]) -> Mapping[str, Any]:
        return await self.request("release", fenced_args(registration))

    async def snapshot(
        self,
        *,
        canonical_repository: str | None = None,
        expected_manifest: Sequence[Mapping[str, Any]] | None = None,
        expected_live_revision: str | None = None,
        include_history: bool = False,
    ) -> Mapping[str, Any]:
        args = snapshot_args(
            canonical_repository, expected_manifest, expected_live_revision, include_history
        )
        return await self.request("snapshot", args)

    async def plan(
        self, *, canonical_repository: str | None = None, query: PlanQuery | None = None
    ) -> Mapping[str, Any]:
        return await self.request(
            "plan", {"canonical_repository": canonical_repository, **query_args(query)}
        )

    async def apply(
        self,
        *,
        candidate_fingerprint: str,
        worker_identities: Sequence[str],
        registry_fingerprint: str | None = None,
        scope_fingerprint: str | None = None,
        canonical_repository: str | None = None,
        override_mass_guard: bool = False,
    ) -> Mapping[str, Any]:
        args = apply_args(
            candidate_fingerprint,
            worker_identities,
            registry_fingerprint,
            scope_fingerprint,
            canonical_repository,
            override_mass_guard=override_mass_guard,
        )
        return await self.request("apply", args)

    async def status(self) -> Mapping[str, Any]:
        return await self.request("status")


class Client:
    """The same API as ``AsyncClient``, blocking, over the standard ``socket`` module."""

    def __init__(
        self,
        socket_path: str | os.PathLike[str],
        *,
        token: str | None = None,
        timeout: float = 30.0,
    ) -> None:
        self.socket_path = Path(socket_path)
        self.token = token
        self.timeout = timeout
        self._sock: socket.socket | None = None
        self._buffer = bytearray()
        self._lock = threading.Lock()
        self._ids = itertools.count(1)

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
            raise Unavailable(f"cannot reach the supervisor at {self.socket_path}: {exc}") from None
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
                raise ProtocolError("the supervisor's answer exceeds the client's size limit")
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
            request_id = str(next(self._ids))
            frame = request_frame(
                request_id, op, args or {}, token if token is not None else self.token
            )
            try:
                with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                    # As in AsyncClient.request: a refusal may be waiting behind the hang-up.
                    sock.sendall(frame)
                line = self._readline(sock)
            except TimeoutError:
                self.close()
                raise Unavailable(f"no answer to {op} within {self.timeout}s") from None
            except (EOFError, OSError):
                self.close()
                raise Unavailable(f"the supervisor closed the connection during {op}") from None
            except BaseException:
                self.close()
                raise
            try:
                return parse_result(line, request_id)
            except ProtocolError as exc:
                if not isinstance(exc, RemoteError):
                    self.close()
                raise

    def register(self, claims: Mapping[str, Any], pid: int | None = None) -> Mapping[str, Any]:
        return self.request("register", register_args(claims, pid))

    def heartbeat(self, registration: Mapping[str, Any]) -> Mapping[str, Any]:
        return self.request("heartbeat", fenced_args(registration))

    def release(self, registration: Mapping[str, Any]) -> Mapping[str, Any]:
        return self.request("release", fenced_args(registration))

    def snapshot(
        self,
        *,
        canonical_repository: str | None = None,
        expected_manifest: Sequence[Mapping[str, Any]] | None = None,
        expected_live_revision: str | None = None,
        include_history: bool = False,
    ) -> Mapping[str, Any]:
        args = snapshot_args(
            canonical_repository, expected_manifest, expected_live_revision, include_history
        )
        return self.request("snapshot", args)

    def plan(
        self, *, canonical_repository: str | None = None, query: PlanQuery | None = None
    ) -> Mapping[str, Any]:
        return self.request(
            "plan", {"canonical_repository": canonical_repository, **query_args(query)}
        )

    def apply(
        self,
        *,
        candidate_fingerprint: str,
        worker_identities: Sequence[str],
        registry_fingerprint: str | None = None,
        scope_fingerprint: str | None = None,
        canonical_repository: str | None = None,
        override_mass_guard: bool = False,
    ) -> Mapping[str, Any]:
        args = apply_args(
            candidate_fingerprint,
            worker_identities,
            registry_fingerprint,
            scope_fingerprint,
            canonical_repository,
            override_mass_guard=override_mass_guard,
        )
        return self.request("apply", args)

    def status(self) -> Mapping[str, Any]:
        return self.request("status")
