"""Control-plane socket frames: every op decodes, shapes are checked, unknown arguments refused."""

from __future__ import annotations

import json
from typing import Any

import pytest

from supervisor.errors import ProtocolError
from supervisor.operations.registry import CONTROL_OPS, TASKS
from supervisor.operations.requests import REQUESTS, given
from supervisor.surfaces.socket.protocol import CONTROL_SCHEMAS, decode_request

WHERE = {"remote": "prgs", "org": "org", "repo": "repo"}


def frame(op: str, **args: Any) -> bytes:
    return json.dumps({"v": 1, "id": "1", "op": op, "token": "t", "args": args}).encode()


def test_every_control_op_has_a_permission_task() -> None:
    # The handle authorizes each op with one of these tasks; none may be missing.
    assert {
        "allocate_preview",
        "allocate_apply",
        "assignment_check",
        "lease_assign",
        "lease_heartbeat",
        "lease_release",
        "session_upsert",
        "work_item_upsert",
        "terminal_lock_read",
        "terminal_lock_set",
        "namespace_health_assess",
        "namespace_health_gate",
        "incident_link_upsert",
        "incident_link_read",
    } <= set(TASKS)
    assert len(CONTROL_OPS) == 15


def test_a_minimal_frame_of_each_op_decodes() -> None:
    for op, schema in CONTROL_SCHEMAS.items():
        samples = {
            "a string": "x",
            "an integer": 1,
            "an integer or null": None,
            "a list of objects": [],
        }
        args = {name: samples[shape] for name, (shape, required) in schema.items() if required}
        request = decode_request(frame(op, **args))
        assert isinstance(request.args, REQUESTS[op]), op
        assert request.args.op == op


def test_nulls_are_dropped_but_a_null_terminal_pr_clears() -> None:
    request = decode_request(
        frame("assign", **WHERE, session_id="s", role="author", kind="issue", number=1, phase=None)
    )
    assert isinstance(request.args, REQUESTS["assign"])
    assert "phase" not in given(request.args)
    clear = decode_request(frame("terminal_lock_set", **WHERE, terminal_pr=None))
    assert isinstance(clear.args, REQUESTS["terminal_lock_set"])
    assert clear.args.terminal_pr is None  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("op", "args", "fragment"),
    [
        ("lease_release", {"session_id": "s"}, "lease_id is required"),
        ("lease_release", {"session_id": "s", "lease_id": 5}, "must be a string"),
        (
            "lease_heartbeat",
            {"session_id": "s", "lease_id": "l", "lease_ttl_seconds": "9"},
            "number",
        ),
        (
            "lease_heartbeat",
            {"session_id": "s", "lease_id": "l", "lease_ttl_seconds": 10**400},
            "number",
        ),
        ("allocate", {**WHERE, "session_id": "s", "candidates": [1]}, "list of objects"),
        ("allocate", {**WHERE, "session_id": "s", "candidates": [], "apply": 1}, "true or false"),
        (
            "assign",
            {**WHERE, "session_id": "s", "role": "a", "kind": "pr", "number": True},
            "integer",
        ),
        ("terminal_lock_set", WHERE, "terminal_pr is required"),
        ("terminal_lock_get", {**WHERE, "extra": 1}, "takes no argument"),
    ],
)
def test_bad_shapes_are_protocol_errors(op: str, args: dict[str, Any], fragment: str) -> None:
    with pytest.raises(ProtocolError, match=fragment):
        decode_request(frame(op, **args))


@pytest.mark.parametrize(
    ("op", "args", "ok"),
    [
        ("namespace_health_assess", {"registered_tools": "gitea_whoami"}, True),
        ("namespace_health_assess", {"registered_tools": ["a", "b"]}, True),
        ("namespace_health_assess", {"registered_tools": [1]}, False),
        ("namespace_health_assess", {"probe_result": {"success": True}}, True),
        ("namespace_health_assess", {"probe_result": "ok"}, False),
        ("namespace_health_assess", {"configured": "no"}, False),
        ("incident_link_upsert", {"linked_pr_numbers": [1, 2]}, True),
        ("incident_link_upsert", {"linked_pr_numbers": [True]}, False),
        ("incident_link_upsert", {"kind": "sentry"}, False),
    ],
)
def test_namespace_health_and_link_shapes(op: str, args: dict[str, Any], ok: bool) -> None:
    base: dict[str, Any] = (
        {"session_id": "s", "namespace": "gitea-merger"}
        if op == "namespace_health_assess"
        else {
            "provider": "sentry",
            "provider_issue_id": "1",
            "gitea_org": "o",
            "gitea_repo": "r",
            "gitea_issue_number": 1,
        }
    )
    if ok:
        request = decode_request(frame(op, **base, **args))
        assert isinstance(request.args, REQUESTS[op])
    else:
        with pytest.raises(ProtocolError):
            decode_request(frame(op, **base, **args))
