"""Shared set-up for socket and client tests: a harness supervisor served on a short socket path."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import anyio

from supervisor.handle.hosts import HostLeaseCalls
from supervisor.settings.config import SocketConfig
from supervisor.settings.profile_edits import create_token
from supervisor.settings.profiles import ProfileBook
from supervisor.surfaces.socket.server import CredentialsReader, serve_socket
from supervisor.system.peers import peer_credentials
from supervisor.system.unix_stream import connect_unix_stream
from tests.actors.harness import INSTANCE, REPO, Harness
from tests.actors.helpers_app import SettledHarness, harness

__all__ = [
    "PROFILES_TOML",
    "SELF_START",
    "Served",
    "claims",
    "read_frames",
    "serve",
    "served",
    "short_dir",
    "write_profiles",
]

#: The start-time token the scripted probes report for this test process.
SELF_START = "ticks-self"

PROFILES_TOML = """\
# Profiles for the socket tests.
[profiles.ops-controller]
role_kind = "controller"
allowed_operations = ["gitea.read"]

[profiles.ops-author]
role_kind = "author"
allowed_operations = ["gitea.read"]

[profiles.ops-bystander]
role_kind = "reviewer"
allowed_operations = []
"""


@contextmanager
def short_dir() -> Iterator[Path]:
    """A directory short enough for AF_UNIX paths (pytest's tmp_path can exceed 108 bytes)."""
    path = Path(tempfile.mkdtemp(prefix="fsk-", dir="/tmp"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def write_profiles(directory: Path) -> tuple[ProfileBook, dict[str, str]]:
    """A profiles file with one token per profile; returns the book and name → token."""
    path = directory / "profiles.toml"
    path.write_text(PROFILES_TOML, encoding="utf-8")
    names = ("ops-controller", "ops-author", "ops-bystander")
    tokens = {name: create_token(path, name) for name in names}
    return ProfileBook(path), tokens


def claims(**overrides: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "client_name": "codex",
        "client_instance_id": INSTANCE,
        "session_id": f"sess-{os.getpid()}",
        "namespace": "author",
        "role": "author",
        "profile": "prgs-author",
        "repository_binding": REPO,
    }
    base.update(overrides)
    return base


@dataclass
class Served:
    h: SettledHarness
    path: Path
    config: SocketConfig
    profiles: ProfileBook
    tokens: dict[str, str] = field(default_factory=dict)

    @property
    def token(self) -> str:
        """A controller token: gitea.read, no retire grant."""
        return self.tokens["ops-controller"]


@asynccontextmanager
async def serve(
    h: Harness,
    config: SocketConfig,
    profiles: ProfileBook,
    *,
    credentials: CredentialsReader = peer_credentials,
    hosts: HostLeaseCalls | None = None,
) -> AsyncIterator[Path]:
    """Run ``serve_socket`` for the supervisor in ``h`` until the block ends (with
    ``hosts``, the host lease ops are served too, as the daemon does)."""
    async with anyio.create_task_group() as tg:
        path: Path = await tg.start(
            partial(
                serve_socket,
                h.handle,
                settings=config,
                profiles=profiles,
                probes=h.probes,
                credentials=credentials,
                hosts=hosts,
            )
        )
        try:
            yield path
        finally:
            tg.cancel_scope.cancel()


@asynccontextmanager
async def served(
    tmp_path: Path,
    sock_dir: Path,
    *,
    credentials: CredentialsReader = peer_credentials,
    **socket: Any,
) -> AsyncIterator[Served]:
    """A harness supervisor, with this process scripted alive, served on ``sock_dir``."""
    book, tokens = write_profiles(tmp_path)
    config = SocketConfig(path=sock_dir / "s.sock", **socket)
    async with harness(tmp_path) as h:
        h.probes.set(os.getpid(), alive=True, start_time=SELF_START, cwd=REPO)
        async with serve(h, config, book, credentials=credentials) as path:
            yield Served(h=h, path=path, config=config, profiles=book, tokens=tokens)


async def read_frames(path: Path, payload: bytes, *, count: int) -> list[dict[str, Any]]:
    """Send raw bytes on a fresh connection and read ``count`` answer frames."""
    frames: list[dict[str, Any]] = []
    async with await connect_unix_stream(path) as stream:
        await stream.send(payload)
        buffer = b""
        while len(frames) < count:
            chunk = await stream.receive()
            buffer += chunk
            while b"\n" in buffer:
                line, buffer = buffer.split(b"\n", 1)
                frames.append(json.loads(line))
    return frames
