"""The heartbeat load generator: raw Unix-socket clients, a fixed number of requests in flight."""

from __future__ import annotations

import json
import selectors
import socket
import time
from collections import Counter, deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

import anyio

from bench.fixtures import REPO
from bench.processes import Sleepers
from supervisor.client import Client
from supervisor.client.frames import fenced_args
from supervisor.handle import SupervisorHandle
from supervisor.policy.identity.instance import mint_instance_id
from supervisor.wire import request_frame

__all__ = [
    "Conn",
    "Load",
    "LoadTarget",
    "beat_frames",
    "beat_through_handle",
    "drive",
    "register_sleepers",
    "verdict_of",
    "worker_claims",
]


@dataclass(slots=True)
class Conn:
    sock: socket.socket
    frames: Sequence[bytes]
    next_frame: int = 0
    sent_at: deque[float] = field(default_factory=deque)
    buffer: bytearray = field(default_factory=bytearray)

    @property
    def outstanding(self) -> int:
        return len(self.sent_at)

    def send_next(self, now: float, count: int = 1) -> None:
        """``count`` frames in one write: a pipelining client's burst."""
        chunk = []
        for _ in range(count):
            chunk.append(self.frames[self.next_frame % len(self.frames)])
            self.next_frame += 1
            self.sent_at.append(now)
        data = b"".join(chunk)
        # At most a few kB: always fits an idle Unix socket's send buffer in one send().
        sent = self.sock.send(data)
        if sent != len(data):
            raise RuntimeError("short send on an idle Unix socket")


@dataclass(slots=True)
class Load:
    connections: int
    depth: int
    acked: int = 0
    refused: Counter[str] = field(default_factory=Counter)
    seconds: float = 0.0
    latencies: list[float] = field(default_factory=list)
    daemon_cpu: float = 0.0
    client_cpu: float = 0.0

    @property
    def rate(self) -> float:
        return self.acked / self.seconds if self.seconds > 0 else 0.0


def verdict_of(line: bytes | bytearray) -> str:
    frame = json.loads(line)
    if frame.get("ok") is not True:
        return str((frame.get("error") or {}).get("code") or "error_frame")
    result = frame.get("result") or {}
    return "ok" if result.get("ok") is True else str(result.get("code") or "refused")


class LoadTarget(Protocol):
    def cpu_seconds(self) -> float: ...
    def log_tail(self) -> str: ...


def drive(
    path: Path,
    frames: Sequence[Sequence[bytes]],
    *,
    daemon: LoadTarget,
    warmup: float,
    duration: float,
    depth: int = 1,
) -> Load:
    """``depth`` requests outstanding per connection (1: strict request/answer); count the
    acknowledged beats answered in the timed window."""
    load = Load(connections=len(frames), depth=depth)
    selector = selectors.DefaultSelector()
    conns: list[Conn] = []
    try:
        for mine in frames:
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            sock.connect(str(path))
            sock.setblocking(False)
            conn = Conn(sock=sock, frames=mine)
            selector.register(sock, selectors.EVENT_READ, conn)
            conns.append(conn)
        started = time.perf_counter()
        window_start, window_end = started + warmup, started + warmup + duration
        counting = False
        cpu0 = daemon_cpu0 = 0.0
        for conn in conns:
            conn.send_next(started, depth)
        now = started
        while now < window_end:
            if not counting and now >= window_start:
                counting = True
                window_start = now
                cpu0, daemon_cpu0 = time.process_time(), daemon.cpu_seconds()
            for key, _ in selector.select(timeout=0.5):
                conn = key.data
                data = conn.sock.recv(65536)
                if not data:
                    raise RuntimeError(f"the daemon closed a connection: {daemon.log_tail()}")
                conn.buffer += data
                now = time.perf_counter()
                answered = 0
                while (end := conn.buffer.find(b"\n")) >= 0:
                    line = conn.buffer[:end]
                    del conn.buffer[: end + 1]
                    sent_at = conn.sent_at.popleft()
                    answered += 1
                    verdict = verdict_of(line)
                    if counting:
                        load.latencies.append(now - sent_at)
                        if verdict == "ok":
                            load.acked += 1
                        else:
                            load.refused[verdict] += 1
                if answered and now < window_end:
                    conn.send_next(now, answered)
            now = time.perf_counter()
        load.seconds = now - window_start
        load.client_cpu = time.process_time() - cpu0
        load.daemon_cpu = daemon.cpu_seconds() - daemon_cpu0
        # Collect the answers still in flight so the daemon is not left writing to nobody.
        deadline = time.perf_counter() + 5.0
        while any(c.outstanding for c in conns) and time.perf_counter() < deadline:
            for key, _ in selector.select(timeout=0.5):
                conn = key.data
                data = conn.sock.recv(65536)
                if not data:
                    conn.sent_at.clear()
                    continue
                conn.buffer += data
                while (end := conn.buffer.find(b"\n")) >= 0:
                    del conn.buffer[: end + 1]
                    conn.sent_at.popleft()
    finally:
        for conn in conns:
            selector.unregister(conn.sock)
            conn.sock.close()
        selector.close()
    return load


