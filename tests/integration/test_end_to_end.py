"""The product with real processes: daemon, three workers under exec, kill, plan, apply."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator, Mapping
from contextlib import ExitStack
from typing import Any

import anyio
import pytest
from mcp import Client as McpClient
from mcp import StdioServerParameters

from tests.integration.daemon import Daemon, running_daemon, wait_ready
from tests.integration.exec_scenarios import start_daemon, stop_daemon

pytestmark = [pytest.mark.anyio, pytest.mark.integration]

SLEEPER = ("-c", "import time; time.sleep(600)")


@pytest.fixture
def daemon() -> Iterator[Daemon]:
    with running_daemon(ttl=2.0) as running:
        yield running
    assert running.process.returncode == 0, (running.workdir / "daemon.log").read_text()[-2000:]


def launch_env(daemon: Daemon) -> dict[str, dict[str, str]]:
    result = daemon.cli("launch-config", "--client", "codex", "--", "sh")
    assert result.returncode == 0, result.stderr
    servers = json.loads(result.stdout)["mcpServers"]
    return {name.removeprefix("gitea-"): entry["env"] for name, entry in servers.items()}


def snapshot(daemon: Daemon, *, include_history: bool = False) -> Mapping[str, Any]:
    with daemon.client() as client:
        return client.snapshot(include_history=include_history)


async def wait_for(predicate: Any, *, what: str, show: Any = None) -> None:
    """Poll real processes until ``predicate`` holds; 30 s is a hang guard, not a timing claim."""
    with anyio.move_on_after(30):
        while not predicate():
            await anyio.sleep(0.1)
        return
    pytest.fail(f"gave up waiting for {what}: {show() if show else ''}")


async def test_killed_worker_is_planned_and_retired_while_others_stay_live(daemon: Daemon) -> None:
    await wait_ready(daemon)
    envs = launch_env(daemon)
    with ExitStack() as stack:
        sidecars: dict[str, subprocess.Popen[bytes]] = {}
        for namespace in ("author", "reviewer", "merger"):
            process = subprocess.Popen(
                daemon.worker_command(sys.executable, *SLEEPER),
                env={**os.environ, **envs[namespace]},
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            stack.callback(_stop, process)
            sidecars[namespace] = process

        def live_count() -> int:
            return int(snapshot(daemon)["live_worker_count"])

        await wait_for(lambda: live_count() == 3, what="three live workers")
        # exec became the server: the process started is the worker itself.
        victim_pid = sidecars["author"].pid
        victim = next(w for w in snapshot(daemon)["workers"] if w["pid"] == victim_pid)
        # Killed while the daemon is down, so nobody sees it go: the row is left to the
        # evidence-checked plan and apply (an exit the daemon watches releases it at once).
        stop_daemon(daemon)
        os.kill(victim_pid, signal.SIGKILL)
        assert sidecars["author"].wait(timeout=30) == -signal.SIGKILL
        start_daemon(daemon)

        def planned() -> Mapping[str, Any]:
            with daemon.client() as client:
                return client.plan()

        await wait_for(
            lambda: planned()["candidate_count"] == 1,
            what="one candidate",
            show=lambda: planned()["preserved_summary"],
        )
        plan = planned()
        assert plan["candidate_worker_identities"] == [victim["worker_identity"]]

        apply_args = (
            "apply",
            "--json",
            "--scope-fingerprint",
            plan["scope_fingerprint"],
            "--candidate-fingerprint",
            plan["candidate_fingerprint"],
            "--workers",
            ",".join(plan["candidate_worker_identities"]),
        )
        applied = daemon.cli(*apply_args)
        assert applied.returncode == 0, applied.stdout + applied.stderr
        result = json.loads(applied.stdout)
        assert result["outcome"] == "applied"
        assert [r["worker_identity"] for r in result["retired"]] == [victim["worker_identity"]]
        # The same apply again is a replay, not a failure: nothing is wrong, so exit 0.
        replayed = daemon.cli(*apply_args)
        assert replayed.returncode == 0, replayed.stdout + replayed.stderr
        assert json.loads(replayed.stdout)["outcome"] == "already_retired"

        later = snapshot(daemon)
        after = {w["worker_identity"]: w for w in later["workers"]}
        # Retired is history: counted by the snapshot, no longer listed.
        assert victim["worker_identity"] not in after
        assert later["historical_worker_count"] == 1
        survivors = list(after.values())
        assert len(survivors) == 2
        assert all(w["status"] == "active" and w["live"] for w in survivors)


async def test_exec_passes_a_stdio_mcp_server_through_untouched(daemon: Daemon) -> None:
    await wait_ready(daemon)
    env = {**os.environ, **launch_env(daemon)["controller"]}
    params = StdioServerParameters(
        command=sys.executable,
        args=daemon.worker_command(sys.executable, "-m", "tests.integration.tiny_mcp_server")[1:],
        env=env,
        cwd=os.getcwd(),
    )
    with anyio.fail_after(60):
        async with McpClient(params) as client:
            tools = {tool.name for tool in (await client.list_tools()).tools}
            assert "echo" in tools
            echoed = await client.call_tool("echo", {"text": "through the sidecar"})
            assert not echoed.is_error
            assert "through the sidecar" in json.dumps(echoed.model_dump(mode="json"))
            workers = snapshot(daemon)["workers"]
            assert any(w["namespace"] == "controller" and w["live"] for w in workers)


async def test_cli_exit_codes(daemon: Daemon) -> None:
    await wait_ready(daemon)
    assert daemon.cli("status").returncode == 0
    denied = daemon.cli("status", env={"FLEET_SUPERVISOR_TOKEN": "not-a-token"})
    assert denied.returncode == 1
    bad_usage = daemon.cli("apply", "--workers", "x")
    assert bad_usage.returncode == 2
    unreachable = subprocess.run(
        [sys.executable, "-m", "supervisor.cli", "--socket", "/tmp/fsv-nobody.sock", "status"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert unreachable.returncode == 3


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


async def test_mcp_stdio_command_reaches_the_running_daemon(daemon: Daemon) -> None:
    await wait_ready(daemon)
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "supervisor.cli", "--config", str(daemon.config), "mcp"],
        env={**os.environ, "FLEET_SUPERVISOR_TOKEN": daemon.token},
    )
    with anyio.fail_after(60):
        async with McpClient(params) as client:
            names = {tool.name for tool in (await client.list_tools()).tools}
            assert {
                "gitea_snapshot_instance_fleet",
                "gitea_plan_stale_worker_retirement",
                "gitea_apply_stale_worker_retirement",
            } <= names
            planned = await client.call_tool("gitea_plan_stale_worker_retirement", {})
            assert not planned.is_error
            content = planned.structured_content or {}
            assert content["success"] is True
            assert content["read_only"] is True
            assert content["profile"] == "prgs-reconciler"
