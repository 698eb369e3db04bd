"""Host lease socket ops: argument shapes are checked before anything reaches the keeper."""

from __future__ import annotations

import json
from typing import Any

import pytest

from supervisor.errors import ProtocolError
from supervisor.operations.requests import request as request_of
from supervisor.surfaces.socket.protocol import decode_request


def frame(op: str, args: dict[str, Any]) -> bytes:
    return json.dumps({"v": 1, "id": "r1", "op": op, "args": args, "token": "t"}).encode()


def test_a_well_formed_apply_is_parsed() -> None:
    request = decode_request(
        frame(
            "host_apply",
            {
                "host_id": "host-b",
                "host_token": "hostfp-1",
                "candidate_fingerprint": "candidatefp-1",
                "worker_identities": ["w1", "w2"],
            },
        )
    )
    assert request.args == request_of(
        "host_apply",
        host_id="host-b",
        host_token="hostfp-1",
        candidate_fingerprint="candidatefp-1",
        worker_identities=("w1", "w2"),
    )
    assert decode_request(frame("host_status", {})).args == request_of("host_status")


@pytest.mark.parametrize(
    ("op", "args", "message"),
    [
        ("host_plan", {}, "host_id"),
        ("host_plan", {"host_id": 5}, "host_id"),
        ("host_plan", {"host_id": "h", "extra": 1}, "extra"),
        ("host_status", {"host_id": "h"}, "host_id"),
        (
            "host_apply",
            {"host_id": "h", "host_token": "t", "candidate_fingerprint": "c"},
            "worker_identities",
        ),
        (
            "host_apply",
            {
                "host_id": "h",
                "host_token": "t",
                "candidate_fingerprint": "c",
                "worker_identities": ["ok", 7],
            },
            "worker_identities",
        ),
    ],
)
def test_malformed_host_requests_are_refused(op: str, args: dict[str, Any], message: str) -> None:
    with pytest.raises(ProtocolError, match=message):
        decode_request(frame(op, args))
