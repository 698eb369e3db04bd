"""JSON views of policy results: complete, plain and serializable."""

from __future__ import annotations

import json

from supervisor.policy.permissions import OP_READ, Profile, decide
from supervisor.policy.render import decision_dict, plan_dict, snapshot_dict
from supervisor.policy.snapshot import snapshot_fleet

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


def test_decision_dict_is_plain_json() -> None:
    profile = Profile(name="p", role_kind="controller", allowed_operations=frozenset({OP_READ}))
    data = json.loads(json.dumps(decision_dict(decide(profile, "apply"))))
    assert data["allowed"] is False
    assert data["required_roles"] == ["controller", "reconciler"]
