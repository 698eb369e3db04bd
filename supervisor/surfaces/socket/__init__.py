"""The local socket: framing, peer credentials, the wire protocol and the request server."""

from __future__ import annotations

__all__: list[str] = []
