"""Closing a store closes both of its connections, even when one of them fails to close."""

from __future__ import annotations

from typing import Any

import pytest

from supervisor.errors import StoreError
from supervisor.store.base import close_connections

pytestmark = pytest.mark.anyio


class _Closable:
    def __init__(self, name: str, closed: list[str], *, fails: bool = False) -> None:
        self.name, self.closed, self.fails = name, closed, fails

    async def close(self) -> None:
        self.closed.append(self.name)
        if self.fails:
            raise OSError(f"{self.name} failed to close")


async def test_every_connection_is_closed_and_the_first_failure_named() -> None:
    closed: list[str] = []
    with pytest.raises(StoreError, match="closing the test store failed: a failed to close"):
        await close_connections(
            [
                _Closable("a", closed, fails=True),
                _Closable("b", closed),
                _Closable("c", closed, fails=True),
            ],
            "the test store",
        )
    assert closed == ["a", "b", "c"]
    await close_connections([_Closable("d", closed)], "the test store")
    assert closed[-1] == "d"


async def test_a_reader_that_fails_to_close_leaves_no_writer_open(
    store: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    reader, writer = store._reader, store._writer
    real_reader_close, real_writer_close = reader.close, writer.close
    closed: list[str] = []

    async def failing_close() -> None:
        raise OSError("the reader failed to close")

    async def writer_close() -> None:
        closed.append("writer")
        await real_writer_close()

    monkeypatch.setattr(reader, "close", failing_close)
    monkeypatch.setattr(writer, "close", writer_close)
    try:
        with pytest.raises(StoreError, match=r"closing the store for .* failed"):
            await store.close()
        assert closed == ["writer"]
    finally:
        await real_reader_close()
