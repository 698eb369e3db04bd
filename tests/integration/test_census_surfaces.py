"""The host's MCP servers on every surface: status, snapshot, the fleet page, /metrics."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from actors.census.actor import CensusSettings
from supervisor.cli.format import format_snapshot, format_status
from supervisor.surfaces.socket.status import ServerFigures, status_report
from tests.actors.harness import READER, default_settings
from tests.actors.helpers_app import SettledHarness, harness
from tests.integration.test_fleet_page import get, page_server, run_chromium
from tests.process_trees.trees import Tree, child, io_quiet, processes, start_tree
from tests.spawned import Spawned

pytestmark = [pytest.mark.integration, pytest.mark.anyio]


@asynccontextmanager
async def census_harness(tmp_path: Path) -> AsyncIterator[SettledHarness]:
    settings = dataclasses.replace(default_settings(), census=CensusSettings(home=tmp_path))
    async with harness(tmp_path, settings=settings) as h:
        yield h


def two_duplicates(spawned: Spawned) -> Tree:
    return start_tree(spawned, "claude", [child("mcp-fake-server"), child("mcp-fake-server")])


async def test_status_and_snapshot_show_the_servers_and_their_duplicates(tmp_path: Path) -> None:
    with processes() as spawned:
        tree = two_duplicates(spawned)
        async with census_harness(tmp_path) as h:
            await h.handle.census(fresh=True)
            figures = ServerFigures(
                socket_path=tmp_path / "s.sock", active_connections=0, max_connections=1
            )
            status = await status_report(h.handle, None, figures)
            snapshot = await h.handle.snapshot(READER)
    ours = [s for s in snapshot["mcp_servers"] if s["process"]["pid"] in tree.children]
    assert len(ours) == 2
    assert status["servers"]["servers"] >= 2
    assert status["servers"]["duplicate_groups"] >= 1
    group = next(
        g
        for g in snapshot["mcp_server_duplicates"]
        if {r["pid"] for r in g["servers"]} == set(tree.children)
    )
    assert list(group["clients"]) == ["claude_code", "claude_code"]
    assert group["repeated_bytes"] > 0
    assert "mcp servers:" in format_status(status)
    text = format_snapshot(snapshot)
    for pid in tree.children:
        assert str(pid) in text
    assert "duplicate: " in text


async def test_the_page_charts_the_servers_and_metrics_carry_the_gauges(tmp_path: Path) -> None:
    with processes() as spawned:
        tree = two_duplicates(spawned)
        async with census_harness(tmp_path) as h, page_server(h, tmp_path) as (url, _):
            await h.handle.census(fresh=True)
            servers = (await get(f"{url}/api/servers")).json()
            metrics = (await get(f"{url}/metrics")).text
            dom = await run_chromium(tmp_path, "--dump-dom", f"{url}/")
    assert {s["process"]["pid"] for s in servers["servers"]} >= set(tree.children)
    assert servers["history"][-1]["duplicate_groups"] >= 1
    assert 'data-servers-loaded="1"' in dom
    table = dom[dom.index('id="servers"') : dom.index('id="duplicates"')]
    for pid in tree.children:
        assert f">{pid}<" in table
    client_chart = dom[dom.index('id="chart-client"') : dom.index('id="chart-command"')]
    assert 'data-label="claude_code"' in client_chart
    history_chart = dom[dom.index('id="chart-history"') : dom.index('id="servers"')]
    assert 'data-series="duplicate_groups"' in history_chart
    observed = re.search(r'^fleet_mcp_servers\{provenance="observed"\} (\S+)$', metrics, re.M)
    assert observed is not None
    assert float(observed.group(1)) >= 2
    assert re.search(r'^fleet_mcp_server_memory_bytes\{client="claude_code"\} ', metrics, re.M)
    assert "fleet_mcp_server_duplicate_groups" in metrics
    assert "fleet_mcp_servers_orphaned" in metrics


async def test_each_servers_idle_time_shows_on_every_surface(tmp_path: Path) -> None:
    # The counters never move: the idle time is the virtual time since first sight.
    with processes() as spawned:
        tree = start_tree(spawned, "claude", [child("mcp-fake-server")])
        (pid,) = tree.children
        io_quiet(pid)
        async with census_harness(tmp_path) as h, page_server(h, tmp_path) as (url, _):
            await h.handle.census(fresh=True)
            await h.advance(125)
            await h.handle.census(fresh=True)
            figures = ServerFigures(
                socket_path=tmp_path / "s.sock", active_connections=0, max_connections=1
            )
            status = await status_report(h.handle, None, figures)
            snapshot = await h.handle.snapshot(READER)
            metrics = (await get(f"{url}/metrics")).text
            dom = await run_chromium(tmp_path, "--dump-dom", f"{url}/")
    (idle,) = [s for s in status["servers"]["idle"] if s["pid"] == pid]
    assert idle["idle_seconds"] >= 125
    assert idle["client"] == "claude_code"
    assert f"{pid} mcp-fake-server 2." in format_status(status)  # minutes
    (server,) = [s for s in snapshot["mcp_servers"] if s["process"]["pid"] == pid]
    assert server["idle_seconds"] >= 125
    assert server["usage"]["io_bytes"] is not None
    row = next(
        line for line in format_snapshot(snapshot).splitlines() if line.startswith(f"{pid} ")
    )
    assert " 2." in row
    labels = rf'client="claude_code",command="[^"]*",pid="{pid}"'
    sample = re.search(rf"^fleet_mcp_server_idle_seconds\{{{labels}\}} (\S+)$", metrics, re.M)
    assert sample is not None, metrics
    assert float(sample.group(1)) >= 125
    table = dom[dom.index('id="servers"') : dom.index('id="duplicates"')]
    assert ">idle<" in table
    assert re.search(rf">{pid}<.*?>2\.\d min<", table, re.S)
