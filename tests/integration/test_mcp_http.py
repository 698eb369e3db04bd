"""The fleet tools over streamable HTTP on loopback: bearer tokens from the profiles file."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from supervisor.errors import ConfigError
from supervisor.policy.control.permissions import Profile
from supervisor.settings.profiles import ProfileBook, hash_token
from supervisor.surfaces.mcp.fleet_tools import APPLY_TOOL, PLAN_TOOL, TOOL_NAMES
from supervisor.surfaces.mcp.http import serve_mcp_http
from supervisor.surfaces.mcp.operation_tools import HEARTBEAT_TOOL
from tests.actors.harness import AUTHOR, READER, RETIRER, Harness, harness
from tests.actors.helpers_retirement import status_of
from tests.integration.helpers_mcp import call, call_error, stale_fleet

pytestmark = [pytest.mark.integration, pytest.mark.anyio]

TOKENS = {READER.name: "reader-token", RETIRER.name: "retirer-token", AUTHOR.name: "author-tok"}
_INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "test", "version": "0"},
    },
}
_HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


def _toml_list(values: frozenset[str]) -> str:
    return "[" + ", ".join(f'"{v}"' for v in sorted(values)) + "]"


def write_profiles(path: Path, profiles: tuple[Profile, ...]) -> None:
    """The harness profiles, each proven by its token in TOKENS."""
    tables = [
        f"[profiles.{p.name}]\n"
        f'role_kind = "{p.role_kind}"\n'
        f"allowed_operations = {_toml_list(p.allowed_operations)}\n"
        f'token_sha256 = ["{hash_token(TOKENS[p.name])}"]\n'
        for p in profiles
    ]
    path.write_text("\n".join(tables), encoding="utf-8")


@asynccontextmanager
async def http_tools(h: Harness, tmp_path: Path) -> AsyncIterator[tuple[str, Path]]:
    path = tmp_path / "profiles.toml"
    write_profiles(path, (READER, RETIRER, AUTHOR))
    async with anyio.create_task_group() as tg:
        url = await tg.start(
            lambda task_status: serve_mcp_http(
                h.handle, profiles=ProfileBook(path), port=0, task_status=task_status
            )
        )
        yield str(url), path
        tg.cancel_scope.cancel()


@asynccontextmanager
async def client_for(url: str, token: str) -> AsyncIterator[Client]:
    headers = {"Authorization": f"Bearer {token}"}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=30.0) as http,
        Client(streamable_http_client(url, http_client=http)) as client,
    ):
        yield client


async def raw_post(url: str, headers: dict[str, str]) -> int:
    async with httpx2.AsyncClient(timeout=30.0) as http:
        response = await http.post(url, json=_INITIALIZE, headers={**_HEADERS, **headers})
        return response.status_code


async def test_each_token_acts_as_its_own_profile(tmp_path: Path) -> None:
    async with harness(tmp_path) as h:
        dead, alive = await stale_fleet(h)
        async with http_tools(h, tmp_path) as (url, _):
            assert url.startswith("http://127.0.0.1:")
            assert url.endswith("/mcp")
            async with client_for(url, TOKENS[AUTHOR.name]) as author:
                names = {tool.name for tool in (await author.list_tools()).tools}
                denied = await call_error(author, PLAN_TOOL)
            async with client_for(url, TOKENS[RETIRER.name]) as retirer:
                planned = await call(retirer, PLAN_TOOL)
                applied = await call(
                    retirer,
                    APPLY_TOOL,
                    registry_fingerprint=planned["registry_fingerprint"],
                    candidate_fingerprint=planned["candidate_fingerprint"],
                    worker_identities=planned["candidate_worker_identities"],
                )
        assert await status_of(h, dead["worker_identity"]) == "retired"
        assert await status_of(h, alive["worker_identity"]) == "active"

    assert set(TOOL_NAMES) <= names
    assert denied["success"] is False
    assert denied["permission"]["role_kind"] == "author"
    assert planned["profile"] == RETIRER.name
    assert planned["candidate_worker_identities"] == [dead["worker_identity"]]
    assert applied["outcome"] == "applied"
    assert applied["profile"] == RETIRER.name


async def test_requests_without_a_known_token_get_401(tmp_path: Path) -> None:
    async with harness(tmp_path) as h, http_tools(h, tmp_path) as (url, _):
        missing = await raw_post(url, {})
        unknown = await raw_post(url, {"Authorization": "Bearer not-a-token"})
        known = await raw_post(url, {"Authorization": f"Bearer {TOKENS[READER.name]}"})

        audit = await h.store.read_audit()

    assert (missing, unknown) == (401, 401)
    assert known == 200
    # Both are denials like any other: audited, without the token itself.
    events = [e for e in audit if e["outcome"] == "unauthenticated"]
    assert [e["detail"]["reasons"] for e in events] == [
        ["no bearer token was given"],
        ["the bearer token proves no profile"],
    ]
    assert {(e["action"], e["actor"], e["detail"]["surface"]) for e in events} == {
        ("mcp_http_request", None, "mcp_http")
    }
    assert "not-a-token" not in str(events)


async def test_a_token_removed_from_the_file_stops_working(tmp_path: Path) -> None:
    async with harness(tmp_path) as h, http_tools(h, tmp_path) as (url, path):
        bearer = {"Authorization": f"Bearer {TOKENS[RETIRER.name]}"}
        before = await raw_post(url, bearer)
        write_profiles(path, (READER, AUTHOR))
        after = await raw_post(url, bearer)

    assert (before, after) == (200, 401)


async def test_foreign_host_headers_are_rejected(tmp_path: Path) -> None:
    async with harness(tmp_path) as h, http_tools(h, tmp_path) as (url, _):
        status = await raw_post(
            url,
            {"Authorization": f"Bearer {TOKENS[READER.name]}", "Host": "fleet.example.com"},
        )

    assert status in (403, 421)


@pytest.mark.parametrize("host", ["0.0.0.0", "192.0.2.10", "localhost", "example.com"])
async def test_non_loopback_hosts_are_refused(tmp_path: Path, host: str) -> None:
    path = tmp_path / "profiles.toml"
    write_profiles(path, (READER,))
    async with harness(tmp_path) as h:
        with pytest.raises(ConfigError, match="loopback"):
            await serve_mcp_http(h.handle, profiles=ProfileBook(path), host=host, port=0)


async def test_a_broken_profiles_file_is_named_not_blamed_on_the_token(tmp_path: Path) -> None:
    async with harness(tmp_path) as h, http_tools(h, tmp_path) as (url, path):
        bearer = {"Authorization": f"Bearer {TOKENS[READER.name]}"}
        good = path.read_text(encoding="utf-8")
        path.write_text("[profiles.broken\n", encoding="utf-8")
        async with httpx2.AsyncClient(timeout=30.0) as http:
            refused = await http.post(url, json=_INITIALIZE, headers={**_HEADERS, **bearer})
        missing = await raw_post(url, {})
        # Audited (committed) before the 503 went out, as every denial is.
        audit = [e for e in await h.store.read_audit() if e["outcome"] == "profiles_unreadable"]
        path.write_text(good, encoding="utf-8")
        after = await raw_post(url, bearer)

    [event] = audit
    assert (event["actor"], event["action"]) == (None, "mcp_http_request")
    assert event["detail"]["surface"] == "mcp_http"
    assert event["detail"]["reasons"] == [refused.json()["error_description"]]
    assert TOKENS[READER.name] not in str(event)
    assert refused.status_code == 503
    assert refused.json()["error"] == "profiles_unreadable"
    assert "not valid TOML" in refused.json()["error_description"]
    assert missing == 401  # no token at all is still the caller's problem
    assert after == 200


async def test_every_request_with_a_readable_id_is_answered_by_that_id(tmp_path: Path) -> None:
    # The SDK answered these with id null (-32602 for any shape problem, -32700 for a lone
    # surrogate its strict parser refuses), so the client could not tell which request failed.
    bearer = {**_HEADERS, "Authorization": f"Bearer {TOKENS[READER.name]}"}
    bodies = [
        b'{"jsonrpc":"2.0","id":7,"method":"tools/call","params":"x"}',
        b'{"jsonrpc":"2.0","id":"eight","method":"tools/list","params":[1]}',
        b'{"jsonrpc":"2.0","id":9,"params":{}}',
        b'{"jsonrpc":"1.0","id":10,"method":"tools/list"}',
        b'{"jsonrpc":"2.0","id":11,"method":"tools/list","params":{"a":"\\ud800"}}',
        b"not json",
    ]
    async with (
        harness(tmp_path) as h,
        http_tools(h, tmp_path) as (url, _),
        httpx2.AsyncClient(timeout=30.0) as http,
    ):
        started = await http.post(url, json=_INITIALIZE, headers=bearer)
        session = {
            **bearer,
            "mcp-session-id": started.headers["mcp-session-id"],
            "mcp-protocol-version": "2025-06-18",
        }
        answers = [await http.post(url, content=body, headers=session) for body in bodies]
        # Before a session too, and on the SDK's newer-protocol path.
        fresh = await http.post(url, content=bodies[0], headers=bearer)
        modern = await http.post(
            url, content=bodies[0], headers={**bearer, "mcp-protocol-version": "2026-07-28"}
        )
        unauthenticated = await http.post(url, content=bodies[0], headers=_HEADERS)
        # A well-formed request is answered as before.
        listed = await http.post(
            url, json={"jsonrpc": "2.0", "id": 12, "method": "tools/list"}, headers=session
        )

    assert [(a.status_code, a.json()["id"], a.json()["error"]["code"]) for a in answers] == [
        (400, 7, -32602),
        (400, "eight", -32602),
        (400, 9, -32600),
        (400, 10, -32600),
        (400, 11, -32600),
        (400, None, -32700),  # no id to read: a parse error, as JSON-RPC says
    ]
    assert "params must be a JSON object" in answers[0].json()["error"]["message"]
    for answer in (fresh, modern):
        assert (answer.status_code, answer.json()["id"]) == (400, 7)
        assert answer.json()["error"]["code"] == -32602
    assert int(answers[0].headers["content-length"]) == len(answers[0].content)
    assert unauthenticated.status_code == 401  # authentication still comes first
    assert listed.status_code == 200
    assert '"id":12' in listed.text


async def test_a_control_plane_denial_is_coded_and_audited(tmp_path: Path) -> None:
    async with harness(tmp_path) as h, http_tools(h, tmp_path) as (url, _):
        async with client_for(url, TOKENS[AUTHOR.name]) as author:
            denied = await call_error(author, HEARTBEAT_TOOL, session_id="s-1", lease_id="l-1")
        # Read once the answer is in: the row was committed before it was sent.
        audit = [e for e in await h.store.read_audit() if e["action"] == "lease_heartbeat"]

    assert (denied["code"], denied["denied"], denied["outcome"]) == (
        "permission_denied",
        True,
        "refused",
    )
    [event] = audit
    assert (event["actor"], event["role"], event["outcome"]) == (AUTHOR.name, "author", "refused")
    assert event["detail"]["code"] == "permission_denied"
    assert event["detail"]["reasons"] == denied["reasons"]
