"""Daemon-cohort uniqueness: reused identities and contested generations block apply."""

from __future__ import annotations

from typing import Any

import pytest

from supervisor.policy.evidence import PidEvidence
from supervisor.policy.identity.worker_env import NAMESPACES
from supervisor.policy.retirement.cohort import (
    BLOCKER_CONTESTED_GENERATION,
    BLOCKER_REUSED_IDENTITY,
    classify_cohort,
)

from .rows import live_row, probes, row, trusted_instance


def _cohort(label: str, *, base_pid: int, generation: str) -> list[dict[str, Any]]:
    instance = trusted_instance(label)
    return [
        live_row(
            f"{label}-{ns}",
            pid=base_pid + n,
            namespace=ns,
            client_instance_id=instance,
            generation_id=generation,
        )
        for n, ns in enumerate(NAMESPACES)
    ]


def test_one_instance_five_namespaces_sharing_a_generation_is_fine() -> None:
    rows = _cohort("A", base_pid=100, generation="gen-A")
    verdict = classify_cohort(rows, evidence=probes(alive=range(100, 105)))
    assert not verdict.blocked
    assert verdict.blocker_kind is None
    assert verdict.reasons == ()
    assert verdict.blocked_worker_identities == ()


def test_two_launches_with_distinct_generations_are_fine() -> None:
    rows = [
        *_cohort("A", base_pid=100, generation="gen-A"),
        *_cohort("B", base_pid=200, generation="gen-B"),
    ]
    evidence = probes(alive=[*range(100, 105), *range(200, 205)])
    assert not classify_cohort(rows, evidence=evidence).blocked


def test_duplicate_active_worker_identity_blocks() -> None:
    rows = [row("w-1", pid=101), row("w-1", pid=102, namespace="reviewer"), row("w-2", pid=103)]
    verdict = classify_cohort(rows, evidence=probes(dead=[101, 102, 103]))
    assert verdict.blocked
    assert verdict.blocker_kind == BLOCKER_REUSED_IDENTITY
    assert verdict.duplicate_identities == ("w-1",)
    assert verdict.blocked_worker_identities == ("w-1",)
    assert "w-1" in verdict.reasons[0]


def test_identity_reused_only_by_a_historical_row_does_not_block() -> None:
    rows = [row("w-1", pid=101), row("w-1", pid=102, status="released")]
    assert not classify_cohort(rows, evidence=probes(dead=[101, 102])).blocked


@pytest.mark.parametrize(
    ("second", "why"),
    [
        (
            {"namespace": "author", "client_instance_id": trusted_instance("A")},
            "same namespace, same instance",
        ),
        (
            {"namespace": "reviewer", "client_instance_id": trusted_instance("B")},
            "another instance",
        ),
    ],
)
@pytest.mark.parametrize(
    "other_probe", [PidEvidence(alive=True), PidEvidence(alive=None)], ids=["alive", "unknown"]
)
def test_generation_claimed_by_possibly_running_workers_blocks(
    second: dict[str, Any], why: str, other_probe: PidEvidence
) -> None:
    first = live_row(
        "w-1",
        pid=101,
        namespace="author",
        client_instance_id=trusted_instance("A"),
        generation_id="gen-x",
    )
    other = live_row("w-2", pid=102, generation_id="gen-x", **second)
    verdict = classify_cohort(
        [first, other], evidence={101: PidEvidence(alive=True), 102: other_probe}
    )
    assert verdict.blocked, why
    assert verdict.blocker_kind == BLOCKER_CONTESTED_GENERATION
    assert verdict.contested_generations == ("gen-x",)
    assert verdict.blocked_worker_identities == ("w-1", "w-2")


def test_unprobed_pid_counts_as_possibly_running() -> None:
    rows = [row("w-1", pid=101, generation_id="gen-x"), row("w-2", pid=102, generation_id="gen-x")]
    assert classify_cohort(rows, evidence={}).blocked


def test_dead_rows_do_not_contest_a_generation() -> None:
    rows = [
        row("w-1", pid=101, generation_id="gen-x"),
        row("w-2", pid=102, generation_id="gen-x"),
        live_row("w-3", pid=103, generation_id="gen-x"),
    ]
    verdict = classify_cohort(rows, evidence=probes(dead=[101, 102], alive=[103]))
    assert not verdict.blocked
    # One dead sibling is enough to leave a single possible runner: still fine.
    verdict = classify_cohort(rows[:2], evidence=probes(dead=[101], alive=[102]))
    assert not verdict.blocked


def test_historical_rows_do_not_contest_a_generation() -> None:
    rows = [
        live_row("w-1", pid=101, generation_id="gen-x"),
        live_row("w-2", pid=102, generation_id="gen-x", status="superseded"),
    ]
    assert not classify_cohort(rows, evidence=probes(alive=[101, 102])).blocked


def test_reused_identity_is_reported_before_a_contested_generation() -> None:
    rows = [row("w-1", pid=101, generation_id="gen-x"), row("w-1", pid=102, generation_id="gen-x")]
    verdict = classify_cohort(rows, evidence=probes(alive=[101, 102]))
    assert verdict.blocker_kind == BLOCKER_REUSED_IDENTITY
    assert verdict.duplicate_identities == ("w-1",)
    assert verdict.contested_generations == ("gen-x",)
    assert len(verdict.reasons) == 2


def test_rows_without_generation_or_identity_are_ignored() -> None:
    rows = [
        row("w-1", pid=101, generation_id=None),
        row("w-2", pid=102, generation_id=None),
        row("", pid=103, generation_id="g-3"),
        row(" ", pid=104, generation_id="g-4"),
    ]
    assert not classify_cohort(rows, evidence=probes(alive=[101, 102, 103, 104])).blocked


def test_rows_of_another_host_count_as_possibly_running_whatever_the_local_probe_says() -> None:
    rows = [
        live_row("w-1", pid=101, generation_id="gen-x", host_id="host-far"),
        live_row("w-2", pid=102, generation_id="gen-x", host_id="host-far"),
    ]
    local_dead = probes(dead=[101, 102])
    # Judged from the far host itself, the local answer applies and both are dead.
    assert not classify_cohort(rows, evidence=local_dead, current_host_id="host-far").blocked
    # Judged from here, pid numbers of another machine prove nothing.
    verdict = classify_cohort(rows, evidence=local_dead, current_host_id="host-near")
    assert verdict.blocked
    assert verdict.contested_generations == ("gen-x",)
