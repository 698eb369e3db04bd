"""Tests for supervisor.logs: JSON lines, stderr only, actor binding, reconfiguration."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from datetime import datetime, timedelta
from typing import Any

import anyio
import anyio.lowlevel
import pytest
import structlog

from supervisor.errors import ConfigError
from supervisor.logs import bind_actor, configure_logging, get_logger


@pytest.fixture(autouse=True)
def _reset_structlog() -> Iterator[None]:
    yield
    structlog.reset_defaults()
    structlog.contextvars.clear_contextvars()


def _lines(stream: io.StringIO) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stream.getvalue().splitlines()]


def test_log_line_is_json_with_actor_level_and_iso_timestamp() -> None:
    stream = io.StringIO()
    configure_logging("info", stream=stream)

    with bind_actor("registry_writer"):
        get_logger(component="store").info("batch_committed", rows=42)
    get_logger().info("outside_actor")

    inside, outside = _lines(stream)
    assert inside["event"] == "batch_committed"
    assert inside["actor"] == "registry_writer"
    assert inside["component"] == "store"
    assert inside["rows"] == 42
    assert inside["level"] == "info"
    stamp = datetime.fromisoformat(inside["timestamp"])
    assert stamp.utcoffset() == timedelta(0)
    # The binding ends with the block.
    assert "actor" not in outside


def test_default_stream_is_stderr_never_stdout(capsys: pytest.CaptureFixture[str]) -> None:
    configure_logging()
    get_logger().warning("disk_nearly_full")
    captured = capsys.readouterr()
    assert captured.out == ""
    assert json.loads(captured.err)["event"] == "disk_nearly_full"


def test_level_filters_lower_levels() -> None:
    stream = io.StringIO()
    configure_logging("WARNING", stream=stream)
    log = get_logger()
    log.info("dropped")
    log.debug("dropped")
    log.error("kept")
    assert [line["event"] for line in _lines(stream)] == ["kept"]


def test_configure_is_idempotent_and_reconfigures_existing_loggers() -> None:
    first = io.StringIO()
    configure_logging("info", stream=first)
    log = get_logger()
    log.info("one")
    configure_logging("info", stream=first)
    log.info("two")
    assert [line["event"] for line in _lines(first)] == ["one", "two"]

    second = io.StringIO()
    configure_logging("error", stream=second)
    log.info("filtered_now")
    log.error("moved")
    assert [line["event"] for line in _lines(first)] == ["one", "two"]
    assert [line["event"] for line in _lines(second)] == ["moved"]


def test_unknown_level_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="verbose"):
        configure_logging("verbose")


def test_exceptions_are_rendered_as_json() -> None:
    stream = io.StringIO()
    configure_logging(stream=stream)
    try:
        raise RuntimeError("probe failed")
    except RuntimeError:
        get_logger().exception("sweep_crashed")
    (line,) = _lines(stream)
    assert line["event"] == "sweep_crashed"
    assert line["level"] == "error"
    assert "probe failed" in json.dumps(line["exception"])


@pytest.mark.anyio
async def test_actor_binding_is_per_task() -> None:
    stream = io.StringIO()
    configure_logging(stream=stream)

    async def actor(name: str) -> None:
        with bind_actor(name):
            await anyio.lowlevel.checkpoint()
            get_logger().info("tick")

    async with anyio.create_task_group() as tg:
        tg.start_soon(actor, "heartbeat")
        tg.start_soon(actor, "liveness")

    assert sorted(line["actor"] for line in _lines(stream)) == ["heartbeat", "liveness"]
