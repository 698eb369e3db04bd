"""The exec socket's request: labels only, one strict v1 form; anything else is BadRequest."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from supervisor.surfaces.socket.exec_socket import (
    MAX_REQUEST_BYTES,
    BadRequest,
    ExecRequest,
    parse_request,
)


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (b"v=1\n", ExecRequest(client="", name="", namespace="", ttl=None)),
        (b"v=1", ExecRequest(client="", name="", namespace="", ttl=None)),
        (
            b"v=1\nclient=codex\nname=gitea-author\nnamespace=author\nttl=12.5\n",
            ExecRequest(client="codex", name="gitea-author", namespace="author", ttl=12.5),
        ),
        # The wrapper's own form: every key, empty labels, no ttl line.
        (
            b"v=1\nclient=\nname=srv\nnamespace=\n",
            ExecRequest(client="", name="srv", namespace="", ttl=None),
        ),
        (b"name=x\nv=1\n", ExecRequest(client="", name="x", namespace="", ttl=None)),
        (b"v=1\r\nname=x\r\n", ExecRequest(client="", name="x", namespace="", ttl=None)),
        (b"v=1\nttl=\n", ExecRequest(client="", name="", namespace="", ttl=None)),
        (b"v=1\nttl=3\n", ExecRequest(client="", name="", namespace="", ttl=3.0)),
        (b"v=1\nttl=1e-3\n", ExecRequest(client="", name="", namespace="", ttl=0.001)),
        (
            b"v=1\nname=" + b"n" * 64 + b"\n",
            ExecRequest(client="", name="n" * 64, namespace="", ttl=None),
        ),
        (
            b"v=1\nnamespace=anything\n",
            ExecRequest(client="", name="", namespace="anything", ttl=None),
        ),
    ],
)
def test_valid_requests(data: bytes, expected: ExecRequest) -> None:
    assert parse_request(data) == expected


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"", "v=1"),
        (b"\n", "unexpected request line"),
        (b"v=2\n", "v=1"),
        (b"v=01\n", "v=1"),
        (b"client=codex\n", "v=1"),
        (b"v=1\nv=1\n", "unexpected"),
        (b"v=1\nname=a\nname=b\n", "unexpected"),
        (b"v=1\npid=1\n", "unexpected"),
        (b"v=1\nclient_instance_id=inst-x\n", "unexpected"),
        (b"v=1\nV=1\n", "unexpected"),
        (b"v=1\n\nname=x\n", "unexpected"),
        (b"v=1\nname\n", "unexpected"),
        (b"v=1\n=x\n", "unexpected"),
        ("v=1\nname=caf\u00e9\n".encode(), "not ASCII"),
        (b"v=1\nname=\xff\n", "not ASCII"),
        (b"v=1\nname=a b\n", "name must be"),
        (b"v=1\nname=a/b\n", "name must be"),
        (b"v=1\nclient=x;y\n", "client must be"),
        (b"v=1\nnamespace=" + b"n" * 65 + b"\n", "namespace must be"),
        (b"v=1\nname=a=b\n", "name must be"),
        (b"v=1\nname=a\x00b\n", "name must be"),
        (b"v=1\nttl=nan\n", "positive"),
        (b"v=1\nttl=NaN\n", "positive"),
        (b"v=1\nttl=inf\n", "positive"),
        (b"v=1\nttl=-inf\n", "positive"),
        (b"v=1\nttl=1e999\n", "positive"),
        (b"v=1\nttl=-1\n", "positive"),
        (b"v=1\nttl=0\n", "positive"),
        (b"v=1\nttl=-0.0\n", "positive"),
        (b"v=1\nttl=ten\n", "number"),
        (b"v=1\nttl=0x10\n", "number"),
        (b"v=1\nttl=1,5\n", "number"),
    ],
)
def test_invalid_requests(data: bytes, message: str) -> None:
    with pytest.raises(BadRequest, match=message):
        parse_request(data)


@given(st.binary(max_size=MAX_REQUEST_BYTES))
def test_any_bytes_parse_or_raise_bad_request(data: bytes) -> None:
    try:
        request = parse_request(data)
    except BadRequest:
        return
    assert request.ttl is None or request.ttl > 0


LINE_KEYS = st.sampled_from(["v", "client", "name", "namespace", "ttl", "pid", ""])
LINE_VALUES = st.one_of(
    st.sampled_from(["1", "", "nan", "inf", "-1", "0", "30", "1e308", "1e309", "codex"]),
    st.text(max_size=70),
)


@given(st.lists(st.tuples(LINE_KEYS, LINE_VALUES), max_size=8))
def test_request_shaped_text_parses_or_raises_bad_request(lines: list[tuple[str, str]]) -> None:
    data = "".join(f"{key}={value}\n" for key, value in lines).encode("utf-8")
    try:
        request = parse_request(data)
    except BadRequest:
        return
    assert ("v", "1") in lines
    assert request.ttl is None or 0 < request.ttl < float("inf")
    for label in (request.client, request.name, request.namespace):
        assert len(label) <= 64
