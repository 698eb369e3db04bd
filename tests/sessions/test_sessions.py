"""Whole headless sessions of Claude Code, Codex CLI and Gemini CLI, offline, bare against
wrapped: a wrapped server leaves nothing, however its session ends."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.integration.daemon import Daemon
from tests.realclients.scenarios import exec_daemon
from tests.realclients.test_leftovers import require
from tests.sessions.clients import FAMILY, SESSION_CLIENTS
from tests.sessions.session import SESSION_SCENARIOS, SESSION_SERVERS, run_sessions

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def daemon() -> Iterator[Daemon]:
    with exec_daemon() as running:
        yield running


def _require(client: str) -> None:
    for kind, _ in SESSION_SERVERS:
        require(client, kind)


@pytest.mark.parametrize("scenario", SESSION_SCENARIOS)
@pytest.mark.parametrize("client", SESSION_CLIENTS)
def test_a_wrapped_session_leaves_nothing(client: str, scenario: str, daemon: Daemon) -> None:
    _require(client)
    result = run_sessions(client, scenario, wrapped=True, daemon=daemon)
    report = result.describe()
    assert result.left == [], report
    assert result.row_violations == [], report
    assert result.stopped_while_live == [], report
    names = {name for _, name in SESSION_SERVERS}
    if scenario != "killed-starting":
        # Every tool call went through its wrapped server and came back to the model.
        assert all(done == names for done in result.answered), report
        assert any(line.endswith(" call") for line in result.stub_log), report
    if scenario in ("ends", "two-sessions"):
        assert result.returncodes == [0] * len(result.returncodes), report
    # One row per server and session, each credited to the client's family, none active.
    sessions = len(result.returncodes)
    registered = [r for r in result.rows if r.get("client_type") == FAMILY[client]]
    if scenario != "killed-starting":
        assert len(registered) >= len(names) * sessions, report
    assert all(r["status"] != "active" for r in result.rows), report


@pytest.mark.parametrize("scenario", SESSION_SCENARIOS)
@pytest.mark.parametrize("client", SESSION_CLIENTS)
def test_a_bare_session_runs_its_servers_too(client: str, scenario: str) -> None:
    # The baseline the wrapped runs are compared with: the same sessions reach every
    # server bare. What they leave is measured (bench.leftovers --sessions), not asserted:
    # it is the clients' behaviour, not this project's.
    _require(client)
    result = run_sessions(client, scenario, wrapped=False, daemon=None)
    report = result.describe()
    if scenario != "killed-starting":
        names = {name for _, name in SESSION_SERVERS}
        assert all(done == names for done in result.answered), report
    if scenario in ("ends", "two-sessions"):
        assert result.returncodes == [0] * len(result.returncodes), report
