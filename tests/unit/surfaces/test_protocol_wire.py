"""Wire encoding: the heartbeat answer's fast path says exactly what the generic path says."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from actors.replies import HeartbeatResult
from supervisor.errors import ProtocolError
from supervisor.surfaces.socket.answers import to_wire
from supervisor.surfaces.socket.beats import beat_answer
from supervisor.surfaces.socket.beats import well_formed_heartbeat as _well_formed_heartbeat
from supervisor.surfaces.socket.frame import load_frame as _load
from supervisor.surfaces.socket.protocol import _decoded, decode_request
from supervisor.wire import encode, ok_frame

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


@pytest.mark.parametrize("identity", [7, 1.5, None])
def test_beat_answer_with_odd_field_types_still_matches_the_generic_encoding(
    identity: object,
) -> None:
    result = HeartbeatResult(
        ok=True,
        code="ok",
        detail="",
        worker_identity=identity,  # type: ignore[arg-type]
    )
    assert beat_answer("r-1", result) == encode(ok_frame("r-1", to_wire(result)))


_MISSING = object()
_VALID_ARGS = {"worker_identity": "w-1", "generation_id": "g-1", "pid": 1, "fencing_epoch": 0}
_VALID_FRAME = {"v": 1, "id": "r-1", "op": "heartbeat", "token": "fst_t", "args": _VALID_ARGS}
_TEXTS = ("w-1", "", " ", "x" * 512, "x" * 513, 5, None, ["w"])
#: Per field, values each path must accept or refuse alike (the valid ones included).
_VARIANTS: dict[str, tuple[object, ...]] = {
    "v": (1, 1.0, True, 2, "1", None),
    "id": (None, "r-1", "x" * 128, "x" * 129, 5),
    "op": ("heartbeat", "release", "Heartbeat", 1),
    "token": (None, "fst_t", "t" * 512, "t" * 513, 7),
    "args": (None, [], "args", {}),
    "args.worker_identity": _TEXTS,
    "args.generation_id": _TEXTS,
    "args.pid": (1, 0, -1, True, 2**63, 2**63 - 1, 1.0, "1", None),
    "args.fencing_epoch": (0, 1, -1, False, 2**63, 2**63 - 1, 1.5, "0", None),
}


@st.composite
def _heartbeat_frames(draw: st.DrawFn) -> dict[str, object]:
    """A valid heartbeat frame with up to three fields changed or removed."""
    frame: dict[str, object] = {**_VALID_FRAME, "args": dict(_VALID_ARGS)}
    for _ in range(draw(st.integers(min_value=0, max_value=3))):
        where = draw(st.sampled_from(sorted(_VARIANTS)))
        value = draw(st.sampled_from((_MISSING, *_VARIANTS[where])))
        target: object = frame
        name = where
        if where.startswith("args."):
            target, name = frame.get("args"), where.removeprefix("args.")
        if not isinstance(target, dict):
            continue
        if value is _MISSING:
            target.pop(name, None)
        else:
            target[name] = value
    return frame


@settings(max_examples=400)
@given(data=_heartbeat_frames())
def test_the_heartbeat_fast_path_decodes_exactly_like_the_general_one(
    data: dict[str, object],
) -> None:
    frame = json.dumps(data).encode()
    try:
        expected: object = _decoded(json.loads(frame))
    except ProtocolError as exc:
        expected = (type(exc), exc.detail)
    try:
        got: object = decode_request(frame)
    except ProtocolError as exc:
        got = (type(exc), exc.detail)
    assert got == expected
    assert repr(got) == repr(expected)


def test_a_well_formed_heartbeat_takes_the_fast_path() -> None:
    request = _well_formed_heartbeat(json.loads(json.dumps(_VALID_FRAME)))
    assert request is not None
    assert request == _decoded(json.loads(json.dumps(_VALID_FRAME)))


def _reference_load(frame: bytes) -> object:
    """What frames decoded to before the scanner fast path: json.loads's decoder, and
    nothing that cannot be written back out as UTF-8."""
    try:
        value = json.JSONDecoder().decode(frame.decode("utf-8"))
    except (ValueError, RecursionError) as exc:
        return ("refused", f"frame is not valid JSON: {str(exc)[:200]}")
    try:
        json.dumps(value, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return ("refused", _SURROGATE_DETAIL)
    return value


_SURROGATE_DETAIL = "frame holds a lone UTF-16 surrogate (\\ud800-\\udfff escape)"


@pytest.mark.parametrize(
    "frame",
    [
        rb'{"op":"heartbeat","args":{"worker_identity":"w\ud800","pid":1,'
        rb'"generation_id":"g","fencing_epoch":1}}',
        rb'{"op":"status","token":"t\ud800"}',
        rb'{"op":"status","id":"r\uDFFF"}',
        rb'{"op":"register","args":{"claims":{"session_id":"\ud800"}}}',
        rb'{"op":"register","args":{"claims":{"k\ud800":1}}}',
        rb'{"op":"apply","args":{"worker_identities":["w-1","\udc00"]}}',
    ],
    ids=["identity", "token", "id", "claim", "key", "list"],
)
def test_a_lone_surrogate_anywhere_is_refused_at_decode(frame: bytes) -> None:
    with pytest.raises(ProtocolError) as refused:
        decode_request(frame)
    assert refused.value.code == "bad_request"
    assert "surrogate" in refused.value.detail


def test_a_surrogate_pair_and_an_escaped_backslash_are_not_refused() -> None:
    paired = decode_request(b'{"op":"status","token":"\\ud83d\\ude00"}')
    assert paired.token == "\U0001f600"
    literal = decode_request(b'{"op":"status","token":"\\\\ud800"}')
    assert literal.token == "\\ud800"


def _loaded(frame: bytes) -> object:
    try:
        return _load(frame)
    except ProtocolError as exc:
        return ("refused", exc.detail)


_json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False)
    | st.text(max_size=8)
    # Lone and paired surrogates: hypothesis's text leaves them out.
    | st.sampled_from(("\ud800", "a\udfff", "\ud83d\ude00")),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=8,
)


@settings(max_examples=300)
@given(
    value=_json_values,
    before=st.sampled_from(("", " ", "\t", "x", "[")),
    after=st.sampled_from(("", " ", "\r", "}", ",", "x", " {}")),
    cut=st.integers(min_value=0, max_value=3),
)
def test_loading_a_frame_matches_the_plain_decoder(
    value: object, before: str, after: str, cut: int
) -> None:
    text = before + json.dumps(value) + after
    for frame in (text.encode(), text.encode()[: len(text) - cut], b"\xff" + text.encode()):
        assert repr(_loaded(frame)) == repr(_reference_load(frame))
