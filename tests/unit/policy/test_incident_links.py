"""Incident link validation and the legacy collapse plan (pure)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from supervisor.operations.registry import TASKS
from supervisor.policy.control.incident_links import (
    INCIDENT_OBSERVATION_FIELDS,
    check_incident_link,
    normalize_scope,
    plan_legacy_collapse,
)
from supervisor.policy.control.permissions import OP_LEASE, OP_READ
from supervisor.policy.control.plane import ControlPlaneRefusal

BASE: dict[str, Any] = {
    "provider": " Sentry ",
    "provider_issue_id": " 42 ",
    "gitea_org": "org",
    "gitea_repo": "repo",
    "gitea_issue_number": 7,
}


def test_scope_normalization_makes_every_blank_the_same_key() -> None:
    assert [normalize_scope(v) for v in (None, "", "   ", " x ")] == ["", "", "", "x"]
    keys = {check_incident_link(**BASE, provider_org=blank).key for blank in (None, "", "  ")}
    assert keys == {("sentry", "", "", "", "42")}


def test_only_given_observations_are_carried_and_stamps_kept_as_given() -> None:
    spec = check_incident_link(
        **BASE, fingerprint="fp", last_seen="2026-01-01T01:00:00+00:00", event_count=0
    )
    assert dict(spec.observations) == {
        "fingerprint": "fp",
        "last_seen": "2026-01-01T01:00:00+00:00",
        "event_count": 0,
    }
    assert spec.target == ("org", "repo", 7)


def test_unknown_fields_are_refused() -> None:
    with pytest.raises(ControlPlaneRefusal) as refused:
        check_incident_link(**BASE, kind="sentry")
    assert refused.value.code == "invalid_incident_link"


def _row(link_id: int, **fields: Any) -> dict[str, Any]:
    row: dict[str, Any] = {
        "link_id": link_id,
        "provider": "sentry",
        "provider_base_url": None,
        "provider_org": None,
        "provider_project": None,
        "provider_issue_id": "dup",
        "gitea_org": "org",
        "gitea_repo": "repo",
        "gitea_issue_number": 1,
    }
    row.update(dict.fromkeys(INCIDENT_OBSERVATION_FIELDS))
    row["status"] = "open"
    row.update(fields)
    return row


def test_collapse_keeps_the_lowest_id_and_normalizes_scope() -> None:
    plan = plan_legacy_collapse(
        [_row(5), _row(2, provider_org="  "), _row(9, provider_issue_id="b")]
    )
    assert plan.conflicts == ()
    assert plan.drop_ids == (5,)
    assert [r["link_id"] for r in plan.keep] == [2, 9]
    assert all(r["provider_org"] == "" for r in plan.keep)


@pytest.mark.parametrize("field", INCIDENT_OBSERVATION_FIELDS)
def test_any_differing_observation_refuses_the_group(field: str) -> None:
    plan = plan_legacy_collapse([_row(1), _row(2, **{field: "other"})])
    assert plan.drop_ids == ()
    [conflict] = plan.conflicts
    assert "conflicting observation metadata" in conflict
    assert field in conflict


_VALUES = st.sampled_from([None, "a", "b"])


@settings(deadline=None)
@given(
    rows=st.lists(
        st.fixed_dictionaries(
            {"provider_org": st.sampled_from([None, "", " "]), "fingerprint": _VALUES}
        ),
        min_size=1,
        max_size=5,
    )
)
def test_a_collapse_only_drops_exact_twins(rows: list[dict[str, Any]]) -> None:
    built = [_row(i + 1, **r) for i, r in enumerate(rows)]
    plan = plan_legacy_collapse(built)
    agree = len({r["fingerprint"] for r in rows}) == 1
    assert bool(plan.conflicts) is (not agree)
    if agree:
        assert plan.drop_ids == tuple(range(2, len(rows) + 1))
        assert [r["link_id"] for r in plan.keep] == [1]
    else:
        assert plan.drop_ids == ()


def test_permissions_of_the_new_tasks() -> None:
    assert TASKS["namespace_health_assess"].operation == OP_READ
    assert TASKS["namespace_health_gate"].operation == OP_READ
    assert TASKS["incident_link_read"].operation == OP_READ
    assert len(TASKS["namespace_health_assess"].roles) == 5
    assert TASKS["incident_link_upsert"].operation == OP_LEASE
    assert TASKS["incident_link_upsert"].roles == frozenset({"controller", "reconciler"})