def worker_claims(index: int) -> dict[str, Any]:
    return {
        "client_name": "codex",
        "client_instance_id": mint_instance_id(
            "codex", now=datetime(2026, 1, 1, tzinfo=UTC), nonce=f"hb-{index}"
        ),
        "session_id": f"sess-hb-{index}",
        "namespace": "author",
        "role": "author",
        "profile": "prgs-author",
        "repository_binding": REPO,
    }


def register_sleepers(path: Path, sleepers: Sleepers) -> list[Mapping[str, Any]]:
    """Register every sleeper through the socket, as its parent (the peer-credential rule)."""
    registrations: list[Mapping[str, Any]] = []
    with Client(path, timeout=30.0) as client:
        for index, pid in enumerate(sleepers.pids):
            result = client.register(worker_claims(index), pid=pid)
            if result.get("ok") is not True:
                raise RuntimeError(f"registration of pid {pid} refused: {result}")
            registrations.append(result["registration"])
    return registrations


def beat_frames(registrations: Sequence[Mapping[str, Any]], connections: int) -> list[list[bytes]]:
    """Connection j beats workers j, j+C, ...; with fewer workers than connections they share."""
    frames: list[list[bytes]] = [[] for _ in range(connections)]
    count = max(connections, len(registrations))
    for k in range(count):
        registration = registrations[k % len(registrations)]
        frame = request_frame(str(k), "heartbeat", fenced_args(registration), None)
        frames[k % connections].append(frame)
    return frames


async def beat_through_handle(
    handle: SupervisorHandle,
    registrations: Sequence[Mapping[str, Any]],
    *,
    callers: int,
    warmup: float,
    duration: float,
) -> tuple[int, float]:
    """``callers`` tasks beat the registrations in turn through ``handle.heartbeat``
    (no socket); acknowledged beats counted only inside the window after ``warmup``."""
    acked = 0
    counting = False
    started = time.perf_counter()
    window_start, window_end = started + warmup, started + warmup + duration

    async def caller(offset: int) -> None:
        nonlocal acked, counting, window_start
        k = offset
        while (now := time.perf_counter()) < window_end:
            if not counting and now >= window_start:
                counting, window_start = True, now
            registration = registrations[k % len(registrations)]
            k += callers
            beat = await handle.heartbeat(
                str(registration["worker_identity"]),
                pid=int(registration["pid"]),
                generation_id=str(registration["generation_id"]),
                fencing_epoch=int(registration["fencing_epoch"]),
            )
            if not beat.ok:
                raise RuntimeError(f"heartbeat refused: {beat.code} {beat.detail}")
            if counting:
                acked += 1

    async with anyio.create_task_group() as tg:
        for offset in range(callers):
            tg.start_soon(caller, offset)
    return acked, time.perf_counter() - window_start
