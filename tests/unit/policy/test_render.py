"""JSON views of policy results: complete, plain and serializable."""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from typing import Any

from supervisor.operations.registry import decide
from supervisor.policy.control.permissions import OP_READ, Profile
from supervisor.policy.fleet.snapshot import observation_stamp, snapshot_fleet
from supervisor.policy.render import decision_dict, plan_dict, snapshot_dict

from .rows import HOST, NOW, REPO, live_row, make_plan, probes, row


def _rows() -> list[dict[str, object]]:
    return [
        row("w-1", pid=101),
        live_row("w-live", pid=102),
        row("w-legacy", pid=103, client_instance_id="legacy-pid-103"),
        row("w-old", pid=104, status="retired"),
    ]


EVIDENCE = probes(dead=[101, 103, 104], alive=[102])


def test_plan_dict_is_plain_json_with_the_customers_fields() -> None:
    plan = make_plan(_rows(), evidence=EVIDENCE)
    data = json.loads(json.dumps(plan_dict(plan)))
    assert data["read_only"] is True
    assert data["mutation_performed"] is False
    assert data["outcome"] == "planned"
    assert data["candidate_worker_identities"] == ["w-1"]
    assert (data["assessed_count"], data["candidate_count"], data["preserved_count"]) == (4, 1, 3)
    assert data["registry_fingerprint"] == plan.registry_fingerprint
    assert data["candidate_fingerprint"] == plan.candidate_fingerprint
    assert data["scope_fingerprint"] == plan.scope_fingerprint
    assert data["preserved_reason_counts"] == dict(plan.preserved_reason_counts)
    assert data["candidates"][0]["evidence"]["pid"] == 101
    assert data["fencing_context"] == {"current_host_id": HOST, "current_boot_id": "boot-0002"}


def test_snapshot_dict_is_plain_json() -> None:
    snapshot = snapshot_fleet(
        _rows(), now=NOW, evidence=EVIDENCE, current_host_id=HOST, canonical_repository=REPO
    )
    data = json.loads(json.dumps(snapshot_dict(snapshot)))
    assert data["read_only"] is True
    assert (data["live_worker_count"], data["stale_worker_count"]) == (1, 2)
    assert data["historical_worker_count"] == 1
    assert data["live_fleet_safe"] is False
    assert len(data["workers"]) == 4
    assert data["workers"][0]["instance_identity_trusted"] in (True, False)
    assert data["reasons"] == [f["detail"] for f in data["active_blockers"]]


def _snapshot_data(rows: list[dict[str, object]], *, now: datetime = NOW) -> dict[str, Any]:
    snapshot = snapshot_fleet(
        rows, now=now, evidence=EVIDENCE, current_host_id=HOST, canonical_repository=REPO
    )
    data: dict[str, Any] = json.loads(json.dumps(snapshot_dict(snapshot)))
    return data


def test_snapshot_dict_partitions_workers_into_live_stale_and_historical() -> None:
    data = _snapshot_data(_rows())

    def ids(key: str) -> list[str]:
        return [w["worker_identity"] for w in data[key]]

    assert ids("live_workers") == ["w-live"]
    assert ids("stale_workers") == ["w-1", "w-legacy"]
    assert ids("historical_workers") == ["w-old"]
    # Each partition holds the same worker views as ``workers``.
    by_id = {w["worker_identity"]: w for w in data["workers"]}
    for key in ("live_workers", "stale_workers", "historical_workers"):
        for view in data[key]:
            assert view == by_id[view["worker_identity"]]
    assert data["mutation_performed"] is False


def test_snapshot_carries_observation_stamps_that_move_with_time() -> None:
    rows = _rows()
    first = _snapshot_data(rows)
    assert first["snapshot_at"] == "2026-07-30T07:00:00.000000Z"
    token = first["consistency_token"]
    assert isinstance(token, str)
    assert token.startswith("fleetrev-")
    assert first["registry_revision"] == token
    assert token == observation_stamp(rows, str(first["snapshot_at"]))
    # Same rows, same instant, any order: the same stamp.
    assert _snapshot_data(list(reversed(rows)))["consistency_token"] == token
    # Same rows one second later: a different stamp, which is why apply never takes it.
    later = _snapshot_data(rows, now=NOW + timedelta(seconds=1))
    assert later["consistency_token"] != token
    # A changed heartbeat moves it too.
    beat = [dict(r) for r in rows]
    beat[1]["last_heartbeat_at"] = "2026-11-30T11:59:59.000000Z"
    assert _snapshot_data(beat)["consistency_token"] != token


def test_decision_dict_is_plain_json() -> None:
    profile = Profile(name="p", role_kind="controller", allowed_operations=frozenset({OP_READ}))
    data = json.loads(json.dumps(decision_dict(decide(profile, "apply"))))
    assert data["allowed"] is False
    assert data["required_roles"] == ["controller", "reconciler"]
