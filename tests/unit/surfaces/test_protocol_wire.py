"""Wire encoding: the heartbeat answer's fast path says exactly what the generic path says."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from actors.messages import HeartbeatResult
from supervisor.errors import ProtocolError
from supervisor.surfaces.protocol import beat_answer, decode_request, encode, ok_frame, to_wire

_text = st.text(max_size=40)


_results = st.builds(
    HeartbeatResult,
    ok=st.booleans(),
    code=_text,
    detail=_text,
    worker_identity=_text,
    last_heartbeat_at=st.none() | _text,
)


@given(request_id=st.none() | _text, result=_results)
def test_beat_answer_is_byte_for_byte_the_generic_encoding(
    request_id: str | None, result: HeartbeatResult
) -> None:
    assert beat_answer(request_id, result) == encode(ok_frame(request_id, to_wire(result)))


@pytest.mark.parametrize("value", ["", " ", "\t\n", "x" * 5000])
def test_blank_or_overlong_text_arguments_are_refused(value: str) -> None:
    args = {"worker_identity": value, "pid": 1, "generation_id": "g", "fencing_epoch": 1}
    frame = json.dumps({"op": "heartbeat", "args": args}).encode()
    with pytest.raises(ProtocolError, match="worker_identity"):
        decode_request(frame)
