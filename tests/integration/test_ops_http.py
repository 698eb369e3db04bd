"""The ops HTTP listener: /metrics from actor state and counters, /healthz and /readyz."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from prometheus_client.parser import text_string_to_metric_families

from supervisor.daemon.ops import OpsState
from supervisor.operations.requests import REQUESTS
from supervisor.surfaces.http.ops import OpsRoutes, serve_ops_http
from tests.actors.harness import READER
from tests.actors.helpers_app import SettledHarness, harness

#: The heartbeat's (and release's) request: the registration a beat names, in full.
FencedArgs: Any = REQUESTS["heartbeat"]

pytestmark = [pytest.mark.integration, pytest.mark.anyio]


@asynccontextmanager
async def ops_listener(h: SettledHarness, *, serving: bool = True) -> AsyncIterator[str]:
    state = OpsState(h.supervisor, h.supervisor.metrics)
    state.serving = serving
    routes = OpsRoutes(h.handle, h.supervisor.metrics, state.health)
    async with anyio.create_task_group() as tg:
        url = await tg.start(
            lambda task_status: serve_ops_http(
                routes, host="127.0.0.1", port=0, task_status=task_status
            )
        )
        yield str(url)
        tg.cancel_scope.cancel()


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    out: dict[tuple[str, tuple[tuple[str, str], ...]], float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return out


async def get(url: str) -> httpx2.Response:
    async with httpx2.AsyncClient(timeout=30.0) as client:
        return await client.get(url)


async def test_metrics_count_beats_plans_and_classify_the_fleet(tmp_path: Path) -> None:
    async with harness(tmp_path) as h, ops_listener(h) as url:
        first = await h.register(namespace="author")
        await h.register(namespace="reviewer")
        assert (await h.beat(first)).ok
        refused = await h.handle.heartbeat(
            str(first["worker_identity"]),
            pid=int(first["pid"]),
            generation_id="gen-x",
            fencing_epoch=1,
        )
        assert not refused.ok
        # One group holding an accepted and a refused beat (and the accepted one twice).
        good = FencedArgs(
            worker_identity=str(first["worker_identity"]),
            pid=int(first["pid"]),
            generation_id=str(first["generation_id"]),
            fencing_epoch=int(first["fencing_epoch"]),
        )
        bad = FencedArgs(
            worker_identity=good.worker_identity,
            pid=good.pid,
            generation_id="gen-x",
            fencing_epoch=1,
        )
        grouped = await h.handle.heartbeat_many([good, bad, good], timeout=30.0)
        assert [r.ok for r in grouped] == [True, False, True]
        await h.advance(5.0)  # one liveness sweep
        plan = await h.handle.plan(READER)
        assert plan["success"]
        response = await get(f"{url}/metrics")
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/plain")
        got = samples(response.text)
    for namespace in ("author", "reviewer"):
        labels = (("namespace", namespace), ("ownership", "live"), ("status", "active"))
        assert got[("fleet_workers", labels)] == 1
    assert got[("fleet_heartbeats_total", (("code", "ok"), ("result", "accepted")))] == 1 + 2
    refused_key = ("fleet_heartbeats_total", (("code", refused.code), ("result", "refused")))
    assert got[refused_key] == 1 + 1
    assert got[("fleet_plans_total", (("outcome", "planned"),))] == 1
    # Two registrations committed in the writer's batch path.
    assert got[("fleet_commit_latency_seconds_count", (("kind", "batch"),))] >= 2
    assert got[("fleet_liveness_sweeps_total", ())] >= 1
    assert got[("fleet_liveness_sweep_duration_seconds_count", ())] >= 1
    assert got[("fleet_gauges_available", ())] == 1
    assert got[("fleet_exit_watches", ())] == 0  # pidfds are off in the harness


async def test_metrics_still_render_when_the_gauges_cannot_be_computed(tmp_path: Path) -> None:
    async with harness(tmp_path) as h, ops_listener(h) as url:
        await h.supervisor.store.close()  # every read now fails inside the actor
        response = await get(f"{url}/metrics")
        restarts = dict(h.supervisor.restarts)
    assert response.status_code == 200
    assert restarts == {}  # a failed scrape crashed no actor
    got = samples(response.text)
    assert got[("fleet_gauges_available", ())] == 0


async def test_healthz_and_readyz(tmp_path: Path) -> None:
    async with harness(tmp_path) as h:
        async with ops_listener(h, serving=False) as url:
            health = await get(f"{url}/healthz")
            ready = await get(f"{url}/readyz")
        assert health.status_code == 200
        assert health.json()["healthy"] is True
        assert ready.status_code == 503
        assert "the socket is not serving yet" in ready.json()["reasons"]
        await h.advance(5.0)
        async with ops_listener(h) as url:
            assert (await get(f"{url}/readyz")).status_code == 200
            # An actor that is not running makes the daemon unhealthy.
            h.supervisor.actor_states["retirement"] = "restarting"
            health = await get(f"{url}/healthz")
            assert health.status_code == 503
            assert "actor retirement is restarting" in health.json()["reasons"]
            assert (await get(f"{url}/readyz")).status_code == 503


async def test_unknown_paths_and_methods_are_refused(tmp_path: Path) -> None:
    async with harness(tmp_path) as h, ops_listener(h) as url:
        assert (await get(f"{url}/nope")).status_code == 404
        async with httpx2.AsyncClient(timeout=30.0) as client:
            assert (await client.post(f"{url}/metrics", content=b"x")).status_code == 405
        # Garbage instead of HTTP closes that connection; the listener carries on.
        host, port = url.removeprefix("http://").rsplit(":", 1)
        stream = await anyio.connect_tcp(host, int(port))
        async with stream:
            await stream.send(b"\x00\x01 not http\r\n\r\n")
            with anyio.fail_after(10):
                try:
                    while await stream.receive():
                        pass
                except (anyio.EndOfStream, anyio.BrokenResourceError):
                    pass
        assert (await get(f"{url}/healthz")).status_code == 200
