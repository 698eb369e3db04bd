"""The read-only fleet page: its token/uid gate, its JSON, and the page in headless Chromium."""

from __future__ import annotations

import os
import re
import shutil
import socket
import struct
import zlib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import httpx2
import pytest

from supervisor.daemon.ops import OpsState
from supervisor.surfaces.http.fleet_page import FleetPage
from supervisor.surfaces.http.ops import OpsRoutes, serve_ops_http
from supervisor.system.peers import PeerUidLookup, loopback_peer_uid
from tests.actors.harness import INSTANCE
from tests.actors.helpers_app import SettledHarness, harness
from tests.integration.socket_helpers import write_profiles

pytestmark = [pytest.mark.integration, pytest.mark.anyio]

WINDOW = (1200, 900)


def stranger(_ours: tuple[str, int], _peer: tuple[str, int]) -> int | None:
    return os.geteuid() + 1


@asynccontextmanager
async def page_server(
    h: SettledHarness, tmp_path: Path, *, peer_uid: PeerUidLookup = loopback_peer_uid
) -> AsyncIterator[tuple[str, dict[str, str]]]:
    book, tokens = write_profiles(tmp_path)
    state = OpsState(h.supervisor, h.supervisor.metrics, book)
    routes = OpsRoutes(h.handle, h.supervisor.metrics, state.health, FleetPage(h.handle, book))
    async with anyio.create_task_group() as tg:
        url = await tg.start(
            lambda task_status: serve_ops_http(
                routes, host="127.0.0.1", port=0, peer_uid=peer_uid, task_status=task_status
            )
        )
        yield str(url), tokens
        tg.cancel_scope.cancel()


async def a_fleet(h: SettledHarness) -> dict[str, str]:
    """Two live workers of one launch, one stale row and one orphan."""
    author = await h.register(namespace="author")
    await h.register(namespace="reviewer")
    client = h.spawn(start="ticks-client")
    orphan = await h.register(
        namespace="merger", client_pid=client, client_process_start_time="ticks-client"
    )
    h.probes.kill(client)
    stale = await h.register(namespace="controller")
    h.probes.kill(int(stale["pid"]))
    await h.advance(5.0)
    return {
        "author": str(author["worker_identity"]),
        "orphan": str(orphan["worker_identity"]),
        "stale": str(stale["worker_identity"]),
    }


async def get(url: str, **headers: str) -> httpx2.Response:
    async with httpx2.AsyncClient(timeout=30.0) as client:
        return await client.get(url, headers=headers)


async def test_same_uid_reads_the_fleet_without_a_token(tmp_path: Path) -> None:
    async with harness(tmp_path) as h, page_server(h, tmp_path) as (url, _):
        ids = await a_fleet(h)
        page = await get(f"{url}/")
        fleet = await get(f"{url}/api/fleet")
        plan = await get(f"{url}/api/plan")
    assert page.status_code == 200
    assert page.headers["content-type"].startswith("text/html")
    assert page.headers["x-frame-options"] == "DENY"
    body = fleet.json()
    assert body["viewer"] == "local-owner"
    assert {w["worker_identity"] for w in body["workers"]} >= set(ids.values())
    assert [o["worker_identity"] for o in body["orphaned_workers"]] == [ids["orphan"]]
    assert body["leases"]["readable"] is True
    assert plan.json()["outcome"] == "planned"


async def test_another_uid_needs_a_token(tmp_path: Path) -> None:
    async with harness(tmp_path) as h, page_server(h, tmp_path, peer_uid=stranger) as (url, tokens):
        refused = await get(f"{url}/api/fleet")
        forged = await get(f"{url}/api/fleet", authorization="Bearer not-a-token")
        by_header = await get(
            f"{url}/api/fleet", authorization=f"Bearer {tokens['ops-controller']}"
        )
        by_query = await get(f"{url}/?token={tokens['ops-controller']}")
        page_refused = await get(f"{url}/")
        # The gate sits in front of the page only: metrics and health stay open on loopback.
        metrics = await get(f"{url}/metrics")
    assert refused.status_code == 401
    assert refused.json()["error"] == "unauthenticated"
    assert forged.status_code == 401
    assert by_header.status_code == 200
    assert by_header.json()["viewer"] == "ops-controller"
    assert by_query.status_code == 200
    assert page_refused.status_code == 401
    assert metrics.status_code == 200


async def test_a_rebound_dns_name_is_refused_even_for_the_same_uid(tmp_path: Path) -> None:
    async with harness(tmp_path) as h, page_server(h, tmp_path) as (url, _):
        rebound = await get(f"{url}/api/fleet", host="attacker.example:9464")
        local = await get(f"{url}/api/fleet", host="localhost")
    assert rebound.status_code == 401
    assert "Host header" in rebound.json()["detail"]
    assert local.status_code == 200


