"""Random interleavings of fleet events, plans and applies against the running supervisor.

Each hypothesis example starts a fresh supervisor (fake clock, scripted probes, SQLite
in a temporary directory) inside one ``anyio.run`` and drives a list of operations.
Invariants checked after every step:

* no apply retires a row whose pid the probes report as not dead at that moment, or
  whose session holds an active lease;
* a retired row never changes again (every column is compared with the copy taken
  when it was first seen retired), and its heartbeats are refused;
* every apply is all-or-nothing for its outcome, including applies whose transaction
  gets a fault injected after its first guarded write: anything but ``applied``
  changes no row; ``applied`` changes exactly the rows it reports as retired, and
  only rows it was asked for.

``STATE_MACHINE_EXAMPLES`` sets the number of generated examples (default 60; the
explicit ``@example`` cases below run in addition).
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from actors.writer.beats import NOT_ACTIVE
from supervisor.policy.retirement.reasons import (
    OUTCOME_ALREADY_RETIRED,
    OUTCOME_APPLIED,
    OUTCOME_CANDIDATE_SUBSET,
    OUTCOME_CANDIDATES_MOVED,
    OUTCOME_MASS_GUARD,
    OUTCOME_NOTHING_REQUESTED,
    OUTCOME_REGISTRY_MOVED,
    OUTCOME_SCOPE_MOVED,
    OUTCOME_TRANSACTION_FAILED,
)
from tests.actors.harness import RETIRER, Harness, harness
from tests.actors.helpers_retirement import (
    ExplodingReprobe,
    apply_plan,
    ensure_swept,
    instance_id,
    lease,
    plan,
    rows_by_identity,
)

EXAMPLES = int(os.environ.get("STATE_MACHINE_EXAMPLES", "60"))

#: Outcomes an apply may legitimately have here (no gate can refuse in this model).
EXPECTED_OUTCOMES = frozenset(
    {
        OUTCOME_APPLIED,
        OUTCOME_REGISTRY_MOVED,
        OUTCOME_SCOPE_MOVED,
        OUTCOME_CANDIDATES_MOVED,
        OUTCOME_CANDIDATE_SUBSET,
        OUTCOME_ALREADY_RETIRED,
        OUTCOME_NOTHING_REQUESTED,
        OUTCOME_MASS_GUARD,
    }
)

INSTANCES = (instance_id("sm-a"), instance_id("sm-b"), "legacy-pid-9")
NAMESPACES = ("author", "reviewer", "merger", "controller", "reconciler")
#: Register codes at or above this share one session (and so a lease) with each other.
SHARED_FROM = len(INSTANCES) * len(NAMESPACES) * 3
REGISTER_CODES = SHARED_FROM + len(INSTANCES) * len(NAMESPACES)
SMALL_STEPS = (1.0, 4.0, 10.0)
BIG_STEPS = (31.0, 45.0, 90.0)
#: "crash" applies make the second per-target re-probe raise inside the transaction.
APPLY_MODES = ("strict", "scoped", "strict-subset", "scoped-crash")
RETIREMENT_COLUMNS = frozenset({"status", "retired_at", "retired_by", "retirement_reason"})

Op = tuple[str, int]

#: Event names, repeated by weight: deaths and expiry are common so that most plans
#: find real candidates. Each operation reads its argument modulo what it needs.
_WEIGHTED_EVENTS: tuple[str, ...] = (
    *("register",) * 2,
    *("beat",) * 2,
    *("die",) * 4,
    "revive",
    "reuse",
    "adopt",
    "lease",
    "unlease",
    "tick",
    *("expire",) * 3,
    "plan",
    "apply",
)
EVENT: st.SearchStrategy[Op] = st.tuples(st.sampled_from(_WEIGHTED_EVENTS), st.integers(0, 255))
#: What races a plan before its apply leans to what must stop that apply.
_RACING_EVENTS: tuple[str, ...] = (
    *("revive",) * 2,
    *("reuse",) * 2,
    *("lease",) * 2,
    "adopt",
    "register",
    "beat",
    "die",
    "unlease",
    "tick",
)
RACE: st.SearchStrategy[Op] = st.tuples(st.sampled_from(_RACING_EVENTS), st.integers(0, 255))


def _round(parts: tuple[list[Op], list[Op], int]) -> list[Op]:
    before, between, mode = parts
    return [*before, ("plan", 0), *between, ("apply", mode)]


#: One round: fleet events, a plan, a few events racing it, an apply of that plan.
ROUND: st.SearchStrategy[list[Op]] = st.tuples(
    st.lists(EVENT, min_size=1, max_size=8),
    st.lists(RACE, max_size=3),
    st.integers(0, len(APPLY_MODES) - 1),
).map(_round)
#: A whole example: rounds run back to back, so later ones meet earlier retirements.
OPS: st.SearchStrategy[list[Op]] = st.lists(ROUND, min_size=1, max_size=4).map(
    lambda rounds: [op for one in rounds for op in one]
)


@dataclass
class Model:
    h: Harness
    probes: ExplodingReprobe
    workers: list[dict[str, Any]] = field(default_factory=list)
    leases: dict[str, str] = field(default_factory=dict)  # lease_id -> session_id
    frozen: dict[str, dict[str, Any]] = field(default_factory=dict)
    latest_plan: Mapping[str, Any] | None = None
    counter: int = 0

    def pick(self, index: int, *, alive: bool | None = None) -> dict[str, Any] | None:
        """The index-th worker (modulo), optionally only among those whose pid the
        probes currently report as ``alive`` (True) or dead (False)."""
        pool = [
            w
            for w in self.workers
            if alive is None or self.h.probes.probe(int(w["pid"])).alive is alive
        ]
        return pool[index % len(pool)] if pool else None

    def fresh(self, prefix: str) -> str:
        self.counter += 1
        return f"{prefix}-{self.counter}"


async def _register(m: Model, code: int, pid: int | None = None) -> None:
    instance = INSTANCES[code % len(INSTANCES)]
    namespace = NAMESPACES[(code // len(INSTANCES)) % len(NAMESPACES)]
    session = "sess-sm-shared" if code >= SHARED_FROM else m.fresh("sess-sm")
    registration = await m.h.register(
        pid, client_instance_id=instance, namespace=namespace, session_id=session
    )
    m.workers.append(dict(registration))


async def _beat(m: Model, worker: dict[str, Any]) -> None:
    result = await m.h.beat(worker)
    if str(worker["worker_identity"]) in m.frozen:
        assert not result.ok
        assert result.code == NOT_ACTIVE, result


async def _lease(m: Model, worker: dict[str, Any]) -> None:
    lease_id = m.fresh("lease")
    session = str(worker["session_id"])
    ack = await m.h.handle.upsert_lease(lease(lease_id, session_id=session))
    assert ack.ok, ack
    m.leases[lease_id] = session


async def _unlease(m: Model, worker: dict[str, Any]) -> None:
    session = str(worker["session_id"])
    held = [lid for lid, s in m.leases.items() if s == session]
    if not held:
        return
    ack = await m.h.handle.upsert_lease(lease(held[-1], session_id=session, status="released"))
    assert ack.ok, ack
    del m.leases[held[-1]]


async def _apply(m: Model, mode_index: int) -> None:
    planned = m.latest_plan
    if planned is None:
        return
    mode = APPLY_MODES[mode_index]
    requested = list(planned["candidate_worker_identities"])
    if mode == "strict-subset":
        requested = requested[: len(requested) // 2]
    h = m.h
    before = await rows_by_identity(h)
    not_dead = {
        int(row["pid"])
        for row in before.values()
        if row["status"] == "active" and h.probes.probe(int(row["pid"])).alive is not False
    }
    active_leases = await h.store.read_leases(status="active")
    leased_sessions = {str(x["session_id"]) for x in active_leases if x["session_id"]}

    crash = mode.endswith("-crash")
    m.probes.reprobes.clear()
    m.probes.armed = crash
    try:
        result = await apply_plan(
            h,
            planned,
            mode="scoped" if mode.startswith("scoped") else "strict",
            identities=requested,
        )
    finally:
        m.probes.armed = False

    after = await rows_by_identity(h)
    outcome = str(result["outcome"])
    assert outcome in EXPECTED_OUTCOMES or (crash and outcome == OUTCOME_TRANSACTION_FAILED), result
    if outcome == OUTCOME_TRANSACTION_FAILED:
        assert len(m.probes.reprobes) == 2, "only the injected fault may fail a transaction"
    assert set(after) == set(before), "rows appeared or vanished during an apply"
    changed = {i for i in before if before[i] != after[i]}
    reported = {str(r["worker_identity"]) for r in result.get("retired") or []}
    if outcome != OUTCOME_APPLIED:
        assert not changed, (outcome, changed)
        assert result["retired_count"] == 0
        assert result["mutation_performed"] is False
    else:
        assert changed == reported, (changed, reported)
        assert result["retired_count"] == len(reported)
        assert result["mutation_performed"] is bool(reported)
    if outcome == OUTCOME_ALREADY_RETIRED:
        assert all(after[i]["status"] == "retired" for i in requested)
    assert changed <= set(requested)
    for identity in changed:
        old, new = before[identity], after[identity]
        assert old["status"] == "active"
        assert new["status"] == "retired"
        assert new["retired_by"] == RETIRER.name
        assert int(old["pid"]) not in not_dead, f"retired {identity} while its pid was running"
        assert str(old["session_id"]) not in leased_sessions, (
            f"retired {identity} while its session held an active lease"
        )
        assert {k: v for k, v in old.items() if k not in RETIREMENT_COLUMNS} == {
            k: v for k, v in new.items() if k not in RETIREMENT_COLUMNS
        }


async def _step(m: Model, op: Op) -> None:
    name, arg = op
    h = m.h
    if name == "register":
        await _register(m, arg % REGISTER_CODES)
    elif name == "tick":
        await h.clock.advance(SMALL_STEPS[arg % len(SMALL_STEPS)])
    elif name == "expire":
        await h.clock.advance(BIG_STEPS[arg % len(BIG_STEPS)])
    elif name == "plan":
        m.latest_plan = await plan(h)
    elif name == "apply":
        await _apply(m, arg % len(APPLY_MODES))
    else:
        # Deaths strike running processes; revivals and reuse happen on dead pids.
        among = {"die": True, "revive": False, "reuse": False}.get(name)
        worker = m.pick(arg, alive=among)
        if worker is None:
            return
        pid = int(worker["pid"])
        if name == "beat":
            await _beat(m, worker)
        elif name == "die":
            h.probes.kill(pid)
        elif name == "revive":
            h.probes.revive(pid, str(worker["process_start_time"]))
        elif name == "reuse":
            h.probes.revive(pid, f"ticks-reused-{m.fresh('start')}")
        elif name == "adopt":
            # The process now holding a reused pid registers in its own right.
            seen = h.probes.probe(pid)
            if seen.alive and seen.start_time != worker["process_start_time"]:
                await _register(m, arg % REGISTER_CODES, pid)
        elif name == "lease":
            await _lease(m, worker)
        elif name == "unlease":
            await _unlease(m, worker)
        else:  # pragma: no cover - the strategy produces no other names
            raise AssertionError(name)


async def _check_retired_rows_are_final(m: Model) -> None:
    for identity, row in (await rows_by_identity(m.h)).items():
        if identity in m.frozen:
            assert row == m.frozen[identity], f"retired row {identity} changed"
        elif row["status"] == "retired":
            m.frozen[identity] = dict(row)


async def _scenario(initial: list[int], ops: list[Op], directory: str) -> None:
    failure: Exception | None = None
    probes = ExplodingReprobe(host_id="host-a", boot_id="boot-1", explode_on=2)
    async with harness(Path(directory), probes=probes) as h:
        try:
            await ensure_swept(h)
            model = Model(h=h, probes=probes)
            for op in [*(("register", code) for code in initial), *ops]:
                await _step(model, op)
                await _check_retired_rows_are_final(model)
        except Exception as exc:
            # Raised only after the supervisor has drained and stopped: an exception
            # escaping into its task group cancels the actors mid-message, and what
            # they leave unclosed would fail later examples while hypothesis shrinks.
            failure = exc
    if failure is not None:
        raise failure


# A run of 1,000 examples takes about 85 s on a 2-core machine; scale pytest-timeout's
# per-test limit with the count so that CI can ask for many more.
@pytest.mark.timeout(120 + EXAMPLES // 2)
@settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(
    initial=st.lists(st.integers(0, REGISTER_CODES - 1), min_size=1, max_size=6),
    ops=OPS,
)
# Paths every run covers, whatever hypothesis generates: a plain applied retirement and
# its replay; a pid that revives between plan and apply; a lease taken between them; a
# transaction that fails after its first write; pid reuse with the newcomer registering
# on the reused number.
@example(
    initial=[0, 1, 7],
    ops=[
        ("die", 0),
        ("die", 1),
        ("expire", 0),
        ("plan", 0),
        ("apply", 0),
        ("beat", 0),
        ("apply", 1),
    ],
)
@example(
    initial=[0, 1],
    ops=[
        ("die", 0),
        ("die", 1),
        ("expire", 1),
        ("plan", 0),
        ("revive", 1),
        ("apply", 1),
        ("die", 1),
        ("apply", 1),
    ],
)
@example(
    initial=[0, 7],
    ops=[
        ("die", 0),
        ("die", 1),
        ("expire", 0),
        ("plan", 0),
        ("lease", 1),
        ("apply", 0),
        ("unlease", 1),
        ("apply", 2),
    ],
)
@example(
    initial=[0, 1, 7],
    ops=[
        ("die", 0),
        ("die", 0),
        ("die", 0),
        ("expire", 0),
        ("plan", 0),
        ("apply", 3),
        ("apply", 1),
    ],
)
@example(
    initial=[0],
    ops=[
        ("die", 0),
        ("expire", 0),
        ("plan", 0),
        ("reuse", 0),
        ("adopt", 0),
        ("apply", 0),
        ("plan", 0),
        ("apply", 1),
        ("expire", 2),
        ("plan", 0),
        ("apply", 0),
    ],
)
def test_random_interleavings_never_retire_live_or_leased_rows_nor_half_apply(
    initial: list[int], ops: list[Op]
) -> None:
    with tempfile.TemporaryDirectory(prefix="retire-sm-") as directory:
        anyio.run(_scenario, initial, ops, directory, backend="asyncio")
