"""The snapshot's worker dicts: the hand-built view equals dataclasses.asdict's."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from supervisor.policy.evidence import PidEvidence
from supervisor.policy.fleet.snapshot import snapshot_fleet
from supervisor.policy.fleet.worker_view import WorkerView
from supervisor.policy.render import snapshot_dict, worker_dict

from .rows import HOST, NOW, REPO
from .test_plan_properties import evidence_maps, fleet_rows


def _reference(view: WorkerView) -> dict[str, Any]:
    """What worker_dict was: asdict, then the two nested views and two flat fields."""
    data = asdict(view)
    data["identity"] = asdict(view.identity)
    data["liveness"] = asdict(view.liveness)
    data["instance_id_provenance"] = view.identity.provenance
    data["instance_identity_trusted"] = view.identity.trusted
    return data


@settings(max_examples=150, deadline=None)
@given(
    rows=st.integers(min_value=1, max_value=8).flatmap(
        lambda n: st.tuples(*(fleet_rows(i) for i in range(n)))
    ),
    evidence=evidence_maps(),
)
def test_worker_dicts_equal_asdict(
    rows: tuple[dict[str, Any], ...], evidence: dict[int, PidEvidence]
) -> None:
    snap = snapshot_fleet(
        list(rows), now=NOW, evidence=evidence, current_host_id=HOST, canonical_repository=REPO
    )
    for view in snap.workers:
        got, want = worker_dict(view), _reference(view)
        assert got == want
        # Same keys in the same order, and values of the same types (1 is not 1.0).
        assert repr(list(got.items())) == repr(list(want.items()))


@settings(max_examples=100, deadline=None)
@given(
    rows=st.integers(min_value=1, max_value=8).flatmap(
        lambda n: st.tuples(*(fleet_rows(i) for i in range(n)))
    ),
    evidence=evidence_maps(),
)
def test_instance_dicts_equal_asdict(
    rows: tuple[dict[str, Any], ...], evidence: dict[int, PidEvidence]
) -> None:
    snap = snapshot_fleet(
        list(rows), now=NOW, evidence=evidence, current_host_id=HOST, canonical_repository=REPO
    )
    rendered = snapshot_dict(snap)["instances"]
    assert len(rendered) == len(snap.instances)
    for got, group in zip(rendered, snap.instances, strict=True):
        want = asdict(group)
        want["namespace_counts"] = dict(group.namespace_counts)
        want = {k: list(v) if isinstance(v, tuple) else v for k, v in want.items()}
        assert repr(list(got.items())) == repr(list(want.items()))
