"""Real MCP clients run servers under ``fleet-supervisor exec``: nothing of a server may be left."""

# Every scenario x server (tests/realclients/scenarios.py) runs WRAPPED, against one
# daemon with ``[exec] reap_orphans = true``. The client ends its way (exits after
# listing or calling tools, is SIGKILLed, or closes the server's stdin and stays), and
# then no process of the server's tree may run, and the server's row must have left
# ``active`` only once its last process was gone. The bare servers' leaks are the
# clients' business, measured by ``python -m bench.leftovers``, never asserted here.
# The clients come from tests/realclients/install.sh; without them a local run skips
# and CI fails.

from __future__ import annotations

import os
from collections.abc import Iterator

import anyio
import pytest

from tests.integration.daemon import Daemon, running_daemon, wait_ready
from tests.integration.exec_scenarios import start_daemon, stop_daemon
from tests.realclients.harness import SERVERS, missing
from tests.realclients.scenarios import (
    DAEMON_EXEC_CONFIG,
    REAP_GRACE_SECONDS,
    SCENARIOS,
    describe,
    exec_daemon,
    run_scenario,
)

pytestmark = pytest.mark.integration

#: A hang guard, not a timing claim: the daemon kills a tree after REAP_GRACE_SECONDS;
#: the wait ends as soon as nothing is left and every new row left ``active``.
_SETTLE_GUARD = REAP_GRACE_SECONDS + 10.0


def require(client: str, server: str) -> None:
    """Skip without the client or server; under CI a missing one fails instead."""
    reason = missing(client, server)
    if reason is None:
        return
    if os.environ.get("CI", "").strip().lower() in {"1", "true", "yes"}:
        pytest.fail(f"CI needs the real clients: {reason}")
    pytest.skip(reason)


@pytest.fixture(scope="module")
def daemon() -> Iterator[Daemon]:
    with exec_daemon() as running:
        yield running


@pytest.mark.parametrize("server", SERVERS)
@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_a_wrapped_server_leaves_no_process_and_its_row_outlives_none(
    scenario: str, server: str, daemon: Daemon
) -> None:
    client, _ = SCENARIOS[scenario]
    require(client, server)
    result = run_scenario(
        scenario, server, wrapped=True, daemon=daemon, settle_seconds=_SETTLE_GUARD
    )
    report = describe(result)
    assert result.connected, f"the client never showed the server connected\n{report}"
    assert result.leftover_count == 0, f"processes left after {_SETTLE_GUARD:.0f}s\n{report}"
    assert result.rows, f"the wrapper registered no row\n{report}"
    still_active = [r["worker_identity"] for r in result.rows if r["status"] == "active"]
    assert still_active == [], f"rows still active with no process left\n{report}"
    assert result.row_violations == [], f"a row left active before its processes\n{report}"


#: Where a bare server leaks, with the daemon down the whole time the client runs.
_DOWN_CASES = [
    ("claude-list", "everything-npx"),
    ("claude-list", "stubborn"),
    ("gemini-list", "stubborn"),
    ("sdk-sigkill", "stubborn"),
]


@pytest.mark.parametrize(("scenario", "server"), _DOWN_CASES)
def test_a_daemon_down_during_the_client_run_finishes_the_cleanup_when_it_starts(
    scenario: str, server: str
) -> None:
    client, _ = SCENARIOS[scenario]
    require(client, server)
    with running_daemon(extra_config=DAEMON_EXEC_CONFIG) as daemon:
        anyio.run(wait_ready, daemon)
        stop_daemon(daemon)
        result = run_scenario(
            scenario,
            server,
            wrapped=True,
            daemon=daemon,
            settle_seconds=_SETTLE_GUARD,
            daemon_starts=lambda: start_daemon(daemon),
        )
    report = describe(result)
    assert result.connected, f"the client never showed the server connected\n{report}"
    assert result.leftover_count == 0, f"processes left after {_SETTLE_GUARD:.0f}s\n{report}"
    still_active = [r["worker_identity"] for r in result.rows if r["status"] == "active"]
    assert still_active == [], f"rows still active with no process left\n{report}"
