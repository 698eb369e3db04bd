"""registry_fingerprint v2: exact over active rows, a MuHash set digest over history."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from supervisor.policy.retirement.fingerprints import (
    FINGERPRINT_FIELDS,
    history_summary,
    is_history,
    registry_fingerprint,
    row_unit,
)
from supervisor.policy.retirement.history import EMPTY_HISTORY, HistoryFold, identity_irregular

from .rows import row


def _fleet() -> list[dict[str, Any]]:
    rows = [row(f"w-{i}", pid=100 + i) for i in range(3)]
    rows += [row(f"h-{i}", pid=200 + i, status=s) for i, s in enumerate(("released", "retired"))]
    return rows


def test_the_token_from_a_summary_equals_the_token_from_every_row() -> None:
    rows = _fleet()
    active = [r for r in rows if not is_history(r)]
    assert registry_fingerprint(active, history_summary(rows)) == registry_fingerprint(rows)
    assert registry_fingerprint(active) != registry_fingerprint(rows)


@pytest.mark.parametrize("field", [f for f in FINGERPRINT_FIELDS if f != "status"])
def test_any_relevant_field_of_a_historical_row_moves_the_token(field: str) -> None:
    rows = _fleet()
    before = registry_fingerprint(rows)
    rows[-1] = {**rows[-1], field: f"changed-{rows[-1].get(field)}"}
    assert registry_fingerprint(rows) != before


def test_a_row_entering_history_moves_the_token() -> None:
    rows = _fleet()
    before = registry_fingerprint(rows)
    rows[0] = {**rows[0], "status": "retired"}
    assert registry_fingerprint(rows) != before


@settings(max_examples=100, deadline=None)
@given(
    units=st.lists(st.text(max_size=12), max_size=12),
    data=st.data(),
)
def test_the_set_digest_is_order_free_and_folds_out_exactly(
    units: list[str], data: st.DataObject
) -> None:
    forward = HistoryFold()
    for unit in units:
        forward.add(unit, "w")
    shuffled = data.draw(st.permutations(units))
    backward = HistoryFold()
    for unit in shuffled:
        backward.add(unit, "w")
    assert forward.summary() == backward.summary()
    extra = data.draw(st.text(max_size=12))
    forward.add(extra, "w")
    assert forward.summary().digest != backward.summary().digest
    forward.add(extra, "w", -1)
    assert forward.summary() == backward.summary()
    for unit in units:
        forward.add(unit, "w", -1)
    assert forward.summary() == EMPTY_HISTORY


def test_a_duplicated_row_is_counted_twice() -> None:
    unit = row_unit(_fleet()[-1])
    once, twice = HistoryFold(), HistoryFold()
    once.add(unit, "h-1")
    twice.add(unit, "h-1")
    twice.add(unit, "h-1")
    assert once.summary().digest != twice.summary().digest


@pytest.mark.parametrize(
    ("value", "irregular"),
    [("wkr-1", False), ("", False), (" wkr-1", True), ("wkr-1\n", True), (7, True), (None, True)],
)
def test_which_identities_force_planning_history_row_by_row(value: Any, irregular: bool) -> None:
    assert identity_irregular(value) is irregular
