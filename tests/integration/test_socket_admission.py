"""Who gets served: a broken profiles file is named as such; idle peers make room for new ones."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from supervisor.client import AsyncClient, RemoteProfilesUnreadable, RemoteUnauthenticated
from supervisor.system.unix_stream import connect_unix_stream
from tests.integration.socket_helpers import claims, read_frames, served, short_dir

pytestmark = [pytest.mark.integration, pytest.mark.anyio]


@pytest.fixture
def sock_dir() -> Iterator[Path]:
    with short_dir() as path:
        yield path


@pytest.mark.parametrize(
    ("broken", "cause"),
    [
        ("[profiles.ops-controller\nrole_kind = ", "not valid TOML"),
        (
            '[profiles.ops-controller]\nrole_kind = "controller"\n'
            'allowed_operations = "gitea.read"\n',
            "must be a list",
        ),
    ],
    ids=["unparsable", "wrong-type"],
)
async def test_a_broken_profiles_file_is_named_not_blamed_on_the_token(
    tmp_path: Path, sock_dir: Path, broken: str, cause: str
) -> None:
    async with served(tmp_path, sock_dir) as s, AsyncClient(s.path, token=s.token) as client:
        good = s.profiles.path.read_text(encoding="utf-8")
        assert (await client.plan())["success"] is True
        s.profiles.path.write_text(broken, encoding="utf-8")
        with pytest.raises(RemoteProfilesUnreadable) as refused:
            await client.plan()
        assert refused.value.remote_code == "profiles_unreadable"
        assert cause in refused.value.detail
        assert str(s.profiles.path) in refused.value.detail
        s.profiles.path.write_text(good, encoding="utf-8")
        assert (await client.plan())["success"] is True
        # A token the intact file does not list is still just unauthenticated.
        with pytest.raises(RemoteUnauthenticated):
            await client.request("plan", {}, token="not-a-token")


async def test_at_the_limit_the_connection_idle_longest_makes_room(
    tmp_path: Path, sock_dir: Path
) -> None:
    async with served(tmp_path, sock_dir, max_connections=2, evict_idle_after_seconds=0) as s:
        first, second = await connect_unix_stream(s.path), await connect_unix_stream(s.path)
        for stream in (first, second):  # answered, so counted and now idle; first the longest
            await stream.send(b"{}\n")
            assert b"bad_request" in await stream.receive()
        [answer] = await read_frames(s.path, b"{}\n", count=1)
        assert answer["error"]["code"] == "bad_request"  # served, not server_busy
        with pytest.raises(anyio.EndOfStream):
            await first.receive()  # the one evicted
        await second.send(b"{}\n")
        assert b"bad_request" in await second.receive()
        await first.aclose()
        await second.aclose()


async def test_a_worker_whose_idle_connection_was_evicted_keeps_heartbeating(
    tmp_path: Path, sock_dir: Path
) -> None:
    async with (
        served(tmp_path, sock_dir, max_connections=1, evict_idle_after_seconds=0) as s,
        AsyncClient(s.path) as worker,
    ):
        registration = (await worker.register(claims()))["registration"]
        async with AsyncClient(s.path) as newcomer:
            assert (await newcomer.heartbeat(registration))["ok"] is True
        # The worker's connection was closed to admit the newcomer; it reconnects.
        assert (await worker.heartbeat(registration))["ok"] is True


async def test_no_connection_is_evicted_before_it_was_idle_long_enough(
    tmp_path: Path, sock_dir: Path
) -> None:
    async with (
        served(tmp_path, sock_dir, max_connections=1, evict_idle_after_seconds=3600) as s,
        AsyncClient(s.path) as worker,
    ):
        registration = (await worker.register(claims()))["registration"]
        [busy] = await read_frames(s.path, b"", count=1)
        assert busy["error"]["code"] == "server_busy"
        assert (await worker.heartbeat(registration))["ok"] is True
