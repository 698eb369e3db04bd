"""Loopback listeners: only loopback IP literals, listening at once, a taken port refused."""

from __future__ import annotations

import socket

import pytest

from supervisor.errors import ConfigError, Unavailable
from supervisor.system.loopback import loopback_address, loopback_listener


@pytest.mark.parametrize(
    ("host", "address"),
    [
        ("127.0.0.1", "127.0.0.1"),
        (" 127.0.0.2 ", "127.0.0.2"),
        ("::1", "::1"),
        ("0:0:0:0:0:0:0:1", "::1"),
        ("localhost", None),
        ("0.0.0.0", None),
        ("192.168.1.5", None),
        ("::", None),
        ("", None),
    ],
)
def test_only_loopback_ip_literals_pass(host: str, address: str | None) -> None:
    assert loopback_address(host) == address


@pytest.mark.parametrize("host", ["localhost", "0.0.0.0", "10.0.0.1"])
def test_a_host_off_loopback_is_refused_before_any_socket(host: str) -> None:
    with pytest.raises(ConfigError, match="MCP HTTP host must be a loopback IP address"):
        loopback_listener(host, 0, what="MCP HTTP")


def test_the_listener_accepts_at_once_and_a_taken_port_is_unavailable() -> None:
    listener = loopback_listener("127.0.0.1", 0, what="ops HTTP")
    try:
        port = listener.getsockname()[1]
        with socket.create_connection(("127.0.0.1", port), timeout=5):
            pass  # queued by the kernel: the socket listens before anything serves it
        with pytest.raises(Unavailable, match=f"ops HTTP cannot listen on 127.0.0.1:{port}"):
            loopback_listener("127.0.0.1", port, what="ops HTTP")
    finally:
        listener.close()
