"""Which structured tool answers are flagged ``isError``."""

from __future__ import annotations

from typing import Any

import pytest

from supervisor.surfaces.mcp.results import answer_is_error

REFUSED = {"success": False, "outcome": "refused", "reasons": ["denied"], "denied": True}
LOST = {"success": False, "outcome": "outcome_unknown", "reasons": ["lost"]}
UNHEALTHY_VERDICT = {"success": False, "healthy": False, "assessed_at": "2026-11-30T12:00:00Z"}


@pytest.mark.parametrize(
    ("body", "kwargs", "expected"),
    [
        (None, {}, False),
        ({"success": True}, {}, False),
        (REFUSED, {}, True),
        (LOST, {}, True),
        (
            {"success": True, "outcome": "registry_revision_moved"},
            {"ok_outcomes": {"applied"}},
            True,
        ),
        ({"success": True, "outcome": "applied"}, {"ok_outcomes": {"applied"}}, False),
        # A recorded but unhealthy verdict did what was asked; a refused assessment did not.
        (UNHEALTHY_VERDICT, {}, True),
        (UNHEALTHY_VERDICT, {"success_is_verdict": True}, False),
        (REFUSED, {"success_is_verdict": True}, True),
        (LOST, {"success_is_verdict": True}, True),
    ],
)
def test_answer_is_error(
    body: dict[str, Any] | None, kwargs: dict[str, Any], expected: bool
) -> None:
    assert answer_is_error(body, **kwargs) is expected
