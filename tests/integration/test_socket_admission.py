"""Who gets served: a broken profiles file is named as such; idle peers make room for new ones."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from supervisor.client import AsyncClient
from supervisor.client_wire import RemoteError, RemoteUnauthenticated
from tests.integration.socket_helpers import served, short_dir

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
        with pytest.raises(RemoteError) as refused:
            await client.plan()
        assert refused.value.remote_code == "profiles_unreadable"
        assert cause in refused.value.detail
        assert str(s.profiles.path) in refused.value.detail
        s.profiles.path.write_text(good, encoding="utf-8")
        assert (await client.plan())["success"] is True
        # A token the intact file does not list is still just unauthenticated.
        with pytest.raises(RemoteUnauthenticated):
            await client.request("plan", {}, token="not-a-token")