def test_the_uid_of_a_loopback_peer_is_read_from_proc() -> None:
    for family, host in ((socket.AF_INET, "127.0.0.1"), (socket.AF_INET6, "::1")):
        with socket.socket(family) as server, socket.socket(family) as client:
            server.bind((host, 0))
            server.listen()
            client.connect(server.getsockname()[:2])
            conn, peer = server.accept()
            with conn:
                ours = conn.getsockname()[:2]
                assert loopback_peer_uid(ours, peer[:2]) == os.geteuid()
                assert loopback_peer_uid(ours, (host, 1)) is None
    assert loopback_peer_uid(("10.0.0.1", 80), ("10.0.0.2", 5000)) is None


# --- headless Chromium ------------------------------------------------------------


def chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    assert found, "headless Chromium is required: apt-get install -y chromium (tests/run.sh does)"
    return found


def chromium_argv(profile: Path, *args: str) -> list[str]:
    """Headless Chromium with a profile of its own, a fixed window, then ``args``."""
    return [
        chromium(),
        "--headless",
        "--no-sandbox",  # runs as root in CI containers
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--no-first-run",
        "--hide-scrollbars",
        f"--user-data-dir={profile}",
        f"--window-size={WINDOW[0]},{WINDOW[1]}",
        *args,
    ]


async def run_chromium(tmp_path: Path, *args: str) -> str:
    # Virtual time: the page's fetches complete and its scripts run before the dump.
    command = chromium_argv(tmp_path / "chromium-profile", "--virtual-time-budget=15000", *args)
    with anyio.fail_after(90):  # a hang guard, not a timing assertion
        done = await anyio.run_process(command, check=False)
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    return done.stdout.decode()


def png_facts(path: Path) -> tuple[int, int, int]:
    """Width, height and the number of distinct scanline bytes of an 8-bit RGB(A) PNG."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", data[16:24])
    idat, position = b"", 8
    while position < len(data):
        (length,) = struct.unpack(">I", data[position : position + 4])
        kind = data[position + 4 : position + 8]
        if kind == b"IDAT":
            idat += data[position + 8 : position + 8 + length]
        position += 12 + length
    return width, height, len(set(zlib.decompress(idat)))


async def test_the_page_renders_the_fleet_in_headless_chromium(tmp_path: Path) -> None:
    async with harness(tmp_path) as h, page_server(h, tmp_path) as (url, _):
        ids = await a_fleet(h)
        dom = await run_chromium(tmp_path, "--dump-dom", f"{url}/?plan=1")
        # FLEET_PAGE_SCREENSHOT=/some/file.png keeps the screenshot for a human to look at.
        shot = Path(os.environ.get("FLEET_PAGE_SCREENSHOT", tmp_path / "fleet.png"))
        await run_chromium(tmp_path, f"--screenshot={shot}", f"{url}/?plan=1")
    assert 'data-loaded="1"' in dom
    # Live refresh: 15 virtual seconds at one fetch per 5 s re-render the fleet.
    refreshes = re.search(r'data-refreshes="(\d+)"', dom)
    assert refreshes is not None
    assert int(refreshes.group(1)) >= 3
    text = re.sub(r"<[^>]+>", " ", dom)
    assert INSTANCE in text
    summary = dom[dom.index('id="summary"') : dom.index('id="error"')]
    for figure in ("live 3", "stale 1", "orphaned 1"):
        assert figure in summary
    stale_table = dom[dom.index('id="stale"') : dom.index('id="orphans"')]
    assert ids["stale"] in stale_table
    assert ids["author"] not in stale_table
    orphan_table = dom[dom.index('id="orphans"') : dom.index('id="leases"')]
    assert ids["orphan"] in orphan_table
    assert "launching_client_exited" in orphan_table
    plan = dom[dom.index('id="plan"') :]
    assert "worker_live" in plan  # the live workers' reason code in the plan preview
    width, height, distinct = png_facts(shot)
    assert (width, height) == WINDOW
    assert distinct > 20  # text, tables and colours, not a blank or error page


async def test_refusals_of_the_page_are_audited(tmp_path: Path) -> None:
    async with harness(tmp_path) as h, page_server(h, tmp_path, peer_uid=stranger) as (url, tokens):
        refused = await get(f"{url}/api/fleet")
        (tmp_path / "profiles.toml").write_text("[profiles.broken\n", encoding="utf-8")
        unreadable = await get(
            f"{url}/api/fleet", authorization=f"Bearer {tokens['ops-controller']}"
        )
        # Read once the answers are in: each row was committed before its refusal was sent.
        audit = await h.store.read_audit()
    assert refused.status_code == 401
    assert unreadable.status_code == 503
    assert unreadable.json()["error"] == "profiles_unreadable"
    rows = [(e["outcome"], e["action"], e["detail"]["surface"]) for e in audit]
    assert rows == [
        ("unauthenticated", "/api/fleet", "fleet_page"),
        ("profiles_unreadable", "/api/fleet", "fleet_page"),
    ]
    assert audit[1]["detail"]["reasons"] == [unreadable.json()["detail"]]
    assert tokens["ops-controller"] not in str(audit)
