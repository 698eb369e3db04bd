"""The socket floor: an asyncio server answering every frame at once, no actors, no database.

Run as ``python -m bench.echo_server PATH``; it serves until killed. The heartbeat
benchmark drives it with the same client and loads as the daemon, so the gap between
the two is what the supervisor itself costs.
"""

from __future__ import annotations

import asyncio
import json
import sys

__all__ = ["main"]


class _Echo(asyncio.Protocol):
    def __init__(self) -> None:
        self._buffer = bytearray()
        self._transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self._transport = transport

    def data_received(self, data: bytes) -> None:
        self._buffer += data
        answers = []
        while (end := self._buffer.find(b"\n")) >= 0:
            request = json.loads(bytes(self._buffer[:end]))
            del self._buffer[: end + 1]
            # Parsed and answered like the daemon's frames, minus everything in between.
            answer = {"v": 1, "id": request.get("id"), "ok": True, "result": {"ok": True}}
            answers.append(json.dumps(answer, separators=(",", ":")).encode() + b"\n")
        assert self._transport is not None
        self._transport.write(b"".join(answers))


async def _serve(path: str) -> None:
    server = await asyncio.get_running_loop().create_unix_server(_Echo, path)
    async with server:
        await server.serve_forever()


def main() -> None:
    asyncio.run(_serve(sys.argv[1]))


if __name__ == "__main__":
    main()
