"""Plan listing arguments on the wire, the MCP size cap, and the CLI's compact plan text."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import pytest

from supervisor.cli.format import format_plan
from supervisor.client.declared import DeclaredCalls
from supervisor.errors import ProtocolError
from supervisor.operations.requests import REQUESTS, given
from supervisor.policy.retirement.reasons import REASON_ALREADY_TERMINAL
from supervisor.surfaces.mcp.size import fit_result
from supervisor.surfaces.socket.protocol import decode_request, parse_plan_query
from supervisor.wire import DEFAULT_PAGE, PlanQuery, query_args


def test_absent_listing_arguments_mean_the_compact_default() -> None:
    assert parse_plan_query({}) == PlanQuery()
    assert not PlanQuery().lists_entries


def test_listing_arguments_round_trip_through_the_wire_form() -> None:
    query = PlanQuery(
        reason=REASON_ALREADY_TERMINAL, namespace="author", limit=7, cursor="wkr-9", examples=0
    )
    assert parse_plan_query(query_args(query)) == query
    assert query_args(PlanQuery()) == {}
    wire: dict[str, Any] = {"reason": REASON_ALREADY_TERMINAL, "full": True}
    frame = {"v": 1, "id": "1", "op": "plan", "args": wire}
    parsed = decode_request(json.dumps(frame).encode()).args
    assert isinstance(parsed, REQUESTS["plan"])
    assert PlanQuery(**given(parsed)) == PlanQuery(reason=REASON_ALREADY_TERMINAL, full=True)


@pytest.mark.parametrize(
    "args",
    [
        {"reason": "no_such_reason"},
        {"limit": 0},
        {"limit": 1001},
        {"limit": True},
        {"limit": "5"},
        {"examples": -1},
        {"full": "yes"},
        {"cursor": ""},
        {"namespace": "   "},
    ],
)
def test_bad_listing_arguments_are_refused(args: dict[str, Any]) -> None:
    with pytest.raises(ProtocolError):
        parse_plan_query(args)


def _size(body: dict[str, Any]) -> int:
    return len(json.dumps(body, default=str, separators=(",", ":")).encode())


def test_an_answer_that_fits_is_returned_unchanged() -> None:
    body = {"success": True, "candidates": [{"worker_identity": "w-1"}]}
    assert fit_result(body, 65_536) == body


def test_a_large_answer_is_cut_to_size_and_says_what_was_cut() -> None:
    entry = {"worker_identity": "w", "evidence": {"pad": "x" * 500}}
    body = {
        "success": True,
        "registry_fingerprint": "registryfp-1",
        "candidate_count": 400,
        "candidates": [entry] * 400,
        "candidate_worker_identities": [f"wkr-{i:06d}" for i in range(400)],
    }
    cut = fit_result(body, 8_192)
    assert _size(cut) <= 8_192
    assert cut["registry_fingerprint"] == "registryfp-1"
    assert cut["candidate_count"] == 400
    shown = cut["truncated"]["candidates"]
    assert shown["total"] == 400
    assert shown["shown"] == len(cut["candidates"]) < 400
    # The identities, needed by apply, are cut only when nothing else is left to cut.
    assert cut["candidate_worker_identities"] == body["candidate_worker_identities"]
    assert "truncation_note" in cut


def test_the_cli_prints_the_summary_and_the_complete_apply_command() -> None:
    result = {
        "success": True,
        "candidate_count": 2,
        "preserved_count": 7,
        "candidates": [
            {"worker_identity": "w-1", "reason_code": "eligible_stale_orphan", "evidence": {}},
            {"worker_identity": "w-2", "reason_code": "eligible_stale_orphan", "evidence": {}},
        ],
        "candidate_worker_identities": ["w-1", "w-2"],
        "preserved_summary": [
            {
                "reason_code": REASON_ALREADY_TERMINAL,
                "count": 7,
                "examples": [{"worker_identity": "h-1", "detail": "status is 'retired'"}],
            }
        ],
        "registry_fingerprint": "registryfp-r",
        "scope_fingerprint": "scopefp-s",
        "candidate_fingerprint": "candidatefp-c",
        "next_cursor": None,
    }
    text = format_plan(result)
    assert "candidates: 2   preserved: 7" in text
    assert f"{REASON_ALREADY_TERMINAL}: 7  h-1" in text
    assert (
        "fleet-supervisor apply --scope-fingerprint scopefp-s "
        "--candidate-fingerprint candidatefp-c --workers w-1,w-2"
    ) in text
    assert DEFAULT_PAGE == 50


class _Frames(DeclaredCalls[Mapping[str, Any]]):
    """The client's named calls, answering with the arguments each frame would carry."""

    def request(
        self, op: str, args: Mapping[str, Any] | None = None, *, token: str | None = None
    ) -> Mapping[str, Any]:
        return args or {}


def _snapshot_args(args: dict[str, Any]) -> Any:
    frame = {"v": 1, "id": "1", "op": "snapshot", "args": args}
    parsed = decode_request(json.dumps(frame).encode()).args
    assert isinstance(parsed, REQUESTS["snapshot"])
    return parsed


def test_a_snapshot_lists_history_only_when_the_frame_asks() -> None:
    assert _snapshot_args({}).include_history is False
    assert _snapshot_args({"include_history": True}).include_history is True
    assert _Frames().snapshot(include_history=True)["include_history"] is True
    assert "include_history" not in _Frames().snapshot()


@pytest.mark.parametrize("value", ["yes", 1, None])
def test_a_non_boolean_include_history_is_refused(value: Any) -> None:
    with pytest.raises(ProtocolError, match="include_history"):
        _snapshot_args({"include_history": value})
