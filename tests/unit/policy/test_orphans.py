"""The orphan finding: which rows' launching clients this host can call gone."""

from __future__ import annotations

from typing import Any

import pytest

from supervisor.policy.evidence import PidEvidence
from supervisor.policy.fleet.orphans import (
    REASON_CLIENT_EXITED,
    REASON_CLIENT_PID_REUSED,
    client_pids,
    find_orphans,
)

HOST = "host-a"


def row(identity: str, **overrides: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "worker_identity": identity,
        "status": "active",
        "host_id": HOST,
        "pid": 100,
        "client_pid": 50,
        "client_process_start_time": "t-50",
        "namespace": "author",
    }
    base.update(overrides)
    return base


@pytest.mark.parametrize(
    ("overrides", "client", "expected"),
    [
        ({}, PidEvidence(alive=False), REASON_CLIENT_EXITED),
        ({}, PidEvidence(alive=True, start_time="t-other"), REASON_CLIENT_PID_REUSED),
        ({}, PidEvidence(alive=True, start_time="t-50"), None),
        ({}, PidEvidence(alive=None), None),
        ({"client_process_start_time": None}, PidEvidence(alive=True, start_time="x"), None),
        ({"status": "released"}, PidEvidence(alive=False), None),
        ({"host_id": "host-b"}, PidEvidence(alive=False), None),
        ({"client_pid": None}, PidEvidence(alive=False), None),
    ],
)
def test_orphan_verdicts(
    overrides: dict[str, Any], client: PidEvidence, expected: str | None
) -> None:
    rows = [row("wkr-1", **overrides)]
    evidence = {100: PidEvidence(alive=True, start_time="t-100"), 50: client}
    found = find_orphans(rows, evidence=evidence, current_host_id=HOST)
    assert [f.reason_code for f in found] == ([expected] if expected else [])


def test_a_dead_worker_is_left_to_the_plan_and_other_hosts_are_not_probed() -> None:
    rows = [row("wkr-1"), row("wkr-2", host_id="host-b", client_pid=51)]
    assert client_pids(rows, current_host_id=HOST) == {50}
    assert client_pids(rows, current_host_id=None) == set()
    evidence = {100: PidEvidence(alive=False), 50: PidEvidence(alive=False)}
    assert find_orphans(rows, evidence=evidence, current_host_id=HOST) == ()
